package funnel_test

import (
	"context"
	"testing"
	"time"

	"tatkal/booking/funnel"
	"tatkal/booking/lab/testenv"
)

// Two processes time one stage in one 5-second step. Process a: 90 at
// 1 ms and 10 at 2 s (its own p95 is 2 s); process b: 100 at 50 ms (its
// own p95 is 50 ms). Together 200 samples, the 190th is at 50 ms: the
// p95 comes from the summed histogram, not from either process's p95 or
// their mean or maximum. Another stage and another step stay apart.
func TestLatencySeriesFromSeveralProcessesCombine(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	a := funnel.New(env.Redis, env.KeyPrefix, nil)
	b := funnel.New(env.Redis, env.KeyPrefix, nil)
	// A minute boundary inside the range: two hashes are read.
	base := time.Now().Truncate(time.Minute).Add(-time.Minute - 5*time.Second)
	for i := 0; i < 90; i++ {
		a.ObserveAt(funnel.HoldAttempt, time.Millisecond, base.Add(time.Second))
	}
	for i := 0; i < 10; i++ {
		a.ObserveAt(funnel.HoldAttempt, 2*time.Second, base.Add(2*time.Second))
	}
	for i := 0; i < 100; i++ {
		b.ObserveAt(funnel.HoldAttempt, 50*time.Millisecond, base.Add(4*time.Second))
	}
	b.ObserveAt(funnel.PayInitiated, 300*time.Millisecond, base.Add(6*time.Second)) // the next step, the next minute
	a.ObserveAt(funnel.HoldAttempt, 9*time.Second, base.Add(-time.Second))          // before the range
	for _, r := range []*funnel.Recorder{a, b} {
		if err := r.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	got, err := b.LatencySeries(ctx, base, base.Add(14*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || !got[1].At.Equal(base.Add(funnel.SeriesStep)) {
		t.Fatalf("%d buckets (second at %v), want 3 from %v", len(got), got[1].At, base)
	}
	type want struct {
		p95 time.Duration
		n   int64
	}
	for i, w := range []map[string]want{
		{funnel.HoldAttempt: {50 * time.Millisecond, 200}, funnel.PayInitiated: {0, 0}},
		{funnel.HoldAttempt: {0, 0}, funnel.PayInitiated: {500 * time.Millisecond, 1}},
		{funnel.HoldAttempt: {0, 0}, funnel.PayInitiated: {0, 0}},
	} {
		for stage, w := range w {
			if p, n := got[i].Quantile(stage, 0.95); p != w.p95 || n != w.n {
				t.Errorf("bucket %d %s: p95 %v of %d samples, want %v of %d", i, stage, p, n, w.p95, w.n)
			}
		}
	}
	if p, _ := got[0].Quantile(funnel.HoldAttempt, 0.99); p != 2*time.Second {
		t.Errorf("p99 %v, want 2s: the slow tail is kept", p)
	}
	keys, err := env.Redis.Keys(ctx, env.KeyPrefix+":lseries:*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("latency series keys: %v %v", keys, err)
	}
	for _, k := range keys {
		if ttl := env.Redis.TTL(ctx, k).Val(); ttl <= 0 || ttl > funnel.SeriesRetention {
			t.Fatalf("%s expires in %v, want within %v", k, ttl, funnel.SeriesRetention)
		}
	}
}

// Two processes call one payment route; each step's outcomes add up per
// route, and the routes stay apart.
func TestRouteSeriesFromSeveralProcessesAddUp(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	a := funnel.New(env.Redis, env.KeyPrefix, nil)
	b := funnel.New(env.Redis, env.KeyPrefix, nil)
	base := time.Now().Truncate(time.Minute).Add(-2 * time.Minute)
	for i := 0; i < 3; i++ {
		a.RouteEventAt("razorpay/upi", funnel.RouteAnswered, base.Add(time.Second))
		b.RouteEventAt("razorpay/upi", funnel.RouteAnswered, base.Add(3*time.Second))
	}
	b.RouteEventAt("razorpay/upi", funnel.RouteNoAnswer, base.Add(4*time.Second))
	a.RouteEventAt("razorpay/upi", funnel.RouteNoAnswer, base.Add(11*time.Second))
	a.RouteEventAt("payu/card", funnel.RouteRefused, base.Add(2*time.Second))
	for _, r := range []*funnel.Recorder{a, b} {
		if err := r.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	got, err := a.RouteSeries(ctx, base, base.Add(14*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	want := []map[string]int64{
		{"razorpay/upi|answered": 6, "razorpay/upi|no_answer": 1, "payu/card|refused": 1},
		{},
		{"razorpay/upi|no_answer": 1},
	}
	if len(got) != len(want) {
		t.Fatalf("%d buckets, want %d", len(got), len(want))
	}
	for i, w := range want {
		if len(got[i].Counts) != len(w) {
			t.Errorf("bucket %d: %v, want %v", i, got[i].Counts, w)
		}
		for k, n := range w {
			if got[i].Counts[k] != n {
				t.Errorf("bucket %d %s: %d, want %d", i, k, got[i].Counts[k], n)
			}
		}
	}
	var none *funnel.Recorder
	none.RouteEvent("razorpay/upi", funnel.RouteAnswered) // must not panic
}
