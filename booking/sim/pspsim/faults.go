package pspsim

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"math"
	"sync"
	"time"

	"tatkal/booking/payment/pspapi"
	"tatkal/booking/sim/simhttp"
)

// chance decides a fault with probability rate. The draw is a hash of the
// seed and what is being decided (gateway, merchant_ref, the decision's
// name), not a shared random stream, so with a fixed Seed every payment
// meets the same fate whatever the order requests and ticks arrive in.
func (s *Server) chance(rate float64, parts ...string) bool {
	if rate <= 0 {
		return false
	}
	if rate >= 1 {
		return true
	}
	return s.uniform(parts...) < rate
}

// uniform is a draw in [0, 1) determined by the seed and parts.
func (s *Server) uniform(parts ...string) float64 {
	h := sha256.New()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], s.seed)
	h.Write(b[:])
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	sum := h.Sum(nil)
	return float64(binary.BigEndian.Uint64(sum[:8])>>11) / (1 << 53)
}

// latency draws a call's latency from a log-normal whose median is p50
// and whose 99th percentile is p99; the tail is cut at 3×p99 so a call
// never hangs by accident (hangs are the timeout fault's job).
func (s *Server) latency(rc pspapi.RouteConfig) time.Duration {
	p50, p99 := float64(rc.LatencyP50Ms), float64(rc.LatencyP99Ms)
	if p99 <= 0 {
		return 0
	}
	p50 = max(p50, 1)
	if p99 <= p50 {
		return time.Duration(p50 * float64(time.Millisecond))
	}
	sigma := math.Log(p99/p50) / 2.3263 // z of the 99th percentile
	s.rngMu.Lock()
	z := s.rng.NormFloat64()
	s.rngMu.Unlock()
	ms := min(p50*math.Exp(sigma*z), 3*p99)
	return time.Duration(ms * float64(time.Millisecond))
}

// errClosing ends a sleep because the server is shutting down.
var errClosing = errors.New("psp simulator closing")

// sleep waits d unless the request or the server ends first.
func (s *Server) sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	defer context.AfterFunc(s.ctx, stop)()
	switch {
	case simhttp.Sleep(ctx, d):
		return nil
	case s.ctx.Err() != nil:
		return errClosing
	default:
		return ctx.Err()
	}
}

// limiter is a token bucket per route: CapacityTPS creates a second, with
// a burst of one second's worth. It is process memory on purpose: it
// models a bank's capacity, not state a restart must keep.
type limiter struct {
	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tps    int
	tokens float64
	last   time.Time
}

func newLimiter() *limiter { return &limiter{buckets: map[string]*bucket{}} }

// allow takes a token for key at rate tps (0 = unlimited). It uses the
// wall clock, not Config.Now, because it meters real requests.
func (l *limiter) allow(key string, tps int) bool {
	if tps <= 0 {
		return true
	}
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b == nil || b.tps != tps {
		b = &bucket{tps: tps, tokens: float64(tps), last: now}
		l.buckets[key] = b
	}
	b.tokens = min(float64(tps), b.tokens+now.Sub(b.last).Seconds()*float64(tps))
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
