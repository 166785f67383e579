package booking_test

import (
	"context"
	"testing"
	"time"

	"tatkal/booking/lab/teststack"
)

// pauser is teststack.Pauser under the names this package's tests use.
type pauser struct{ teststack.Pauser }

func (p *pauser) pause(ctx context.Context, point string) { p.Pause(ctx, point) }

func (p *pauser) arm(point string) (reached, release chan struct{}) { return p.Arm(point) }

// waitFor fails the test unless ch closes within 10 s.
func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}
