package admission

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Benchmarks of the waiting room against the real Redis and PostgreSQL:
//
//	go test -run '^$' -bench 'Queue' -benchtime 5s ./booking/admission/
//	TATKAL_BENCH_ENTRANTS=1000000 go test -run '^$' -bench QueueMemory -benchtime 1x ./booking/admission/

func benchSetup(b *testing.B) (*bundle, Intent, int64) {
	bb := setup(b, func(c *Config) { c.LimitAccount, c.LimitDevice, c.MaxInFlight = 1<<30, 1<<30, 1<<20 })
	shard := bb.shard(b, "3A", 0, time.Now().Add(time.Minute), "queue") // inside the pre-queue: cohort entries
	return bb, intentOf(shard), shard.ID
}

// BenchmarkQueueEnter: one new entrant per operation (device check, rate
// limits, ENTER and STATUS scripts).
func BenchmarkQueueEnter(b *testing.B) {
	bb, in, _ := benchSetup(b)
	ctx := context.Background()
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(16) // many clients at once, as at 10:00
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			uid := next.Add(1)
			if _, err := bb.svc.Enter(ctx, bb.caller(uid), in); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
}

// BenchmarkQueueStatus: a status poll that does the work (rate limits and
// the STATUS script), each from a fresh session so no cached answer helps.
func BenchmarkQueueStatus(b *testing.B) {
	bb, in, shardID := benchSetup(b)
	ctx := context.Background()
	const users = 5000
	callers := make([]Caller, users)
	for i := range callers {
		callers[i] = bb.caller(int64(i + 1))
		if _, err := bb.svc.Enter(ctx, callers[i], in); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(16) // many clients at once, as at 10:00
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			n := next.Add(1)
			c := callers[n%users]
			c.SessionToken = "st_" + strconv.FormatInt(n, 10)
			if _, err := bb.svc.Status(ctx, c, bb.svc.Ticket(shardID, c.UserID)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "polls/s")
}

// BenchmarkQueueEarlyPoll: polls that come before poll_after_ms, answered
// from the process cache with no Redis call.
func BenchmarkQueueEarlyPoll(b *testing.B) {
	bb, in, shardID := benchSetup(b)
	ctx := context.Background()
	c := bb.caller(1)
	if _, err := bb.svc.Enter(ctx, c, in); err != nil {
		b.Fatal(err)
	}
	ticket := bb.svc.Ticket(shardID, 1)
	if _, err := bb.svc.Status(ctx, c, ticket); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetParallelism(16) // many clients at once, as at 10:00
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := bb.svc.Status(ctx, c, ticket); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "polls/s")
}

// BenchmarkQueueMemory fills one queue with TATKAL_BENCH_ENTRANTS entrants
// (default 100,000) through the ENTER script, pipelined, and reports the
// Redis memory per waiting entrant.
func BenchmarkQueueMemory(b *testing.B) {
	n := 100_000
	if v, err := strconv.Atoi(os.Getenv("TATKAL_BENCH_ENTRANTS")); err == nil && v > 0 {
		n = v
	}
	bb, in, shardID := benchSetup(b)
	ctx := context.Background()
	shard, err := bb.svc.cfg.Catalog.Find(ctx, in.TrainNo, in.JourneyDate, in.Class, in.Quota)
	if err != nil {
		b.Fatal(err)
	}
	w, err := bb.svc.WindowFor(ctx, shard)
	if err != nil {
		b.Fatal(err)
	}
	rdb := bb.env.Redis
	if err := bb.svc.enter.Load(ctx, rdb).Err(); err != nil {
		b.Fatal(err)
	}
	used := func() int64 {
		info, _ := rdb.Info(ctx, "memory").Result()
		for _, line := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
		return 0
	}
	keys := bb.svc.queueKeys(shardID)[:2]
	expire := time.Now().Add(time.Hour).UnixMilli()
	before := used()
	start := time.Now()
	b.ResetTimer()
	for range b.N {
		for lo := 0; lo < n; lo += 2000 {
			pipe := rdb.Pipeline()
			for uid := lo + 1; uid <= min(lo+2000, n); uid++ {
				score := strconv.FormatInt(Score(w.Seed, bb.svc.Ticket(shardID, int64(uid))), 10)
				bb.svc.enter.EvalSha(ctx, pipe, keys, uid, score, expire)
			}
			if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	elapsed := time.Since(start)
	after := used()
	card, _ := rdb.ZCard(ctx, keys[0]).Result()
	usage, _ := rdb.MemoryUsage(ctx, keys[0], 0).Result()
	if card != int64(n) {
		b.Fatalf("%d in the queue, want %d", card, n)
	}
	b.ReportMetric(float64(after-before)/float64(n), "B/entrant(used_memory)")
	b.ReportMetric(float64(usage)/float64(n), "B/entrant(MEMORY_USAGE)")
	b.ReportMetric(float64(n)/elapsed.Seconds()*float64(b.N), "pipelined-entries/s")
	bb.env.Redis.Del(ctx, keys...) //nolint:errcheck
}
