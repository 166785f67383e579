package booking_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"tatkal/booking"
	"tatkal/booking/lab/teststack"
)

// Two confirmed berths are cancelled at once on a sold-out shard with three
// waitlisted tickets: the first two in waitlist order are confirmed onto
// the freed berths, once each (two promotion jobs, plus promotions run
// again by hand as a retried or duplicated job would), the third stays
// waitlisted, the passengers are told once, the core holds the confirmed
// PNRs, and the seat invariants hold in Redis and PostgreSQL.
func TestWaitlistPromotion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{Work: true})
	shardID, date := s.DemoShard(t, 2, 5)
	users := s.Users(t, "pr", 5)
	book := func(i int, want string) uuid.UUID {
		h, err := s.Service.Hold(ctx, teststack.Caller(users[i]), holdReq(users[i], fmt.Sprintf("promote-%04d", i), date, "MMCT", "NDLS",
			pax(fmt.Sprintf("Passenger %c", 'A'+i), 30+i, "F")))
		if err != nil || h.Status != want {
			t.Fatalf("hold %d: %+v %v, want %s", i, h, err, want)
		}
		if _, err := s.Service.Confirm(ctx, h.HoldID); err != nil {
			t.Fatal(err)
		}
		return h.HoldID
	}
	seats := []uuid.UUID{book(0, "HELD"), book(1, "HELD")}
	waiting := []uuid.UUID{book(2, "WAITLIST_OFFERED"), book(3, "WAITLIST_OFFERED"), book(4, "WAITLIST_OFFERED")}

	for _, id := range seats {
		s.Recorded(t, id) // CONFIRMED, so their passengers may cancel them
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() {
			_, errs[i] = s.Service.CancelBooking(ctx, users[i], seats[i], nil)
		})
	}
	wg.Wait()
	for _, err := range errs {
		teststack.Must(t, err, "cancel")
	}
	// A retried or doubled job: promotes nothing more.
	wg.Go(func() { s.Service.Promote(ctx, shardID) }) //nolint:errcheck
	wg.Go(func() { s.Service.Promote(ctx, shardID) }) //nolint:errcheck
	wg.Wait()

	deadline := time.Now().Add(60 * time.Second)
	for {
		var open, unsynced int
		teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM river_job WHERE kind = 'tqwl_promote' AND state <> 'completed'),
			(SELECT count(*) FROM bookings WHERE status = 'CONFIRMED' AND prs_state <> 'SYNCED')`).Scan(&open, &unsynced), "jobs")
		if open == 0 && unsynced == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d promotion jobs open, %d confirmed bookings not at the core", open, unsynced)
		}
		time.Sleep(100 * time.Millisecond)
	}
	want := []string{booking.BookingConfirmed, booking.BookingConfirmed, booking.BookingWaitlisted}
	berths := map[string]bool{}
	for i, id := range waiting {
		v, err := s.Service.Status(ctx, users[2+i], id)
		teststack.Must(t, err, "status")
		if v.BookingStat != want[i] {
			t.Fatalf("TQWL/%d is %s, want %s", i+1, v.BookingStat, want[i])
		}
		if v.BookingStat == booking.BookingConfirmed {
			if len(v.Berths) != 1 || v.Berths[0].Coach == "" {
				t.Fatalf("promoted TQWL/%d has berths %+v", i+1, v.Berths)
			}
			berths[fmt.Sprintf("%s/%d", v.Berths[0].Coach, v.Berths[0].BerthNo)] = true
		}
	}
	if len(berths) != 2 {
		t.Fatalf("promoted onto %v, want two distinct berths", berths)
	}
	var told, jobs int
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM notifications WHERE kind = 'PROMOTED'),
		(SELECT count(*) FROM river_job WHERE kind = 'tqwl_promote')`).Scan(&told, &jobs), "count")
	if told != 4 || jobs != 2 {
		t.Fatalf("%d promotion messages (want 2 passengers by SMS and e-mail), %d promotion jobs (want one per cancellation)", told, jobs)
	}
	var promoted int
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM bookings WHERE promoted_at IS NOT NULL`).Scan(&promoted), "promoted")
	if promoted != 2 {
		t.Fatalf("%d bookings promoted, want 2", promoted)
	}
	var coreConfirmed int
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM prs.passengers WHERE active`).Scan(&coreConfirmed), "core")
	if coreConfirmed != 2 {
		t.Fatalf("the core seats %d passengers, want the 2 promoted", coreConfirmed)
	}
	s.CheckInvariants(t, shardID)
	av, err := s.Service.Store().Available(ctx, shardID, 0, 7)
	if err != nil || av.Free != 0 {
		t.Fatalf("%d berths free after the promotion (%v), want 0", av.Free, err)
	}
}

// A promotion job killed between two steps (inside its transaction, after
// confirming the first of two waitlisted tickets; after its commit, before
// Redis learns the berths) and run again promotes each ticket exactly
// once: two confirmed, one still waiting, one message each, the seat
// invariants whole in Redis and PostgreSQL.
func TestPromotionKilledBetweenStepsAndRerun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := &pauser{}
	s := teststack.New(t, teststack.Options{Pause: p.pause})
	shardID, date := s.DemoShard(t, 2, 5)
	users := s.Users(t, "pk", 5)
	book := func(i int, want string) uuid.UUID {
		h, err := s.Service.Hold(ctx, teststack.Caller(users[i]), holdReq(users[i], fmt.Sprintf("promote-kill-%04d", i), date, "MMCT", "NDLS",
			pax(fmt.Sprintf("Passenger %c", 'A'+i), 30+i, "F")))
		if err != nil || h.Status != want {
			t.Fatalf("hold %d: %+v %v, want %s", i, h, err, want)
		}
		if _, err := s.Service.Confirm(ctx, h.HoldID); err != nil {
			t.Fatal(err)
		}
		return h.HoldID
	}
	seats := []uuid.UUID{book(0, "HELD"), book(1, "HELD")}
	waiting := []uuid.UUID{book(2, "WAITLIST_OFFERED"), book(3, "WAITLIST_OFFERED"), book(4, "WAITLIST_OFFERED")}
	for i, id := range seats {
		s.Recorded(t, id)
		_, err := s.Service.CancelBooking(ctx, users[i], id, nil) // no workers: the promotion waits for us
		teststack.Must(t, err, "cancel")
	}
	kill := func(point string) {
		t.Helper()
		reached, _ := p.arm(point)
		jobCtx, die := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { _, err := s.Service.Promote(jobCtx, shardID); done <- err }()
		waitFor(t, reached, point)
		die()
		if err := <-done; err == nil {
			t.Fatalf("a promotion killed at %s reported success", point)
		}
	}
	kill("promote.between-bookings")
	var promoted int
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM bookings WHERE promoted_at IS NOT NULL`).Scan(&promoted), "promoted")
	if promoted != 0 {
		t.Fatalf("%d bookings promoted by a promotion killed inside its transaction, want 0", promoted)
	}
	kill("promote.before-rebuild")
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM bookings WHERE promoted_at IS NOT NULL`).Scan(&promoted), "promoted")
	if promoted != 2 {
		t.Fatalf("%d bookings promoted by a promotion killed after its commit, want 2", promoted)
	}
	// Redis has not learnt it: the shard refuses holds (stale epoch) until
	// the rerun rebuilds it.
	again, err := s.Service.Promote(ctx, shardID)
	teststack.Must(t, err, "rerun")
	if len(again) != 0 {
		t.Fatalf("the rerun promoted %+v again", again)
	}
	want := []string{booking.BookingConfirmed, booking.BookingConfirmed, booking.BookingWaitlisted}
	for i, id := range waiting {
		v, err := s.Service.Status(ctx, users[2+i], id)
		teststack.Must(t, err, "status")
		if v.BookingStat != want[i] {
			t.Fatalf("TQWL/%d is %s, want %s", i+1, v.BookingStat, want[i])
		}
	}
	var told int
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM notifications WHERE kind = 'PROMOTED'`).Scan(&told), "told")
	if told != 4 {
		t.Fatalf("%d promotion messages, want 4 (two passengers, SMS and e-mail)", told)
	}
	s.CheckInvariants(t, shardID)
	av, err := s.Service.Store().Available(ctx, shardID, 0, 7)
	if err != nil || av.Free != 0 {
		t.Fatalf("%d berths free after the promotion (%v), want 0", av.Free, err)
	}
}

// promotionScene is a sold-out shard of three berths: two confirmed
// bookings cancelled (their berths waiting for the promotion), one live
// hold, three paid waitlisted tickets, no workers running.
func promotionScene(t *testing.T, s *teststack.Stack, prefix string) (shardID int64, date time.Time, waiting []uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	shardID, date = s.DemoShard(t, 3, 5)
	users := s.Users(t, prefix, 6)
	hold := func(i int, want string, confirm bool) uuid.UUID {
		h, err := s.Service.Hold(ctx, teststack.Caller(users[i]), holdReq(users[i], fmt.Sprintf("promote-%s-%04d", prefix, i), date, "MMCT", "NDLS",
			pax(fmt.Sprintf("Passenger %c", 'A'+i), 30+i, "F")))
		if err != nil || h.Status != want {
			t.Fatalf("hold %d: %+v %v, want %s", i, h, err, want)
		}
		if confirm {
			_, err = s.Service.Confirm(ctx, h.HoldID)
			teststack.Must(t, err, "confirm %d", i)
		}
		return h.HoldID
	}
	seats := []uuid.UUID{hold(0, "HELD", true), hold(1, "HELD", true)}
	hold(2, "HELD", false) // a live hold the promotion must leave alone
	waiting = []uuid.UUID{hold(3, "WAITLIST_OFFERED", true), hold(4, "WAITLIST_OFFERED", true), hold(5, "WAITLIST_OFFERED", true)}
	for i, id := range seats {
		s.Recorded(t, id)
		_, err := s.Service.CancelBooking(ctx, users[i], id, nil)
		teststack.Must(t, err, "cancel %d", i)
	}
	return shardID, date, waiting
}

// probe marks the shard's Redis meta with a field no script writes and a
// rebuild (LOAD deletes the shard's keys) does not keep: still there
// after a promotion, Redis was changed only where it had to be.
func probe(t *testing.T, s *teststack.Stack, shardID int64, set bool) bool {
	t.Helper()
	ctx := context.Background()
	if set {
		teststack.Must(t, s.Store.Redis().HSet(ctx, s.Store.MetaKey(shardID), "probe", "1").Err(), "set probe")
		return true
	}
	n, err := s.Store.Redis().HDel(ctx, s.Store.MetaKey(shardID), "probe").Result()
	teststack.Must(t, err, "take probe")
	return n == 1
}

// A promotion changes only what it must in Redis: the two cancelled
// bookings' berths go to the first two waitlisted tickets by the PROMOTE
// script, fenced by the epoch, with no rebuild of the shard; the live hold
// and the third ticket are untouched; the seat invariants hold between
// Redis and PostgreSQL, and the shard takes holds at once (the epochs
// agree).
func TestPromotionChangesOnlyWhatItMust(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{})
	shardID, date, waiting := promotionScene(t, s, "pd")
	probe(t, s, shardID, true)
	done, err := s.Service.Promote(ctx, shardID)
	teststack.Must(t, err, "promote")
	if len(done) != 2 || done[0].HoldID != waiting[0] || done[1].HoldID != waiting[1] {
		t.Fatalf("promoted %+v, want the first two waitlisted", done)
	}
	users := s.Users(t, "pdx", 1)
	h, err := s.Service.Hold(ctx, teststack.Caller(users[0]), holdReq(users[0], "promote-pdx-0", date, "MMCT", "NDLS", pax("Passenger X", 40, "M")))
	if err != nil || h.Status != "WAITLIST_OFFERED" {
		t.Fatalf("a hold after the promotion: %+v %v, want a waitlist offer", h, err)
	}
	if !probe(t, s, shardID, false) {
		t.Fatal("the promotion rebuilt the shard in Redis")
	}
	s.CheckInvariants(t, shardID)
	var pgEpoch int64
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT epoch FROM inventory_shards WHERE id = $1`, shardID).Scan(&pgEpoch), "epoch")
	snap, err := s.Store.Snapshot(ctx, shardID)
	teststack.Must(t, err, "snapshot")
	if snap.Epoch != pgEpoch {
		t.Fatalf("Redis at epoch %d, PostgreSQL at %d", snap.Epoch, pgEpoch)
	}
	if again, err := s.Service.Promote(ctx, shardID); err != nil || len(again) != 0 {
		t.Fatalf("promoted again: %+v %v", again, err)
	}
	s.CheckInvariants(t, shardID)
}

// When Redis disagrees with the promotion (forced: a promoted ticket's
// record removed between the commit and the script), the script changes
// nothing and the shard is rebuilt from PostgreSQL instead: the
// invariants hold all the same.
func TestPromotionFallsBackToTheRebuild(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := &pauser{}
	s := teststack.New(t, teststack.Options{Pause: p.pause})
	shardID, _, waiting := promotionScene(t, s, "pf")
	probe(t, s, shardID, true)
	reached, release := p.arm("promote.before-rebuild")
	done := make(chan error, 1)
	go func() { _, err := s.Service.Promote(ctx, shardID); done <- err }()
	waitFor(t, reached, "promote.before-rebuild")
	teststack.Must(t, s.Store.Redis().HDel(ctx, strings.TrimSuffix(s.Store.MetaKey(shardID), "meta")+"holds", waiting[1].String()).Err(), "lose a record")
	close(release)
	teststack.Must(t, <-done, "promote")
	if probe(t, s, shardID, false) {
		t.Fatal("the shard was not rebuilt after the script found Redis disagreeing")
	}
	s.CheckInvariants(t, shardID)
}

// A waitlisted booking's first sync sends it WAITLISTED to the core and,
// before it marks it synced, the booking is promoted (PENDING again for the
// promotion's own sync). The first sync must not mark the promoted booking
// synced on the strength of the waitlisted version, which would leave the
// promotion's sync nothing to do and the core without the berth: it finds
// the booking changed and sends it again as it is now.
func TestPromotedBookingOutlivesItsStaleSync(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var armed atomic.Bool
	paused, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	s := teststack.New(t, teststack.Options{Pause: func(ctx context.Context, point string) {
		if point == "coresync.before-mark" && armed.CompareAndSwap(true, false) {
			close(paused)
			<-release
		}
	}})
	t.Cleanup(free)
	shardID, date := s.DemoShard(t, 1, 2)
	users := s.Users(t, "stale", 2)
	book := func(i int, want string) uuid.UUID {
		h, err := s.Service.Hold(ctx, teststack.Caller(users[i]), holdReq(users[i], fmt.Sprintf("stale-%04d", i), date, "MMCT", "NDLS",
			pax(fmt.Sprintf("Passenger %c", 'A'+i), 30+i, "F")))
		if err != nil || h.Status != want {
			t.Fatalf("hold %d: %+v %v, want %s", i, h, err, want)
		}
		if _, err := s.Service.Confirm(ctx, h.HoldID); err != nil {
			t.Fatal(err)
		}
		return h.HoldID
	}
	seat := book(0, "HELD")
	s.Recorded(t, seat)
	waiting := book(1, "WAITLIST_OFFERED")
	var bookingID int64
	var pnr string
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT id, pnr FROM bookings WHERE hold_id = $1`, waiting).Scan(&bookingID, &pnr), "booking")
	armed.Store(true)
	stale := make(chan error, 1)
	go func() { stale <- s.Service.SyncToCore(ctx, bookingID) }()
	select {
	case <-paused:
	case <-time.After(30 * time.Second):
		t.Fatal("the first sync never got the core's answer")
	}
	_, err := s.Service.CancelBooking(ctx, users[0], seat, nil)
	teststack.Must(t, err, "cancel")
	promoted, err := s.Service.Promote(ctx, shardID)
	teststack.Must(t, err, "promote")
	if len(promoted) != 1 {
		t.Fatalf("promoted %d bookings, want the waitlisted one", len(promoted))
	}
	free()
	teststack.Must(t, <-stale, "the first sync")
	teststack.Must(t, s.Service.SyncToCore(ctx, bookingID), "the promotion's sync")
	var active bool
	var state string
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT bool_and(active) FROM prs.passengers WHERE pnr = $1`, pnr).Scan(&active), "core")
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT prs_state FROM bookings WHERE id = $1`, bookingID).Scan(&state), "state")
	if !active || state != "SYNCED" {
		t.Errorf("promoted %s: core seats it %v, our sync state %s; want seated and SYNCED", pnr, active, state)
	}
}
