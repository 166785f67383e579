package funnel_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"tatkal/booking/funnel"
	"tatkal/booking/lab/testenv"
)

// Two processes count into one funnel; the sum is what the console reads.
func TestCountsFromSeveralProcessesAddUp(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	a := funnel.New(env.Redis, env.KeyPrefix, nil)
	b := funnel.New(env.Redis, env.KeyPrefix, nil)
	start := time.Now()
	var wg sync.WaitGroup
	for _, r := range []*funnel.Recorder{a, b} {
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 500; i++ {
					r.Add(7, funnel.HoldAttempt, 1)
					if i%5 == 0 {
						r.Add(7, funnel.Held, 1)
					}
					r.Observe(funnel.Held, time.Duration(i%40)*time.Millisecond)
				}
			}()
		}
	}
	wg.Wait()
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	secs, err := a.Read(ctx, 7, start, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var attempts, held int64
	for _, s := range secs {
		attempts += s.Counts[funnel.HoldAttempt]
		held += s.Counts[funnel.Held]
	}
	if attempts != 8000 || held != 1600 {
		t.Fatalf("read %d attempts and %d held, want 8000 and 1600", attempts, held)
	}
	p95, n, err := a.Quantile(ctx, funnel.Held, start, time.Now(), 0.95)
	if err != nil || n != 8000 || p95 != 50*time.Millisecond {
		t.Fatalf("p95 %v over %d (%v), want 50ms over 8000", p95, n, err)
	}
	shards, err := b.Shards(ctx)
	if err != nil || len(shards) != 1 || shards[0] != 7 {
		t.Fatalf("shards %v %v", shards, err)
	}
	// A shard last counted longer ago than its counts are kept is forgotten.
	old := float64(time.Now().Add(-funnel.Retention - time.Minute).Unix())
	if err := env.Redis.ZAdd(ctx, env.KeyPrefix+":funnel:active", redis.Z{Score: old, Member: "3"}).Err(); err != nil {
		t.Fatal(err)
	}
	if shards, err = b.Shards(ctx); err != nil || len(shards) != 1 || shards[0] != 7 {
		t.Fatalf("shards with one long idle: %v %v, want [7]", shards, err)
	}
	if n, err := env.Redis.ZCard(ctx, env.KeyPrefix+":funnel:active").Result(); err != nil || n != 1 {
		t.Errorf("the idle shard is still listed in Redis (%d members, %v)", n, err)
	}
	var nilRecorder *funnel.Recorder
	nilRecorder.Add(1, funnel.Held, 1) // must not panic
}

// The charted series: two processes' counts land in the 5-second bucket
// of the second they happened and add up; shards stay apart; a bucket
// with nothing is zero; the series keys expire.
func TestSeriesFromSeveralProcessesAddUp(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	a := funnel.New(env.Redis, env.KeyPrefix, nil)
	b := funnel.New(env.Redis, env.KeyPrefix, nil)
	// A minute boundary inside the range: the series reads two hashes per shard.
	base := time.Now().Truncate(time.Minute).Add(-time.Minute - 10*time.Second)
	a.AddAt(3, funnel.Held, 2, base.Add(1*time.Second))  // bucket 0
	b.AddAt(3, funnel.Held, 5, base.Add(4*time.Second))  // bucket 0, the other process
	a.AddAt(3, funnel.Held, 1, base.Add(10*time.Second)) // bucket 2, the next minute
	b.AddAt(3, funnel.Confirmed, 4, base.Add(12*time.Second))
	b.AddAt(9, funnel.Held, 7, base.Add(2*time.Second))
	a.AddAt(3, funnel.Held, 100, base.Add(-time.Second)) // before the range
	for _, r := range []*funnel.Recorder{a, b} {
		if err := r.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	got, err := a.Series(ctx, []int64{3, 9, 11}, base, base.Add(19*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64][]map[string]int64{
		3:  {{funnel.Held: 7}, {}, {funnel.Held: 1, funnel.Confirmed: 4}, {}},
		9:  {{funnel.Held: 7}, {}, {}, {}},
		11: {{}, {}, {}, {}},
	}
	for id, w := range want {
		bs := got[id]
		if len(bs) != len(w) {
			t.Fatalf("shard %d: %d buckets, want %d", id, len(bs), len(w))
		}
		for i, counts := range w {
			if !bs[i].At.Equal(base.Add(time.Duration(i) * funnel.SeriesStep)) {
				t.Fatalf("shard %d bucket %d starts at %v, want %v", id, i, bs[i].At, base.Add(time.Duration(i)*funnel.SeriesStep))
			}
			for _, st := range funnel.Stages {
				if bs[i].Counts[st] != counts[st] {
					t.Fatalf("shard %d bucket %d: %s = %d, want %d (%v)", id, i, st, bs[i].Counts[st], counts[st], bs[i].Counts)
				}
			}
		}
	}
	keys, err := env.Redis.Keys(ctx, env.KeyPrefix+":fseries:*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("series keys: %v %v", keys, err)
	}
	for _, k := range keys {
		if ttl := env.Redis.TTL(ctx, k).Val(); ttl <= 0 || ttl > funnel.SeriesRetention {
			t.Fatalf("%s expires in %v, want within %v", k, ttl, funnel.SeriesRetention)
		}
	}
	if _, err := a.Series(ctx, []int64{3}, base, base.Add(-time.Minute)); err == nil {
		t.Fatal("a range that ends before it starts was read")
	}
}

// BenchmarkSeries reads what the console charts each second at a busy
// 10:00: ten minutes of 17 shards with every stage counted every second.
func BenchmarkSeries(b *testing.B) {
	env := testenv.New(b)
	ctx := context.Background()
	r := funnel.New(env.Redis, env.KeyPrefix, nil)
	end := time.Now().Truncate(time.Minute)
	start := end.Add(-10 * time.Minute)
	ids := make([]int64, 17)
	for i := range ids {
		ids[i] = int64(i)
	}
	for at := start; at.Before(end); at = at.Add(time.Second) {
		for _, id := range ids {
			for _, st := range funnel.Stages {
				r.AddAt(id, st, 3, at)
			}
		}
		if err := r.Flush(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		got, err := r.Series(ctx, ids, start, end.Add(-time.Second))
		if err != nil || len(got[16]) != 120 || got[16][119].Counts[funnel.Held] != 15 {
			b.Fatalf("series: %v %v", err, got[16][119].Counts)
		}
	}
}

// BenchmarkAdd is what every hold, payment and queue answer pays to be
// counted: a stage and a latency, from many goroutines at once.
func BenchmarkAdd(b *testing.B) {
	r := funnel.New(nil, "bench", nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r.Add(7, funnel.HoldAttempt, 1)
			r.Observe(funnel.HoldAttempt, 3*time.Millisecond)
		}
	})
}
