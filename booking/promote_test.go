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
	"tatkal/booking/lab/testenv"
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

	testenv.Eventually(t, 60*time.Second, "the promotions done and at the core", func() error {
		var open, unsynced int
		teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM river_job WHERE kind = 'tqwl_promote' AND state <> 'completed'),
			(SELECT count(*) FROM bookings WHERE status = 'CONFIRMED' AND prs_state <> 'SYNCED')`).Scan(&open, &unsynced), "jobs")
		return testenv.Want(open == 0 && unsynced == 0, "%d promotion jobs open, %d confirmed bookings not at the core", open, unsynced)
	})
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

// keptScene is a shard of one berth whose confirmed booking is cancelled
// while a paid waitlisted ticket waits: the berth is kept for the
// promotion, whose job is held back (no workers run).
func keptScene(t *testing.T, s *teststack.Stack, prefix string) (shardID int64, date time.Time, users []int64, seat, waiting uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	shardID, date = s.DemoShard(t, 1, 5)
	users = s.Users(t, prefix, 3)
	book := func(i int, want string) uuid.UUID {
		h, err := s.Service.Hold(ctx, teststack.Caller(users[i]), holdReq(users[i], fmt.Sprintf("kept-%s-%d", prefix, i), date, "MMCT", "NDLS",
			pax(fmt.Sprintf("Passenger %c", 'A'+i), 30+i, "F")))
		if err != nil || h.Status != want {
			t.Fatalf("hold %d: %+v %v, want %s", i, h, err, want)
		}
		_, err = s.Service.Confirm(ctx, h.HoldID)
		teststack.Must(t, err, "confirm %d", i)
		return h.HoldID
	}
	seat, waiting = book(0, "HELD"), book(1, "WAITLIST_OFFERED")
	s.Recorded(t, seat)
	_, err := s.Service.CancelBooking(ctx, users[0], seat, nil)
	teststack.Must(t, err, "cancel the seat")
	var queued int
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'tqwl_promote' AND state = 'available'`).
		Scan(&queued), "promotion job")
	if queued != 1 {
		t.Fatalf("%d promotion jobs waiting after the cancellation, want 1", queued)
	}
	return shardID, date, users, seat, waiting
}

// The berth of a cancelled confirmed booking is kept for the waitlist's
// promotion however late its job runs: the sweeper, run while the job is
// held back, leaves it taken (it used to see a cancelled booking still
// sold in Redis and free it), and so does a rebuild of the shard from
// PostgreSQL, so a new passenger is offered the waitlist,
// not the berth; then the promotion runs and confirms the waitlisted
// ticket onto that berth. The invariants hold throughout.
func TestSweeperKeepsTheBerthForALatePromotion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{})
	shardID, date, users, seat, waiting := keptScene(t, s, "sk")

	rep, err := s.Service.Sweep(ctx)
	teststack.Must(t, err, "sweep")
	// Nor does a rebuild from PostgreSQL (Redis lost meanwhile) free it.
	_, err = s.Service.Rebuild(ctx, shardID)
	teststack.Must(t, err, "rebuild")
	h, err := s.Service.Hold(ctx, teststack.Caller(users[2]), holdReq(users[2], "kept-sk-late", date, "MMCT", "NDLS", pax("Late Comer", 50, "M")))
	if err != nil || h.Status != "WAITLIST_OFFERED" {
		t.Fatalf("a new passenger's hold after the sweep, while the berth waits for the promotion: %+v %v, want WAITLIST_OFFERED (sweep: %+v)",
			h, err, rep)
	}
	if rep.Synced != 0 || rep.Promoted != 0 {
		t.Fatalf("the sweep touched the kept berth: %+v, want it left for the promotion", rep)
	}
	s.CheckInvariants(t, shardID)

	// The promotion job runs at last.
	done, err := s.Service.Promote(ctx, shardID)
	teststack.Must(t, err, "promote")
	if len(done) != 1 || done[0].HoldID != waiting {
		t.Fatalf("promoted %+v, want the waitlisted ticket", done)
	}
	var freed, got []int32
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT (SELECT berths FROM holds WHERE id = $1), (SELECT berths FROM holds WHERE id = $2)`,
		seat, waiting).Scan(&freed, &got), "berths")
	if len(got) != 1 || len(freed) != 1 || got[0] != freed[0] {
		t.Fatalf("promoted onto berths %v, want the cancelled booking's %v", got, freed)
	}
	v, err := s.Service.Status(ctx, users[1], waiting)
	teststack.Must(t, err, "status")
	if v.BookingStat != booking.BookingConfirmed {
		t.Fatalf("the waitlisted ticket is %s after the promotion, want CONFIRMED", v.BookingStat)
	}
	var kept int
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM bookings WHERE kept_for_promotion`).Scan(&kept), "kept")
	if kept != 0 {
		t.Fatalf("%d bookings still keep berths after the promotion ran", kept)
	}
	if _, err := s.Service.Sweep(ctx); err != nil {
		t.Fatalf("sweep after the promotion: %v", err)
	}
	s.CheckInvariants(t, shardID)
}

// A berth kept for a promotion that can never come (its job lost, and the
// waitlisted ticket cancelled meanwhile) does not stay kept for ever: past
// the sweep grace the sweeper runs the promotion itself, which promotes no
// one and puts the berth back on sale.
func TestKeptBerthOfALostPromotionIsFreedBySweeper(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{})
	shardID, date, users, _, waiting := keptScene(t, s, "sl")
	_, err := s.Service.CancelBooking(ctx, users[1], waiting, nil)
	teststack.Must(t, err, "cancel the waitlisted ticket")
	_, err = s.Pool.Exec(ctx, `DELETE FROM river_job WHERE kind = 'tqwl_promote'`)
	teststack.Must(t, err, "lose the promotion job")

	rep, err := s.Service.Sweep(ctx)
	teststack.Must(t, err, "sweep within the grace")
	if rep.Promoted != 0 {
		t.Fatalf("the sweeper promoted within the grace: %+v", rep)
	}
	// Past the grace (the clock moved on: the cancellation is older).
	_, err = s.Pool.Exec(ctx, `UPDATE bookings SET cancelled_at = cancelled_at - interval '10 minutes' WHERE kept_for_promotion`)
	teststack.Must(t, err, "age the cancellation")
	rep, err = s.Service.Sweep(ctx)
	teststack.Must(t, err, "sweep past the grace")
	if rep.Promoted != 1 {
		t.Fatalf("sweep past the grace: %+v, want the overdue promotion run", rep)
	}
	h, err := s.Service.Hold(ctx, teststack.Caller(users[2]), holdReq(users[2], "kept-sl-late", date, "MMCT", "NDLS", pax("Late Comer", 50, "M")))
	if err != nil || h.Status != "HELD" {
		t.Fatalf("a hold once no promotion can take the berth: %+v %v, want HELD", h, err)
	}
	s.CheckInvariants(t, shardID)
}
