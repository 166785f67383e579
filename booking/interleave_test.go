package booking_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
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
	"github.com/riverqueue/river"

	"tatkal/booking"
	"tatkal/booking/fraud/review"
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/teststack"
	"tatkal/booking/payment"
	"tatkal/booking/payment/pspapi"
	"tatkal/booking/prs"
	"tatkal/booking/sim/pspsim"
	"tatkal/recon"
)

// TestRandomInterleavings drives passengers, the deferred work and the back
// office against small shards at once, round after round: holds and their
// replays, waitlist offers and their payment, wallet payments, UPI payments
// approved or declined (late, after their hold lapsed, too), hold and
// booking cancels and the waitlist promotions they queue (run early, on
// time or held back late, with the sweeper in between), expiries, charting
// and the chart's delivery to the core, fraud decisions enforced (bookings
// cancelled, accounts banned) and appealed, reconciliation runs on the
// gateways' settlement files and the core's export with their automatic
// resolutions, with the core timing out, failing, down or rejecting
// bookings, Redis scripts failing and Redis losing everything, and the
// answers to chosen transactions' COMMITs lost on the wire. Each round's
// steps run concurrently with a pass of the River jobs; then the jobs and
// the sweeper settle it, and check asserts what must hold (see check).
//
// TATKAL_INTERLEAVE_SEED replays a run's choices (the timing is the
// machine's); TATKAL_INTERLEAVE_ROUNDS sets the number of rounds, and
// TATKAL_INTERLEAVE_SECONDS a time to go on for at least, for a long local
// run; TATKAL_INTERLEAVE_KEEP_GOING=1 reports each kind of broken
// invariant once and goes on, instead of stopping at the first, to survey
// what a seed finds.
func TestRandomInterleavings(t *testing.T) {
	t.Parallel()
	rounds := 110
	if testing.Short() {
		rounds = 15
	}
	if v, err := strconv.Atoi(os.Getenv("TATKAL_INTERLEAVE_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	var atLeast time.Duration
	if v, err := strconv.Atoi(os.Getenv("TATKAL_INTERLEAVE_SECONDS")); err == nil && v > 0 {
		atLeast = time.Duration(v) * time.Second
	}
	seedN := time.Now().UnixNano()
	if v, err := strconv.ParseInt(os.Getenv("TATKAL_INTERLEAVE_SEED"), 10, 64); err == nil {
		seedN = v
	}
	t.Logf("seed %d (TATKAL_INTERLEAVE_SEED=%d replays it), %d rounds", seedN, seedN, rounds)
	w := newWorld(t, seedN)
	w.seed = seedN
	w.keepGoing = os.Getenv("TATKAL_INTERLEAVE_KEEP_GOING") == "1"
	start := time.Now()
	round := 0
	// The rarest paths (an approval after its hold lapsed, a promotion
	// held back) need luck: the run goes on, up to half as many rounds
	// again, until each has happened.
	for ; round < rounds || time.Since(start) < atLeast || (!testing.Short() && len(w.unexercised()) > 0 && round < rounds*3/2); round++ {
		w.steer = round >= rounds
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

// unexercised names the steps and outcomes the coverage check wants that
// have not happened yet.
func (w *world) unexercised() []string {
	var missing []string
	for _, k := range []string{"held", "wallet-paid", "upi-approved", "hold-cancelled", "booking-cancelled", "expired", "late-success",
		"core-fault", "redis-fault", "waitlist-offered", "waitlist-paid", "promoted", "promotion-late", "charted", "chart-sent",
		"core-rejected", "fraud-enforced", "fraud-cancelled", "banned", "appeal-upheld", "recon-run", "recon-resolved", "commit-lost"} {
		if w.count[k].Load() == 0 {
			missing = append(missing, k)
		}
	}
	return missing
}

// passengerPaths are the paths only passengers' own steps reach: a run
// whose accounts the fraud steps banned early may never reach them.
var passengerPaths = []string{"held", "waitlist-offered", "waitlist-paid", "promoted", "promotion-late", "booking-cancelled", "fraud-cancelled"}

func (w *world) passengersMissing() bool {
	return slices.ContainsFunc(w.unexercised(), func(k string) bool { return slices.Contains(passengerPaths, k) })
}

// replaceBanned gives each banned passenger's place to a new account when
// at least atLeast are banned, so that bans (and appeals yet to come) do
// not keep the run from the passengers' paths. The banned stay in the
// database, for the checks and for appeals.
func (w *world) replaceBanned(n, atLeast int) {
	rows, err := w.s.Pool.Query(w.ctx, `SELECT id FROM users WHERE id = ANY($1) AND banned_at IS NOT NULL`, w.users)
	var banned []int64
	if err == nil {
		banned, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	}
	if err != nil {
		w.t.Fatalf("banned passengers: %v", err)
	}
	if len(banned) == 0 || len(banned) < atLeast {
		return
	}
	fresh, err := seed.Users(w.ctx, w.s.Pool, seed.UsersSpec{Count: len(banned), Prefix: fmt.Sprintf("il%dr", n), PasswordHash: "x", WalletRupees: 1_000_000})
	if err != nil {
		w.t.Fatal(err)
	}
	for i, id := range banned {
		w.users[slices.Index(w.users, id)] = fresh[i]
	}
	w.note("banned passengers %v replaced by %v", banned, fresh)
}

// Shape of the world: shards small enough to sell out within a round or
// two, so that waitlists form and promotions find someone.
const (
	worldBerths   = 3
	worldWaitlist = 4
	// chartAge is how many rounds a shard is open before it may be charted.
	chartAge = 6
	// waveJobTimeout bounds a job run beside the steps: a hung core costs
	// each of its jobs that much, as River's job timeout would.
	waveJobTimeout = 300 * time.Millisecond
)

// world is one run: the stack, its faults and what the passengers did.
type world struct {
	t       *testing.T
	s       *teststack.Stack
	proxy   *pgProxy
	ctx     context.Context
	rng     *rand.Rand
	users   []int64
	core    *prs.Client
	redis   *luaFaults
	browser *http.Client
	// The back office: two fraud analysts, the enforcement batch, and
	// reconciliation on the stack's simulators.
	review   *review.Service
	enforcer *review.Enforcer
	analysts [4]int64
	// steer: the planned rounds are done and paths are still unexercised;
	// the faults lean towards them.
	steer     bool
	recon     *recon.Service
	sources   recon.Sources
	seed      int64
	keepGoing bool
	// promoting counts promotions (and charts, which promote first) under
	// way; promotionGen counts those begun: a hold that saw neither change
	// ran with no promotion beside it.
	promoting, promotionGen atomic.Int64
	deadlocks               int64 // PostgreSQL's count already reported

	mu        sync.Mutex
	shards    []worldShard             // in opening order; the last is the one on sale
	keys      map[int64][]string       // hold idempotency keys per user
	upi       map[uuid.UUID]string     // open UPI payments: their approval page
	cancelled map[uuid.UUID]bool       // holds whose booking a passenger cancelled
	tried     map[int64]time.Time      // shard: when its last promotion ended
	lateJobs  map[int64]bool           // promotion jobs held back by a pass
	trace     []string                 // this round's steps, for the failure report
	before    []string                 // and the round's before
	count     map[string]*atomic.Int64 // what happened, for the coverage check
	tally     map[string]int64         // and outcomes not known in advance
	broken    map[string]bool          // kinds of failure reported (keep-going mode)
	found     []violation              // broken invariants seen by the steps themselves
	journeys  [][2]string              // from, to
}

type worldShard struct {
	id   int64
	date time.Time
	born int // the round it opened in
}

// violation is an invariant a step saw broken, reported by the next check
// (a step runs on its own goroutine, which may not stop the test).
type violation struct{ kind, msg string }

func newWorld(t *testing.T, seedN int64) *world {
	var routes []pspapi.RouteConfig
	for _, rc := range pspsim.DefaultRoutes() {
		rc.LatencyP50Ms, rc.LatencyP99Ms, rc.AutoApproveMs = 2, 10, -1 // the customer decides on the page
		rc.TimeoutRate, rc.DeclineRate, rc.PendingRate, rc.LateSuccessRate, rc.DuplicateCallbackRate, rc.AbandonRate = 0, 0, 0, 0, 0.2, 0
		rc.LostCallbackRate = 0.4 // the inquiry job (or reconciliation) finds those out
		routes = append(routes, rc)
	}
	rules := booking.DefaultRules()
	rules.DailyCap = 1000 // the cap is not under test; the berths are
	// Through a proxy that can lose a chosen COMMIT's answer.
	s, proxy := proxiedStackWith(t, teststack.Options{Rules: &rules, Routes: routes, SweepGrace: time.Millisecond})
	ctx := context.Background()
	shardID, date := s.DemoShard(t, worldBerths, worldWaitlist)
	users, err := seed.Users(ctx, s.Pool, seed.UsersSpec{Count: 6, Prefix: "il", PasswordHash: "x", WalletRupees: 1_000_000})
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, s: s, proxy: proxy, ctx: ctx, rng: rand.New(rand.NewPCG(uint64(seedN), 0x1a7e)),
		users: users, core: prs.NewClient(s.Core.URL, s.CoreKey, nil),
		redis:   &luaFaults{rng: rand.New(rand.NewPCG(uint64(seedN), 0x4ed15))},
		browser: &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		shards:  []worldShard{{id: shardID, date: date}},
		keys:    map[int64][]string{}, upi: map[uuid.UUID]string{}, cancelled: map[uuid.UUID]bool{}, tried: map[int64]time.Time{}, lateJobs: map[int64]bool{},
		count: map[string]*atomic.Int64{}, tally: map[string]int64{}, broken: map[string]bool{},
		// The whole run twice as often: a berth it frees fits any waitlisted
		// journey, one of a part fits only some.
		journeys: [][2]string{{"MMCT", "NDLS"}, {"MMCT", "NDLS"}, {"MMCT", "BRC"}, {"BRC", "NDLS"}, {"ST", "KOTA"}},
	}
	for _, k := range []string{"held", "sold-out", "refused", "replayed", "wallet-paid", "upi-started", "upi-approved", "upi-declined",
		"hold-cancelled", "cancel-refused", "booking-cancelled", "expired", "late-success", "core-fault", "redis-fault", "redis-lost",
		"waitlist-offered", "waitlist-paid", "promoted", "promotion-early", "promotion-late", "sweep", "charted", "chart-sent",
		"chart-send-early", "core-rejected", "fraud-decided", "fraud-enforced", "fraud-cancelled", "banned", "appeal-filed",
		"appeal-upheld", "recon-run", "recon-auto", "recon-resolved", "resolve-twice", "commit-armed", "commit-lost", "in-review"} {
		w.count[k] = &atomic.Int64{}
	}
	for _, m := range lostCommits {
		w.count["commit-lost:"+m.name] = &atomic.Int64{}
	}
	w.backOffice()
	s.Redis.AddHook(w.redis)
	t.Cleanup(func() { w.redis.set(0) })
	if err := s.Pool.QueryRow(ctx, `SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`).Scan(&w.deadlocks); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w *world) note(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.trace = append(w.trace, fmt.Sprintf(format, args...))
}

// violate records an invariant a step saw broken.
func (w *world) violate(kind, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	w.note("BROKEN (%s): %s", kind, msg)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.found = append(w.found, violation{kind, msg})
}

// countKind counts an outcome not known in advance.
func (w *world) countKind(k string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.tally[k]++
}

func (w *world) counts() map[string]int64 {
	out := map[string]int64{}
	w.mu.Lock()
	defer w.mu.Unlock()
	maps.Copy(out, w.tally)
	for k, v := range w.count {
		if n := v.Load(); n > 0 {
			out[k] = n
		}
	}
	return out
}

// current is the shard on sale; shardIDs are every shard of the run.
func (w *world) current() worldShard {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.shards[len(w.shards)-1]
}

func (w *world) shardIDs() []int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := make([]int64, len(w.shards))
	for i, s := range w.shards {
		ids[i] = s.id
	}
	return ids
}

// openShard puts a new shard on sale (the next journey date) once the
// current one is charted or charting.
func (w *world) openShard(n int) {
	cur := w.current()
	var state string
	if err := w.s.Pool.QueryRow(w.ctx, `SELECT chart_state FROM inventory_shards WHERE id = $1`, cur.id).Scan(&state); err != nil {
		w.t.Fatalf("round %d: shard %d: %v", n, cur.id, err)
	}
	if state == "OPEN" {
		return
	}
	date := cur.date.AddDate(0, 0, 1)
	wl := worldWaitlist
	id, err := seed.Shard(w.ctx, w.s.Pool, seed.ShardSpec{Train: "12951", Date: date, Class: "3A", Berths: worldBerths,
		OpensAt: time.Now().Add(-time.Minute), WaitlistCap: &wl})
	if err != nil {
		w.t.Fatalf("round %d: open the next shard: %v", n, err)
	}
	if _, err := w.s.Service.Rebuild(w.ctx, id); err != nil {
		w.t.Fatalf("round %d: load shard %d: %v", n, id, err)
	}
	w.mu.Lock()
	w.shards = append(w.shards, worldShard{id: id, date: date, born: n})
	w.mu.Unlock()
	w.note("shard %d (%s) on sale", id, date.Format(time.DateOnly))
}

// round sets this round's faults and runs a few steps and a pass of the
// jobs, all at once.
func (w *world) round(n int) {
	w.mu.Lock()
	w.before, w.trace = append(w.before[:0], w.trace...), w.trace[:0]
	w.mu.Unlock()
	w.openShard(n)
	// Bans shut passengers out: once half of them are banned, or past the
	// planned rounds while a passengers' path is unmet, the banned give
	// their places to new accounts.
	if w.steer && w.passengersMissing() {
		w.replaceBanned(n, 1)
	} else {
		w.replaceBanned(n, len(w.users)/2)
	}
	faults := prs.Faults{}
	switch f := w.rng.IntN(12); {
	case f < 4: // the core does the work and the answer is lost
		faults.TimeoutRate = 0.6
	case f < 6:
		faults.FailRate = 0.5
	case f < 7:
		faults.Outage = true
	case f < 9: // the core refuses bookings for its own reasons
		faults.RejectRate = 0.4
	}
	if w.steer && slices.Contains(w.unexercised(), "core-rejected") {
		// Past the planned rounds, luck gets help: a run must meet every path.
		faults = prs.Faults{RejectRate: 0.6}
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
	// whose answer is lost, then a cancel, then the cancel's job), some
	// held back to the next pass (a job retried late).
	for wave := range 2 {
		steps := make([]func(), 0, 6)
		for i := range 1 + w.rng.IntN(4) {
			steps = append(steps, w.step(n, wave*10+i))
		}
		lost := w.pickLostCommit()
		during, after := w.passPlan(), w.passPlan()
		w.loseCommit(lost)
		var wg sync.WaitGroup
		for _, f := range steps {
			wg.Go(f)
		}
		wg.Go(func() { w.drain(waveJobTimeout, during) })
		wg.Wait()
		w.drain(waveJobTimeout, after)
		w.commitLost(lost)
	}
}

// step picks one action (its randomness drawn now, so a seed replays the
// same choices).
func (w *world) step(n, i int) func() {
	ctx := w.ctx
	user := w.users[w.rng.IntN(len(w.users))]
	op := w.rng.IntN(100)
	pick := w.rng.Int()
	j := w.journeys[w.rng.IntN(len(w.journeys))]
	shard := w.current()
	if op >= 81 && op < 85 && n-shard.born < chartAge {
		op = 0 // too young to chart: a hold instead
	}
	if w.steer && slices.ContainsFunc([]string{"waitlist-paid", "promoted", "promotion-late"}, func(k string) bool { return slices.Contains(w.unexercised(), k) }) {
		// Past the planned rounds, a promotion gets help: holds (waitlist
		// offers once sold out), wallet payments (of offers too) and
		// cancellations of tickets of the shard on sale, nothing that
		// charts it or bans its passengers.
		op = []int{0, 30, 30, 60}[op%4]
	}
	switch {
	case op < 24: // hold (a waitlist offer once the shard is sold out)
		key := fmt.Sprintf("il-%d-%d-%d", n, i, user)
		w.mu.Lock()
		w.keys[user] = append(w.keys[user], key)
		w.mu.Unlock()
		return func() { w.hold(user, key, shard, j) }
	case op < 27: // a retry of an earlier hold request answers what the hold is now
		return func() {
			w.mu.Lock()
			keys := slices.Clone(w.keys[user])
			w.mu.Unlock()
			if len(keys) == 0 {
				return
			}
			key := keys[pick%len(keys)]
			r, err := w.s.Service.Hold(ctx, teststack.Caller(user), w.holdReq(user, key, shard.date, j))
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
			if (r.Status == "HELD" || r.Status == "WAITLIST_OFFERED") && state != booking.HoldHeld && state != booking.HoldConfirmed {
				// CONFIRMED may commit between the answer and this read.
				w.violate("replay", "replay of %s answered %s for a hold that is %s", key, r.Status, state)
			}
		}
	case op < 38: // wallet payment, of a seat or a waitlist offer
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
	case op < 45: // UPI payment: the customer decides later
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
	case op < 54: // the customer approves (or declines) an open UPI payment, maybe after its hold lapsed
		approve := op < 52
		// Now and then the gateway's day is reconciled right after, while
		// the callback (lost, maybe) and the inquiry are on their way.
		then := approve && pick%3 == 0
		return func() {
			if gw := w.decide(pick, approve); then && gw != "" {
				w.reconcile(gw, shard.date)
			}
		}
	case op < 59: // cancel a hold
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
	case op < 69: // cancel a ticket: a confirmed one queues the waitlist's promotion
		return func() {
			// Mostly a confirmed ticket of the shard on sale, whose
			// cancellation queues the promotion of its waitlist; now and
			// then a waitlisted one, or one of a charted shard, which stays.
			shards, what := []int64{shard.id}, "SEAT"
			switch pick % 6 {
			case 1:
				shards = w.shardIDs()
				fallthrough
			case 3:
				what = "TICKET"
			}
			if pick%2 == 0 {
				pick = -1 // the newest ticket: its sync may still be in doubt
			}
			id, owner, ok := w.randomHoldOn(shards, pick, what)
			if !ok {
				return
			}
			// Recorded first: the cancellation may commit even if its
			// answer fails (a Redis error, or a COMMIT's answer lost).
			w.mu.Lock()
			w.cancelled[id] = true
			w.mu.Unlock()
			v, err := w.s.Service.CancelBooking(ctx, owner, id, nil)
			w.note("cancel booking %s: %s %v", id, v.BookingStat, err)
			if err == nil {
				w.count["booking-cancelled"].Add(1)
			} else {
				w.count["cancel-refused"].Add(1)
			}
		}
	case op < 75: // the hold window ends
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
	case op < 78: // a promotion runs early: beside the cancellation that queued it, or before its job
		return func() { w.promote(shard.id, "early") }
	case op < 81: // the sweeper's periodic pass, beside everything else
		return func() {
			rep, err := w.s.Service.Sweep(ctx)
			w.note("sweep: %+v %v", rep, err)
			w.count["sweep"].Add(1)
		}
	case op < 85: // the shard's chart is prepared, beside holds, payments and cancellations on it
		return func() { w.chart(shard.id) }
	case op < 87: // a chart is sent by hand, beside its job
		return func() { w.sendChart(pick) }
	case op < 90: // two analysts decide on a cluster of this shard's bookers; the batch may enforce it at once
		return w.fraudStep(n, i, shard.id, pick)
	case op < 95: // a member appeals an enforced decision, an analyst answers
		return func() { w.appeal(pick) }
	default: // reconciliation: a gateway's settlement file of the day, or the core's export, matched against ours
		gateways := w.sources.Gateways()
		gw := gateways[pick%len(gateways)]
		if pick%3 == 0 {
			gw = recon.Core
		}
		return func() { w.reconcile(gw, shard.date) }
	}
}

// hold asks for seats on shard as user, and checks that no berth kept for
// a queued promotion was handed out meanwhile.
func (w *world) hold(user int64, key string, shard worldShard, j [2]string) {
	// The freed berths of a cancellation that queued a promotion go back on
	// sale only through the promotion: before it runs, no hold may take
	// them. Checked only for a hold with no promotion beside it.
	quiet := w.promoting.Load() == 0
	gen := w.promotionGen.Load()
	kept := w.keptForPromotion(shard.id)
	r, err := w.s.Service.Hold(w.ctx, teststack.Caller(user), w.holdReq(user, key, shard.date, j))
	w.note("hold %s by %d on %d %s-%s: %s %v", key, user, shard.id, j[0], j[1], r.Status, err)
	switch {
	case err != nil:
		w.count["refused"].Add(1)
		w.countKind("refused:" + booking.ErrorReason(err))
		return
	case r.Status == "SOLD_OUT":
		w.count["sold-out"].Add(1)
		return
	case r.Status == "WAITLIST_OFFERED":
		w.count["waitlist-offered"].Add(1)
		return
	case r.Status == "HELD":
		w.count["held"].Add(1)
	}
	if r.Status != "HELD" || len(kept) == 0 || !quiet || w.promotionGen.Load() != gen {
		return
	}
	var taken []string
	rows, err := w.s.Pool.Query(w.ctx, `SELECT b.pnr || ' berth ' || p.berth_idx FROM holds h
		JOIN booking_passengers p ON p.shard_id = h.shard_id AND p.berth_idx = ANY(h.berths)
			AND int4range(p.from_seq, p.to_seq) && int4range(h.from_seq, h.to_seq)
		JOIN bookings b ON b.id = p.booking_id
		WHERE h.id = $1 AND h.state IN ('HELD', 'CONFIRMED') AND p.booking_id = ANY($2)`, r.HoldID, kept)
	if err == nil {
		taken, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil {
		w.t.Errorf("berths of hold %s: %v", r.HoldID, err)
		return
	}
	if len(taken) > 0 {
		w.violate("promotion-berth-sold", "(finding 4) hold %s (key %s) took %v, freed by a cancellation whose waitlist promotion was still queued: "+
			"a berth kept for the waitlist went on sale before the promotion ran", r.HoldID, key, taken)
	}
}

// keptForPromotion lists the cancelled bookings of shard whose berths wait
// for a queued promotion, begun after the last promotion of the shard
// ended (cancelled_at is when the cancellation's transaction began).
func (w *world) keptForPromotion(shardID int64) []int64 {
	w.mu.Lock()
	since := w.tried[shardID]
	w.mu.Unlock()
	rows, err := w.s.Pool.Query(w.ctx, `SELECT b.id FROM river_job j JOIN bookings b ON b.id = (j.args->>'cancelled')::bigint
		WHERE j.kind = 'tqwl_promote' AND (j.args->>'shard_id')::bigint = $1 AND j.state NOT IN ('completed', 'cancelled', 'discarded')
		AND b.status = 'CANCELLED' AND b.cancelled_at > $2`, shardID, since)
	if err != nil {
		w.t.Errorf("queued promotions: %v", err)
		return nil
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		w.t.Errorf("queued promotions: %v", err)
	}
	return ids
}

// promote runs a shard's waitlist promotion, as its job or early.
func (w *world) promote(shardID int64, how string) error {
	done, err := w.promoting1(shardID, func() ([]booking.Promoted, error) {
		ctx, cancel := context.WithTimeout(w.ctx, 5*time.Second)
		defer cancel()
		return w.s.Service.Promote(ctx, shardID)
	})
	w.note("promote shard %d (%s): %d promoted %v", shardID, how, len(done), err)
	if how == "early" {
		w.count["promotion-early"].Add(1)
	}
	return err
}

// promoting1 runs f, a promotion of shard (or a chart, which promotes
// first), counted for the hold check: from its end, every cancellation
// begun before may have been promoted (or its berths given back).
func (w *world) promoting1(shardID int64, f func() ([]booking.Promoted, error)) ([]booking.Promoted, error) {
	w.promoting.Add(1)
	w.promotionGen.Add(1)
	defer func() {
		w.mu.Lock()
		w.tried[shardID] = time.Now() // PostgreSQL's clock is this machine's
		w.mu.Unlock()
		w.promoting.Add(-1)
	}()
	return f()
}

func (w *world) holdReq(user int64, key string, date time.Time, j [2]string) booking.HoldRequest {
	return booking.HoldRequest{UserID: user, IdempotencyKey: key, Train: "12951", Date: date, Class: "3A", From: j[0], To: j[1],
		Passengers: []booking.Passenger{pax("Asha Verma", 30, "F")}}
}

// randomHold picks one of the run's holds in state, or with a ticket not
// cancelled for "TICKET" (a confirmed one for "SEAT"), on any shard
// (charted ones too).
func (w *world) randomHold(pick int, state string) (uuid.UUID, int64, bool) {
	return w.randomHoldOn(w.shardIDs(), pick, state)
}

func (w *world) randomHoldOn(shards []int64, pick int, state string) (uuid.UUID, int64, bool) {
	rows, err := w.s.Pool.Query(w.ctx, `SELECT h.id, h.user_id FROM holds h LEFT JOIN bookings b ON b.hold_id = h.id
		WHERE h.shard_id = ANY($1) AND (h.state = $2 OR ($2 = 'TICKET' AND b.status IN ('CONFIRMED', 'WAITLISTED'))
			OR ($2 = 'SEAT' AND b.status = 'CONFIRMED')) ORDER BY h.id`,
		shards, state)
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

// decide approves or declines one open UPI payment on the gateway's page,
// and says which gateway.
func (w *world) decide(pick int, approve bool) string {
	w.mu.Lock()
	var ids []uuid.UUID
	for id := range w.upi {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b uuid.UUID) int { return strings.Compare(a.String(), b.String()) })
	if len(ids) == 0 {
		w.mu.Unlock()
		return ""
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
	var hstate, gateway string
	w.s.Pool.QueryRow(w.ctx, `SELECT h.state, coalesce(p.psp, '') FROM payments p JOIN holds h ON h.id = p.hold_id WHERE p.id = $1`, id).
		Scan(&hstate, &gateway) //nolint:errcheck
	verb := "/decline"
	if approve {
		verb = "/approve"
	}
	resp, err := w.browser.Post(url+verb, "application/x-www-form-urlencoded", nil)
	if err != nil {
		w.note("upi %s %s: %v", id, verb, err)
		return gateway
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
	return gateway
}

// passPlan is how one pass of the jobs goes, drawn on the test's goroutine
// so that a seed replays it: whether the sweeper's periodic pass comes
// first, which kinds of job wait for a later pass (as River's backoff or a
// busy queue would have them), and whether a reconciliation resolution
// runs twice at once (a job retried while its first run still works).
type passPlan struct {
	sweep bool
	held  map[string]bool
	twice bool
}

// heldBack are the jobs a pass may hold back, with the chance of it:
// promotions (the sweeper and new holds meet the freed berths first),
// inquiries and late successes (a capture stays unheard of, or undone,
// until reconciliation finds it), chart deliveries (the chart waits while
// its bookings change) and resolutions.
var heldBack = []struct {
	kind   string
	chance float64
}{
	{booking.PromoteArgs{}.Kind(), 0.75}, {payment.InquiryArgs{}.Kind(), 0.5}, {payment.LateSuccessArgs{}.Kind(), 0.5},
	{booking.ChartSendArgs{}.Kind(), 0.3}, {recon.ResolveArgs{}.Kind(), 0.25},
}

func (w *world) passPlan() passPlan {
	p := passPlan{sweep: w.rng.IntN(4) == 0, held: map[string]bool{}, twice: w.rng.IntN(3) == 0}
	for _, k := range heldBack {
		p.held[k.kind] = w.rng.Float64() < k.chance
	}
	w.mu.Lock()
	heldBefore := len(w.lateJobs) > 0
	w.mu.Unlock()
	if w.steer && heldBefore && slices.Contains(w.unexercised(), "promotion-late") {
		// Past the planned rounds, a promotion held back runs now.
		p.held[booking.PromoteArgs{}.Kind()] = false
	}
	return p
}

// drain runs every pending River job once, as the workers would (the
// stack's own workers are off, so the test decides when work happens),
// each bounded by timeout, except the kinds plan holds back, and reports
// how many finished. A job that fails stays for the next pass, as River
// would retry it. The sweeper may pass first; the fraud batch enforces
// what is due last.
func (w *world) drain(timeout time.Duration, plan passPlan) (done, left int) {
	ctx := w.ctx
	if plan.sweep {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		rep, err := w.s.Service.Sweep(sctx)
		cancel()
		w.note("sweep: %+v %v", rep, err)
		w.count["sweep"].Add(1)
	}
	rows, err := w.s.Pool.Query(ctx, `SELECT id, kind, args, attempt FROM river_job
		WHERE state NOT IN ('completed', 'cancelled', 'discarded') ORDER BY id`)
	if err != nil {
		w.t.Errorf("jobs: %v", err)
		return 0, 0
	}
	type job struct {
		id      int64
		kind    string
		args    []byte
		attempt int
	}
	var jobs []job
	for rows.Next() {
		var j job
		if err := rows.Scan(&j.id, &j.kind, &j.args, &j.attempt); err != nil {
			rows.Close()
			w.t.Errorf("jobs: %v", err)
			return 0, 0
		}
		jobs = append(jobs, j)
	}
	rows.Close()
	for _, j := range jobs {
		if plan.held[j.kind] {
			if j.kind == (booking.PromoteArgs{}).Kind() {
				w.note("promotion job %d held back", j.id)
				w.mu.Lock()
				w.lateJobs[j.id] = true
				w.mu.Unlock()
			}
			left++
			continue
		}
		// River counts the attempts; so does this pass.
		if _, err := w.s.Pool.Exec(ctx, `UPDATE river_job SET attempt = attempt + 1 WHERE id = $1`, j.id); err != nil {
			w.t.Errorf("job %d: %v", j.id, err)
		}
		finished, err := w.runJob(j.id, j.kind, j.args, j.attempt+1, timeout, plan.twice)
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
	w.enforce("batch")
	return done, left
}

func (w *world) runJob(id int64, kind string, raw []byte, attempt int, timeout time.Duration, twice bool) (bool, error) {
	// A hung core costs a job its timeout, as River's job timeout would.
	ctx, cancel := context.WithTimeout(w.ctx, timeout)
	defer cancel()
	var args struct {
		HoldID      uuid.UUID `json:"hold_id"`
		BookingID   int64     `json:"booking_id"`
		RefundID    uuid.UUID `json:"refund_id"`
		PaymentID   uuid.UUID `json:"payment_id"`
		ShardID     int64     `json:"shard_id"`
		ExceptionID uuid.UUID `json:"exception_id"`
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
	case booking.PromoteArgs{}.Kind():
		w.mu.Lock()
		late := w.lateJobs[id]
		w.mu.Unlock()
		if late {
			w.count["promotion-late"].Add(1)
		}
		err = w.promote(args.ShardID, fmt.Sprintf("job %d", id))
	case booking.ChartArgs{}.Kind(), booking.ChartSendArgs{}.Kind():
		send := kind == booking.ChartSendArgs{}.Kind()
		_, err = w.promoting1(args.ShardID, func() ([]booking.Promoted, error) {
			return nil, w.s.Service.ChartJob(ctx, args.ShardID, send, attempt, booking.ChartMaxAttempts)
		})
		if _, cancelled := errors.AsType[*river.JobCancelError](err); cancelled {
			return true, err // given up: the shard says why, the check judges it
		}
	case recon.ResolveArgs{}.Kind():
		resolve := func() error { return w.recon.Resolve(ctx, args.ExceptionID, w.s.Payments, w.s.Service) }
		if !twice {
			err = resolve()
			break
		}
		w.count["resolve-twice"].Add(1)
		var wg sync.WaitGroup
		var second error
		wg.Go(func() { second = resolve() })
		first := resolve()
		wg.Wait()
		err = errors.Join(first, second)
	default:
		return true, nil // nothing of the seats or the money
	}
	return err == nil && again <= 0, err
}

// settle lifts the faults and lets the jobs and the sweeper bring
// everything in line, as time would.
//
// In a round whose Redis calls all went through, every job runs to its
// end before the sweeper does: by then Redis must agree with PostgreSQL
// (checkSeatsBeforeSweep), as the live path and its jobs keep them in step
// by themselves; the sweeper repairs only what a Redis fault left (a
// release or an undo that failed), and would hide a path that undid or
// forgot a Redis change after a transaction that did commit.
func (w *world) settle(n int) {
	faulty := w.redis.rate() > 0
	w.redis.set(0)
	w.s.SetCoreFaults(w.t, prs.Faults{})
	if !faulty {
		w.settlePasses(n, false)
		w.checkSeatsBeforeSweep()
	}
	w.settlePasses(n, true)
}

// settlePasses runs the jobs (the sweeper first, with sweep) with faults
// off: a job gets River's patience, and the settling ends only after two
// passes in a row that finish nothing (a slow machine must not pass for a
// stuck job).
func (w *world) settlePasses(n int, sweep bool) {
	idle := 0
	for pass := 0; pass < 30; pass++ {
		if sweep {
			if _, err := w.s.Service.Sweep(w.ctx); err != nil {
				w.note("sweep: %v", err)
			}
		}
		done, _ := w.drain(5*time.Second, passPlan{})
		if done > 0 {
			idle = 0
		} else if idle++; idle >= 2 {
			return
		}
	}
	w.note("round %d: jobs still finishing after 30 passes", n)
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
		w.drain(waveJobTimeout, passPlan{})
	}
}

// luaFaults makes a share of this test's Lua calls fail before they reach
// Redis, as a network would.
type luaFaults struct {
	mu      sync.Mutex
	failure float64
	rng     *rand.Rand
}

var errLuaInjected = errors.New("injected Redis failure")

func (f *luaFaults) set(rate float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failure = rate
}

func (f *luaFaults) rate() float64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failure
}

// roll says whether to fail this call, and whether to run it first.
func (f *luaFaults) roll() (fail, runFirst bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failure == 0 || f.rng.Float64() >= f.failure {
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
