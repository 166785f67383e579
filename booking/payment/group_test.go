package payment_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"tatkal/booking"
	"tatkal/booking/lab/teststack"
	"tatkal/booking/payment"
	"tatkal/booking/payment/pspapi"
)

// groupGate watches the confirmation groups (booking/payment/group.go)
// through their pause points: it counts queued confirmations and groups
// reaching COMMIT and, once armed, holds the first group before its COMMIT
// until released and runs atCommit, if set, before each later group's
// COMMIT. (A UPI payment's create answer is a confirmation group too, so
// the fixtures are made before arming.)
type groupGate struct {
	mu       sync.Mutex
	armed    bool
	queued   int
	groups   int
	paused   chan struct{} // closed when the first group waits before COMMIT
	release  chan struct{} // closed by the test to let it commit
	atCommit func(ctx context.Context, group int)
}

func newGroupGate() *groupGate {
	return &groupGate{paused: make(chan struct{}), release: make(chan struct{})}
}

func (g *groupGate) pause(ctx context.Context, point string) {
	switch point {
	case "confirm.queued":
		g.mu.Lock()
		g.queued++
		g.mu.Unlock()
	case "confirm.before-commit":
		g.mu.Lock()
		g.groups++
		n, at, armed, paused, release := g.groups, g.atCommit, g.armed, g.paused, g.release
		g.mu.Unlock()
		if !armed {
			return
		}
		if n == 1 {
			close(paused)
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		if at != nil {
			at(ctx, n)
		}
	}
}

// arm starts counting afresh and holding the first group; armed again,
// the gate has fresh paused and release channels (read them after arm).
func (g *groupGate) arm() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.armed {
		g.paused, g.release = make(chan struct{}), make(chan struct{})
	}
	g.armed, g.queued, g.groups = true, 0, 0
}

func (g *groupGate) counts() (queued, groups int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.queued, g.groups
}

// waitQueued waits until n confirmations have been queued in all.
func (g *groupGate) waitQueued(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if q, _ := g.counts(); q >= n {
			return
		}
		if time.Now().After(deadline) {
			q, _ := g.counts()
			t.Fatalf("%d confirmations queued, want %d", q, n)
		}
	}
}

// sentCallback is a webhook and the gateway that signs and sends it.
type sentCallback struct {
	gw string
	ev pspapi.Webhook
}

// inOneGroup holds a first group (user's wallet payment for first, under
// key) at its COMMIT until every callback of sends is queued, so that they
// are all written as the next group, and returns each callback's status.
func (w *world) inOneGroup(t *testing.T, gate *groupGate, user int64, first booking.HoldResult, key string, sends []sentCallback) []int {
	t.Helper()
	gate.arm()
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, err := w.s.Payments.Initiate(context.Background(), teststack.Caller(user),
			payment.InitiateRequest{HoldID: first.HoldID, Method: payment.Wallet, IdempotencyKey: key}); err != nil {
			t.Errorf("first group: %v", err)
		}
	})
	<-gate.paused
	codes := make([]int, len(sends))
	for i, s := range sends {
		wg.Go(func() { codes[i] = sendWebhook(t, w, s.gw, s.ev) })
	}
	gate.waitQueued(t, 1+len(sends))
	close(gate.release)
	wg.Wait()
	return codes
}

// awaiting makes a UPI payment for a fresh hold of user, left AWAITING_USER
// (the customer never answers), and returns the SUCCESS webhook its gateway
// would send.
func (w *world) awaiting(t *testing.T, user int64, key string) (payment.View, pspapi.Webhook) {
	t.Helper()
	h := w.hold(t, user, key+"-hold")
	v, err := w.pay(t, user, h.HoldID, payment.UPI, key)
	if err != nil || v.State != payment.AwaitingUser {
		t.Fatalf("upi pay: %+v %v", v, err)
	}
	return v, w.successHook(t, v, "evt-"+key)
}

// awaitingEach is awaiting for each of users, keyed prefix-0, prefix-1, ...
func (w *world) awaitingEach(t *testing.T, users []int64, prefix string) ([]payment.View, []pspapi.Webhook) {
	t.Helper()
	var views []payment.View
	var hooks []pspapi.Webhook
	for i, u := range users {
		v, ev := w.awaiting(t, u, fmt.Sprintf("%s-%d", prefix, i))
		views, hooks = append(views, v), append(hooks, ev)
	}
	return views, hooks
}

// successHook is the SUCCESS webhook v's gateway would send, as eventID.
func (w *world) successHook(t *testing.T, v payment.View, eventID string) pspapi.Webhook {
	t.Helper()
	var pspRef string
	if err := w.s.Pool.QueryRow(context.Background(), `SELECT psp_ref FROM payments WHERE id = $1`, v.ID).Scan(&pspRef); err != nil {
		t.Fatal(err)
	}
	return pspapi.Webhook{EventID: eventID, PSPRef: pspRef, MerchantRef: v.ID.String(), Gateway: v.Gateway, Method: "UPI",
		Status: pspapi.StatusSuccess, AmountPaise: v.AmountPaise, BankEventTime: time.Now()}
}

// givenUp makes a UPI payment for a fresh hold of user, marks it FAILED as
// if given up on, and pays the hold again (AWAITING_USER): both payments,
// with the SUCCESS webhooks their gateway would send.
func (w *world) givenUp(t *testing.T, user int64, key string) (given payment.View, givenHook pspapi.Webhook, again payment.View, againHook pspapi.Webhook) {
	t.Helper()
	given, givenHook = w.awaiting(t, user, key)
	if _, err := w.s.Pool.Exec(context.Background(), `UPDATE payments SET state = 'FAILED', resolved_at = now() WHERE id = $1`, given.ID); err != nil {
		t.Fatal(err)
	}
	again, err := w.pay(t, user, given.HoldID, payment.UPI, key+"-again")
	if err != nil || again.State != payment.AwaitingUser {
		t.Fatalf("second payment: %+v %v", again, err)
	}
	return given, givenHook, again, w.successHook(t, again, "evt-"+key+"-again")
}

// noAnswer: routes whose customer never approves, so a UPI payment waits
// for the webhook the test sends.
var noAnswer = func(rc *pspapi.RouteConfig) { rc.AutoApproveMs = -1 }

// Wallet payments and signed callbacks confirming at once share
// transactions, and every one ends as it would alone: CONFIRMED, one
// booking and one PNR per hold, one debit per wallet payment, the ledger
// balanced.
func TestConcurrentConfirmationsShareTransactions(t *testing.T) {
	t.Parallel()
	const n = 120 // of each kind
	gate := newGroupGate()
	w := newWorld(t, teststack.Options{Routes: fastRoutes(noAnswer), Pause: gate.pause, ConfirmWriters: 16}, 2*n+8, 2*n)
	ctx := context.Background()
	holds := make([]uuid.UUID, n)
	hooks := make([]pspapi.Webhook, n)
	for i := range n {
		holds[i] = w.hold(t, w.users[i], fmt.Sprintf("group-wallet-hold-%d", i)).HoldID
		_, hooks[i] = w.awaiting(t, w.users[n+i], fmt.Sprintf("group-cb-pay-%d", i))
	}
	q0, g0 := gate.counts()
	var wg sync.WaitGroup
	errs := make([]error, 2*n)
	for i := range n {
		wg.Go(func() {
			v, err := w.s.Payments.Initiate(ctx, teststack.Caller(w.users[i]),
				payment.InitiateRequest{HoldID: holds[i], Method: payment.Wallet, IdempotencyKey: fmt.Sprintf("group-wallet-pay-%d", i)})
			if err == nil && v.State != payment.Success {
				err = fmt.Errorf("wallet payment %s", v.State)
			}
			errs[i] = err
		})
		wg.Go(func() {
			if code := sendWebhook(t, w, hooks[i].Gateway, hooks[i]); code != 200 && code != 204 {
				errs[n+i] = fmt.Errorf("callback answered %d", code)
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("confirmation %d: %v", i, err)
		}
	}
	q, g := gate.counts()
	q, g = q-q0, g-g0
	t.Logf("%d confirmations in %d groups", q, g)
	if q != 2*n || g >= q {
		t.Errorf("%d confirmations queued in %d groups: want %d sharing transactions", q, g, 2*n)
	}
	var holdsOK, bookings, pnrs, succeeded, debits int
	if err := w.s.Pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM holds WHERE state = 'CONFIRMED'),
		(SELECT count(*) FROM bookings),
		(SELECT count(DISTINCT pnr) FROM bookings),
		(SELECT count(*) FROM payments WHERE state = 'SUCCESS'),
		(SELECT count(*) FROM wallet_entries WHERE kind = 'DEBIT')`).Scan(&holdsOK, &bookings, &pnrs, &succeeded, &debits); err != nil {
		t.Fatal(err)
	}
	if holdsOK != 2*n || bookings != 2*n || pnrs != 2*n || succeeded != 2*n || debits != n {
		t.Errorf("%d holds CONFIRMED, %d bookings, %d PNRs, %d payments SUCCESS, %d debits; want %d, %d, %d, %d, %d",
			holdsOK, bookings, pnrs, succeeded, debits, 2*n, 2*n, 2*n, 2*n, n)
	}
	w.checkMoney(t)
}

// One failing confirmation in a group undoes only itself: a wallet payment
// for a lapsed hold is refused HOLD_EXPIRED in its savepoint and the group
// commits the rest. A wallet payment whose berth a confirmation earlier in
// the same group has just taken fails only when the group's holds are
// confirmed together (the exclusion constraint, after its debit was
// written): the group is rolled back whole and its bodies run alone, where
// that one is refused by itself. Either way each is told its own answer,
// the refused leave no trace, and a wallet payment and a callback commit.
func TestFailingConfirmationUndoesOnlyItself(t *testing.T) {
	t.Parallel()
	for _, clashing := range []bool{false, true} {
		t.Run(fmt.Sprintf("clashing=%v", clashing), func(t *testing.T) {
			t.Parallel()
			failingConfirmation(t, clashing)
		})
	}
}

func failingConfirmation(t *testing.T, clashing bool) {
	gate := newGroupGate()
	w := newWorld(t, teststack.Options{Routes: fastRoutes(noAnswer), Pause: gate.pause, ConfirmWriters: 1}, 16, 8)
	ctx := context.Background()
	// One writer: the first group (user 5's payment) waits before its COMMIT
	// while the others queue, so they form the next group together.
	first := w.hold(t, w.users[5], "group-first-hold")
	taker := w.hold(t, w.users[0], "group-taker-hold")
	clash := w.hold(t, w.users[1], "group-clash-hold") // after taker's: sorted after it in the group
	lapsed := w.hold(t, w.users[2], "group-lapsed-hold")
	good := w.hold(t, w.users[3], "group-good-hold")
	cbView, hook := w.awaiting(t, w.users[4], "group-cb-pay")
	if clashing {
		if _, err := w.s.Pool.Exec(ctx, `UPDATE holds SET berths = (SELECT berths FROM holds WHERE id = $1) WHERE id = $2`,
			taker.HoldID, clash.HoldID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.s.Pool.Exec(ctx, `UPDATE holds SET expires_at = now() - interval '1 second' WHERE id = $1`, lapsed.HoldID); err != nil {
		t.Fatal(err)
	}
	pay := func(i int, h uuid.UUID) (payment.View, error) {
		return w.s.Payments.Initiate(ctx, teststack.Caller(w.users[i]),
			payment.InitiateRequest{HoldID: h, Method: payment.Wallet, IdempotencyKey: fmt.Sprintf("wallet-pay-%d", i)})
	}
	gate.arm()
	var wg sync.WaitGroup
	var firstErr error
	wg.Go(func() { _, firstErr = pay(5, first.HoldID) })
	<-gate.paused
	views := make([]payment.View, 4)
	errs := make([]error, 4)
	for i, h := range []uuid.UUID{taker.HoldID, clash.HoldID, lapsed.HoldID, good.HoldID} {
		wg.Go(func() { views[i], errs[i] = pay(i, h) })
	}
	var cbCode int
	wg.Go(func() { cbCode = sendWebhook(t, w, hook.Gateway, hook) })
	gate.waitQueued(t, 6)
	close(gate.release)
	wg.Wait()
	// The second group commits, or (clashing) is rolled back before its
	// COMMIT and its bodies commit alone.
	if _, groups := gate.counts(); groups != map[bool]int{false: 2, true: 1}[clashing] {
		t.Errorf("%d groups reached their COMMIT for the first confirmation and five queued behind it (clashing %v)", groups, clashing)
	}
	if firstErr != nil {
		t.Errorf("first group: %v", firstErr)
	}
	// Clashing, taker and clash want one berth: alone, whichever commits
	// first has it, and the other is refused by the exclusion constraint.
	winner, loser := 0, 1
	if clashing && errs[0] != nil {
		winner, loser = 1, 0
	}
	names := []string{"taker", "clash"}
	if errs[winner] != nil || views[winner].State != payment.Success {
		t.Errorf("%s: %+v %v", names[winner], views[winner], errs[winner])
	}
	if pgErr := (*pgconn.PgError)(nil); clashing && (!errors.As(errs[loser], &pgErr) || pgErr.Code != "23P01") {
		t.Errorf("%s: %+v %v; want the exclusion constraint's refusal", names[loser], views[loser], errs[loser])
	}
	if !clashing && (errs[loser] != nil || views[loser].State != payment.Success) {
		t.Errorf("%s, its own berths: %+v %v", names[loser], views[loser], errs[loser])
	}
	if r := booking.ErrorReason(errs[2]); r != "HOLD_EXPIRED" {
		t.Errorf("lapsed: %+v %v; want HOLD_EXPIRED", views[2], errs[2])
	}
	if errs[3] != nil || views[3].State != payment.Success {
		t.Errorf("good: %+v %v", views[3], errs[3])
	}
	if cbCode != 200 && cbCode != 204 {
		t.Errorf("callback answered %d", cbCode)
	}
	state := func(h uuid.UUID) (hold string, payments, debits int) {
		t.Helper()
		if err := w.s.Pool.QueryRow(ctx, `SELECT h.state, (SELECT count(*) FROM payments p WHERE p.hold_id = h.id),
			(SELECT count(*) FROM wallet_entries e WHERE e.user_id = h.user_id AND e.kind = 'DEBIT')
			FROM holds h WHERE h.id = $1`, h).Scan(&hold, &payments, &debits); err != nil {
			t.Fatal(err)
		}
		return hold, payments, debits
	}
	for _, c := range []struct {
		name             string
		hold             uuid.UUID
		state            string
		payments, debits int
	}{
		{"first", first.HoldID, booking.HoldConfirmed, 1, 1},
		{names[winner], []uuid.UUID{taker.HoldID, clash.HoldID}[winner], booking.HoldConfirmed, 1, 1},
		{names[loser], []uuid.UUID{taker.HoldID, clash.HoldID}[loser], map[bool]string{false: booking.HoldConfirmed, true: booking.HoldHeld}[clashing],
			map[bool]int{false: 1, true: 0}[clashing], map[bool]int{false: 1, true: 0}[clashing]},
		{"lapsed", lapsed.HoldID, booking.HoldHeld, 0, 0},
		{"good", good.HoldID, booking.HoldConfirmed, 1, 1},
		{"callback", cbView.HoldID, booking.HoldConfirmed, 1, 0},
	} {
		if s, p, d := state(c.hold); s != c.state || p != c.payments || d != c.debits {
			t.Errorf("%s: hold %s with %d payments and %d debits; want %s, %d, %d", c.name, s, p, d, c.state, c.payments, c.debits)
		}
	}
	if clashing {
		// The refused payment tried again: its hold failed a joint
		// confirmation lately, so its body runs alone rather than sink
		// another group, which commits the others.
		second, other := w.hold(t, w.users[6], "group-second-hold"), w.hold(t, w.users[7], "group-other-hold")
		gate.arm()
		var firstErr, againErr, otherErr error
		var againView payment.View
		wg.Go(func() { _, firstErr = pay(6, second.HoldID) })
		<-gate.paused
		wg.Go(func() {
			againView, againErr = w.s.Payments.Initiate(ctx, teststack.Caller(w.users[loser]),
				payment.InitiateRequest{HoldID: []uuid.UUID{taker.HoldID, clash.HoldID}[loser], Method: payment.Wallet, IdempotencyKey: "wallet-again"})
		})
		wg.Go(func() { _, otherErr = pay(7, other.HoldID) })
		gate.waitQueued(t, 3)
		close(gate.release)
		wg.Wait()
		if _, groups := gate.counts(); groups != 2 {
			t.Errorf("%d groups reached their COMMIT with the refused payment's retry in the second; want 2", groups)
		}
		if pgErr := (*pgconn.PgError)(nil); !errors.As(againErr, &pgErr) || pgErr.Code != "23P01" {
			t.Errorf("retry of %s: %+v %v; want the exclusion constraint's refusal", names[loser], againView, againErr)
		}
		if firstErr != nil || otherErr != nil {
			t.Errorf("the payments beside the retry: %v, %v", firstErr, otherErr)
		}
	}
	if bad, err := payment.CheckLedger(ctx, w.s.Pool); err != nil || len(bad) > 0 {
		t.Errorf("ledger: %v %v", bad, err)
	}
}

// A group whose COMMIT fails (its connection killed just before) tells
// every caller in it the failure, and nothing of it is durable: the wallet
// payments' retries and the gateway's repeated callback then confirm once.
func TestFailedGroupCommitTellsEveryCaller(t *testing.T) {
	t.Parallel()
	gate := newGroupGate()
	w := newWorld(t, teststack.Options{Routes: fastRoutes(noAnswer), Pause: gate.pause, ConfirmWriters: 1}, 16, 4)
	ctx := context.Background()
	var killed int
	gate.atCommit = func(ctx context.Context, group int) {
		if group != 2 {
			return
		}
		// The group's transaction is the one connection idle inside one.
		if err := w.s.Pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND state = 'idle in transaction' AND pid <> pg_backend_pid()`).Scan(&killed); err != nil {
			t.Error(err)
		}
	}
	first := w.hold(t, w.users[3], "group-first-hold")
	a := w.hold(t, w.users[0], "group-a-hold")
	b := w.hold(t, w.users[1], "group-b-hold")
	cbView, hook := w.awaiting(t, w.users[2], "group-cb-pay")
	pay := func(i int, h uuid.UUID) (payment.View, error) {
		return w.s.Payments.Initiate(ctx, teststack.Caller(w.users[i]),
			payment.InitiateRequest{HoldID: h, Method: payment.Wallet, IdempotencyKey: fmt.Sprintf("wallet-pay-%d", i)})
	}
	gate.arm()
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, err := pay(3, first.HoldID); err != nil {
			t.Errorf("first group: %v", err)
		}
	})
	<-gate.paused
	errs := make([]error, 2)
	for i, h := range []uuid.UUID{a.HoldID, b.HoldID} {
		wg.Go(func() { _, errs[i] = pay(i, h) })
	}
	var cbCode int
	wg.Go(func() { cbCode = sendWebhook(t, w, hook.Gateway, hook) })
	gate.waitQueued(t, 4)
	close(gate.release)
	wg.Wait()
	if killed != 1 {
		t.Fatalf("killed %d connections before the second group's COMMIT, want 1", killed)
	}
	for i, err := range errs {
		if err == nil {
			t.Errorf("wallet payment %d told success though its group's COMMIT failed", i)
		}
	}
	if cbCode < 500 {
		t.Errorf("callback answered %d though its group's COMMIT failed; want a 5xx for the gateway to retry", cbCode)
	}
	var confirmed, payments, debits int
	check := func() {
		t.Helper()
		if err := w.s.Pool.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM holds WHERE id = ANY($1) AND state = 'CONFIRMED'),
			(SELECT count(*) FROM payments WHERE hold_id = ANY($1) AND state = 'SUCCESS'),
			(SELECT count(*) FROM wallet_entries WHERE kind = 'DEBIT' AND user_id = ANY($2))`,
			[]uuid.UUID{a.HoldID, b.HoldID, cbView.HoldID}, w.users[:3]).Scan(&confirmed, &payments, &debits); err != nil {
			t.Fatal(err)
		}
		if bad, err := payment.CheckLedger(ctx, w.s.Pool); err != nil || len(bad) > 0 {
			t.Errorf("ledger: %v %v", bad, err)
		}
	}
	check()
	if confirmed != 0 || payments != 0 || debits != 0 {
		t.Fatalf("after the failed COMMIT: %d holds confirmed, %d payments SUCCESS, %d debits; want none", confirmed, payments, debits)
	}
	// As a passenger retries with the same key and the gateway repeats its
	// callback.
	for i, h := range []uuid.UUID{a.HoldID, b.HoldID} {
		if v, err := pay(i, h); err != nil || v.State != payment.Success {
			t.Errorf("retry of wallet payment %d: %+v %v", i, v, err)
		}
	}
	if code := sendWebhook(t, w, hook.Gateway, hook); code != 200 && code != 204 {
		t.Errorf("repeated callback answered %d", code)
	}
	check()
	if confirmed != 3 || payments != 3 || debits != 2 {
		t.Errorf("after the retries: %d holds confirmed, %d payments SUCCESS, %d debits; want 3, 3, 2", confirmed, payments, debits)
	}
}

// A group's holds are confirmed together after its last body, so a later
// body of the group would find a hold still HELD whose payment is already
// SUCCESS, which no body alone ever sees. Forced: a passenger gave up on a
// UPI payment (FAILED) and paid again; the first payment's late success and
// the second's failure arrive in one group. The failure's body runs alone
// after the group, finds the hold confirmed and releases nothing: the group
// commits the late success's ticket, and the seats stay sold.
func TestBodyOnAHoldTheGroupIsConfirmingRunsAlone(t *testing.T) {
	t.Parallel()
	gate := newGroupGate()
	w := newWorld(t, teststack.Options{Routes: fastRoutes(noAnswer), Pause: gate.pause, ConfirmWriters: 1}, 8, 2)
	ctx := context.Background()
	first := w.hold(t, w.users[1], "alone-first-hold")
	given, success, again, failure := w.givenUp(t, w.users[0], "alone-given-up")
	failure.Status, failure.FailureReason = pspapi.StatusFailed, "DECLINED"
	gate.arm()
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, err := w.s.Payments.Initiate(ctx, teststack.Caller(w.users[1]),
			payment.InitiateRequest{HoldID: first.HoldID, Method: payment.Wallet, IdempotencyKey: "alone-first-pay"}); err != nil {
			t.Errorf("first group: %v", err)
		}
	})
	<-gate.paused
	codes := make([]int, 2)
	for i, ev := range []pspapi.Webhook{success, failure} {
		wg.Go(func() { codes[i] = sendWebhook(t, w, ev.Gateway, ev) })
	}
	gate.waitQueued(t, 3)
	close(gate.release)
	wg.Wait()
	for i, code := range codes {
		if code != 200 && code != 204 {
			t.Errorf("callback %d answered %d", i, code)
		}
	}
	// The second group committed (the late success's ticket with it); had
	// the failure released the hold inside it, the group's confirmation
	// would have failed and every body run alone, with no second COMMIT.
	if _, groups := gate.counts(); groups != 2 {
		t.Errorf("%d groups reached their COMMIT; want 2", groups)
	}
	var hold, givenState, againState string
	var bookings int
	if err := w.s.Pool.QueryRow(ctx, `SELECT (SELECT state FROM holds WHERE id = $1), (SELECT state FROM payments WHERE id = $2),
		(SELECT state FROM payments WHERE id = $3), (SELECT count(*) FROM bookings WHERE hold_id = $1)`,
		given.HoldID, given.ID, again.ID).Scan(&hold, &givenState, &againState, &bookings); err != nil {
		t.Fatal(err)
	}
	if hold != booking.HoldConfirmed || bookings != 1 || givenState != payment.Success || againState != payment.Failed {
		t.Errorf("hold %s with %d bookings, late success %s, second payment %s; want CONFIRMED, 1, SUCCESS, FAILED",
			hold, bookings, givenState, againState)
	}
	var shardID int64
	if err := w.s.Pool.QueryRow(ctx, `SELECT shard_id FROM holds WHERE id = $1`, given.HoldID).Scan(&shardID); err != nil {
		t.Fatal(err)
	}
	w.s.CheckInvariants(t, shardID) // Redis agrees: the seats are sold, not released
}

// In one group, the common successes (open payments at our amount whose
// holds are HELD) are taken set-based, and every other answer runs its own
// body and ends as it would alone: a second event for a payment just taken
// changes nothing but is recorded; a success for a cancelled hold is
// refunded; one carrying another amount is refused and changes nothing; a
// late success of a payment given up on, whose hold another payment of the
// group is paying, runs alone after the group and is refunded as a second
// charge.
func TestCommonSuccessesTakenTogetherAndTheRestByTheirBodies(t *testing.T) {
	t.Parallel()
	gate := newGroupGate()
	w := newWorld(t, teststack.Options{Routes: fastRoutes(noAnswer), Pause: gate.pause, ConfirmWriters: 1}, 16, 10)
	ctx := context.Background()
	plain, events := w.awaitingEach(t, w.users[:4], "common")
	again := events[0]
	again.EventID += "-again"
	cancelled, cancelledEv := w.awaiting(t, w.users[4], "common-cancelled")
	if _, err := w.s.Service.Cancel(ctx, w.users[4], cancelled.HoldID); err != nil {
		t.Fatal(err)
	}
	mismatch, mismatchEv := w.awaiting(t, w.users[5], "common-mismatch")
	mismatchEv.AmountPaise += 100
	given, givenEv, second, secondEv := w.givenUp(t, w.users[6], "common-given-up")
	first := w.hold(t, w.users[7], "common-first-hold")

	taken0 := w.s.Payments.SetBasedSuccesses()
	all := append(events, again, cancelledEv, mismatchEv, givenEv, secondEv)
	var sends []sentCallback
	for _, ev := range all {
		sends = append(sends, sentCallback{ev.Gateway, ev})
	}
	codes := w.inOneGroup(t, gate, w.users[7], first, "common-first-pay", sends)
	for i, code := range codes {
		if ok := code == 200 || code == 204; ok == (all[i].EventID == mismatchEv.EventID) {
			t.Errorf("callback %s answered %d", all[i].EventID, code)
		}
	}
	if taken := w.s.Payments.SetBasedSuccesses() - taken0; taken != 5 {
		t.Errorf("%d successes taken set-based; want 5 (four plain ones and the hold's second payment)", taken)
	}
	if _, groups := gate.counts(); groups != 2 {
		t.Errorf("%d groups reached their COMMIT; want 2", groups)
	}
	for i, v := range plain {
		var state, hold, pnr string
		var hooks, toSuccess int
		if err := w.s.Pool.QueryRow(ctx, `SELECT p.state, h.state, coalesce(b.pnr, ''),
			(SELECT count(*) FROM webhook_events e WHERE e.payment_id = p.id),
			(SELECT count(*) FROM payment_events e WHERE e.payment_id = p.id AND e.to_state = 'SUCCESS' AND e.from_state = 'AWAITING_USER'
				AND e.cause IN ('webhook ' || $2, 'webhook ' || $2 || '-again') AND e.detail->>'psp_ref' = p.psp_ref)
			FROM payments p JOIN holds h ON h.id = p.hold_id LEFT JOIN bookings b ON b.hold_id = h.id WHERE p.id = $1`,
			v.ID, events[i].EventID).Scan(&state, &hold, &pnr, &hooks, &toSuccess); err != nil {
			t.Fatal(err)
		}
		wantHooks := 1
		if i == 0 {
			wantHooks = 2
		}
		if state != payment.Success || hold != booking.HoldConfirmed || pnr == "" || hooks != wantHooks || toSuccess != 1 {
			t.Errorf("payment %d: %s, hold %s, PNR %q, %d events recorded, %d changes to SUCCESS; want SUCCESS, CONFIRMED, a PNR, %d, 1",
				i, state, hold, pnr, hooks, toSuccess, wantHooks)
		}
	}
	refund := func(id uuid.UUID) (state, reason string) {
		t.Helper()
		if err := w.s.Pool.QueryRow(ctx, `SELECT p.state, coalesce(r.reason, '') FROM payments p LEFT JOIN refunds r ON r.payment_id = p.id
			WHERE p.id = $1`, id).Scan(&state, &reason); err != nil {
			t.Fatal(err)
		}
		return state, reason
	}
	if state, reason := refund(cancelled.ID); state != payment.Success || reason != booking.RefundHoldCancelled {
		t.Errorf("success for a cancelled hold: %s, refund %q; want SUCCESS refunded %s", state, reason, booking.RefundHoldCancelled)
	}
	if state, reason := refund(mismatch.ID); state != payment.AwaitingUser || reason != "" {
		t.Errorf("success at another amount: %s, refund %q; want it unchanged", state, reason)
	}
	if state, reason := refund(given.ID); state != payment.Success || reason != booking.RefundDuplicateCharge {
		t.Errorf("late success of a hold paid again: %s, refund %q; want SUCCESS refunded %s", state, reason, booking.RefundDuplicateCharge)
	}
	if state, reason := refund(second.ID); state != payment.Success || reason != "" {
		t.Errorf("the hold's second payment: %s, refund %q; want SUCCESS with its ticket", state, reason)
	}
	w.s.CheckInvariants(t, w.shard)
}

// A callback is held to the payment it names inside the group as it is
// alone: in one group with plain successes (taken set-based), a success
// signed by another gateway than the payment's and one carrying another
// gateway reference are refused and change nothing, while the plain ones
// confirm. Fails if the set-based path takes a success without checking
// the payment's gateway or reference (the other gateway's success carries
// the right amount and would confirm the hold).
func TestTamperedCallbacksInAGroupChangeNothing(t *testing.T) {
	t.Parallel()
	gate := newGroupGate()
	w := newWorld(t, teststack.Options{Routes: fastRoutes(noAnswer), Pause: gate.pause, ConfirmWriters: 1}, 16, 6)
	ctx := context.Background()
	plain, events := w.awaitingEach(t, w.users[:3], "tampered-plain")
	foreign, foreignEv := w.awaiting(t, w.users[3], "tampered-foreign")
	other := ""
	for _, g := range w.s.Gateways {
		if g.ID != foreignEv.Gateway {
			other = g.ID
		}
	}
	if other == "" {
		t.Fatal("the test stack has one gateway; this test needs two")
	}
	reffed, reffedEv := w.awaiting(t, w.users[4], "tampered-ref")
	reffedEv.PSPRef += "x"
	first := w.hold(t, w.users[5], "tampered-first-hold")

	taken0 := w.s.Payments.SetBasedSuccesses()
	all := []sentCallback{{events[0].Gateway, events[0]}, {events[1].Gateway, events[1]}, {events[2].Gateway, events[2]},
		{other, foreignEv}, {reffedEv.Gateway, reffedEv}}
	codes := w.inOneGroup(t, gate, w.users[5], first, "tampered-first-pay", all)
	for i, code := range codes {
		if ok := code == 200; ok != (i < 3) {
			t.Errorf("callback %d (%s at %s) answered %d", i, all[i].ev.EventID, all[i].gw, code)
		}
	}
	if taken := w.s.Payments.SetBasedSuccesses() - taken0; taken != 3 {
		t.Errorf("%d successes taken set-based; want the 3 plain ones", taken)
	}
	for i, v := range plain {
		var state, hold string
		if err := w.s.Pool.QueryRow(ctx, `SELECT p.state, h.state FROM payments p JOIN holds h ON h.id = p.hold_id WHERE p.id = $1`,
			v.ID).Scan(&state, &hold); err != nil {
			t.Fatal(err)
		}
		if state != payment.Success || hold != booking.HoldConfirmed {
			t.Errorf("plain payment %d: %s, hold %s; want SUCCESS, CONFIRMED", i, state, hold)
		}
	}
	for _, v := range []payment.View{foreign, reffed} {
		var state, hold string
		var hooks, events int
		if err := w.s.Pool.QueryRow(ctx, `SELECT p.state, h.state, (SELECT count(*) FROM webhook_events e WHERE e.payment_id = p.id),
			(SELECT count(*) FROM payment_events e WHERE e.payment_id = p.id AND e.to_state = 'SUCCESS')
			FROM payments p JOIN holds h ON h.id = p.hold_id WHERE p.id = $1`, v.ID).Scan(&state, &hold, &hooks, &events); err != nil {
			t.Fatal(err)
		}
		if state != payment.AwaitingUser || hold != booking.HoldHeld || hooks != 0 || events != 0 {
			t.Errorf("tampered callback's payment %s: %s, hold %s, %d events recorded, %d changes to SUCCESS; want it unchanged",
				v.ID, state, hold, hooks, events)
		}
	}
	w.s.CheckInvariants(t, w.shard)
}

// A group's statements run on whichever pool connection its writer takes,
// each connection seeing them now and then: under PostgreSQL's default
// each execution there was planned afresh. The group's transaction uses
// the generic plans instead (db.GenericPlans).
func TestConfirmationGroupsUseGenericPlans(t *testing.T) {
	t.Parallel()
	st := teststack.New(t, teststack.Options{})
	ctx := context.Background()
	var mode string
	err := payment.InGroup(ctx, st.Payments, uuid.New(), func(ctx context.Context, tx pgx.Tx) error {
		return tx.QueryRow(ctx, `SELECT current_setting('plan_cache_mode')`).Scan(&mode)
	})
	if err != nil || mode != "force_generic_plan" {
		t.Fatalf("plan_cache_mode in a confirmation group: %q (%v), want force_generic_plan", mode, err)
	}
	// Only there: the pool's other transactions keep the default.
	if err := st.Pool.QueryRow(ctx, `SELECT current_setting('plan_cache_mode')`).Scan(&mode); err != nil || mode != "auto" {
		t.Fatalf("plan_cache_mode outside a group: %q (%v)", mode, err)
	}
}
