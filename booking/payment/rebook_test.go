package payment_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"tatkal/booking"
	"tatkal/booking/lab/teststack"
	"tatkal/booking/payment"
)

// lateWorld is a passenger whose UPI payment the bank confirms after the
// hold ran out: the payment is SUCCESS, the hold EXPIRED with its berth
// back on sale, and the late-success job (no workers here) not yet run.
type lateWorld struct {
	*world
	pause *teststack.Pauser
	user  int64
	hold  uuid.UUID
	pay   uuid.UUID
}

func newLateWorld(t *testing.T) *lateWorld {
	t.Helper()
	ctx := context.Background()
	lw := &lateWorld{pause: &teststack.Pauser{}}
	lw.world = newWorld(t, teststack.Options{Routes: teststack.QuietRoutes(), Pause: lw.pause.Pause}, 4, 1)
	lw.user = lw.users[0]
	lw.hold = lw.world.hold(t, lw.user, "late-rebook-hold-1").HoldID
	v, err := lw.world.pay(t, lw.user, lw.hold, payment.UPI, "late-rebook-pay-1")
	teststack.Must(t, err, "UPI payment")
	lw.pay = v.ID
	_, err = lw.s.Pool.Exec(ctx, `UPDATE holds SET expires_at = now() - interval '1 second' WHERE id = $1`, lw.hold)
	teststack.Must(t, err, "run the hold's time out")
	_, err = lw.s.Service.ExpireHold(ctx, lw.hold)
	teststack.Must(t, err, "expire the hold")
	lw.s.ApproveAtGateway(t, lw.pay)
	lw.s.Payments.Inquire(ctx, lw.pay) //nolint:errcheck // read below
	var state, hold string
	teststack.Must(t, lw.s.Pool.QueryRow(ctx, `SELECT p.state, h.state FROM payments p JOIN holds h ON h.id = p.hold_id WHERE p.id = $1`,
		lw.pay).Scan(&state, &hold), "late payment")
	if state != payment.Success || hold != booking.HoldExpired {
		t.Fatalf("the late payment is %s for a %s hold, want SUCCESS for an EXPIRED one", state, hold)
	}
	return lw
}

// resolve runs the late-success job, as its worker would, in the
// background.
func (lw *lateWorld) resolve() <-chan error {
	done := make(chan error, 1)
	go func() { done <- lw.s.Payments.ResolveLateSuccess(context.Background(), lw.pay) }()
	return done
}

// waitErr fails the test unless done answers nil within 30 s.
func waitErr(t *testing.T, done <-chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		teststack.Must(t, err, "%s", what)
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// Issue 33 (8): the late-success job has decided the passenger has not
// held this train again, and before its retake commits the passenger holds
// again and pays from the wallet. The retake reads that under the
// account's lock and refunds the late payment in full: one ticket, one
// charge kept. Before, the read was made once, without a lock, and the
// retake issued a second ticket, both charges kept.
func TestLateRetakeSeesTheHoldMadeMeanwhile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lw := newLateWorld(t)
	reached, release := lw.pause.Arm("late.before-retake")
	done := lw.resolve()
	waitClosed(t, reached, "the late success to reach its retake")
	again := lw.world.hold(t, lw.user, "late-rebook-hold-2")
	if v, err := lw.world.pay(t, lw.user, again.HoldID, payment.Wallet, "late-rebook-pay-2"); err != nil || v.State != payment.Success {
		t.Fatalf("the passenger's new payment: %+v %v", v, err)
	}
	close(release)
	waitErr(t, done, "the late success")

	var tickets, refunds int
	var refunded, captured int64
	teststack.Must(t, lw.s.Pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM bookings WHERE user_id = $1 AND status = 'CONFIRMED'),
		(SELECT count(*) FROM refunds WHERE payment_id = $2), (SELECT coalesce(sum(amount_paise), 0) FROM refunds WHERE payment_id = $2),
		(SELECT captured_paise FROM payments WHERE id = $2)`, lw.user, lw.pay).Scan(&tickets, &refunds, &refunded, &captured), "outcome")
	if tickets != 1 || refunds != 1 || refunded != captured {
		t.Fatalf("the passenger has %d tickets; the late payment has %d refunds of %d paise for %d captured; want one ticket and the late payment back once",
			tickets, refunds, refunded, captured)
	}
	var body string
	teststack.Must(t, lw.s.Pool.QueryRow(ctx, `SELECT body FROM notifications WHERE user_id = $1 AND kind = 'REFUND_STARTED' AND ref = $2 LIMIT 1`,
		lw.user, lw.pay.String()).Scan(&body), "refund notice")
	if !strings.Contains(body, "booked this train again") {
		t.Errorf("the refund notice says %q, want why", body)
	}
	lw.s.CheckInvariants(t, lw.shard)
}

// Issue 33 (8), the other order: while the retake is deciding (its seats
// taken back in Redis, not yet committed), the passenger's new hold waits
// for it, and commits after the ticket: the decision saw every hold made
// before it, and none is made during it. Before, the new hold committed
// in the middle, unseen by a decision taken earlier.
func TestNewHoldWaitsForALateRetakeDeciding(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lw := newLateWorld(t)
	reached, release := lw.pause.Arm("retake.held")
	done := lw.resolve()
	waitClosed(t, reached, "the retake to hold the seats back")
	type answer struct {
		res booking.HoldResult
		err error
	}
	held := make(chan answer, 1)
	go func() {
		res, err := lw.s.Service.Hold(ctx, teststack.Caller(lw.user), booking.HoldRequest{UserID: lw.user, IdempotencyKey: "late-rebook-hold-3",
			Train: "12951", Date: lw.date, Class: "3A", From: "MMCT", To: "NDLS", Passengers: []booking.Passenger{pax("Meera Pillai")}})
		held <- answer{res, err}
	}()
	// The new hold's transaction waits on the account's lock; a hold that
	// answers first committed in the middle of the retake.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var waiting bool
		teststack.Must(t, lw.s.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_database d ON d.oid = l.database
			WHERE l.locktype = 'advisory' AND l.classid = $1 AND l.objsubid = 2 AND NOT l.granted AND d.datname = current_database())`,
			booking.AccountLockClass).Scan(&waiting), "locks")
		if waiting {
			break
		}
		select {
		case a := <-held:
			close(release)
			t.Fatalf("the passenger's new hold (%s, %v) was answered while the late payment's retake was deciding", a.res.Status, a.err)
		default:
		}
		if time.Now().After(deadline) {
			close(release)
			t.Fatal("the passenger's new hold neither waited nor answered")
		}
	}
	close(release)
	waitErr(t, done, "the late success")
	var h booking.HoldResult
	select {
	case a := <-held:
		if a.err != nil || a.res.Status != "HELD" {
			t.Fatalf("the passenger's new hold after the retake: %+v %v", a.res, a.err)
		}
		h = a.res
	case <-time.After(30 * time.Second):
		t.Fatal("the new hold never answered")
	}
	var late, again string
	teststack.Must(t, lw.s.Pool.QueryRow(ctx, `SELECT (SELECT state FROM holds WHERE id = $1), (SELECT state FROM holds WHERE id = $2)`,
		lw.hold, h.HoldID).Scan(&late, &again), "holds")
	if late != booking.HoldConfirmed || again != booking.HoldHeld {
		t.Fatalf("the late payment's hold is %s and the new one %s, want CONFIRMED then HELD", late, again)
	}
	lw.s.CheckInvariants(t, lw.shard)
}

// Issue 33 (3), the retake's side: a payment that succeeds late for a
// lapsed hold of an account banned meanwhile is refunded, saying why,
// instead of failing its job until someone looks (the confirmation refused
// a banned account after the retake had taken the seats back).
func TestLateSuccessOfABannedAccountIsRefunded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lw := newLateWorld(t)
	_, err := lw.s.Pool.Exec(ctx, `UPDATE users SET banned_at = now() WHERE id = $1`, lw.user)
	teststack.Must(t, err, "ban")
	waitErr(t, lw.resolve(), "the late success")
	var bookings, refunds int
	var body string
	teststack.Must(t, lw.s.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM bookings WHERE hold_id = $1),
		(SELECT count(*) FROM refunds WHERE payment_id = $2),
		(SELECT coalesce(max(body), '') FROM notifications WHERE kind = 'REFUND_STARTED' AND ref = $2::text)`, lw.hold, lw.pay).
		Scan(&bookings, &refunds, &body), "outcome")
	if bookings != 0 || refunds != 1 || !strings.Contains(body, "fraud review") {
		t.Fatalf("late success of a banned account: %d bookings, %d refunds, told %q", bookings, refunds, body)
	}
	lw.s.CheckInvariants(t, lw.shard)
}
