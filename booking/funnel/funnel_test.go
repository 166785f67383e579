package funnel_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"tatkal/booking/funnel"
	"tatkal/booking/testenv"
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
	var nilRecorder *funnel.Recorder
	nilRecorder.Add(1, funnel.Held, 1) // must not panic
}
