package payment_test

import (
	"context"
	"testing"
	"time"

	"tatkal/booking/lab/teststack"
	"tatkal/booking/payment"
	"tatkal/booking/payment/pspapi"
)

// A create that never reached the gateway (our call gave up, and the
// gateway has no record) is failed once "not found" can mean "never
// created": the inquiry asks again at that moment, not a backoff later
// (up to a minute, the seats and the passenger waiting). Before it, "not
// found" decides nothing.
func TestNeverCreatedPaymentFailsWhenItsWaitEnds(t *testing.T) {
	t.Parallel()
	const notCreatedAfter, since = 20 * time.Second, 18 * time.Second
	w := newWorld(t, teststack.Options{Routes: fastRoutes(func(rc *pspapi.RouteConfig) { rc.AutoApproveMs = -1 }),
		NotCreatedAfter: notCreatedAfter}, 4, 1)
	ctx := context.Background()
	u := w.users[0]
	h := w.hold(t, u, "never-hold-1")
	v, err := w.pay(t, u, h.HoldID, payment.UPI, "never-pay-1")
	if err != nil || v.State != payment.AwaitingUser {
		t.Fatalf("upi pay: %+v %v", v, err)
	}
	// Make it the payment whose create was lost on the way: the gateway
	// has no record, we never heard an answer, and we asked `since` ago.
	if _, err := w.s.Pool.Exec(ctx, `DELETE FROM psp.payments WHERE merchant_ref = $1`, v.ID.String()); err != nil {
		t.Fatal(err)
	}
	if _, err := w.s.Pool.Exec(ctx, `UPDATE payments SET state = 'UNKNOWN', psp_ref = NULL, initiated_at = now() - $2::interval WHERE id = $1`,
		v.ID, since.String()); err != nil {
		t.Fatal(err)
	}
	if _, ok := w.gatewayPayment(t, v.Gateway, v.ID); ok {
		t.Fatal("the gateway still knows the payment")
	}

	wait, err := w.s.Payments.Inquire(ctx, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	// The first backoff is 5 s; the wait ends 2 s from now.
	if left := notCreatedAfter - since; wait <= 0 || wait > left+1500*time.Millisecond {
		t.Fatalf("asks again in %s; not-found means never-created in %s", wait, left)
	}
	if got, err := w.s.Payments.Get(ctx, u, v.ID); err != nil || got.State != payment.Unknown {
		t.Fatalf("before its wait ends, not-found decided %+v %v", got, err)
	}
	time.Sleep(wait)
	if again, err := w.s.Payments.Inquire(ctx, v.ID); err != nil || again != 0 {
		t.Fatalf("inquiry once the wait is over: again in %s, %v", again, err)
	}
	if got, err := w.s.Payments.Get(ctx, u, v.ID); err != nil || got.State != payment.Failed {
		t.Fatalf("never-created payment after its wait: %+v %v", got, err)
	}
}
