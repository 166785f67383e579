package review_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"tatkal/booking"
	"tatkal/booking/admission"
	"tatkal/booking/fraud/review"
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/teststack"
	"tatkal/booking/payment"
)

type ring struct {
	s         *teststack.Stack
	svc       *review.Service
	cluster   int64
	members   []int64
	holds     []uuid.UUID // the members' bookings, the last two waitlisted
	analysts  [5]int64    // a decides, b approves; c, d and e had no part
	shardID   int64
	date      time.Time
	paused    atomic.Int32
	stopAfter atomic.Int32 // the pause hook cancels the job after this many cancellations
	cancelJob context.CancelFunc
	pause     booking.PauseFunc
}

// newRing books a small shard full through the wallet: four ring accounts
// with a confirmed ticket each on a shard of four berths, then two more
// ring accounts on the Tatkal waitlist, and puts them in one flagged
// cluster of the shard's window.
func newRing(t *testing.T) *ring {
	t.Helper()
	ctx := context.Background()
	r := &ring{}
	r.pause = func(ctx context.Context, point string) {
		if point == "fraud.enforce.after-cancel" && r.paused.Add(1) == r.stopAfter.Load() && r.cancelJob != nil {
			r.cancelJob() // the worker stops here, mid-batch
		}
	}
	r.s = teststack.New(t, teststack.Options{Pause: r.pause})
	r.shardID, r.date = r.s.DemoShard(t, 4, 10)
	ids, err := seed.Users(ctx, r.s.Pool, seed.UsersSpec{Count: 6, Prefix: "ring", PasswordHash: "x", WalletRupees: 20000})
	if err != nil {
		t.Fatal(err)
	}
	r.members = ids
	for i, u := range ids {
		res, err := r.s.Service.Hold(ctx, teststack.Caller(u), booking.HoldRequest{UserID: u, IdempotencyKey: fmt.Sprintf("ring-hold-%04d", i),
			Train: "12951", Date: r.date, Class: "3A", Quota: "TQ", From: "MMCT", To: "NDLS",
			Passengers: []booking.Passenger{{Name: "Tout Passenger", Age: 30 + i, Gender: "M", IDType: "PAN", IDRef: fmt.Sprintf("TOUTP%04dK", i)}}})
		if err != nil {
			t.Fatalf("hold %d: %v", i, err)
		}
		if _, err := r.s.Payments.Initiate(ctx, teststack.Caller(u), payment.InitiateRequest{HoldID: res.HoldID, Method: "WALLET",
			IdempotencyKey: fmt.Sprintf("ring-pay-%04d", i)}); err != nil {
			t.Fatalf("pay %d: %v", i, err)
		}
		r.holds = append(r.holds, res.HoldID)
	}
	r.flag(t)
	return r
}

// flag puts the ring's members in one flagged cluster of its shard's
// window, and adds the five analysts and the review service.
func (r *ring) flag(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	var window time.Time
	if err := r.s.Pool.QueryRow(ctx, `SELECT window_opens_at FROM inventory_shards WHERE id = $1`, r.shardID).Scan(&window); err != nil {
		t.Fatal(err)
	}
	if err := r.s.Pool.QueryRow(ctx, `INSERT INTO fraud_clusters (window_opens_at, score, flagged, members, evidence)
		VALUES ($1, 9, true, $2, '{"why":["test ring"]}') RETURNING id`, window, len(r.members)).Scan(&r.cluster); err != nil {
		t.Fatal(err)
	}
	if _, err := r.s.Pool.Exec(ctx, `INSERT INTO fraud_cluster_members (cluster_id, user_id) SELECT $1, unnest($2::bigint[])`, r.cluster, r.members); err != nil {
		t.Fatal(err)
	}
	for i, login := range []string{"fraud-a", "fraud-b", "fraud-c", "fraud-d", "fraud-e"} {
		if err := r.s.Pool.QueryRow(ctx, `INSERT INTO console_users (login, name, role, password_hash) VALUES ($1, $1, 'fraud', 'x') RETURNING id`,
			login).Scan(&r.analysts[i]); err != nil {
			t.Fatal(err)
		}
	}
	r.svc = review.New(r.s.Pool)
	r.svc.EnforceDelay = 0
	r.svc.Refunds = r.s.Payments
}

func (r *ring) enforcer() *review.Enforcer {
	return &review.Enforcer{Review: r.svc, Booking: r.s.Service, Pause: r.pause}
}

// seen is what a member sees of their booking over the API.
func (r *ring) seen(t *testing.T, i int) string {
	t.Helper()
	req, _ := http.NewRequest("GET", r.s.Server.URL+"/v1/bookings/"+r.holds[i].String()+"/status", nil)
	req.Header.Set("Authorization", "Bearer "+r.s.Token(r.members[i]))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var v map[string]any
	json.Unmarshal(b, &v) //nolint:errcheck
	return fmt.Sprintf("%d %v %v", resp.StatusCode, v["state"], v["booking_status"])
}

func count(t *testing.T, r *ring, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := r.s.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCancelDecisionEnforcedOnceAfterStop: a bulk cancel decided and
// approved changes nothing a member sees until the batch runs; the batch,
// stopped after its second cancellation and run again, cancels every
// booking exactly once, refunds the waitlisted ones once (per the Tatkal
// rules: a confirmed Tatkal ticket refunds nothing), and the berths go back
// on sale.
func TestCancelDecisionEnforcedOnceAfterStop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRing(t)
	if n := count(t, r, `SELECT count(*) FROM bookings WHERE user_id = ANY($1) AND status IN ('CONFIRMED', 'WAITLISTED')`, r.members); n != 6 {
		t.Fatalf("%d live bookings, want 6", n)
	}
	before := make([]string, len(r.holds))
	for i := range r.holds {
		before[i] = r.seen(t, i)
	}
	if _, err := r.svc.Claim(ctx, r.analysts[0], r.cluster, time.Minute); err != nil {
		t.Fatal(err)
	}
	d, err := r.svc.Decide(ctx, r.analysts[0], r.cluster, review.Decision{Outcome: review.CancelBookings, Reason: "PASSENGER_RESALE"})
	if err != nil {
		t.Fatal(err)
	}
	// Not approved: the batch does nothing.
	if n, err := r.enforcer().RunDue(ctx); err != nil || n != 0 {
		t.Fatalf("before approval the batch enforced %d (err %v)", n, err)
	}
	if err := r.svc.Approve(ctx, r.analysts[1], d.ID); err != nil {
		t.Fatal(err)
	}
	// Decided and approved: the members still see their tickets, a seat
	// is still sold out to others.
	for i := range r.holds {
		if now := r.seen(t, i); now != before[i] {
			t.Errorf("member %d saw %q change to %q before enforcement", i, before[i], now)
		}
	}
	if n := count(t, r, `SELECT count(*) FROM bookings WHERE user_id = ANY($1) AND status = 'CANCELLED'`, r.members); n != 0 {
		t.Fatalf("%d bookings cancelled before enforcement", n)
	}

	// The worker stops after the second cancellation.
	jobCtx, cancel := context.WithCancel(ctx)
	r.cancelJob, _ = cancel, r.stopAfter.Swap(2)
	if _, err := r.enforcer().RunDue(jobCtx); err == nil {
		t.Fatal("the stopped batch reported success")
	}
	if n := count(t, r, `SELECT count(*) FROM bookings WHERE user_id = ANY($1) AND status = 'CANCELLED'`, r.members); n != 2 {
		t.Fatalf("the stopped batch cancelled %d bookings, want 2", n)
	}
	if n := count(t, r, `SELECT count(*) FROM fraud_decisions WHERE id = $1 AND enforced_at IS NULL`, d.ID); n != 1 {
		t.Fatal("a stopped batch marked its decision enforced")
	}
	// Resumed (twice, as a retried job might be).
	for range 2 {
		if _, err := r.enforcer().RunDue(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := count(t, r, `SELECT count(*) FROM bookings WHERE user_id = ANY($1) AND status = 'CANCELLED'`, r.members); n != 6 {
		t.Errorf("%d of 6 bookings cancelled", n)
	}
	if n := count(t, r, `SELECT count(*) FROM fraud_enforcements WHERE decision_id = $1 AND action = 'CANCEL'`, d.ID); n != 6 {
		t.Errorf("%d enforcement records, want 6", n)
	}
	// Refunds: once per waitlisted booking, none for confirmed tickets.
	var waitlisted int
	if err := r.s.Pool.QueryRow(ctx, `SELECT count(*) FROM bookings WHERE user_id = ANY($1) AND waitlist_no IS NOT NULL`, r.members).Scan(&waitlisted); err != nil {
		t.Fatal(err)
	}
	if waitlisted == 0 {
		t.Fatal("the ring has no waitlisted booking; the refund is untested")
	}
	if n := count(t, r, `SELECT count(*) FROM refunds f JOIN payments p ON p.id = f.payment_id WHERE p.hold_id = ANY($1)`, r.holds); n != waitlisted {
		t.Errorf("%d refunds for %d waitlisted bookings, want one each", n, waitlisted)
	}
	if n := count(t, r, `SELECT count(*) FROM (SELECT p.hold_id FROM refunds f JOIN payments p ON p.id = f.payment_id
		WHERE p.hold_id = ANY($1) GROUP BY 1 HAVING count(*) > 1) x`, r.holds); n != 0 {
		t.Errorf("%d bookings refunded twice", n)
	}
	if n := count(t, r, `SELECT count(*) FROM fraud_decisions WHERE id = $1 AND enforced_at IS NOT NULL`, d.ID); n != 1 {
		t.Error("decision not marked enforced")
	}
	if n := count(t, r, `SELECT count(*) FROM audit_log WHERE action = 'fraud.cancel_booking'`); n != 6 {
		t.Errorf("%d cancellations audited, want 6", n)
	}
	// The berths are back: once the promotion job that the cancellations
	// inserted has run (no workers here: run it as the job would), the
	// waitlist is served first, then someone else holds a seat.
	if _, err := r.s.Service.Promote(ctx, r.shardID); err != nil {
		t.Fatalf("promotion after enforcement: %v", err)
	}
	outsider := r.s.Users(t, "honest", 1)[0]
	res, err := r.s.Service.Hold(ctx, teststack.Caller(outsider), booking.HoldRequest{UserID: outsider, IdempotencyKey: "honest-hold-0001",
		Train: "12951", Date: r.date, Class: "3A", Quota: "TQ", From: "MMCT", To: "NDLS",
		Passengers: []booking.Passenger{{Name: "Honest Person", Age: 50, Gender: "F", IDType: "PAN", IDRef: "HONES1234T"}}})
	if err != nil || res.Status != "HELD" {
		t.Errorf("after enforcement a berth is not back on sale: %+v %v", res, err)
	}
}

// TestBanAndUpheldAppeal: a ban takes effect only when enforced, refuses
// the member's holds, the member appeals over the API, the appeal is in
// the analysts' queue, and upholding it restores the account.
func TestBanAndUpheldAppeal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRing(t)
	hold := func(i int, key string) error {
		u := r.members[i]
		_, err := r.s.Service.Hold(ctx, teststack.Caller(u), booking.HoldRequest{UserID: u, IdempotencyKey: key,
			Train: "12951", Date: r.date, Class: "3A", Quota: "TQ", From: "MMCT", To: "NDLS",
			Passengers: []booking.Passenger{{Name: "Tout Passenger", Age: 70, Gender: "M", IDType: "PAN", IDRef: "TOUTP7777K"}}})
		return err
	}
	if _, err := r.svc.Claim(ctx, r.analysts[0], r.cluster, time.Minute); err != nil {
		t.Fatal(err)
	}
	d, err := r.svc.Decide(ctx, r.analysts[0], r.cluster, review.Decision{Outcome: review.Ban, Reason: "AUTOMATION"})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.svc.Approve(ctx, r.analysts[1], d.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := r.svc.FileAppeal(ctx, r.members[0], "I am a real traveller."); booking.ErrorReason(err) != "NOTHING_TO_APPEAL" {
		t.Errorf("appeal before enforcement: %v, want NOTHING_TO_APPEAL", err)
	}
	if n := count(t, r, `SELECT count(*) FROM users WHERE id = ANY($1) AND banned_at IS NOT NULL`, r.members); n != 0 {
		t.Fatalf("%d accounts banned before enforcement", n)
	}
	if _, err := r.enforcer().RunDue(ctx); err != nil {
		t.Fatal(err)
	}
	if err := hold(0, "banned-hold-0001"); booking.ErrorReason(err) != "ACCOUNT_SUSPENDED" {
		t.Fatalf("banned member's hold: %v, want ACCOUNT_SUSPENDED", err)
	}
	// The appeal, over HTTP, as the member.
	req, _ := http.NewRequest("POST", r.s.Server.URL+"/v1/fraud/appeals", strings.NewReader(`{"statement":"These are my family's tickets."}`))
	req.Header.Set("Authorization", "Bearer "+r.s.Token(r.members[0]))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("appeal: %d %s", resp.StatusCode, body)
	}
	appeals, err := r.svc.Appeals(ctx)
	if err != nil || len(appeals) != 1 || appeals[0].UserID != r.members[0] || appeals[0].DecisionID != d.ID {
		t.Fatalf("appeals queue: %+v %v", appeals, err)
	}
	id := appeals[0].ID
	// Neither analyst of the ban answers the appeal against it.
	for _, a := range r.analysts[:2] {
		if _, err := r.svc.AnswerAppeal(ctx, a, id, true, "I was wrong"); booking.ErrorReason(err) != "OWN_DECISION" {
			t.Fatalf("an analyst of the ban upholding the appeal: %v, want OWN_DECISION", err)
		}
	}
	// One analyst who had no part proposes; the ban holds.
	if ans, err := r.svc.AnswerAppeal(ctx, r.analysts[2], id, true, "family verified by phone"); err != nil || ans.Verdict != review.Proposed {
		t.Fatalf("first uphold of a two-analyst ban's appeal: %+v %v, want PROPOSED", ans, err)
	}
	if err := hold(0, "proposed-hold-0001"); booking.ErrorReason(err) != "ACCOUNT_SUSPENDED" {
		t.Fatalf("with the uphold only proposed, the member's hold: %v, want ACCOUNT_SUSPENDED", err)
	}
	if _, err := r.svc.AnswerAppeal(ctx, r.analysts[2], id, true, "again"); booking.ErrorReason(err) != "SAME_ANALYST" {
		t.Fatalf("the proposer approving their own proposal: %v, want SAME_ANALYST", err)
	}
	if n := count(t, r, `SELECT count(*) FROM users WHERE id = $1 AND banned_at IS NOT NULL`, r.members[0]); n != 1 {
		t.Fatal("the ban was lifted by one analyst")
	}
	// A second analyst with no part approves: lifted.
	if ans, err := r.svc.AnswerAppeal(ctx, r.analysts[3], id, true, "agreed"); err != nil || ans.Verdict != review.Upheld {
		t.Fatalf("second analyst's uphold: %+v %v", ans, err)
	}
	if err := hold(0, "restored-hold-0001"); err != nil && booking.ErrorReason(err) == "ACCOUNT_SUSPENDED" {
		t.Errorf("after the upheld appeal the account is still suspended: %v", err)
	}
	if n := count(t, r, `SELECT count(*) FROM users WHERE id = ANY($1) AND banned_at IS NOT NULL`, r.members[1:]); n != 5 {
		t.Errorf("%d of the 5 other members still banned", n)
	}
	if n := count(t, r, `SELECT count(*) FROM audit_log WHERE action IN ('fraud.appeal', 'fraud.appeal_upheld', 'fraud.ban')`); n != 3 {
		t.Errorf("%d appeal and ban audit records, want 3", n)
	}
	if n := count(t, r, `SELECT count(*) FROM audit_log WHERE (action = 'fraud.appeal_uphold_proposed' AND actor = 'fraud-c')
		OR (action = 'fraud.appeal_upheld' AND actor = 'fraud-d' AND detail->>'proposed_by' = 'fraud-c')`); n != 2 {
		t.Errorf("%d audit records of the proposal and the uphold with both logins, want 2", n)
	}
}

// A member banned by two decisions appeals one of them: upheld, the other
// decision's ban still holds; their appeal against the other, upheld too,
// lifts it.
func TestAppealLiftsOnlyItsDecisionsBan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRing(t)
	banned := func() bool {
		return count(t, r, `SELECT count(*) FROM users WHERE id = $1 AND banned_at IS NOT NULL`, r.members[0]) == 1
	}
	// A second cluster, of another window's evidence, with the same member.
	var window time.Time
	if err := r.s.Pool.QueryRow(ctx, `SELECT window_opens_at FROM fraud_clusters WHERE id = $1`, r.cluster).Scan(&window); err != nil {
		t.Fatal(err)
	}
	var second int64
	if err := r.s.Pool.QueryRow(ctx, `INSERT INTO fraud_clusters (window_opens_at, score, flagged, members, evidence)
		VALUES ($1, 5, true, 2, '{"why":["second ring"]}') RETURNING id`, window.Add(24*time.Hour)).Scan(&second); err != nil {
		t.Fatal(err)
	}
	if _, err := r.s.Pool.Exec(ctx, `INSERT INTO fraud_cluster_members (cluster_id, user_id) VALUES ($1, $2), ($1, $3)`,
		second, r.members[0], r.members[1]); err != nil {
		t.Fatal(err)
	}
	var decisions []int64
	for _, cl := range []int64{r.cluster, second} {
		if _, err := r.svc.Claim(ctx, r.analysts[0], cl, time.Minute); err != nil {
			t.Fatal(err)
		}
		d, err := r.svc.Decide(ctx, r.analysts[0], cl, review.Decision{Outcome: review.Ban, Reason: "AUTOMATION"})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.svc.Approve(ctx, r.analysts[1], d.ID); err != nil {
			t.Fatal(err)
		}
		if err := r.enforcer().Enforce(ctx, d.ID); err != nil {
			t.Fatal(err)
		}
		decisions = append(decisions, d.ID)
	}
	uphold := func() int64 {
		t.Helper()
		a, err := r.svc.FileAppeal(ctx, r.members[0], "Not me.")
		if err != nil {
			t.Fatal(err)
		}
		for _, analyst := range r.analysts[2:4] {
			if _, err := r.svc.AnswerAppeal(ctx, analyst, a.ID, true, "ok"); err != nil {
				t.Fatal(err)
			}
		}
		return a.DecisionID
	}
	first := uphold()
	if !banned() {
		t.Fatalf("upholding the appeal against decision %d lifted the ban decision %v still imposes", first, decisions)
	}
	if n := count(t, r, `SELECT count(*) FROM users WHERE id = $1 AND banned_at IS NOT NULL`, r.members[1]); n != 1 {
		t.Fatal("another member's ban was lifted")
	}
	if second := uphold(); second == first || banned() {
		t.Fatalf("the appeal against the other decision (%d after %d): banned %v", second, first, banned())
	}
	if _, err := r.svc.FileAppeal(ctx, r.members[0], "Again."); booking.ErrorReason(err) != "NOTHING_TO_APPEAL" {
		t.Fatalf("an appeal with both decisions lifted: %v, want NOTHING_TO_APPEAL", err)
	}
}

// An appeal against an enforced cancellation of a confirmed Tatkal ticket
// (refunded nothing by the rules), upheld by two analysts at once after a
// third proposed it: the full fare is refunded once, the booking says why,
// the member is told.
func TestUpheldCancellationAppealRefundsFullFare(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRing(t)
	if _, err := r.svc.Claim(ctx, r.analysts[0], r.cluster, time.Minute); err != nil {
		t.Fatal(err)
	}
	d, err := r.svc.Decide(ctx, r.analysts[0], r.cluster, review.Decision{Outcome: review.CancelBookings, Reason: "PASSENGER_RESALE"})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.svc.Approve(ctx, r.analysts[1], d.ID); err != nil {
		t.Fatal(err)
	}
	if err := r.enforcer().Enforce(ctx, d.ID); err != nil {
		t.Fatal(err)
	}
	var paymentID uuid.UUID
	var fare int64
	if err := r.s.Pool.QueryRow(ctx, `SELECT id, amount_paise FROM payments WHERE hold_id = $1 AND state = 'SUCCESS'`, r.holds[0]).Scan(&paymentID, &fare); err != nil {
		t.Fatal(err)
	}
	if n := count(t, r, `SELECT count(*) FROM refunds WHERE payment_id = $1`, paymentID); n != 0 {
		t.Fatalf("the cancelled confirmed Tatkal ticket was refunded %d times before any appeal", n)
	}
	a, err := r.svc.FileAppeal(ctx, r.members[0], "I travel on this ticket myself.")
	if err != nil || a.DecisionID != d.ID {
		t.Fatalf("appeal: %+v %v", a, err)
	}
	if ans, err := r.svc.AnswerAppeal(ctx, r.analysts[2], a.ID, true, "verified"); err != nil || ans.Verdict != review.Proposed {
		t.Fatalf("proposal: %+v %v", ans, err)
	}
	if n := count(t, r, `SELECT count(*) FROM refunds WHERE payment_id = $1`, paymentID); n != 0 {
		t.Fatal("a proposed uphold refunded")
	}
	// Two analysts approve at once: one upholds, the other is told it was
	// answered.
	type result struct {
		ans review.Answer
		err error
	}
	results := make(chan result, 2)
	for _, analyst := range r.analysts[3:5] {
		go func() {
			ans, err := r.svc.AnswerAppeal(ctx, analyst, a.ID, true, "agreed")
			results <- result{ans, err}
		}()
	}
	upheld := 0
	for range 2 {
		res := <-results
		switch {
		case res.err == nil && res.ans.Verdict == review.Upheld && res.ans.RefundedPaise == fare:
			upheld++
		case booking.ErrorReason(res.err) == "ANSWERED":
		default:
			t.Errorf("a concurrent approval: %+v %v", res.ans, res.err)
		}
	}
	if upheld != 1 {
		t.Fatalf("%d upholds, want 1", upheld)
	}
	if n := count(t, r, `SELECT count(*) FROM refunds WHERE payment_id = $1 AND reason = 'APPEAL_UPHELD' AND amount_paise = $2`, paymentID, fare); n != 1 {
		t.Fatalf("%d full refunds of the payment, want 1", n)
	}
	if n := count(t, r, `SELECT count(*) FROM river_job WHERE kind = $1 AND args->>'refund_id' = (SELECT id::text FROM refunds WHERE payment_id = $2)`,
		payment.RefundArgs{}.Kind(), paymentID); n != 1 {
		t.Fatalf("%d refund jobs enqueued, want 1", n)
	}
	if n := count(t, r, `SELECT count(*) FROM notifications WHERE user_id = $1 AND kind = 'REFUND_STARTED' AND ref = $2`, r.members[0], paymentID.String()); n == 0 {
		t.Error("the member was not told of the refund")
	}
	if n := count(t, r, `SELECT count(*) FROM audit_log WHERE action = 'fraud.appeal_refund' AND actor IN ('fraud-d', 'fraud-e')
		AND detail->>'proposed_by' = 'fraud-c'`); n != 1 {
		t.Errorf("%d refund audit records naming both analysts, want 1", n)
	}
	// The member sees why.
	req, _ := http.NewRequest("GET", r.s.Server.URL+"/v1/bookings/"+r.holds[0].String()+"/status", nil)
	req.Header.Set("Authorization", "Bearer "+r.s.Token(r.members[0]))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	json.NewDecoder(resp.Body).Decode(&st) //nolint:errcheck
	resp.Body.Close()
	if msg, _ := st["message"].(string); !strings.Contains(msg, "appeal") || st["refund_due_paise"] != float64(fare) {
		t.Errorf("the member's booking after the upheld appeal: %v", st)
	}
	// Other members' cancelled tickets are untouched.
	if n := count(t, r, `SELECT count(*) FROM refunds f JOIN payments p ON p.id = f.payment_id WHERE p.hold_id = ANY($1) AND f.reason = 'APPEAL_UPHELD'`,
		r.holds[1:]); n != 0 {
		t.Errorf("%d other members refunded by one member's appeal", n)
	}
}

// TestExtraChallengeDecision: the graduated response end to end. An
// EXTRA_CHALLENGE decision changes nothing until enforcement; then every
// member's next booking challenge is harder and an outsider's is not; an
// upheld appeal lifts it.
func TestExtraChallengeDecision(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRing(t)
	outsider := r.s.Users(t, "plain", 1)[0]
	bits := func(uid int64) int {
		t.Helper()
		ch, err := r.s.Admission.Challenge(ctx, admission.Caller{UserID: uid, Verified: true, SessionToken: fmt.Sprintf("st_%d", uid)}, "attempt-0001")
		if err != nil {
			t.Fatal(err)
		}
		return ch.Bits
	}
	base := bits(outsider)
	for _, m := range r.members {
		if n := bits(m); n != base {
			t.Fatalf("member %d: %d bits before any decision, outsider %d", m, n, base)
		}
	}
	if _, err := r.svc.Claim(ctx, r.analysts[0], r.cluster, time.Minute); err != nil {
		t.Fatal(err)
	}
	r.svc.EnforceDelay = time.Hour
	d, err := r.svc.Decide(ctx, r.analysts[0], r.cluster, review.Decision{Outcome: review.ExtraChallenge, Reason: "AUTOMATION"})
	if err != nil || d.NeedsApproval {
		t.Fatalf("decide: %+v %v", d, err)
	}
	if n, err := r.enforcer().RunDue(ctx); err != nil || n != 0 {
		t.Fatalf("before the delay the batch enforced %d (%v)", n, err)
	}
	if n := bits(r.members[0]); n != base {
		t.Fatalf("decided, not enforced: member gets %d bits, want %d", n, base)
	}
	if _, err := r.s.Pool.Exec(ctx, `UPDATE fraud_decisions SET enforce_after = now() - interval '1 second' WHERE id = $1`, d.ID); err != nil {
		t.Fatal(err)
	}
	if n, err := r.enforcer().RunDue(ctx); err != nil || n != 1 {
		t.Fatalf("the batch enforced %d (%v), want 1", n, err)
	}
	for _, m := range r.members {
		if n := bits(m); n <= base {
			t.Errorf("member %d after enforcement: %d bits, want more than %d", m, n, base)
		}
	}
	if n := bits(outsider); n != base {
		t.Errorf("outsider after enforcement: %d bits, want %d", n, base)
	}
	if n := count(t, r, `SELECT count(*) FROM fraud_enforcements WHERE decision_id = $1 AND action = 'EXTRA_CHALLENGE'`, d.ID); n != len(r.members) {
		t.Errorf("%d enforcement records, want %d", n, len(r.members))
	}
	a, err := r.svc.FileAppeal(ctx, r.members[0], "I solve puzzles slowly, but I am me.")
	if err != nil || a.Outcome != review.ExtraChallenge {
		t.Fatalf("appeal: %+v %v", a, err)
	}
	if ans, err := r.svc.AnswerAppeal(ctx, r.analysts[1], a.ID, true, "ok"); err != nil || ans.Verdict != review.Upheld {
		t.Fatalf("a one-analyst decision's appeal upheld by another analyst: %+v %v", ans, err)
	}
	if n := bits(r.members[0]); n != base {
		t.Errorf("after the upheld appeal: %d bits, want %d", n, base)
	}
	if n := bits(r.members[1]); n <= base {
		t.Errorf("another member after someone else's appeal: %d bits", n)
	}
}
