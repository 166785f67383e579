package bench_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"tatkal/booking/bench"
	"tatkal/booking/teststack"
)

// TestBenchSmoke runs every phase briefly against a private database: each
// figure must come out positive and the shard's invariants must hold.
func TestBenchSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL and Redis")
	}
	st := teststack.New(t, teststack.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opts := bench.DefaultOptions()
	opts.Duration, opts.Concurrency, opts.Berths = 300*time.Millisecond, 8, 64
	opts.Pool, opts.Redis, opts.Service = st.Pool, st.Redis, st.Service
	opts.SessionKey = []byte(strings.Repeat("b", 32)) // BaseURL empty: the bench serves the API itself
	rep, err := bench.Run(ctx, opts)
	if err != nil {
		t.Fatalf("bench: %v", err)
	}
	out := rep.String()
	t.Log("\n" + out)

	positive := map[string]float64{
		"raw A ops/s":           rep.RawLua.Rate(),
		"raw A pipelined ops/s": rep.RawLuaPipelined.Rate(),
		"raw B rows/s":          rep.RawPG.Rate(),
		"cycle holds/s":         rep.Cycle.DurableRate(),
		"service decisions/s":   rep.Service.Rate(),
		"service durable/s":     rep.Service.DurableRate(),
		"HTTP decisions/s":      rep.HTTP.Rate(),
		"HTTP durable/s":        rep.HTTP.DurableRate(),
		"rush decisions/s":      rep.Rush.Rate(),
		"rush durable/s":        rep.Rush.FillRate(),
	}
	for name, v := range positive {
		if !(v > 0) {
			t.Errorf("%s = %v, want > 0", name, v)
		}
	}
	for _, p := range []bench.Phase{rep.Cycle, rep.Service, rep.HTTP, rep.Rush} {
		if p.P50 <= 0 || p.P99 < p.P50 {
			t.Errorf("%s: p50 %v p99 %v", p.Name, p.P50, p.P99)
		}
	}
	// Nothing but the rush may answer SOLD_OUT, and nothing may fail.
	for _, p := range []bench.Phase{rep.Cycle, rep.Service, rep.HTTP} {
		if len(p.Errors) > 0 || p.SoldOut > 0 || p.Durable != p.Ops {
			t.Errorf("%s: %d decisions, %d durable, %d sold out, errors %v", p.Name, p.Ops, p.Durable, p.SoldOut, p.Errors)
		}
	}
	if !rep.OK() {
		t.Errorf("invariants after the bench: %d checks", len(rep.Checks))
		for _, c := range rep.Checks {
			t.Errorf("%s", c.String())
		}
	}
	for _, want := range []string{"raw A", "raw B", "service", "HTTP", "cycle", "rush", "OK (Redis and PostgreSQL agree", "GOMAXPROCS"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}
