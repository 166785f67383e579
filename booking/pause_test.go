package booking_test

import (
	"context"
	"sync"
	"testing"
	"time"
)

// pauser holds a path at one named point (booking.PauseFunc), once, after
// arm: the test runs the competing step while it waits there.
type pauser struct {
	mu      sync.Mutex
	point   string
	reached chan struct{}
	release chan struct{}
}

func (p *pauser) pause(ctx context.Context, point string) {
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

// arm makes the next path reaching point wait there until the returned
// release is closed; reached is closed when it arrives.
func (p *pauser) arm(point string) (reached, release chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.point, p.reached, p.release = point, make(chan struct{}), make(chan struct{})
	return p.reached, p.release
}

// waitFor fails the test unless ch closes within 10 s.
func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}
