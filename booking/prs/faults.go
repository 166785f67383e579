package prs

import "fmt"

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
