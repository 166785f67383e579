package inventory_test

import (
	"context"
	"math/rand"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"tatkal/booking/inventory"
	"tatkal/booking/lab/testenv"
)

// benchParallelism multiplies GOMAXPROCS into the number of goroutines
// b.RunParallel starts: the client waits on the network, so one goroutine
// per CPU would leave Redis idle between calls.
const benchParallelism = 16

const (
	benchLegs   = 8
	benchBerths = 400 // 5 coaches of 80
)

// benchShard is a hot shard of 400 berths (5 coaches of 80) and 8 legs,
// about a third of its berth-legs already sold (confirmed bookings spread
// over random journeys), so the script scans a realistic mask and the
// groups have to search.
func benchShard() inventory.ShardState { return benchShardOf(5) }

// benchShardOf is benchShard with its 400 berths in n equal coaches.
func benchShardOf(n int) inventory.ShardState {
	types, coaches := shape(n, benchBerths/n, "LMULMUST")
	rng := rand.New(rand.NewSource(7))
	occ := make([]uint16, benchBerths)
	var holds []inventory.HoldRecord
	for i := 0; i < 300; i++ {
		from := rng.Intn(benchLegs)
		to := from + 1 + rng.Intn(benchLegs-from)
		b := rng.Intn(benchBerths)
		if occ[b]&legMask(from, to) != 0 {
			continue
		}
		occ[b] |= legMask(from, to)
		holds = append(holds, inventory.HoldRecord{ID: "sold" + strconv.Itoa(i), State: 'C', UserID: int64(1e6 + i), From: from, To: to, Berths: []int{b}, Passengers: 1, ExpiresMs: 1})
	}
	return inventory.ShardState{Epoch: 1, Legs: benchLegs, BerthTypes: types, Coaches: coaches, WaitlistCap: 0, Holds: holds}
}

// BenchmarkHoldScript measures HOLD+RELEASE cycles on one hot shard from
// parallel goroutines: each iteration is one HOLD (1-4 passengers, random
// journey and preferences) and, when it held, one RELEASE, so the shard
// stays in its steady state. holds/s counts HELD answers per second of
// wall time.
func BenchmarkHoldScript(b *testing.B) { benchHold(b, benchShard()) }

// BenchmarkHoldScriptSmallCoaches is BenchmarkHoldScript on the same 400
// berths in 20 coaches of 20, as a Tatkal quota of 30% per coach lays them
// out: groups more often miss the first coach, so the coach scan runs.
func BenchmarkHoldScriptSmallCoaches(b *testing.B) { benchHold(b, benchShardOf(20)) }

func benchHold(b *testing.B, st inventory.ShardState) {
	s, _, _ := newStore(b)
	ctx := context.Background()
	mustLoad(b, s, testShard, st)
	var users, held, refused atomic.Int64
	b.SetParallelism(benchParallelism)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		user := users.Add(1)
		rng := rand.New(rand.NewSource(user))
		n := 0
		for pb.Next() {
			n++
			from := rng.Intn(benchLegs)
			to := from + 1 + rng.Intn(benchLegs-from)
			prefs := make([]byte, 1+rng.Intn(4))
			for i := range prefs {
				prefs[i] = "LMU--"[rng.Intn(5)]
			}
			r := inventory.HoldRequest{
				ShardID: testShard, HoldID: "b" + strconv.FormatInt(user, 10) + "-" + strconv.Itoa(n), UserID: user,
				IdemKey: strconv.Itoa(n), From: from, To: to, ExpiresAt: time.Now().Add(10 * time.Minute),
				DailyCap: 10, Prefs: prefs, IDOK: true, IdemTTL: 2 * time.Minute, MaxPassengers: 4,
			}
			res, err := s.Hold(ctx, r)
			if err != nil {
				b.Error(err)
				return
			}
			if res.Outcome != inventory.Held {
				refused.Add(1)
				continue
			}
			held.Add(1)
			if got, err := s.Release(ctx, testShard, res.HoldID, inventory.ReleaseHold, user, r.IdemKey); err != nil || got != "RELEASED" {
				b.Errorf("release %s: %q %v", res.HoldID, got, err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(held.Load())/b.Elapsed().Seconds(), "holds/s")
	if total := held.Load() + refused.Load(); total > 0 {
		b.ReportMetric(float64(refused.Load())/float64(total), "refused/op")
	}
	if sn := snap(b, s, testShard); len(sn.Holds) != len(st.Holds) {
		b.Fatalf("%d records left, want the %d sold ones", len(sn.Holds), len(st.Holds))
	}
}

// BenchmarkAvailScript measures AVAIL on the hot shard of
// BenchmarkHoldScript: random journeys from parallel goroutines.
func BenchmarkAvailScript(b *testing.B) {
	s, _, _ := newStore(b)
	ctx := context.Background()
	mustLoad(b, s, testShard, benchShard())
	var users atomic.Int64
	b.SetParallelism(benchParallelism)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		rng := rand.New(rand.NewSource(users.Add(1)))
		for pb.Next() {
			from := rng.Intn(benchLegs)
			to := from + 1 + rng.Intn(benchLegs-from)
			if _, err := s.Available(ctx, testShard, from, to); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// ceilingLua is the least a hold can do atomically in Redis: one counter,
// incremented with a bound check (and decremented again on overflow).
const ceilingLua = `
local v = redis.call('HINCRBY', KEYS[1], ARGV[1], ARGV[2])
if v < 0 or v > tonumber(ARGV[3]) then
  redis.call('HINCRBY', KEYS[1], ARGV[1], -tonumber(ARGV[2]))
  return 0
end
return 1
`

// BenchmarkRawLuaCeiling runs ceilingLua the way BenchmarkHoldScript runs
// the real scripts: same Redis, same parallelism, one shard's hash tag, one
// call to take n seats on a leg and one to give them back per iteration.
// Its holds/s is the ceiling the hold path can approach.
func BenchmarkRawLuaCeiling(b *testing.B) {
	rdb := testenv.Redis(b)
	prefix := testenv.RedisPrefix(b, rdb)
	ctx := context.Background()
	script := redis.NewScript(ceilingLua)
	key := []string{prefix + ":{s1}:cnt"}
	if err := script.Load(ctx, rdb).Err(); err != nil {
		b.Fatal(err)
	}
	var users, held atomic.Int64
	b.SetParallelism(benchParallelism)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		rng := rand.New(rand.NewSource(users.Add(1)))
		for pb.Next() {
			leg := "h" + strconv.Itoa(rng.Intn(benchLegs))
			n := 1 + rng.Intn(4)
			ok, err := script.Run(ctx, rdb, key, leg, n, benchBerths).Int()
			if err != nil {
				b.Error(err)
				return
			}
			if ok != 1 {
				continue
			}
			held.Add(1)
			if err := script.Run(ctx, rdb, key, leg, -n, benchBerths).Err(); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(held.Load())/b.Elapsed().Seconds(), "holds/s")
	for l := 0; l < benchLegs; l++ {
		if v := rdb.HGet(ctx, key[0], "h"+strconv.Itoa(l)).Val(); v != "" && v != "0" {
			b.Fatalf("leg %d counter %s after balanced cycles", l, v)
		}
	}
}
