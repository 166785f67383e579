package payment_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"tatkal/booking/lab/testenv"
	"tatkal/booking/payment"
)

// Late-success resolutions hold a pool connection for their lock and take
// others for their steps: more of them at once than the pool has
// connections must still all finish, not wait on each other until their
// deadline. Each here resolves a payment that does not exist, which needs
// the lock's connection and one more.
func TestManyLateSuccessResolutionsDoNotExhaustThePool(t *testing.T) {
	t.Parallel()
	env := testenv.NewWithPool(t, 4)
	svc := payment.New(payment.Config{Pool: env.Pool})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() { errs <- svc.ResolveLateSuccess(ctx, uuid.New()) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err == nil || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("resolution of an unknown payment: %v, want its own error in time", err)
		}
	}
}
