package booking_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"tatkal/booking"
	"tatkal/booking/db"
	"tatkal/booking/inventory"
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
	"tatkal/booking/prs"
)

// Seats under interleavings (issue 9, the Redis side): each test forces its
// interleaving by committing one side directly, by a pause point, or by a
// Redis error injected on the stack's own client, then checks the outcome
// in PostgreSQL and Redis.

// redisFaults fails chosen Redis calls of one test's client, as a Redis
// error would: a go-redis hook, the real Redis serving everything else.
type redisFaults struct {
	mu    sync.Mutex
	rules []*faultRule
}

type faultRule struct {
	match func(args []any) bool
	left  int // calls still to fail; -1 for ever
}

var errInjected = errors.New("injected Redis fault")

// stackWithFaults starts a stack whose Redis client fails what f is told to.
func stackWithFaults(t *testing.T, opts teststack.Options) (*teststack.Stack, *redisFaults) {
	t.Helper()
	env := testenv.New(t)
	f := &redisFaults{}
	env.Redis.AddHook(f)
	return teststack.Start(t, env, opts), f
}

// fail makes the next n calls matching match fail (n < 0: all of them).
func (f *redisFaults) fail(n int, match func(args []any) bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = append(f.rules, &faultRule{match: match, left: n})
}

func (f *redisFaults) hit(args []any) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.rules {
		if r.left != 0 && r.match(args) {
			if r.left > 0 {
				r.left--
			}
			return true
		}
	}
	return false
}

func (f *redisFaults) DialHook(next redis.DialHook) redis.DialHook { return next }
func (f *redisFaults) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if f.hit(cmd.Args()) {
			cmd.SetErr(errInjected)
			return errInjected
		}
		return next(ctx, cmd)
	}
}
func (f *redisFaults) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// script splits a script call into its keys and arguments (ok false for
// any other command).
func script(args []any) (keys, argv []string, ok bool) {
	if len(args) < 3 {
		return nil, nil, false
	}
	if name, _ := args[0].(string); name != "evalsha" && name != "eval" {
		return nil, nil, false
	}
	var n int
	switch v := args[2].(type) {
	case int:
		n = v
	case int64:
		n = int(v)
	default:
		return nil, nil, false
	}
	for i, a := range args[3:] {
		s, _ := a.(string)
		if i < n {
			keys = append(keys, s)
		} else {
			argv = append(argv, s)
		}
	}
	return keys, argv, true
}

// releaseOf matches RELEASE of hold id in mode.
func releaseOf(id string, mode inventory.ReleaseMode) func([]any) bool {
	return func(args []any) bool {
		keys, argv, ok := script(args)
		return ok && len(keys) == 7+inventory.MaxLegs && len(argv) == 2 && argv[0] == id && argv[1] == string(mode)
	}
}

// confirmOf matches CONFIRM of hold id.
func confirmOf(id string) func([]any) bool {
	return func(args []any) bool {
		keys, argv, ok := script(args)
		return ok && len(keys) == 5 && strings.HasSuffix(keys[4], ":live") && len(argv) == 1 && argv[0] == id
	}
}

// loadOf matches LOAD of a shard (only LOAD names the old "occ" key).
func loadOf(shardID int64) func([]any) bool {
	suffix := ":{s" + itoa(shardID) + "}:occ"
	return func(args []any) bool {
		keys, _, ok := script(args)
		return ok && len(keys) > 0 && strings.HasSuffix(keys[len(keys)-3], suffix)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// check runs the invariant check and returns it (failing on an error only).
func check(t *testing.T, s *teststack.Stack, shardID int64) inventory.Report {
	t.Helper()
	rep, err := inventory.Check(context.Background(), s.Pool, s.Store, shardID, s.Service.Rules().HoldWindow)
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	return rep
}

// seatSyncJobs counts seat-sync jobs queued for a hold.
func seatSyncJobs(t *testing.T, s *teststack.Stack, id uuid.UUID) int {
	t.Helper()
	var n int
	if err := s.Pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job WHERE kind = 'seat_sync'
		AND args->>'hold_id' = $1 AND state IN ('available', 'scheduled', 'retryable')`, id.String()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func mustHold(t *testing.T, s *teststack.Stack, user int64, key string, date time.Time) booking.HoldResult {
	t.Helper()
	res, err := s.Service.Hold(context.Background(), teststack.Caller(user), holdReq(user, key, date, "MMCT", "NDLS", pax("Asha Rao", 30, "F")))
	if err != nil || res.Status != "HELD" {
		t.Fatalf("hold %s: %+v %v", key, res, err)
	}
	return res
}

// lapse expires a hold in PostgreSQL only: its Redis release is late.
func lapse(t *testing.T, s *teststack.Stack, id uuid.UUID) {
	t.Helper()
	if _, err := s.Pool.Exec(context.Background(), `UPDATE holds SET state = 'EXPIRED', state_reason = 'hold window ended',
		updated_at = now() WHERE id = $1 AND state = 'HELD'`, id); err != nil {
		t.Fatal(err)
	}
}

// Problem 3: a client that disconnects right after the commit must not
// leave Redis saying held. AfterConfirm runs on a context of its own.
func TestConfirmLandsInRedisWhenTheRequestIsGone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{})
	shardID, date := s.DemoShard(t, 2, 0)
	users := s.Users(t, "gone", 1)
	h := mustHold(t, s, users[0], "gone-00001", date)
	var res booking.ConfirmResult
	if err := db.Transact(ctx, s.Pool, func(tx pgx.Tx) error {
		var err error
		res, err = s.Service.ConfirmTx(ctx, tx, h.HoldID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if n := seatSyncJobs(t, s, h.HoldID); n != 1 {
		t.Errorf("%d seat-sync jobs committed with the confirmation, want 1", n)
	}
	gone, cancel := context.WithCancel(ctx)
	cancel()
	s.Service.AfterConfirm(gone, res)
	s.CheckInvariants(t, shardID)
}

// Problem 3: Redis missed a confirmation (an error), then the booking is
// cancelled: the berth must come back, not stay held for ever.
func TestCancelAfterAMissedConfirmationFreesTheBerth(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, faults := stackWithFaults(t, teststack.Options{})
	shardID, date := s.DemoShard(t, 1, 0)
	users := s.Users(t, "mc", 2)
	h := mustHold(t, s, users[0], "missed-0001", date)
	faults.fail(1, confirmOf(h.HoldID.String()))
	if _, err := s.Service.Confirm(ctx, h.HoldID); err != nil {
		t.Fatal(err)
	}
	if rep := check(t, s, shardID); rep.OK() {
		t.Fatal("the check did not see Redis miss the confirmation")
	}
	s.Recorded(t, h.HoldID)
	if _, err := s.Service.CancelBooking(ctx, users[0], h.HoldID, nil); err != nil {
		t.Fatal(err)
	}
	s.CheckInvariants(t, shardID)
	again, err := s.Service.Hold(ctx, teststack.Caller(users[1]), holdReq(users[1], "missed-0002", date, "MMCT", "NDLS", pax("Bina Das", 30, "F")))
	if err != nil || again.Status != "HELD" {
		t.Fatalf("the cancelled booking's berth: %+v %v, want HELD", again, err)
	}
	s.CheckInvariants(t, shardID)
}

// Problem 3: a core rejection whose Redis release fails leaves a seat-sync
// job behind it, which frees the berth.
func TestCoreRejectionLeavesASeatSyncJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, faults := stackWithFaults(t, teststack.Options{})
	shardID, date := s.DemoShard(t, 1, 0)
	users := s.Users(t, "rj", 1)
	h := mustHold(t, s, users[0], "reject-0001", date)
	if _, err := s.Service.Confirm(ctx, h.HoldID); err != nil {
		t.Fatal(err)
	}
	var bookingID int64
	if err := s.Pool.QueryRow(ctx, `SELECT id FROM bookings WHERE hold_id = $1`, h.HoldID).Scan(&bookingID); err != nil {
		t.Fatal(err)
	}
	// The confirmation's own seat-sync job is done with.
	if _, err := s.Pool.Exec(ctx, `DELETE FROM river_job WHERE kind = 'seat_sync'`); err != nil {
		t.Fatal(err)
	}
	s.SetCoreFaults(t, prs.Faults{RejectRate: 1})
	faults.fail(1, releaseOf(h.HoldID.String(), inventory.ReleaseCancel))
	if err := s.Service.SyncToCore(ctx, bookingID); err != nil {
		t.Fatalf("sync to a rejecting core: %v", err)
	}
	var status string
	if err := s.Pool.QueryRow(ctx, `SELECT status FROM bookings WHERE id = $1`, bookingID).Scan(&status); err != nil || status != booking.BookingCancelled {
		t.Fatalf("booking %s %v, want CANCELLED", status, err)
	}
	if n := seatSyncJobs(t, s, h.HoldID); n != 1 {
		t.Fatalf("%d seat-sync jobs after the rejection, want 1", n)
	}
	if err := s.Service.SyncSeat(ctx, h.HoldID); err != nil { // what the job does
		t.Fatal(err)
	}
	s.CheckInvariants(t, shardID)
}

// Problem 3: the sweeper repairs a sold (C) record whose booking PostgreSQL
// cancelled, which it never looked at: only live holds come due.
func TestSweeperFreesASoldRecordPostgreSQLCancelled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{})
	shardID, date := s.DemoShard(t, 1, 0)
	users := s.Users(t, "sx", 2)
	h := mustHold(t, s, users[0], "sold-00001", date)
	if _, err := s.Service.Confirm(ctx, h.HoldID); err != nil {
		t.Fatal(err)
	}
	// Cancelled in PostgreSQL only, its Redis release and jobs lost.
	if _, err := s.Pool.Exec(ctx, `WITH b AS (UPDATE bookings SET status = 'CANCELLED', cancelled_at = now() WHERE hold_id = $1 RETURNING id)
		UPDATE booking_passengers SET status = 'CANCELLED' WHERE booking_id IN (SELECT id FROM b)`, h.HoldID); err != nil {
		t.Fatal(err)
	}
	rep, err := s.Service.Sweep(ctx)
	if err != nil || rep.Synced != 1 {
		t.Fatalf("sweep: %+v %v, want one record synced", rep, err)
	}
	s.CheckInvariants(t, shardID)
	mustHold(t, s, users[1], "sold-00002", date)
}

// Problem 13: right after problem 3 happens, the check reports it, with its
// age, instead of forgiving a young record for ten seconds.
func TestCheckReportsACancelledBookingStillHeldInRedis(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{})
	shardID, date := s.DemoShard(t, 1, 0)
	users := s.Users(t, "ck", 1)
	h := mustHold(t, s, users[0], "check-0001", date)
	// Confirmed then cancelled in PostgreSQL; Redis never heard of either.
	if err := db.Transact(ctx, s.Pool, func(tx pgx.Tx) error {
		_, err := s.Service.ConfirmTx(ctx, tx, h.HoldID)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool.Exec(ctx, `UPDATE bookings SET status = 'CANCELLED', cancelled_at = now() WHERE hold_id = $1`, h.HoldID); err != nil {
		t.Fatal(err)
	}
	rep := check(t, s, shardID)
	found := false
	for _, v := range rep.Violations {
		if strings.Contains(v, h.HoldID.String()) && strings.Contains(v, " for ") {
			found = true
		}
	}
	if !found {
		t.Fatalf("the check did not report hold %s (booking cancelled, Redis held) with its age:\n%s", h.HoldID, rep)
	}
}

// Problem 2: a late release of a lapsed hold lands between its retake's
// Redis hold and commit. The lapsed record must not be overwritten (its
// berth leaked) and the retake's berths must not be freed.
func TestLateReleaseCannotFreeARetakesSeats(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var svc *booking.Service
	var late booking.HoldInfo
	released := false
	pause := func(ctx context.Context, point string) {
		if point == "retake.held" && !released {
			released = true
			svc.AfterRelease(ctx, late) // the expiry's Redis release, late
		}
	}
	s := teststack.New(t, teststack.Options{Pause: pause})
	svc = s.Service
	shardID, date := s.DemoShard(t, 2, 0)
	users := s.Users(t, "rt", 3)
	h := mustHold(t, s, users[0], "retake-0001", date)
	late = booking.HoldInfo{ID: h.HoldID, ShardID: shardID, UserID: users[0]}
	lapse(t, s, h.HoldID)
	res, outcome, err := s.Service.RetakeAndConfirm(ctx, h.HoldID, func(pgx.Tx, booking.ConfirmResult) error { return nil })
	if err != nil || outcome != booking.RetakeConfirmed {
		t.Fatalf("retake: %+v %s %v", res, outcome, err)
	}
	if !released {
		s.Service.AfterRelease(ctx, late) // no pause point: the release is later still
	}
	s.CheckInvariants(t, shardID)
	// One berth confirmed, one free: the next passenger gets it, the one
	// after finds the shard sold out.
	mustHold(t, s, users[1], "retake-0002", date)
	r, err := s.Service.Hold(ctx, teststack.Caller(users[2]), holdReq(users[2], "retake-0003", date, "MMCT", "NDLS", pax("Kiran Shah", 30, "M")))
	if err != nil || r.Status != "SOLD_OUT" {
		t.Fatalf("third passenger on two berths: %+v %v, want SOLD_OUT", r, err)
	}
	s.CheckInvariants(t, shardID)
}

// Problem 2: a retake whose commit failed and whose undo failed too is
// freed by the sweeper; the next retake must hold afresh, not replay the
// first one's HELD for berths that are free again.
func TestRetakeAfterTheSweeperFreedAnAttempt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rules := booking.DefaultRules()
	rules.HoldWindow = time.Second
	s, faults := stackWithFaults(t, teststack.Options{Rules: &rules, SweepGrace: time.Millisecond})
	shardID, date := s.DemoShard(t, 2, 0)
	users := s.Users(t, "rs", 1)
	h := mustHold(t, s, users[0], "replay-0001", date)
	if _, err := s.Pool.Exec(ctx, `UPDATE holds SET expires_at = now() - interval '1 second' WHERE id = $1`, h.HoldID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Service.ExpireHold(ctx, h.HoldID); err != nil {
		t.Fatal(err)
	}
	// First attempt: the payment's side fails, and so does the undo.
	_, _, err := s.Service.RetakeAndConfirm(ctx, h.HoldID, func(pgx.Tx, booking.ConfirmResult) error {
		faults.fail(1, releaseOf(h.HoldID.String(), inventory.ReleaseUndo))
		return errors.New("the payment side failed")
	})
	if err == nil {
		t.Fatal("a retake whose transaction failed answered no error")
	}
	time.Sleep(1100 * time.Millisecond)
	if rep, err := s.Service.Sweep(ctx); err != nil || rep.Orphans != 1 {
		t.Fatalf("sweep: %+v %v, want the failed attempt freed", rep, err)
	}
	// Whatever is left of the attempt in Redis, freed as the sweeper would.
	if _, err := s.Store.Release(ctx, shardID, h.HoldID.String(), inventory.ReleaseHold, users[0], ""); err != nil {
		t.Fatal(err)
	}
	res, outcome, err := s.Service.RetakeAndConfirm(ctx, h.HoldID, func(pgx.Tx, booking.ConfirmResult) error { return nil })
	if err != nil || outcome != booking.RetakeConfirmed {
		t.Fatalf("second retake: %+v %s %v", res, outcome, err)
	}
	s.CheckInvariants(t, shardID)
}

// Problem 8: a passenger with a live hold on another shard still gets the
// ticket a late payment paid for.
func TestLateSuccessRetakesDespiteALiveHoldElsewhere(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{})
	shardA, date := s.DemoShard(t, 2, 0)
	shardB, err := seed.Shard(ctx, s.Pool, seed.ShardSpec{Train: "12951", Date: date.AddDate(0, 0, 1), Class: "3A", Berths: 2,
		OpensAt: time.Now().Add(-time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Service.Rebuild(ctx, shardB); err != nil {
		t.Fatal(err)
	}
	users := s.Users(t, "le", 1)
	h := mustHold(t, s, users[0], "elsewhere-1", date)
	if _, err := s.Pool.Exec(ctx, `UPDATE holds SET expires_at = now() - interval '1 second' WHERE id = $1`, h.HoldID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Service.ExpireHold(ctx, h.HoldID); err != nil {
		t.Fatal(err)
	}
	other := mustHold(t, s, users[0], "elsewhere-2", date.AddDate(0, 0, 1))
	res, outcome, err := s.Service.RetakeAndConfirm(ctx, h.HoldID, func(pgx.Tx, booking.ConfirmResult) error { return nil })
	if err != nil || outcome != booking.RetakeConfirmed || res.PNR == "" {
		t.Fatalf("retake with a live hold elsewhere: %+v %s %v, want a PNR", res, outcome, err)
	}
	if v, err := s.Service.Status(ctx, users[0], other.HoldID); err != nil || v.State != booking.HoldHeld {
		t.Fatalf("the live hold elsewhere: %+v %v, want still HELD", v, err)
	}
	s.CheckInvariants(t, shardA)
	s.CheckInvariants(t, shardB)
}

// Problem 5: a rebuild whose load fails after its epoch bump leaves the
// shard refusing holds. It is recorded, shown by the check, retried by the
// sweeper, and a stale-epoch refusal triggers a rebuild.
func TestFailedRebuildIsRecordedAndRetried(t *testing.T) {
	t.Parallel()
	for _, by := range []string{"sweeper", "hold"} {
		t.Run(by, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s, faults := stackWithFaults(t, teststack.Options{})
			shardID, date := s.DemoShard(t, 2, 0)
			users := s.Users(t, "fr"+by[:1], 1)
			faults.fail(1, loadOf(shardID))
			if _, err := s.Service.Rebuild(ctx, shardID); err == nil {
				t.Fatal("a rebuild whose load failed answered no error")
			}
			var failure string
			if err := s.Pool.QueryRow(ctx, `SELECT coalesce(rebuild_error, '') FROM inventory_shards WHERE id = $1`, shardID).Scan(&failure); err != nil || failure == "" {
				t.Fatalf("rebuild failure not recorded: %q %v", failure, err)
			}
			if rep := check(t, s, shardID); rep.OK() {
				t.Fatalf("the check passes a shard whose rebuild failed:\n%s", rep)
			}
			switch by {
			case "sweeper":
				rep, err := s.Service.Sweep(ctx)
				if err != nil || rep.Rebuilt < 1 { // the demo's other shards are rebuilt too
					t.Fatalf("sweep: %+v %v, want the shard rebuilt", rep, err)
				}
				mustHold(t, s, users[0], "rebuilt-001", date)
			case "hold":
				n := 0
				testenv.Eventually(t, 15*time.Second, "a hold after a failed rebuild", func() error {
					n++
					res, err := s.Service.Hold(ctx, teststack.Caller(users[0]), holdReq(users[0], "rebuilt-"+itoa(int64(100+n)), date,
						"MMCT", "NDLS", pax("Asha Rao", 30, "F")))
					if err == nil && res.Status == "HELD" {
						return nil
					}
					if booking.ErrorReason(err) != "SHARD_REBUILDING" {
						t.Fatalf("hold %d after a failed rebuild: %+v %v", n, res, err)
					}
					return err
				})
			}
			if err := s.Pool.QueryRow(ctx, `SELECT coalesce(rebuild_error, '') FROM inventory_shards WHERE id = $1`, shardID).Scan(&failure); err != nil || failure != "" {
				t.Fatalf("rebuild failure %q (%v) left after a successful rebuild", failure, err)
			}
			s.CheckInvariants(t, shardID)
		})
	}
}

// Problem 10: one shard that cannot be rebuilt does not stop the sweep of
// the others.
func TestSweepGoesOnPastAShardItCannotRebuild(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, faults := stackWithFaults(t, teststack.Options{})
	broken, date := s.DemoShard(t, 2, 0)
	fine, err := seed.Shard(ctx, s.Pool, seed.ShardSpec{Train: "12951", Date: date.AddDate(0, 0, 1), Class: "3A", Berths: 2,
		OpensAt: time.Now().Add(-time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if fine < broken {
		t.Fatalf("shard ids %d < %d: the broken shard must be swept first", fine, broken)
	}
	if _, err := s.Service.Rebuild(ctx, fine); err != nil {
		t.Fatal(err)
	}
	users := s.Users(t, "sg", 1)
	orphan := uuid.New()
	if res, err := s.Store.Hold(ctx, inventory.HoldRequest{ShardID: fine, HoldID: orphan.String(), UserID: users[0], IdemKey: "orphan-0001",
		From: 0, To: 7, ExpiresAt: time.Now().Add(-time.Minute), DailyCap: 2, Prefs: []byte("-"), IDOK: true, IdemTTL: time.Minute,
		MaxPassengers: 4}); err != nil || res.Outcome != inventory.Held {
		t.Fatalf("orphan hold: %+v %v", res, err)
	}
	faults.fail(-1, loadOf(broken))
	if err := s.Store.Wipe(ctx, broken); err != nil {
		t.Fatal(err)
	}
	rep, err := s.Service.Sweep(ctx)
	if err == nil || !strings.Contains(err.Error(), "shard "+itoa(broken)) {
		t.Fatalf("sweep error %v, want the broken shard's", err)
	}
	if rep.Orphans != 1 {
		t.Fatalf("sweep %+v: the shard after the broken one was not swept", rep)
	}
	s.CheckInvariants(t, fine)
}
