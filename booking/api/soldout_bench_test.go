package api_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"tatkal/booking/lab/bench"
	"tatkal/booking/lab/teststack"
)

// BenchmarkSoldOutHold: POST /v1/bookings/hold on a sold-out shard,
// through HTTP on loopback (client and server share the two cores), once
// the shard's view is in the sold-out cache: authentication, the body, the
// journey and passenger checks, no Redis call. Beside it, in the same run,
// raw A: the bench's minimal hold-style Lua script, one round trip each.
//
//	go test -run '^$' -bench SoldOutHold -benchtime 3s ./booking/api/
func BenchmarkSoldOutHold(b *testing.B) {
	s := teststack.New(b, teststack.Options{MaxHoldsInFlight: 4096})
	_, date := s.DemoShard(b, 1, 0)
	users := s.Users(b, "sob", 64)
	body := `{"train_no":"12951","journey_date":"` + date.Format(time.DateOnly) + `","class":"3A","from":"MMCT","to":"NDLS",` +
		`"passengers":[{"name":"Sold Out","age":30,"gender":"F","id_type":"PAN","id_ref":"ABCDE1234F"}]}`
	tr := &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute, DisableCompression: true}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	tokens, devices := map[int64]string{}, map[int64]string{}
	for _, u := range users {
		tokens[u], devices[u] = s.Token(u), s.DeviceBinding(u)
	}
	var keys atomic.Int64
	hold := func(u int64) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, s.Server.URL+"/v1/bookings/hold", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tokens[u])
		req.Header.Set("X-Device-Token", devices[u])
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "sold-out-bench-"+strconv.FormatInt(keys.Add(1), 10))
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(out)
	}
	// users[0] takes the berth; users[1]'s attempt is the script's
	// SOLD_OUT that fills the cache.
	if code, out := hold(users[0]); code != http.StatusCreated {
		b.Fatalf("first hold: %d %s", code, out)
	}
	if code, out := hold(users[1]); code != http.StatusOK || !strings.Contains(out, `"SOLD_OUT"`) {
		b.Fatalf("sold-out hold: %d %s", code, out)
	}
	// Without the cache (every attempt runs the HOLD script), then with it.
	store := s.Service.Store()
	cache := store.SoldOut()
	store.SetSoldOut(nil)
	b.Run("http-sold-out-script", func(b *testing.B) { soldOutHTTP(b, users, hold) })
	store.SetSoldOut(cache)
	b.Run("http-sold-out-cached", func(b *testing.B) { soldOutHTTP(b, users, hold) })
	b.Run("raw-A", func(b *testing.B) {
		ctx := context.Background()
		rdb := s.Redis
		tag := s.KeyPrefix + ":{rawA}:"
		keys := []string{tag + "cnt", tag + "holds"}
		if err := rdb.Set(ctx, keys[0], 1<<50, time.Hour).Err(); err != nil {
			b.Fatal(err)
		}
		defer rdb.Del(ctx, keys...)
		script := redis.NewScript(bench.RawHoldLua)
		if err := script.Load(ctx, rdb).Err(); err != nil {
			b.Fatal(err)
		}
		var n atomic.Int64
		b.SetParallelism(16)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				i := strconv.FormatInt(n.Add(1), 10)
				if err := script.EvalSha(ctx, rdb, keys, "h"+i, i, 1).Err(); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	})
}

// soldOutHTTP posts holds from users[1:] (never the holder) until b.N,
// each of which must be answered SOLD_OUT.
func soldOutHTTP(b *testing.B, users []int64, hold func(int64) (int, string)) {
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		u := users[1+next.Add(1)%int64(len(users)-1)]
		for pb.Next() {
			if code, out := hold(u); code != http.StatusOK {
				b.Errorf("hold: %d %s", code, out)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "answers/s")
}
