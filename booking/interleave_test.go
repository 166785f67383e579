package booking_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"tatkal/booking"
	"tatkal/booking/inventory"
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/teststack"
	"tatkal/booking/payment"
	"tatkal/booking/payment/pspapi"
	"tatkal/booking/prs"
	"tatkal/booking/sim/pspsim"
)

// TestRandomInterleavings drives passengers and the deferred work against
// one small shard at once, round after round: holds and their replays,
// wallet payments, UPI payments approved or declined (late, after their
// hold lapsed, too), hold and booking cancels, expiries, with the core
// timing out, failing or down, Redis scripts failing (before or after they
// ran) and Redis losing everything. Each round's steps run concurrently
// with a pass of the River jobs; then the jobs and the sweeper settle it,
// and PostgreSQL, Redis and the core must agree, every captured payment be
// a ticket or a full refund, and no berth be lost or sold twice.
//
// TATKAL_INTERLEAVE_SEED replays a run; TATKAL_INTERLEAVE_SECONDS bounds it.
func TestRandomInterleavings(t *testing.T) {
	t.Parallel()
	budget := 30 * time.Second
	if testing.Short() {
		budget = 6 * time.Second
	}
	if v, err := strconv.Atoi(os.Getenv("TATKAL_INTERLEAVE_SECONDS")); err == nil && v > 0 {
		budget = time.Duration(v) * time.Second
	}
	seedN := time.Now().UnixNano()
	if v, err := strconv.ParseInt(os.Getenv("TATKAL_INTERLEAVE_SEED"), 10, 64); err == nil {
		seedN = v
	}
	t.Logf("seed %d (TATKAL_INTERLEAVE_SEED=%d replays it)", seedN, seedN)
	w := newWorld(t, seedN)
	start := time.Now()
	round := 0
	// The budget is a minimum: on a loaded machine a round takes longer, and
	// the rarest steps (a UPI approval after its hold lapsed) need about
	// twenty rounds, so the run goes on, up to three budgets, until each
	// has happened.
	for ; time.Since(start) < budget || (!testing.Short() && len(w.unexercised()) > 0 && time.Since(start) < 3*budget); round++ {
		w.round(round)
		w.settle(round)
		w.check(round, false)
	}
	w.finish(round)
	w.check(round, true)
	t.Logf("%d rounds in %v: %v", round, time.Since(start).Round(time.Millisecond), w.counts())
	if missing := w.unexercised(); len(missing) > 0 && !testing.Short() {
		t.Errorf("the run never exercised %v: %v", missing, w.counts())
	}
}

// unexercised names the steps the coverage check wants that have not
// happened yet.
func (w *world) unexercised() []string {
	var missing []string
	for _, k := range []string{"held", "wallet-paid", "upi-approved", "hold-cancelled", "booking-cancelled", "expired", "late-success", "core-fault", "redis-fault"} {
		if w.count[k].Load() == 0 {
			missing = append(missing, k)
		}
	}
	return missing
}

// world is one run: the stack, its faults and what the passengers did.
type world struct {
	t       *testing.T
	s       *teststack.Stack
	ctx     context.Context
	rng     *rand.Rand
	shardID int64
	date    time.Time
	users   []int64
	core    *prs.Client
	redis   *luaFaults
	browser *http.Client

	mu        sync.Mutex
	keys      map[int64][]string       // hold idempotency keys per user
	upi       map[uuid.UUID]string     // open UPI payments: their approval page
	cancelled map[uuid.UUID]bool       // holds whose booking a passenger cancelled
	trace     []string                 // this round's steps, for the failure report
	count     map[string]*atomic.Int64 // what happened, for the coverage check
	journeys  [][2]string              // from, to
}

func newWorld(t *testing.T, seedN int64) *world {
	var routes []pspapi.RouteConfig
	for _, rc := range pspsim.DefaultRoutes() {
		rc.LatencyP50Ms, rc.LatencyP99Ms, rc.AutoApproveMs = 2, 10, -1 // the customer decides on the page
		rc.TimeoutRate, rc.DeclineRate, rc.PendingRate, rc.LateSuccessRate, rc.DuplicateCallbackRate, rc.AbandonRate = 0, 0, 0, 0, 0.2, 0
		rc.LostCallbackRate = 0.3 // the inquiry job finds those out
		routes = append(routes, rc)
	}
	rules := booking.DefaultRules()
	rules.DailyCap = 1000 // the cap is not under test; the berths are
	s := teststack.New(t, teststack.Options{Rules: &rules, Routes: routes, SweepGrace: time.Millisecond})
	shardID, date := s.DemoShard(t, 3, 0)
	users, err := seed.Users(context.Background(), s.Pool, seed.UsersSpec{Count: 6, Prefix: "il", PasswordHash: "x", WalletRupees: 1_000_000})
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, s: s, ctx: context.Background(), rng: rand.New(rand.NewPCG(uint64(seedN), 0x1a7e)), shardID: shardID,
		date: date, users: users, core: prs.NewClient(s.Core.URL, s.CoreKey, nil),
		redis:   &luaFaults{rng: rand.New(rand.NewPCG(uint64(seedN), 0x4ed15))},
		browser: &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		keys:    map[int64][]string{}, upi: map[uuid.UUID]string{}, cancelled: map[uuid.UUID]bool{}, count: map[string]*atomic.Int64{},
		journeys: [][2]string{{"MMCT", "NDLS"}, {"MMCT", "BRC"}, {"BRC", "NDLS"}, {"ST", "KOTA"}},
	}
	for _, k := range []string{"held", "sold-out", "refused", "replayed", "wallet-paid", "upi-started", "upi-approved", "upi-declined",
		"hold-cancelled", "cancel-refused", "booking-cancelled", "expired", "late-success", "core-fault", "redis-fault", "redis-lost"} {
		w.count[k] = &atomic.Int64{}
	}
	s.Redis.AddHook(w.redis)
	t.Cleanup(func() { w.redis.set(0) })
	return w
}

func (w *world) note(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.trace = append(w.trace, fmt.Sprintf(format, args...))
}

func (w *world) counts() map[string]int64 {
	out := map[string]int64{}
	for k, v := range w.count {
		out[k] = v.Load()
	}
	return out
}

// round sets this round's faults and runs a few passengers' steps and a
// pass of the jobs, all at once.
func (w *world) round(n int) {
	w.trace = w.trace[:0]
	faults := prs.Faults{}
	switch f := w.rng.IntN(10); {
	case f < 4: // the core does the work and the answer is lost
		faults.TimeoutRate = 0.6
	case f < 6:
		faults.FailRate = 0.5
	case f < 7:
		faults.Outage = true
	}
	if faults != (prs.Faults{}) {
		w.count["core-fault"].Add(1)
	}
	w.s.SetCoreFaults(w.t, faults)
	redisRate := 0.0
	if w.rng.IntN(3) == 0 {
		redisRate = 0.25
		w.count["redis-fault"].Add(1)
	}
	w.redis.set(redisRate)
	w.note("round %d: core faults %+v, redis failure rate %.2f", n, faults, redisRate)
	if w.rng.IntN(15) == 0 {
		w.count["redis-lost"].Add(1)
		w.note("redis loses every key")
		w.s.WipeRedis(w.t)
	}

	// Two waves of steps, each beside a pass of the jobs, with a pass of
	// its own between them: the jobs run under the faults too (a sync
	// whose answer is lost, then a cancel, then the cancel's job).
	for wave := range 2 {
		steps := make([]func(), 0, 6)
		for i := range 1 + w.rng.IntN(4) {
			steps = append(steps, w.step(n, wave*10+i))
		}
		var wg sync.WaitGroup
		for _, f := range steps {
			wg.Go(f)
		}
		wg.Go(func() { w.drainOnce() })
		wg.Wait()
		w.drainOnce()
	}
}

// step picks one passenger action (its randomness drawn now, so a seed
// replays the same choices).
func (w *world) step(n, i int) func() {
	ctx := w.ctx
	user := w.users[w.rng.IntN(len(w.users))]
	op := w.rng.IntN(100)
	pick := w.rng.Int()
	j := w.journeys[w.rng.IntN(len(w.journeys))]
	switch {
	case op < 22: // hold
		key := fmt.Sprintf("il-%d-%d-%d", n, i, user)
		w.mu.Lock()
		w.keys[user] = append(w.keys[user], key)
		w.mu.Unlock()
		return func() {
			r, err := w.s.Service.Hold(ctx, teststack.Caller(user), w.holdReq(user, key, j))
			w.note("hold %s by %d %s-%s: %s %v", key, user, j[0], j[1], r.Status, err)
			switch {
			case err != nil:
				w.count["refused"].Add(1)
			case r.Status == "SOLD_OUT":
				w.count["sold-out"].Add(1)
			default:
				w.count["held"].Add(1)
			}
		}
	case op < 28: // a retry of an earlier hold request answers what the hold is now
		return func() {
			w.mu.Lock()
			keys := slices.Clone(w.keys[user])
			w.mu.Unlock()
			if len(keys) == 0 {
				return
			}
			key := keys[pick%len(keys)]
			r, err := w.s.Service.Hold(ctx, teststack.Caller(user), w.holdReq(user, key, j))
			w.note("replay %s: %s %v", key, r.Status, err)
			if err != nil || !r.Replayed || r.HoldID == uuid.Nil {
				return
			}
			w.count["replayed"].Add(1)
			var state string
			if err := w.s.Pool.QueryRow(ctx, `SELECT state FROM holds WHERE id = $1`, r.HoldID).Scan(&state); err != nil {
				w.t.Errorf("replay %s: %v", key, err)
				return
			}
			if r.Status == "HELD" && state != booking.HoldHeld && state != booking.HoldConfirmed {
				// CONFIRMED may commit between the answer and this read.
				w.t.Errorf("replay of %s answered HELD for a hold that is %s", key, state)
			}
		}
	case op < 43: // wallet payment
		return func() {
			id, owner, ok := w.randomHold(pick, booking.HoldHeld)
			if !ok {
				return
			}
			v, err := w.s.Payments.Initiate(ctx, teststack.Caller(owner), payment.InitiateRequest{HoldID: id, Method: payment.Wallet,
				IdempotencyKey: fmt.Sprintf("il-wallet-%d-%d", n, i)})
			w.note("wallet pay %s: %s %v", id, v.State, err)
			if err == nil && v.State == payment.Success {
				w.count["wallet-paid"].Add(1)
			}
		}
	case op < 52: // UPI payment: the customer decides later
		return func() {
			id, owner, ok := w.randomHold(pick, booking.HoldHeld)
			if !ok {
				return
			}
			v, err := w.s.Payments.Initiate(ctx, teststack.Caller(owner), payment.InitiateRequest{HoldID: id, Method: payment.UPI,
				VPA: fmt.Sprintf("user%d@okaxis", owner), IdempotencyKey: fmt.Sprintf("il-upi-%d-%d", n, i)})
			w.note("upi pay %s: %s %v", id, v.State, err)
			if err == nil && v.NextAction != nil && v.NextAction.URL != "" {
				w.count["upi-started"].Add(1)
				w.mu.Lock()
				w.upi[v.ID] = v.NextAction.URL
				w.mu.Unlock()
			}
		}
	case op < 64: // the customer approves (or declines) an open UPI payment, maybe after its hold lapsed
		approve := op < 61
		return func() { w.decide(pick, approve) }
	case op < 74: // cancel a hold
		return func() {
			id, owner, ok := w.randomHold(pick, booking.HoldHeld)
			if !ok {
				return
			}
			_, err := w.s.Service.Cancel(ctx, owner, id)
			w.note("cancel hold %s: %v", id, err)
			if err == nil {
				w.count["hold-cancelled"].Add(1)
			} else {
				w.count["cancel-refused"].Add(1)
			}
		}
	case op < 88: // cancel a ticket
		return func() {
			if pick%2 == 0 {
				pick = -1 // the newest ticket: its sync may still be in doubt
			}
			id, owner, ok := w.randomHold(pick, "TICKET")
			if !ok {
				return
			}
			// Recorded first: the cancellation may commit even if its
			// answer fails (a Redis error after the commit).
			w.mu.Lock()
			w.cancelled[id] = true
			w.mu.Unlock()
			v, err := w.s.Service.CancelBooking(ctx, owner, id, nil)
			w.note("cancel booking %s: %s %v", id, v.BookingStat, err)
			if err == nil {
				w.count["booking-cancelled"].Add(1)
			}
		}
	default: // the hold window ends
		return func() {
			id, _, ok := w.randomHold(pick, booking.HoldHeld)
			if pick%2 == 0 {
				// Half the time the hold of an open UPI payment, so that an
				// approval after the hold lapsed (the rarest step) comes
				// within a few rounds, not by luck.
				if u, found := w.heldUnderOpenUPI(pick); found {
					id, ok = u, true
				}
			}
			if !ok {
				return
			}
			w.note("expire %s", id)
			if _, err := w.s.Pool.Exec(ctx, `UPDATE holds SET expires_at = now() - interval '1 second' WHERE id = $1 AND state = 'HELD'`, id); err != nil {
				w.t.Errorf("expire %s: %v", id, err)
			}
			w.count["expired"].Add(1)
		}
	}
}

func (w *world) holdReq(user int64, key string, j [2]string) booking.HoldRequest {
	return booking.HoldRequest{UserID: user, IdempotencyKey: key, Train: "12951", Date: w.date, Class: "3A", From: j[0], To: j[1],
		Passengers: []booking.Passenger{pax("Asha Verma", 30, "F")}}
}

// randomHold picks one of the shard's holds in state, or with a ticket
// not cancelled for "TICKET".
func (w *world) randomHold(pick int, state string) (uuid.UUID, int64, bool) {
	rows, err := w.s.Pool.Query(w.ctx, `SELECT h.id, h.user_id FROM holds h LEFT JOIN bookings b ON b.hold_id = h.id
		WHERE h.shard_id = $1 AND (h.state = $2 OR ($2 = 'TICKET' AND b.status IN ('CONFIRMED', 'WAITLISTED'))) ORDER BY h.id`, w.shardID, state)
	if err != nil {
		w.t.Errorf("holds: %v", err)
		return uuid.Nil, 0, false
	}
	defer rows.Close()
	type h struct {
		id   uuid.UUID
		user int64
	}
	var all []h
	for rows.Next() {
		var x h
		if err := rows.Scan(&x.id, &x.user); err != nil {
			w.t.Errorf("holds: %v", err)
			return uuid.Nil, 0, false
		}
		all = append(all, x)
	}
	if len(all) == 0 {
		return uuid.Nil, 0, false
	}
	if pick < 0 {
		pick = len(all) - 1 // ids are UUIDv7: the newest is last
	}
	x := all[pick%len(all)]
	return x.id, x.user, true
}

// heldUnderOpenUPI picks a HELD hold with a UPI payment the customer has
// not decided yet.
func (w *world) heldUnderOpenUPI(pick int) (uuid.UUID, bool) {
	w.mu.Lock()
	var payments []uuid.UUID
	for id := range w.upi {
		payments = append(payments, id)
	}
	w.mu.Unlock()
	if len(payments) == 0 {
		return uuid.Nil, false
	}
	rows, err := w.s.Pool.Query(w.ctx, `SELECT DISTINCT h.id FROM payments p JOIN holds h ON h.id = p.hold_id
		WHERE p.id = ANY($1) AND h.state = 'HELD' ORDER BY h.id`, payments)
	if err != nil {
		w.t.Errorf("holds under open UPI payments: %v", err)
		return uuid.Nil, false
	}
	holds, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		w.t.Errorf("holds under open UPI payments: %v", err)
		return uuid.Nil, false
	}
	if len(holds) == 0 {
		return uuid.Nil, false
	}
	return holds[pick%len(holds)], true
}

// decide approves or declines one open UPI payment on the gateway's page.
func (w *world) decide(pick int, approve bool) {
	w.mu.Lock()
	var ids []uuid.UUID
	for id := range w.upi {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b uuid.UUID) int { return strings.Compare(a.String(), b.String()) })
	if len(ids) == 0 {
		w.mu.Unlock()
		return
	}
	id := ids[pick%len(ids)]
	if approve && pick%2 == 0 {
		// Half the approvals go to a payment whose hold has lapsed, if
		// any: the late success (see heldUnderOpenUPI).
		var lapsed []uuid.UUID
		w.s.Pool.QueryRow(w.ctx, `SELECT coalesce(array_agg(p.id ORDER BY p.id), '{}') FROM payments p JOIN holds h ON h.id = p.hold_id
			WHERE p.id = ANY($1) AND h.state <> 'HELD'`, ids).Scan(&lapsed) //nolint:errcheck
		if len(lapsed) > 0 {
			id = lapsed[pick%len(lapsed)]
		}
	}
	url := w.upi[id]
	delete(w.upi, id)
	w.mu.Unlock()
	var hstate string
	w.s.Pool.QueryRow(w.ctx, `SELECT h.state FROM payments p JOIN holds h ON h.id = p.hold_id WHERE p.id = $1`, id).Scan(&hstate) //nolint:errcheck
	verb := "/decline"
	if approve {
		verb = "/approve"
	}
	resp, err := w.browser.Post(url+verb, "application/x-www-form-urlencoded", nil)
	if err != nil {
		w.note("upi %s %s: %v", id, verb, err)
		return
	}
	resp.Body.Close()
	w.note("upi %s %s (hold %s): %d", id, verb, hstate, resp.StatusCode)
	switch {
	case approve && hstate != booking.HoldHeld && hstate != "":
		w.count["late-success"].Add(1)
		w.count["upi-approved"].Add(1)
	case approve:
		w.count["upi-approved"].Add(1)
	default:
		w.count["upi-declined"].Add(1)
	}
}

// drainOnce runs every pending River job once, as the workers would (the
// stack's own workers are off, so the test decides when work happens),
// and reports how many finished. A job that fails stays for the next pass,
// as River would retry it.
func (w *world) drainOnce() (done, left int) { return w.drain(500 * time.Millisecond) }

// drain runs each pending job once with timeout per job.
func (w *world) drain(timeout time.Duration) (done, left int) {
	ctx := w.ctx
	rows, err := w.s.Pool.Query(ctx, `SELECT id, kind, args FROM river_job
		WHERE state NOT IN ('completed', 'cancelled', 'discarded') ORDER BY id`)
	if err != nil {
		w.t.Errorf("jobs: %v", err)
		return 0, 0
	}
	type job struct {
		id   int64
		kind string
		args []byte
	}
	var jobs []job
	for rows.Next() {
		var j job
		if err := rows.Scan(&j.id, &j.kind, &j.args); err != nil {
			rows.Close()
			w.t.Errorf("jobs: %v", err)
			return 0, 0
		}
		jobs = append(jobs, j)
	}
	rows.Close()
	for _, j := range jobs {
		finished, err := w.runJob(j.kind, j.args, timeout)
		if err != nil {
			w.note("job %s %s: %v", j.kind, j.args, err)
		}
		if !finished {
			left++
			continue
		}
		done++
		if _, err := w.s.Pool.Exec(ctx, `DELETE FROM river_job WHERE id = $1`, j.id); err != nil {
			w.t.Errorf("job %d: %v", j.id, err)
		}
	}
	return done, left
}

func (w *world) runJob(kind string, raw []byte, timeout time.Duration) (bool, error) {
	// A hung core costs a job its timeout, as River's job timeout would.
	ctx, cancel := context.WithTimeout(w.ctx, timeout)
	defer cancel()
	var args struct {
		HoldID    uuid.UUID `json:"hold_id"`
		BookingID int64     `json:"booking_id"`
		RefundID  uuid.UUID `json:"refund_id"`
		PaymentID uuid.UUID `json:"payment_id"`
		booking.CoreSyncGroupArgs
		booking.SeatSyncGroupArgs
	}
	if err := json.Unmarshal(raw, &args); err != nil {
		return false, err
	}
	var again time.Duration
	var err error
	switch kind {
	case booking.ExpireHoldArgs{}.Kind():
		again, err = w.s.Service.ExpireHold(ctx, args.HoldID)
	case booking.ExpireHoldGroupArgs{}.Kind():
		var group booking.ExpireHoldGroupArgs
		if err := json.Unmarshal(raw, &group); err != nil {
			return false, err
		}
		err = w.s.Service.ExpireHolds(ctx, group.Holds)
	case booking.SeatSyncArgs{}.Kind():
		err = w.s.Service.SyncSeat(ctx, args.HoldID)
	case booking.SweepArgs{}.Kind():
		_, err = w.s.Service.Sweep(ctx)
	case booking.CoreSyncArgs{}.Kind():
		err = w.s.Service.SyncToCore(ctx, args.BookingID)
	case booking.SeatSyncGroupArgs{}.Kind():
		err = w.s.Service.SyncSeats(ctx, args.Holds)
	case booking.CoreSyncGroupArgs{}.Kind():
		err = w.s.Service.SyncGroupToCore(ctx, args.Bookings)
	case payment.RefundArgs{}.Kind():
		again, err = w.s.Payments.ExecuteRefund(ctx, args.RefundID)
	case payment.InquiryArgs{}.Kind():
		again, err = w.s.Payments.Inquire(ctx, args.PaymentID)
	case payment.LateSuccessArgs{}.Kind():
		err = w.s.Payments.ResolveLateSuccess(ctx, args.PaymentID)
	default:
		return true, nil // nothing of the seats or the money
	}
	return err == nil && again <= 0, err
}

// settle lifts the faults and lets the jobs and the sweeper bring
// everything in line, as time would.
func (w *world) settle(n int) {
	w.redis.set(0)
	w.s.SetCoreFaults(w.t, prs.Faults{})
	// Faults are off: a job gets River's patience, and the settling ends
	// only after two passes in a row that finish nothing (a slow machine
	// must not pass for a stuck job).
	idle := 0
	for pass := 0; pass < 30; pass++ {
		if _, err := w.s.Service.Sweep(w.ctx); err != nil {
			w.note("sweep: %v", err)
		}
		done, _ := w.drain(5 * time.Second)
		if done > 0 {
			idle = 0
		} else if idle++; idle >= 2 {
			return
		}
	}
	w.note("round %d: jobs still finishing after 20 passes", n)
}

// finish ends every open payment and live hold, so the last check can
// demand that every payment is resolved.
func (w *world) finish(n int) {
	w.redis.set(0)
	for {
		w.mu.Lock()
		open := len(w.upi)
		w.mu.Unlock()
		if open == 0 {
			break
		}
		w.decide(0, false)
	}
	if _, err := w.s.Pool.Exec(w.ctx, `UPDATE holds SET expires_at = now() - interval '1 second' WHERE state = 'HELD'`); err != nil {
		w.t.Fatal(err)
	}
	// Payments whose page was never reached (a create that failed) are
	// found out by the inquiry; give it the time it asks for.
	if _, err := w.s.Pool.Exec(w.ctx, `UPDATE river_job SET scheduled_at = now() WHERE state NOT IN ('completed', 'cancelled', 'discarded')`); err != nil {
		w.t.Fatal(err)
	}
	w.settle(n)
	// Gateway refunds take the bank a moment: ask again until they land.
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		var pending int
		if err := w.s.Pool.QueryRow(w.ctx, `SELECT count(*) FROM refunds WHERE state = 'PENDING'`).Scan(&pending); err != nil {
			w.t.Fatal(err)
		}
		if pending == 0 {
			return
		}
		time.Sleep(300 * time.Millisecond)
		w.drainOnce()
	}
}

// check asserts the invariants after a settled round. final also demands
// that no payment or refund is still open.
func (w *world) check(n int, final bool) {
	t, ctx := w.t, w.ctx
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("round %d: %s\nsteps:\n  %s", n, fmt.Sprintf(format, args...), strings.Join(w.trace, "\n  "))
	}
	// Seats: Redis and PostgreSQL agree; no berth sold twice or lost.
	rep, err := inventory.Check(ctx, w.s.Pool, w.s.Store, w.shardID, w.s.Service.Rules().HoldWindow)
	if err != nil {
		fail("check: %v", err)
	}
	if !rep.OK() {
		fail("seats disagree:\n%s", rep)
	}
	// The core: every ticket we hold confirmed, nothing else.
	coreBookings, err := w.core.Export(ctx, w.date)
	if err != nil {
		fail("core export: %v", err)
	}
	atCore := map[string]string{}
	for _, b := range coreBookings {
		atCore[b.PNR] = b.State
	}
	type bookingRow struct {
		PNR, Status, State string
		HoldID             uuid.UUID
		Reason             string
	}
	rows, err := w.s.Pool.Query(ctx, `SELECT pnr, status, prs_state, hold_id, cancel_reason FROM bookings WHERE shard_id = $1`, w.shardID)
	if err != nil {
		fail("bookings: %v", err)
	}
	// Collected first: a failure must not leave a connection checked out.
	bookings, err := pgx.CollectRows(rows, pgx.RowToStructByPos[bookingRow])
	if err != nil {
		fail("bookings: %v", err)
	}
	ours := map[string]bool{}
	for _, b := range bookings {
		ours[b.PNR] = true
		switch {
		case b.Status == booking.BookingConfirmed && (b.State != "SYNCED" || atCore[b.PNR] != prs.StatusConfirmed):
			fail("ticket %s is %s/%s here and %q at the core", b.PNR, b.Status, b.State, atCore[b.PNR])
		case b.Status == booking.BookingCancelled && atCore[b.PNR] != "" && atCore[b.PNR] != prs.StateCancelled:
			fail("cancelled booking %s (%s) is still %s at the core", b.PNR, b.Reason, atCore[b.PNR])
		case b.Status == booking.BookingCancelled && !w.cancelled[b.HoldID]:
			fail("booking %s of hold %s was cancelled though no passenger cancelled it: %s", b.PNR, b.HoldID, b.Reason)
		}
	}
	for pnr, state := range atCore {
		if !ours[pnr] && state != prs.StateCancelled {
			fail("the core holds %s (%s), which we never booked", pnr, state)
		}
	}
	// Money: every captured payment is a ticket or a full refund, one
	// ticket per hold; the wallet ledger adds up.
	type paymentRow struct {
		ID                    uuid.UUID
		State, Method         string
		Amount                int64
		HoldID                uuid.UUID
		Booking               string
		Refunded, PendingRefs int64
	}
	rows, err = w.s.Pool.Query(ctx, `SELECT p.id, p.state, p.method, p.amount_paise, p.hold_id, coalesce(b.status, ''),
			coalesce((SELECT sum(r.amount_paise) FROM refunds r WHERE r.payment_id = p.id), 0)::bigint,
			(SELECT count(*) FROM refunds r WHERE r.payment_id = p.id AND r.state = 'PENDING')
		FROM payments p JOIN holds h ON h.id = p.hold_id LEFT JOIN bookings b ON b.hold_id = p.hold_id
		WHERE h.shard_id = $1 ORDER BY p.hold_id, p.resolved_at NULLS LAST, p.id`, w.shardID)
	if err != nil {
		fail("payments: %v", err)
	}
	payments, err := pgx.CollectRows(rows, pgx.RowToStructByPos[paymentRow])
	if err != nil {
		fail("payments: %v", err)
	}
	tickets := map[uuid.UUID]int{}
	for _, p := range payments {
		if p.PendingRefs > 0 && final {
			fail("payment %s has a refund still pending", p.ID)
		}
		switch p.State {
		case payment.Success, payment.Refunded:
			switch {
			case p.Refunded == p.Amount:
			case p.Refunded == 0 && p.Booking != "":
				tickets[p.HoldID]++
				if tickets[p.HoldID] > 1 {
					fail("hold %s was paid for twice (payment %s) and only one charge refunded", p.HoldID, p.ID)
				}
			default:
				fail("%s payment %s of %d paise (%s) is neither a ticket (booking %q) nor a full refund (%d refunded)",
					p.Method, p.ID, p.Amount, p.State, p.Booking, p.Refunded)
			}
		case payment.Failed:
			if p.Refunded != 0 {
				fail("failed payment %s was refunded %d", p.ID, p.Refunded)
			}
		default:
			if final {
				fail("%s payment %s still %s at the end", p.Method, p.ID, p.State)
			}
		}
	}
	var orphans int
	if err := w.s.Pool.QueryRow(ctx, `SELECT count(*) FROM bookings b WHERE b.shard_id = $1
		AND NOT EXISTS (SELECT 1 FROM payments p WHERE p.hold_id = b.hold_id AND p.state IN ('SUCCESS', 'REFUNDED'))`, w.shardID).
		Scan(&orphans); err != nil {
		fail("bookings: %v", err)
	}
	if orphans > 0 {
		fail("%d bookings without a captured payment", orphans)
	}
	if bad, err := payment.CheckLedger(ctx, w.s.Pool); err != nil || len(bad) > 0 {
		fail("wallet ledger: %v %v", bad, err)
	}
}

// luaFaults makes a share of this test's Lua calls fail before they reach
// Redis, as a network would.
type luaFaults struct {
	mu   sync.Mutex
	rate float64
	rng  *rand.Rand
}

var errLuaInjected = errors.New("injected Redis failure")

func (f *luaFaults) set(rate float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rate = rate
}

// roll says whether to fail this call, and whether to run it first.
func (f *luaFaults) roll() (fail, runFirst bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rate == 0 || f.rng.Float64() >= f.rate {
		return false, false
	}
	// Never a lost answer: a HOLD that ran but whose answer was lost keeps
	// its berths in Redis until the hold's expiry (minutes), when the
	// sweeper frees it as an orphan; this test settles in seconds.
	return true, false
}

func (f *luaFaults) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *luaFaults) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name != "evalsha" && name != "eval" {
			return next(ctx, cmd)
		}
		fail, runFirst := f.roll()
		if !fail {
			return next(ctx, cmd)
		}
		if runFirst {
			next(ctx, cmd) //nolint:errcheck // its answer is what gets lost
		}
		cmd.SetErr(errLuaInjected)
		return errLuaInjected
	}
}

func (f *luaFaults) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
