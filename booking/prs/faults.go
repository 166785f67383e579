package prs

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// Faults are the misbehaviours the simulator injects into the /v1 API, so
// the sync channel is exercised against a core that is slow, flaky, down,
// refusing, or silent.
type Faults struct {
	LatencyMs  int     `json:"latency_ms"`  // added to every answer
	JitterMs   int     `json:"jitter_ms"`   // plus a uniform 0..JitterMs
	FailRate   float64 `json:"fail_rate"`   // answer 503 without doing anything
	Outage     bool    `json:"outage"`      // 503 on every /v1 request
	RejectRate float64 `json:"reject_rate"` // refuse a new, valid booking with CORE_REJECTED
	// TimeoutRate makes the core do the work and then hang past any sane
	// client timeout (ending in 504). A real core may well have committed
	// the booking it never answered for, so the work is kept: the client's
	// retry must see the idempotent 200.
	TimeoutRate float64 `json:"timeout_rate"`
}

// maxFaultMs bounds injected latency; beyond a minute it is an outage.
const maxFaultMs = 60_000

// hangFor is how long a timed-out request hangs if the client waits that long.
const hangFor = 30 * time.Second

// Validate says what is wrong with a fault setting, or nil.
func (f Faults) Validate() error {
	if f.LatencyMs < 0 || f.LatencyMs > maxFaultMs || f.JitterMs < 0 || f.JitterMs > maxFaultMs {
		return fmt.Errorf("latency_ms and jitter_ms must be in 0..%d (got %d and %d)", maxFaultMs, f.LatencyMs, f.JitterMs)
	}
	for _, r := range []struct {
		name string
		v    float64
	}{{"fail_rate", f.FailRate}, {"reject_rate", f.RejectRate}, {"timeout_rate", f.TimeoutRate}} {
		if !(r.v >= 0 && r.v <= 1) { // also refuses NaN
			return fmt.Errorf("%s must be in [0,1] (got %v)", r.name, r.v)
		}
	}
	return nil
}

// faultBox holds the current faults and the seeded randomness that decides
// which requests they hit; one per Server.
type faultBox struct {
	mu  sync.Mutex
	cur Faults
	rng *rand.Rand
}

func newFaultBox(seed int64) *faultBox {
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	return &faultBox{rng: rand.New(rand.NewPCG(uint64(seed), 0x7a7ca1))}
}

func (b *faultBox) get() Faults {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cur
}

func (b *faultBox) set(f Faults) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cur = f
}

// roll reports true with probability p.
func (b *faultBox) roll(p float64) bool {
	if p <= 0 {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rng.Float64() < p
}

// plan is what the faults decided for one request.
type plan struct {
	delay time.Duration
	fail  bool
	hang  bool
}

func (b *faultBox) plan() (Faults, plan) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f := b.cur
	p := plan{delay: time.Duration(f.LatencyMs) * time.Millisecond}
	if f.JitterMs > 0 {
		p.delay += time.Duration(b.rng.IntN(f.JitterMs+1)) * time.Millisecond
	}
	p.fail = f.FailRate > 0 && b.rng.Float64() < f.FailRate
	p.hang = f.TimeoutRate > 0 && b.rng.Float64() < f.TimeoutRate
	return f, p
}

// inject wraps the /v1 API with the current faults.
func (s *Server) inject(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, p := s.faults.plan()
		if f.Outage {
			writeError(w, http.StatusServiceUnavailable, errorBody{Code: CodeUnavailable, Message: "the reservation core is down"})
			return
		}
		if !sleep(r.Context(), p.delay) {
			return // the client gave up
		}
		if p.fail {
			writeError(w, http.StatusServiceUnavailable, errorBody{Code: CodeUnavailable, Message: "the reservation core is busy; retry"})
			return
		}
		if !p.hang {
			next.ServeHTTP(w, r)
			return
		}
		// Do the work, lose the answer, and keep the client waiting.
		next.ServeHTTP(discard{h: http.Header{}}, r)
		// Only a fully read body lets net/http notice the client leaving.
		io.Copy(io.Discard, r.Body) //nolint:errcheck
		s.log.Info("prs fault: hanging after the work", "method", r.Method, "path", r.URL.Path)
		if sleep(r.Context(), hangFor) {
			writeError(w, http.StatusGatewayTimeout, errorBody{Code: CodeTimeout, Message: "the reservation core did not answer in time"})
		}
	})
}

// sleep waits d or until ctx ends, reporting whether the full wait passed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// discard is a ResponseWriter whose answer nobody will ever read.
type discard struct{ h http.Header }

func (d discard) Header() http.Header         { return d.h }
func (d discard) Write(b []byte) (int, error) { return len(b), nil }
func (d discard) WriteHeader(int)             {}
