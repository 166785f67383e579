package admission

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"tatkal/booking"
	"tatkal/booking/funnel"
)

type fakeLevers struct {
	mu     sync.Mutex
	paused bool
	rate   int
}

func (f *fakeLevers) AdmissionPaused(int64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.paused
}

func (f *fakeLevers) PollSlowdown(int64) int { return 1 }

func (f *fakeLevers) Rules(base booking.Rules) booking.Rules { return base }

func (f *fakeLevers) AdmissionRate(int64) (int, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.rate, f.rate > 0
}

// TestLeversAndAdaptiveRate: pause admits nobody, a fixed rate is obeyed,
// and slow holds halve the adaptive rate.
func TestLeversAndAdaptiveRate(t *testing.T) {
	t.Parallel()
	lev := &fakeLevers{paused: true}
	var rec *funnel.Recorder
	b := setup(t, func(c *Config) {
		c.Levers = lev
		c.anyPlaces = true
		rec = funnel.New(c.Redis, c.Prefix, slog.New(slog.NewTextHandler(io.Discard, nil)))
		c.Funnel = rec
	})
	ctx := context.Background()
	shard := b.shard(t, "3A", 0, time.Now().Add(-time.Minute), "queue")
	b.fill(t, shard.ID, 1, 200)
	ctl := b.svc.NewController(ControllerConfig{BaseRate: 100, Tick: 100 * time.Millisecond})
	for range 5 {
		if err := ctl.Step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if adm, _ := b.admitted(t, shard.ID); adm != 0 {
		t.Fatalf("paused, yet admitted %d", adm)
	}
	lev.mu.Lock()
	lev.paused, lev.rate = false, 10
	lev.mu.Unlock()
	start := time.Now()
	for time.Since(start) < time.Second {
		if err := ctl.Step(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if adm, _ := b.admitted(t, shard.ID); adm < 5 || adm > 16 {
		t.Fatalf("fixed 10/s for a second admitted %d", adm)
	}

	// Adaptive: holds taking 2 s halve the rate at the next signal reading.
	st := ctl.shards[shard.ID]
	st.rate = 100
	for range 50 {
		rec.Add(shard.ID, funnel.HoldAttempt, 1)
		rec.Observe(funnel.HoldAttempt, 2*time.Second)
	}
	// Put the observations two seconds in the past, where signals look.
	if err := rec.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	st.sigAt = time.Time{}
	ctl.signals(ctx, shard, st, time.Now())
	if st.rate > 60 {
		t.Fatalf("slow holds left the rate at %.0f", st.rate)
	}
	st.sigAt = time.Time{}
	before := st.rate
	time.Sleep(5 * time.Second) // the slow second ages out of the 5 s look-back
	ctl.signals(ctx, shard, st, time.Now())
	if st.rate <= before {
		t.Fatalf("healthy signals did not raise the rate: %.1f -> %.1f", before, st.rate)
	}
}
