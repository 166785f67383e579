package teststack

import (
	"context"
	"sync"

	"tatkal/booking/payment/pspapi"
	"tatkal/booking/sim/pspsim"
)

// Pauser holds a path at one named point (booking.PauseFunc; pass Pause
// as Options.Pause), once, after Arm: the test runs the competing step
// while the path waits there.
type Pauser struct {
	mu      sync.Mutex
	point   string
	reached chan struct{}
	release chan struct{}
}

// Pause is the booking.PauseFunc.
func (p *Pauser) Pause(ctx context.Context, point string) {
	p.mu.Lock()
	if p.point == "" || p.point != point {
		p.mu.Unlock()
		return
	}
	reached, release := p.reached, p.release
	p.point = ""
	p.mu.Unlock()
	close(reached)
	select {
	case <-release:
	case <-ctx.Done():
	}
}

// Arm makes the next path reaching point wait there until the returned
// release is closed; reached is closed when it arrives.
func (p *Pauser) Arm(point string) (reached, release chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.point, p.reached, p.release = point, make(chan struct{}), make(chan struct{})
	return p.reached, p.release
}

// QuietRoutes are the gateways' routes with no faults and no automatic
// approval: a payment waits for its customer (Stack.ApproveAtGateway).
func QuietRoutes() []pspapi.RouteConfig {
	var out []pspapi.RouteConfig
	for _, rc := range pspsim.DefaultRoutes() {
		rc.LatencyP50Ms, rc.LatencyP99Ms = 5, 20
		rc.TimeoutRate, rc.DeclineRate, rc.PendingRate, rc.LateSuccessRate = 0, 0, 0, 0
		rc.LostCallbackRate, rc.DuplicateCallbackRate, rc.CallbackDelayMs = 0, 0, 0
		rc.AutoApproveMs, rc.AbandonRate, rc.CapacityTPS = -1, 0, 0
		out = append(out, rc)
	}
	return out
}
