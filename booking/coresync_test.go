package booking_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"tatkal/booking"
	"tatkal/booking/lab/teststack"
	"tatkal/booking/prs"
)

// booked holds the shard's journey for user and confirms it, returning
// the hold and its booking id.
func booked(t *testing.T, s *teststack.Stack, user int64, key string, date time.Time) (booking.HoldView, int64) {
	t.Helper()
	ctx := context.Background()
	h, err := s.Service.Hold(ctx, teststack.Caller(user), holdReq(user, key, date, "MMCT", "NDLS", pax("Asha Verma", 30, "F")))
	if err != nil || h.Status != "HELD" {
		t.Fatalf("hold %s: %+v %v", key, h, err)
	}
	v, err := s.Service.Confirm(ctx, h.HoldID)
	if err != nil {
		t.Fatalf("confirm %s: %v", key, err)
	}
	return v, bookingID(t, s, h.HoldID)
}

func bookingID(t *testing.T, s *teststack.Stack, holdID uuid.UUID) int64 {
	t.Helper()
	var id int64
	if err := s.Pool.QueryRow(context.Background(), `SELECT id FROM bookings WHERE hold_id = $1`, holdID).Scan(&id); err != nil {
		t.Fatalf("booking of hold %s: %v", holdID, err)
	}
	return id
}

func bookingState(t *testing.T, s *teststack.Stack, id int64) (status, prsState string) {
	t.Helper()
	if err := s.Pool.QueryRow(context.Background(), `SELECT status, prs_state FROM bookings WHERE id = $1`, id).Scan(&status, &prsState); err != nil {
		t.Fatal(err)
	}
	return status, prsState
}

// coreState is the core's state of a PNR ("" when it never had it).
func coreState(t *testing.T, s *teststack.Stack, pnr string) string {
	t.Helper()
	b, err := prs.NewClient(s.Core.URL, s.CoreKey, nil).Get(context.Background(), pnr)
	if err != nil {
		if prs.IsRetryable(err) {
			t.Fatalf("core get %s: %v", pnr, err)
		}
		return ""
	}
	return b.State
}

// wantSecondPassengerSynced books the shard's only berth again for user and
// syncs it: the core must accept it, and nobody's ticket is compensated.
func wantSecondPassengerSynced(t *testing.T, s *teststack.Stack, user int64, date time.Time) {
	t.Helper()
	_, b := booked(t, s, user, "core-second", date)
	if err := s.Service.SyncToCore(context.Background(), b); err != nil {
		t.Fatalf("sync of the second passenger's booking: %v", err)
	}
	if status, state := bookingState(t, s, b); status != booking.BookingConfirmed || state != "SYNCED" {
		t.Fatalf("the second passenger's booking is %s/%s, want CONFIRMED/SYNCED (the core kept a booking we cancelled)", status, state)
	}
}

// A sync whose answer was lost (the core stored the booking, then timed
// out) leaves the booking PENDING; cancelling it must still reach the core,
// or the core keeps the berth and rejects the next passenger's booking.
func TestCancelReachesTheCoreAfterALostAnswer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{})
	_, date := s.DemoShard(t, 1, 0)
	users := s.Users(t, "cl", 2)
	a, aID := booked(t, s, users[0], "core-lost-1", date)

	s.SetCoreFaults(t, prs.Faults{TimeoutRate: 1})
	tctx, cancel := context.WithTimeout(ctx, time.Second)
	err := s.Service.SyncToCore(tctx, aID)
	cancel()
	if err == nil {
		t.Fatal("sync answered although the core timed out")
	}
	s.SetCoreFaults(t, prs.Faults{})
	if st := coreState(t, s, a.PNR); st != prs.StatusConfirmed {
		t.Fatalf("core state of %s after the lost answer: %q, want CONFIRMED (the simulator keeps the work)", a.PNR, st)
	}
	if _, state := bookingState(t, s, aID); state != "PENDING" {
		t.Fatalf("prs_state %s, want PENDING", state)
	}

	// The passenger may not cancel it while it is CONFIRMING; an
	// operator's cancellation (fraud enforcement) does not wait.
	if _, err := s.Service.CancelBooking(ctx, users[0], a.ID, nil); booking.ErrorReason(err) != "CONFIRMING" {
		t.Fatalf("passenger's cancel of a PENDING booking: %v, want CONFIRMING", err)
	}
	s.CancelAsOperator(t, a.ID, "cancelled after fraud review (test)")
	if err := s.Service.SyncToCore(ctx, aID); err != nil { // the cancellation's core-sync job
		t.Fatalf("withdraw: %v", err)
	}
	if st := coreState(t, s, a.PNR); st != prs.StateCancelled {
		t.Fatalf("core state of the cancelled %s: %q, want CANCELLED", a.PNR, st)
	}
	wantSecondPassengerSynced(t, s, users[1], date)
}

// A sync in flight when the booking is cancelled (the cancellation's job
// runs first and finds nothing at the core) must not mark it SYNCED: it
// withdraws what it just stored.
func TestSyncInFlightWhenCancelledWithdrawsTheBooking(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := &pauser{}
	s := teststack.New(t, teststack.Options{Pause: p.pause})
	_, date := s.DemoShard(t, 1, 0)
	users := s.Users(t, "cf", 2)
	a, aID := booked(t, s, users[0], "core-flight-1", date)

	reached, release := p.arm("coresync.before-send")
	done := make(chan error, 1)
	go func() { done <- s.Service.SyncToCore(ctx, aID) }()
	waitFor(t, reached, "the sync to reach the core")
	s.CancelAsOperator(t, a.ID, "cancelled after fraud review (test)") // a passenger waits for CONFIRMED
	if err := s.Service.SyncToCore(ctx, aID); err != nil {             // the cancellation's job: nothing at the core yet
		t.Fatalf("withdraw: %v", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("the in-flight sync: %v", err)
	}
	if _, state := bookingState(t, s, aID); state == "SYNCED" {
		t.Fatal("the cancelled booking was marked SYNCED by the sync in flight")
	}
	if st := coreState(t, s, a.PNR); st != prs.StateCancelled {
		t.Fatalf("core state of the cancelled %s: %q, want CANCELLED", a.PNR, st)
	}
	wantSecondPassengerSynced(t, s, users[1], date)
}

// The core still holds a booking we cancelled (its cancellation is retrying
// behind an outage) when the berth's next booking arrives: the BERTH_TAKEN
// is ours to repair, not the new passenger's ticket to cancel.
func TestBerthTakenByOurOwnCancelledBookingIsRepaired(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{})
	_, date := s.DemoShard(t, 1, 0)
	users := s.Users(t, "cr", 2)
	a, aID := booked(t, s, users[0], "core-stale-1", date)
	if err := s.Service.SyncToCore(ctx, aID); err != nil {
		t.Fatal(err)
	}
	s.SetCoreFaults(t, prs.Faults{Outage: true})
	if _, err := s.Service.CancelBooking(ctx, users[0], a.ID, nil); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if err := s.Service.SyncToCore(ctx, aID); err == nil || !prs.IsRetryable(err) {
		t.Fatalf("withdraw during the outage: %v, want a retryable error", err)
	}
	s.SetCoreFaults(t, prs.Faults{})
	if st := coreState(t, s, a.PNR); st != prs.StatusConfirmed {
		t.Fatalf("core state of %s: %q, want it still CONFIRMED there", a.PNR, st)
	}
	wantSecondPassengerSynced(t, s, users[1], date)
	if st := coreState(t, s, a.PNR); st != prs.StateCancelled {
		t.Fatalf("core state of the stale %s: %q, want CANCELLED", a.PNR, st)
	}
	var refunds int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM refunds`).Scan(&refunds); err != nil || refunds != 0 {
		t.Fatalf("%d refunds (%v), want none", refunds, err)
	}
}

// slowDeadlockDetector makes PostgreSQL wait a minute before it breaks a
// deadlock in the test's database (new connections; the pool is reset),
// so a lock cycle shows as a hang the test reports, not as a second's
// delay and a silent retry.
func slowDeadlockDetector(t *testing.T, s *teststack.Stack) {
	t.Helper()
	ctx := context.Background()
	var name string
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT current_database()`).Scan(&name), "database")
	_, err := s.Pool.Exec(ctx, `ALTER DATABASE `+pgx.Identifier{name}.Sanitize()+` SET deadlock_timeout = '1min'`)
	teststack.Must(t, err, "deadlock timeout")
	s.Pool.Reset()
	var got string
	teststack.Must(t, s.Pool.QueryRow(ctx, `SHOW deadlock_timeout`).Scan(&got), "show deadlock timeout")
	if got != "1min" {
		t.Fatalf("deadlock_timeout %s, want 1min", got)
	}
}

// The core rejects a waitlisted booking while the shard's waitlist is
// being promoted: the compensation (cancel, refund) and the promotion
// both lock the booking and the shard, and must take them in one order,
// the shard's first. Forced: the compensation holds the booking's lock
// while the promotion starts. The compensation used to lock the booking,
// then the hold, then the shard, closing a cycle with the promotion
// (shard, then the waitlisted bookings) that only PostgreSQL's deadlock
// detector broke.
func TestCoreRejectionDuringPromotionTakesTheShardLockFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := &pauser{}
	s := teststack.New(t, teststack.Options{Pause: p.pause})
	slowDeadlockDetector(t, s)
	shardID, date := s.DemoShard(t, 1, 5)
	users := s.Users(t, "lo", 2)
	seat, _ := booked(t, s, users[0], "lock-order-0", date)
	s.Recorded(t, seat.ID)
	h, err := s.Service.Hold(ctx, teststack.Caller(users[1]), holdReq(users[1], "lock-order-1", date, "MMCT", "NDLS", pax("Waiting", 40, "M")))
	if err != nil || h.Status != "WAITLIST_OFFERED" {
		t.Fatalf("hold: %+v %v, want WAITLIST_OFFERED", h, err)
	}
	_, err = s.Service.Confirm(ctx, h.HoldID)
	teststack.Must(t, err, "confirm the waitlisted ticket")
	waiting := bookingID(t, s, h.HoldID)

	s.SetCoreFaults(t, prs.Faults{RejectRate: 1})
	runCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	reached, release := p.arm("compensate.booking-locked")
	compensated := make(chan error, 1)
	go func() { compensated <- s.Service.SyncToCore(runCtx, waiting) }()
	waitFor(t, reached, "the compensation holding the booking")
	promoted := make(chan error, 1)
	go func() { _, err := s.Service.Promote(runCtx, shardID); promoted <- err }()
	// The promotion is waiting on a lock the compensation holds.
	for {
		var n int
		teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND wait_event_type = 'Lock'`).Scan(&n), "lock waits")
		if n > 0 {
			break
		}
		select {
		case err := <-promoted:
			t.Fatalf("the promotion ended (%v) while the compensation held the booking", err)
		case <-runCtx.Done():
			t.Fatal("the promotion never waited for the compensation")
		case <-time.After(10 * time.Millisecond):
		}
	}
	close(release)
	if err := <-compensated; err != nil {
		t.Fatalf("the compensation: %v (deadlocked with the promotion?)", err)
	}
	if err := <-promoted; err != nil {
		t.Fatalf("the promotion: %v (deadlocked with the compensation?)", err)
	}
	s.SetCoreFaults(t, prs.Faults{})
	if status, state := bookingState(t, s, waiting); status != booking.BookingCancelled || state != "REJECTED" {
		t.Fatalf("the rejected booking is %s/%s, want CANCELLED/REJECTED", status, state)
	}
	s.CheckInvariants(t, shardID)
}
