package prssim

import (
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"tatkal/booking/prs"
	"tatkal/booking/sim/simhttp"
	"time"
)

// hangFor is how long a timed-out request hangs if the client waits that long.
const hangFor = 30 * time.Second

// faultBox holds the current faults and the seeded randomness that decides
// which requests they hit; one per Server.
type faultBox struct {
	mu  sync.Mutex
	cur prs.Faults
	rng *rand.Rand
}

func newFaultBox(seed int64) *faultBox {
	if seed == 0 {
		seed = time.Now().UnixNano()
	}
	return &faultBox{rng: rand.New(rand.NewPCG(uint64(seed), 0x7a7ca1))}
}

func (b *faultBox) get() prs.Faults {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.cur
}

func (b *faultBox) set(f prs.Faults) {
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

func (b *faultBox) plan() (prs.Faults, plan) {
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
			simhttp.Error(w, http.StatusServiceUnavailable, prs.ErrorBody{Code: prs.CodeUnavailable, Message: "the reservation core is down"})
			return
		}
		if !simhttp.Sleep(r.Context(), p.delay) {
			return // the client gave up
		}
		if p.fail {
			simhttp.Error(w, http.StatusServiceUnavailable, prs.ErrorBody{Code: prs.CodeUnavailable, Message: "the reservation core is busy; retry"})
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
		if simhttp.Sleep(r.Context(), hangFor) {
			simhttp.Error(w, http.StatusGatewayTimeout, prs.ErrorBody{Code: prs.CodeTimeout, Message: "the reservation core did not answer in time"})
		}
	})
}

// discard is a ResponseWriter whose answer nobody will ever read.
type discard struct{ h http.Header }

func (d discard) Header() http.Header         { return d.h }
func (d discard) Write(b []byte) (int, error) { return len(b), nil }
func (d discard) WriteHeader(int)             {}
