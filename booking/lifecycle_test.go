package booking_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"tatkal/booking"
	"tatkal/booking/db"
	"tatkal/booking/inventory"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
)

func pax(name string, age int, gender string) booking.Passenger {
	return booking.Passenger{Name: name, Age: age, Gender: gender, IDType: "PAN", IDRef: "ABCDE1234F"}
}

func holdReq(user int64, key string, date time.Time, from, to string, ps ...booking.Passenger) booking.HoldRequest {
	return booking.HoldRequest{UserID: user, IdempotencyKey: key, Train: "12951", Date: date, Class: "3A", From: from, To: to, Passengers: ps}
}

var pnrRE = regexp.MustCompile(`^8[0-9]{9}$`) // 12951 starts at MMCT, Mumbai region 8

func TestConfirmIssuesOnePNRWithBerthsAndIsIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{})
	shardID, date := s.DemoShard(t, 8, 0)
	users := s.Users(t, "cf", 1)

	res, err := s.Service.Hold(ctx, teststack.Caller(users[0]), holdReq(users[0], "confirm-0001", date, "BVI", "KOTA",
		pax("Ravi Kumar", 66, "M"), pax("Meena Kumar", 40, "F")))
	if err != nil || res.Status != "HELD" || len(res.Berths) != 2 {
		t.Fatalf("hold: %+v %v", res, err)
	}
	if res.Berths[0].Type != "LB" {
		t.Errorf("senior passenger got %s, want a lower berth", res.Berths[0].Type)
	}
	if res.Berths[0].Coach != res.Berths[1].Coach {
		t.Errorf("group split over coaches %s and %s", res.Berths[0].Coach, res.Berths[1].Coach)
	}
	v1, err := s.Service.Confirm(ctx, res.HoldID)
	if err != nil {
		t.Fatalf("confirm: %v", err)
	}
	if !pnrRE.MatchString(v1.PNR) || v1.BookingStat != booking.BookingConfirmed {
		t.Fatalf("confirm gave PNR %q status %q", v1.PNR, v1.BookingStat)
	}
	if !slices.Equal(v1.Berths, res.Berths) {
		t.Errorf("confirmed berths %v differ from held %v", v1.Berths, res.Berths)
	}
	// A duplicate confirmation (a second payment callback) changes nothing.
	v2, err := s.Service.Confirm(ctx, res.HoldID)
	if err != nil || v2.PNR != v1.PNR {
		t.Fatalf("second confirm: PNR %q err %v, want %q", v2.PNR, err, v1.PNR)
	}
	var bookings, passengers int
	if err := s.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM bookings), (SELECT count(*) FROM booking_passengers WHERE status = 'CONFIRMED')`).
		Scan(&bookings, &passengers); err != nil {
		t.Fatal(err)
	}
	if bookings != 1 || passengers != 2 {
		t.Fatalf("%d bookings and %d confirmed passengers, want 1 and 2", bookings, passengers)
	}
	rep := s.CheckInvariants(t, shardID)
	if rep.Legs[1].RedisConfirmed != 2 || rep.Legs[0].RedisConfirmed != 0 {
		t.Errorf("confirmed per leg %+v, want 2 on legs BVI..KOTA only", rep.Legs)
	}
	// The user's live hold is gone once confirmed, so they may hold again.
	if _, err := s.Service.Hold(ctx, teststack.Caller(users[0]), holdReq(users[0], "confirm-0002", date, "MMCT", "BVI", pax("Ravi Kumar", 66, "M"))); err != nil {
		t.Fatalf("second hold after confirming the first: %v", err)
	}
	// The daily cap (2) is reached: a third is refused.
	_, err = s.Service.Hold(ctx, teststack.Caller(users[0]), holdReq(users[0], "confirm-0003", date, "MMCT", "BVI", pax("Ravi Kumar", 66, "M")))
	if booking.ErrorReason(err) != "LIVE_HOLD_EXISTS" {
		t.Fatalf("third hold with one live: %v, want LIVE_HOLD_EXISTS", err)
	}
}

func TestCancellationFollowsTatkalRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{})
	shardID, date := s.DemoShard(t, 1, 2)
	users := s.Users(t, "cx", 4)

	// A live hold is released at once and the seat can be sold again.
	h1, err := s.Service.Hold(ctx, teststack.Caller(users[0]), holdReq(users[0], "cancel-0001", date, "MMCT", "NDLS", pax("Anil Rao", 30, "M")))
	if err != nil || h1.Status != "HELD" {
		t.Fatalf("hold: %+v %v", h1, err)
	}
	v, err := s.Service.Cancel(ctx, users[0], h1.HoldID)
	if err != nil || v.State != booking.HoldCancelled {
		t.Fatalf("cancel hold: %+v %v", v, err)
	}
	h2, err := s.Service.Hold(ctx, teststack.Caller(users[1]), holdReq(users[1], "cancel-0002", date, "MMCT", "NDLS", pax("Bina Das", 30, "F")))
	if err != nil || h2.Status != "HELD" || h2.Berths[0] != h1.Berths[0] {
		t.Fatalf("the released berth was not sold again: %+v %v", h2, err)
	}
	// Someone else's hold cannot be cancelled and is not even visible.
	if _, err := s.Service.Cancel(ctx, users[0], h2.HoldID); booking.ErrorCode(err) != booking.ENOTFOUND {
		t.Fatalf("cancelling another's hold: %v, want not found", err)
	}
	// A confirmed Tatkal ticket is cancelled without refund; the berth returns.
	if _, err := s.Service.Confirm(ctx, h2.HoldID); err != nil {
		t.Fatal(err)
	}
	// With the only berth sold, the next passenger is offered the waitlist.
	w, err := s.Service.Hold(ctx, teststack.Caller(users[2]), holdReq(users[2], "cancel-0003", date, "MMCT", "NDLS", pax("Chitra Iyer", 30, "F")))
	if err != nil || w.Status != "WAITLIST_OFFERED" || w.WaitlistNo != 1 {
		t.Fatalf("waitlist offer: %+v %v", w, err)
	}
	if _, err := s.Service.Confirm(ctx, w.HoldID); err != nil {
		t.Fatal(err)
	}
	// A waitlisted ticket is refunded less clerkage per passenger.
	// (Cancelled first: with a waitlist, the confirmed berth below would
	// go to it, see TestWaitlistPromotion.)
	v, err = s.Service.CancelBooking(ctx, users[2], w.HoldID, nil)
	if err != nil {
		t.Fatal(err)
	}
	shard, _ := s.Service.Catalog().ByID(ctx, shardID)
	if want := v.Fare.TotalPaise - shard.Fare.Clerkage; v.RefundDue != want || want <= 0 {
		t.Fatalf("waitlist refund %d, want fare %d less clerkage %d", v.RefundDue, v.Fare.TotalPaise, shard.Fare.Clerkage)
	}
	// Cancelling twice is harmless.
	if v2, err := s.Service.CancelBooking(ctx, users[2], w.HoldID, nil); err != nil || v2.RefundDue != v.RefundDue {
		t.Fatalf("second cancel: %+v %v", v2, err)
	}
	// A confirmed one refunds nothing, once the core has recorded it
	// (while CONFIRMING it is refused).
	if _, err := s.Service.CancelBooking(ctx, users[1], h2.HoldID, nil); booking.ErrorReason(err) != "CONFIRMING" {
		t.Fatalf("cancel while CONFIRMING: %v, want refused CONFIRMING", err)
	}
	s.Recorded(t, h2.HoldID)
	v, err = s.Service.CancelBooking(ctx, users[1], h2.HoldID, nil)
	if err != nil || v.BookingStat != booking.BookingCancelled || v.RefundDue != 0 {
		t.Fatalf("cancel confirmed: %+v %v, want cancelled with no refund", v, err)
	}
	s.CheckInvariants(t, shardID)
	av, err := s.Service.Store().Available(ctx, shardID, 0, 7)
	if err != nil || av.Free != 1 {
		t.Fatalf("after cancelling the confirmed ticket %d berths free (%v), want 1", av.Free, err)
	}
	snap, _ := s.Store.Snapshot(ctx, shardID)
	if snap.WaitlistLen != 0 {
		t.Fatalf("waitlist length %d after cancelling the only waitlisted ticket", snap.WaitlistLen)
	}
	s.CheckInvariants(t, shardID)
}

// A hold past its window is released by its River job and its seat sold again.
func TestExpiredHoldIsReleasedAndResold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rules := booking.DefaultRules()
	rules.HoldWindow = 2 * time.Second
	s := teststack.New(t, teststack.Options{Rules: &rules, Work: true, SweepInterval: time.Hour})
	shardID, date := s.DemoShard(t, 1, 0)
	users := s.Users(t, "ex", 2)

	h, err := s.Service.Hold(ctx, teststack.Caller(users[0]), holdReq(users[0], "expire-0001", date, "MMCT", "NDLS", pax("Anil Rao", 30, "M")))
	if err != nil || h.Status != "HELD" {
		t.Fatalf("hold: %+v %v", h, err)
	}
	r, err := s.Service.Hold(ctx, teststack.Caller(users[1]), holdReq(users[1], "expire-0002", date, "MMCT", "NDLS", pax("Bina Das", 30, "F")))
	if err != nil || r.Status != "SOLD_OUT" {
		t.Fatalf("second passenger while held: %+v %v, want SOLD_OUT", r, err)
	}
	deadline := time.Now().Add(20 * time.Second)
	testenv.Eventually(t, 20*time.Second, "the hold expired after its 2 s window", func() error {
		v, err := s.Service.Status(ctx, users[0], h.HoldID)
		if err != nil {
			t.Fatal(err)
		}
		return testenv.Want(v.State == booking.HoldExpired, "hold still %s", v.State)
	})
	// The expiry commits in PostgreSQL, then gives the seat back in Redis:
	// a passenger asking in between is told SOLD_OUT and asks again.
	for try := 0; ; try++ {
		r, err = s.Service.Hold(ctx, teststack.Caller(users[1]), holdReq(users[1], fmt.Sprintf("expire-1%03d", try), date, "MMCT", "NDLS",
			pax("Bina Das", 30, "F")))
		if err == nil && r.Status == "SOLD_OUT" && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if err != nil || r.Status != "HELD" || r.Berths[0] != h.Berths[0] {
			t.Fatalf("the expired seat was not sold again: %+v %v", r, err)
		}
		break
	}
	// Expiring again (a retried job) changes nothing.
	if _, err := s.Service.ExpireHold(ctx, h.HoldID); err != nil {
		t.Fatal(err)
	}
	s.CheckInvariants(t, shardID)
}

// The sweeper frees a Redis hold whose row never became durable and whose
// undo was lost, and rebuilds a shard whose Redis state vanished.
func TestSweeperFreesOrphansAndRebuilds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{})
	shardID, _ := s.DemoShard(t, 2, 0)
	users := s.Users(t, "sw", 1)
	orphan := uuid.New()
	res, err := s.Store.Hold(ctx, inventory.HoldRequest{ShardID: shardID, HoldID: orphan.String(), UserID: users[0], IdemKey: "orphan-0001",
		From: 0, To: 7, ExpiresAt: time.Now().Add(-time.Minute), DailyCap: 2, Prefs: []byte("-"), IDOK: true, IdemTTL: time.Minute, MaxPassengers: 4})
	if err != nil || res.Outcome != inventory.Held {
		t.Fatalf("orphan hold: %+v %v", res, err)
	}
	rep, err := s.Service.Sweep(ctx)
	if err != nil || rep.Orphans != 1 {
		t.Fatalf("sweep: %+v %v, want 1 orphan", rep, err)
	}
	s.CheckInvariants(t, shardID)
	if err := s.Store.Wipe(ctx, shardID); err != nil {
		t.Fatal(err)
	}
	rep, err = s.Service.Sweep(ctx)
	if err != nil || rep.Rebuilt < 1 {
		t.Fatalf("sweep after wipe: %+v %v, want a rebuild", rep, err)
	}
	s.CheckInvariants(t, shardID)
}

// A hold whose process died before or during its group commit leaves a
// Redis record no row will ever stand behind. Once it is older than any
// commit takes (30 s), the sweeper rebuilds its shard from PostgreSQL: the
// seats come back and the attempt's key is free for its retry at once,
// not when the hold would have expired. A record younger than that is a
// commit in flight and is left alone.
func TestSweeperRebuildsAShardWithALostAttempt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{})
	shardID, _ := s.DemoShard(t, 2, 0)
	users := s.Users(t, "lost", 2)
	window := s.Service.Rules().HoldWindow
	attempt := func(user int64, key string, madeAgo time.Duration) (uuid.UUID, inventory.HoldResult) {
		t.Helper()
		id := uuid.New()
		res, err := s.Store.Hold(ctx, inventory.HoldRequest{ShardID: shardID, HoldID: id.String(), UserID: user, IdemKey: key,
			RequestHash: "same-request", From: 0, To: 7, ExpiresAt: time.Now().Add(window - madeAgo), DailyCap: 2, Prefs: []byte("-"),
			IDOK: true, IdemTTL: time.Hour, MaxPassengers: 4})
		if err != nil {
			t.Fatalf("hold %s: %v", key, err)
		}
		return id, res
	}
	has := func(id uuid.UUID) bool {
		t.Helper()
		recs, err := s.Store.Records(ctx, shardID)
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(recs, func(r inventory.HoldRecord) bool { return r.ID == id.String() })
	}
	// The demo's other shards are loaded by a first sweep, so the ones
	// below count only this shard's rebuilds.
	if _, err := s.Service.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	inFlight, res := attempt(users[1], "in-flight-0001", time.Second)
	if res.Outcome != inventory.Held {
		t.Fatalf("in-flight hold: %+v", res)
	}
	rep, err := s.Service.Sweep(ctx)
	if err != nil || rep.Rebuilt != 0 || !has(inFlight) {
		t.Fatalf("sweep beside a commit in flight: %+v %v, record kept %v; want no rebuild and the record kept", rep, err, has(inFlight))
	}
	lost, res := attempt(users[0], "lost-attempt-0001", 40*time.Second)
	if res.Outcome != inventory.Held {
		t.Fatalf("lost hold: %+v", res)
	}
	// Its retry, before the sweep: the key answers the lost attempt.
	if _, res = attempt(users[0], "lost-attempt-0001", 0); !res.Replayed || res.HoldID != lost.String() {
		t.Fatalf("retry before the sweep: %+v; want the lost attempt replayed", res)
	}
	rep, err = s.Service.Sweep(ctx)
	if err != nil || rep.Rebuilt != 1 || has(lost) || has(inFlight) {
		t.Fatalf("sweep: %+v %v, lost record kept %v; want one rebuild that drops both records without rows", rep, err, has(lost))
	}
	if _, res = attempt(users[0], "lost-attempt-0001", 0); res.Outcome != inventory.Held || res.Replayed {
		t.Fatalf("retry after the sweep: %+v; want held afresh", res)
	}
}

// Random holds, confirmations, cancellations and expiries on a small shard
// with mixed journeys: after every step the counters and the per-berth
// masks agree, Redis agrees with PostgreSQL, no berth is sold twice on a
// leg, and every confirmed passenger has one berth for the whole journey.
func TestPropertyRandomLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rules := booking.DefaultRules()
	rules.DailyCap = 1000
	s := teststack.New(t, teststack.Options{Rules: &rules})
	shardID, date := s.DemoShard(t, 10, 6)
	users := s.Users(t, "pr", 12)
	rng := rand.New(rand.NewPCG(42, 7))
	names := []string{"Asha Rao", "Vikram Singh", "Lata Menon", "Kiran Shah"}
	var live, sold []struct {
		user int64
		id   uuid.UUID
	}
	counts := map[string]int{}
	steps := 250
	if testing.Short() {
		steps = 80
	}
	for step := 0; step < steps; step++ {
		switch op := rng.IntN(10); {
		case op < 5: // hold
			u := users[rng.IntN(len(users))]
			a := rng.IntN(7)
			b := a + 1 + rng.IntN(7-a)
			n := 1 + rng.IntN(3)
			var ps []booking.Passenger
			for i := 0; i < n; i++ {
				ps = append(ps, pax(names[rng.IntN(len(names))], 5+rng.IntN(80), []string{"M", "F"}[rng.IntN(2)]))
			}
			res, err := s.Service.Hold(ctx, teststack.Caller(u), holdReq(u, fmt.Sprintf("prop-%05d", step), date,
				teststack.Stations12951[a], teststack.Stations12951[b], ps...))
			switch {
			case err == nil && (res.Status == "HELD" || res.Status == "WAITLIST_OFFERED"):
				live = append(live, struct {
					user int64
					id   uuid.UUID
				}{u, res.HoldID})
				counts[res.Status]++
			case err == nil:
				counts[res.Status]++
			case booking.ErrorReason(err) == "LIVE_HOLD_EXISTS":
				counts["live"]++
			default:
				t.Fatalf("step %d hold: %v", step, err)
			}
		case op < 7 && len(live) > 0: // confirm
			i := rng.IntN(len(live))
			h := live[i]
			live = slices.Delete(live, i, i+1)
			if _, err := s.Service.Confirm(ctx, h.id); err != nil {
				t.Fatalf("step %d confirm: %v", step, err)
			}
			sold = append(sold, h)
			counts["confirm"]++
		case op < 8 && len(live) > 0: // expire
			i := rng.IntN(len(live))
			h := live[i]
			live = slices.Delete(live, i, i+1)
			if _, err := s.Pool.Exec(ctx, `UPDATE holds SET expires_at = now() - interval '1 second' WHERE id = $1`, h.id); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Service.ExpireHold(ctx, h.id); err != nil {
				t.Fatalf("step %d expire: %v", step, err)
			}
			counts["expire"]++
		case op < 9 && len(live) > 0: // cancel a hold
			i := rng.IntN(len(live))
			h := live[i]
			live = slices.Delete(live, i, i+1)
			if _, err := s.Service.Cancel(ctx, h.user, h.id); err != nil {
				t.Fatalf("step %d cancel hold: %v", step, err)
			}
			counts["cancel-hold"]++
		case len(sold) > 0: // cancel a booking
			i := rng.IntN(len(sold))
			h := sold[i]
			sold = slices.Delete(sold, i, i+1)
			s.Recorded(t, h.id) // the core-sync job (no workers here): CONFIRMED, cancellable
			if _, err := s.Service.CancelBooking(ctx, h.user, h.id, nil); err != nil {
				t.Fatalf("step %d cancel booking: %v", step, err)
			}
			// What the promotion job committed with the cancellation does
			// (no workers run here): the waitlist first, then Redis rebuilt.
			if _, err := s.Service.Promote(ctx, shardID); err != nil {
				t.Fatalf("step %d promote: %v", step, err)
			}
			counts["cancel-booking"]++
		}
		s.CheckInvariants(t, shardID)
	}
	t.Logf("operations: %v", counts)
	for _, k := range []string{"HELD", "SOLD_OUT", "WAITLIST_OFFERED", "confirm", "expire", "cancel-booking"} {
		if counts[k] == 0 && !testing.Short() {
			t.Errorf("the random walk never exercised %s: %v", k, counts)
		}
	}
}

// When Redis misses a confirmation (unreachable at that moment), the
// sweeper finds the hold due, reads CONFIRMED in PostgreSQL and confirms it.
func TestSweeperConfirmsWhatRedisMissed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rules := booking.DefaultRules()
	rules.HoldWindow = time.Second
	s := teststack.New(t, teststack.Options{Rules: &rules, SweepGrace: time.Millisecond})
	shardID, date := s.DemoShard(t, 2, 0)
	users := s.Users(t, "sc", 1)
	h, err := s.Service.Hold(ctx, teststack.Caller(users[0]), holdReq(users[0], "sweep-confirm-1", date, "MMCT", "NDLS", pax("Anil Rao", 30, "M")))
	if err != nil {
		t.Fatal(err)
	}
	// Confirm in PostgreSQL only, as if the Redis call after it had failed.
	if err := db.Transact(ctx, s.Pool, func(tx pgx.Tx) error {
		_, err := s.Service.ConfirmTx(ctx, tx, h.HoldID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	rep, _ := inventory.Check(ctx, s.Pool, s.Store, shardID, rules.HoldWindow)
	if rep.OK() {
		t.Fatal("the check did not notice Redis missing the confirmation")
	}
	time.Sleep(1100 * time.Millisecond)
	if sw, err := s.Service.Sweep(ctx); err != nil || sw.Synced != 1 {
		t.Fatalf("sweep: %+v %v, want one hold synced", sw, err)
	}
	s.CheckInvariants(t, shardID)
}

// A retry whose first attempt was lost between the HOLD script and its
// commit (the serving process died there: a Redis record and an
// idempotency key, no row) is answered with a fresh hold once the sweeper
// has freed the orphan, instead of "still in progress" until the key lapses.
// While the record is still in Redis the retry is told to wait.
func TestRetryAfterALostAttemptHoldsAfresh(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{SweepGrace: time.Millisecond})
	shardID, date := s.DemoShard(t, 2, 0)
	users := s.Users(t, "la", 1)
	lost := uuid.New()
	expires := time.Now().Add(2 * time.Second)
	if res, err := s.Store.Hold(ctx, inventory.HoldRequest{ShardID: shardID, HoldID: lost.String(), UserID: users[0], IdemKey: "lost-0001",
		From: 0, To: 7, ExpiresAt: expires, DailyCap: 2, Prefs: []byte("-"), IDOK: true, IdemTTL: time.Hour, MaxPassengers: 4}); err != nil ||
		res.Outcome != inventory.Held {
		t.Fatalf("the lost attempt's hold: %+v %v", res, err)
	}
	req := holdReq(users[0], "lost-0001", date, "MMCT", "NDLS", pax("Asha Rao", 30, "F"))
	if _, err := s.Service.Hold(ctx, teststack.Caller(users[0]), req); booking.ErrorReason(err) != "IN_PROGRESS" {
		t.Fatalf("retry while the record is live: %v, want IN_PROGRESS", err)
	}
	time.Sleep(time.Until(expires) + 100*time.Millisecond)
	if rep, err := s.Service.Sweep(ctx); err != nil || rep.Orphans != 1 {
		t.Fatalf("sweep: %+v %v, want the lost attempt freed", rep, err)
	}
	res, err := s.Service.Hold(ctx, teststack.Caller(users[0]), req)
	if err != nil || res.Status != "HELD" || res.HoldID == lost || res.Replayed {
		t.Fatalf("retry after the sweep: %+v %v, want a fresh hold", res, err)
	}
	again, err := s.Service.Hold(ctx, teststack.Caller(users[0]), req)
	if err != nil || again.HoldID != res.HoldID || !again.Replayed {
		t.Fatalf("the next retry: %+v %v, want the fresh hold replayed", again, err)
	}
	var rows int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM holds WHERE user_id = $1`, users[0]).Scan(&rows); err != nil || rows != 1 {
		t.Fatalf("%d holds, %v", rows, err)
	}
	s.CheckInvariants(t, shardID)
}
