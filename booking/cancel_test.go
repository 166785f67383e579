package booking_test

import (
	"context"
	"strings"
	"testing"

	"tatkal/booking"
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/teststack"
	"tatkal/booking/payment"
)

// A passenger cancels an unpaid hold while their wallet payment commits
// (Cancel paused between reading the hold and its compare-and-set): the
// cancel refuses with ALREADY_CONFIRMED and the paid ticket stands. Only
// an explicit booking cancel, after a preview of its refund, cancels it.
func TestHoldCancelRacingAWalletPaymentKeepsTheTicket(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := &pauser{}
	s := teststack.New(t, teststack.Options{Pause: p.pause})
	shardID, date := s.DemoShard(t, 2, 0)
	users, err := seed.Users(ctx, s.Pool, seed.UsersSpec{Count: 1, Prefix: "cw", PasswordHash: "x", WalletRupees: 10000})
	if err != nil {
		t.Fatal(err)
	}
	u := users[0]
	h, err := s.Service.Hold(ctx, teststack.Caller(u), holdReq(u, "cancel-race-1", date, "MMCT", "NDLS", pax("Asha Verma", 30, "F")))
	if err != nil || h.Status != "HELD" {
		t.Fatalf("hold: %+v %v", h, err)
	}

	reached, release := p.arm("cancel.before-update")
	done := make(chan error, 1)
	go func() {
		_, err := s.Service.Cancel(ctx, u, h.HoldID)
		done <- err
	}()
	waitFor(t, reached, "the cancel to read the hold")
	pay, err := s.Payments.Initiate(ctx, teststack.Caller(u), payment.InitiateRequest{HoldID: h.HoldID, Method: payment.Wallet, IdempotencyKey: "cancel-race-pay-1"})
	if err != nil || pay.State != payment.Success {
		t.Fatalf("wallet pay: %+v %v", pay, err)
	}
	close(release)
	err = <-done
	if booking.ErrorCode(err) != booking.ECONFLICT || booking.ErrorReason(err) != "ALREADY_CONFIRMED" {
		t.Fatalf("hold cancel after the payment committed: %v, want conflict ALREADY_CONFIRMED", err)
	}
	v, err := s.Service.Status(ctx, u, h.HoldID)
	if err != nil {
		t.Fatal(err)
	}
	if v.BookingStat != booking.BookingConfirmed {
		t.Fatalf("after the refused cancel the booking is %q, want CONFIRMED", v.BookingStat)
	}
	if _, err := s.Service.Cancel(ctx, u, h.HoldID); !strings.Contains(booking.ErrorMessage(err), v.PNR) {
		t.Fatalf("a repeated hold cancel: %v, want ALREADY_CONFIRMED naming PNR %s", err, v.PNR)
	}
	var balance int64
	var refunds int
	if err := s.Pool.QueryRow(ctx, `SELECT (SELECT balance_paise FROM wallet_accounts WHERE user_id = $1),
		(SELECT count(*) FROM refunds)`, u).Scan(&balance, &refunds); err != nil {
		t.Fatal(err)
	}
	if balance != 10000*100-v.Fare.TotalPaise || refunds != 0 {
		t.Fatalf("wallet %d paise with %d refunds, want %d debited once for a ticket", balance, refunds, v.Fare.TotalPaise)
	}
	s.CheckInvariants(t, shardID)

	// Cancelling the ticket is its own request, previewed first, once the
	// core has recorded it (CONFIRMED).
	s.Recorded(t, h.HoldID)
	q, err := s.Service.CancelPreview(ctx, u, h.HoldID)
	if err != nil || q.What != "booking" || !q.Allowed || q.RefundPaise != 0 || q.PNR != v.PNR {
		t.Fatalf("preview: %+v %v, want a booking cancel refunding nothing", q, err)
	}
	wrong := int64(100)
	if _, err := s.Service.CancelBooking(ctx, u, h.HoldID, &wrong); booking.ErrorReason(err) != "REFUND_CHANGED" {
		t.Fatalf("booking cancel expecting a refund the rules do not give: %v, want REFUND_CHANGED", err)
	}
	v, err = s.Service.CancelBooking(ctx, u, h.HoldID, &q.RefundPaise)
	if err != nil || v.BookingStat != booking.BookingCancelled || v.RefundDue != 0 {
		t.Fatalf("booking cancel: %+v %v", v, err)
	}
	s.CheckInvariants(t, shardID)
	// A booking cancel of a hold that was never paid is refused.
	h2, err := s.Service.Hold(ctx, teststack.Caller(u), holdReq(u, "cancel-race-2", date, "MMCT", "NDLS", pax("Asha Verma", 30, "F")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Service.CancelBooking(ctx, u, h2.HoldID, nil); booking.ErrorReason(err) != "NOT_BOOKED" {
		t.Fatalf("booking cancel of an unpaid hold: %v, want NOT_BOOKED", err)
	}
}

// A retry of a hold's Idempotency-Key answers the hold as it stands in
// PostgreSQL: HELD only while it is live; then EXPIRED, or the booking it
// became with its PNR.
func TestHoldReplayAnswersTheCurrentState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{})
	_, date := s.DemoShard(t, 2, 0)
	users := s.Users(t, "rp", 2)
	replay := func(u int64, key string) booking.HoldResult {
		t.Helper()
		r, err := s.Service.Hold(ctx, teststack.Caller(u), holdReq(u, key, date, "MMCT", "NDLS", pax("Asha Verma", 30, "F")))
		if err != nil || !r.Replayed {
			t.Fatalf("replay of %s: %+v %v", key, r, err)
		}
		return r
	}
	h, err := s.Service.Hold(ctx, teststack.Caller(users[0]), holdReq(users[0], "replay-state-1", date, "MMCT", "NDLS", pax("Asha Verma", 30, "F")))
	if err != nil || h.Status != "HELD" {
		t.Fatalf("hold: %+v %v", h, err)
	}
	if r := replay(users[0], "replay-state-1"); r.Status != "HELD" || r.HoldID != h.HoldID {
		t.Fatalf("replay of a live hold: %+v", r)
	}
	// Lapsed, its expiry job not run yet: not HELD any more.
	if _, err := s.Pool.Exec(ctx, `UPDATE holds SET expires_at = now() - interval '1 second' WHERE id = $1`, h.HoldID); err != nil {
		t.Fatal(err)
	}
	if r := replay(users[0], "replay-state-1"); r.Status != booking.HoldExpired {
		t.Fatalf("replay of a lapsed hold: %s, want EXPIRED", r.Status)
	}
	if _, err := s.Service.ExpireHold(ctx, h.HoldID); err != nil {
		t.Fatal(err)
	}
	if r := replay(users[0], "replay-state-1"); r.Status != booking.HoldExpired {
		t.Fatalf("replay of an expired hold: %s, want EXPIRED", r.Status)
	}
	h2, err := s.Service.Hold(ctx, teststack.Caller(users[1]), holdReq(users[1], "replay-state-2", date, "MMCT", "NDLS", pax("Asha Verma", 30, "F")))
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.Service.Confirm(ctx, h2.HoldID)
	if err != nil {
		t.Fatal(err)
	}
	if r := replay(users[1], "replay-state-2"); r.Status != booking.BookingConfirmed || r.PNR != v.PNR {
		t.Fatalf("replay of a confirmed hold: %s PNR %q, want CONFIRMED %s", r.Status, r.PNR, v.PNR)
	}
}
