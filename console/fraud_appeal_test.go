package console_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"

	"tatkal/booking/auth"
	"tatkal/booking/fraud/review"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
	"tatkal/console"
)

// appealWorld is a fraud ring whose cluster the analysts decide through
// the console's forms, and the member of it who appeals.
type appealWorld struct {
	t        *testing.T
	s        *teststack.Stack
	cluster  int64
	member   int64
	hold     uuid.UUID
	analysts map[string]*browser // fraud1, admin1, admin2, fraud2, signed in
	decision int64
	appeal   int64
}

func newAppealWorld(t *testing.T) *appealWorld {
	t.Helper()
	s := setup(t, teststack.Options{})
	if _, err := console.SeedUsers(context.Background(), s.Pool, []console.DemoUser{{Login: "fraud2", Password: password, Role: console.Fraud}},
		auth.Argon2Params{MemoryKiB: 64, Time: 1, Threads: 1}); err != nil {
		t.Fatal(err)
	}
	w := &appealWorld{t: t, s: s, analysts: map[string]*browser{}}
	cluster, members, holds := fraudRing(t, s)
	w.cluster, w.member, w.hold = cluster, members[0], holds[0]
	for _, login := range []string{"fraud1", "admin1", "admin2", "fraud2"} {
		b := newBrowser(t, s.Server.URL)
		b.login(login)
		w.analysts[login] = b
	}
	return w
}

// decide has fraud1 claim the cluster and decide outcome on it, admin1
// approve it, the enforcement batch carry it out, and the member appeal
// over the API.
func (w *appealWorld) decide(outcome, reason string) {
	t, ctx := w.t, context.Background()
	t.Helper()
	cl := fmt.Sprintf("/console/fraud/clusters/%d", w.cluster)
	if code, body, _ := w.analysts["fraud1"].post(cl+"/claim", nil); code != http.StatusSeeOther {
		t.Fatalf("claim: %d %.500s", code, body)
	}
	if code, body, _ := w.analysts["fraud1"].post(cl+"/decide", url.Values{"outcome": {outcome}, "reason": {reason}}); code != http.StatusSeeOther {
		t.Fatalf("decide: %d %.500s", code, body)
	}
	if err := w.s.Pool.QueryRow(ctx, `SELECT id FROM fraud_decisions WHERE cluster_id = $1`, w.cluster).Scan(&w.decision); err != nil {
		t.Fatal(err)
	}
	if code, body, _ := w.analysts["admin1"].post(fmt.Sprintf("/console/fraud/decisions/%d/approve", w.decision), nil); code != http.StatusSeeOther {
		t.Fatalf("approve: %d %.500s", code, body)
	}
	if err := (&review.Enforcer{Review: review.New(w.s.Pool), Booking: w.s.Service}).Enforce(ctx, w.decision); err != nil {
		t.Fatal(err)
	}
	r := testenv.Call(t, testenv.Request{Method: "POST", URL: w.s.Server.URL + "/v1/fraud/appeals", Token: w.s.Token(w.member),
		Body: map[string]string{"statement": "These are my own tickets."}})
	if r.Status != http.StatusCreated {
		t.Fatalf("appeal: %d %s", r.Status, r.Raw)
	}
	if err := w.s.Pool.QueryRow(ctx, `SELECT id FROM fraud_appeals WHERE user_id = $1 AND decision_id = $2`, w.member, w.decision).Scan(&w.appeal); err != nil {
		t.Fatal(err)
	}
}

var noticeRE = regexp.MustCompile(`data-testid="notice" role="status">([^<]*)<`)

// answer posts who's verdict on the appeal through the fraud page's form
// and returns the notice the page then shows.
func (w *appealWorld) answer(who, verdict string) string {
	w.t.Helper()
	b := w.analysts[who]
	b.get("/console/fraud")
	code, body, h := b.post(fmt.Sprintf("/console/fraud/appeals/%d", w.appeal), url.Values{"verdict": {verdict}, "note": {"answer of " + who}})
	if code != http.StatusSeeOther || h.Get("Location") != "/console/fraud" {
		w.t.Fatalf("%s answering the appeal: %d %.500s", who, code, body)
	}
	_, page, _ := b.get("/console/fraud")
	m := noticeRE.FindStringSubmatch(page)
	if m == nil {
		w.t.Fatalf("no notice after %s's answer", who)
	}
	return html.UnescapeString(m[1])
}

// row is the appeal's answer cell on who's fraud page.
func (w *appealWorld) row(who string) string {
	w.t.Helper()
	_, page, _ := w.analysts[who].get("/console/fraud")
	id := fmt.Sprintf(`data-testid="fraud-appeal-answer-%d"`, w.appeal)
	i := strings.Index(page, id)
	if i < 0 {
		w.t.Fatalf("%s's fraud page has no open appeal %d", who, w.appeal)
	}
	return page[i : i+strings.Index(page[i:], "</td>")]
}

func (w *appealWorld) count(sql string, args ...any) int {
	w.t.Helper()
	var n int
	if err := w.s.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		w.t.Fatal(err)
	}
	return n
}

// Upholding an appeal against a two-analyst ban, through the console's
// forms: the analysts of the ban cannot answer it; one other analyst only
// proposes (the ban holds) and cannot approve their own proposal; a second
// lifts it. Every step audited with its login.
func TestAppealAgainstTwoAnalystBanTakesTwoOverTheConsole(t *testing.T) {
	t.Parallel()
	w := newAppealWorld(t)
	w.decide(review.Ban, "AUTOMATION")
	banned := func() bool {
		return w.count(`SELECT count(*) FROM users WHERE id = $1 AND banned_at IS NOT NULL`, w.member) == 1
	}
	if !banned() {
		t.Fatal("the enforced ban did not ban the member")
	}
	for _, who := range []string{"fraud1", "admin1"} {
		if !strings.Contains(w.row(who), "You took part in this decision") || strings.Contains(w.row(who), "fraud-appeal-uphold") {
			t.Errorf("%s, who took part in the ban, is offered to answer its appeal: %s", who, w.row(who))
		}
		if n := w.answer(who, "uphold"); !strings.Contains(n, "You took part in decision") || !banned() {
			t.Fatalf("%s upholding the appeal against their own ban: %q, banned %v", who, n, banned())
		}
	}
	if !strings.Contains(w.row("admin2"), "Propose upholding") {
		t.Errorf("admin2 is not offered to propose: %s", w.row("admin2"))
	}
	if n := w.answer("admin2", "uphold"); !strings.Contains(n, "proposed") || !banned() {
		t.Fatalf("one analyst's uphold: %q, banned %v; want proposed, still banned", n, banned())
	}
	if row := w.row("admin2"); !strings.Contains(row, "Upholding proposed by admin2") || strings.Contains(row, "fraud-appeal-uphold") {
		t.Errorf("the proposer's page: %s", row)
	}
	if n := w.answer("admin2", "uphold"); !strings.Contains(n, "second analyst must approve") || !banned() {
		t.Fatalf("the proposer approving their own proposal: %q, banned %v", n, banned())
	}
	if !strings.Contains(w.row("fraud2"), "Approve upholding") {
		t.Errorf("fraud2 is not offered to approve: %s", w.row("fraud2"))
	}
	if n := w.answer("fraud2", "uphold"); !strings.Contains(n, "upheld") || banned() {
		t.Fatalf("the second analyst's approval: %q, banned %v", n, banned())
	}
	if n := w.count(`SELECT count(*) FROM audit_log WHERE subject = $1 AND ((action = 'fraud.appeal_uphold_proposed' AND actor = 'admin2')
		OR (action = 'fraud.appeal_upheld' AND actor = 'fraud2' AND detail->>'proposed_by' = 'admin2'))`, fmt.Sprintf("appeal:%d", w.appeal)); n != 2 {
		t.Errorf("%d audit records of the proposal and the approval, want 2", n)
	}
}

// An upheld appeal against a bulk cancellation, through the console's
// forms: the member's confirmed Tatkal ticket, cancelled with nothing
// refunded, is refunded in full once the second analyst approves, and only
// then.
func TestUpheldCancellationAppealRefundsOverTheConsole(t *testing.T) {
	t.Parallel()
	w := newAppealWorld(t)
	w.decide(review.CancelBookings, "PASSENGER_RESALE")
	var paymentID uuid.UUID
	var fare int64
	if err := w.s.Pool.QueryRow(context.Background(), `SELECT id, amount_paise FROM payments WHERE hold_id = $1 AND state = 'SUCCESS'`, w.hold).
		Scan(&paymentID, &fare); err != nil {
		t.Fatal(err)
	}
	refunds := func() int {
		return w.count(`SELECT count(*) FROM refunds WHERE payment_id = $1`, paymentID)
	}
	if n := w.count(`SELECT count(*) FROM bookings WHERE hold_id = $1 AND status = 'CANCELLED'`, w.hold); n != 1 || refunds() != 0 {
		t.Fatalf("after enforcement: %d cancelled, %d refunds; want 1 and 0", n, refunds())
	}
	// The analysts see what enforcement cancelled.
	if _, page, _ := w.analysts["fraud1"].get(fmt.Sprintf("/console/fraud/clusters/%d", w.cluster)); !strings.Contains(page, "4 tickets cancelled, 0 holds ended") {
		t.Errorf("the cluster's page does not say what enforcement cancelled: %.2000s", page)
	}
	if n := w.answer("admin2", "uphold"); !strings.Contains(n, "proposed") || refunds() != 0 {
		t.Fatalf("the proposal: %q, %d refunds", n, refunds())
	}
	if n := w.answer("fraud2", "uphold"); !strings.Contains(n, "refunded in full") {
		t.Fatalf("the approval: %q", n)
	}
	if n := w.count(`SELECT count(*) FROM refunds WHERE payment_id = $1 AND reason = 'APPEAL_UPHELD' AND amount_paise = $2`, paymentID, fare); n != 1 || refunds() != 1 {
		t.Fatalf("%d full refunds of %d in all, want one", n, refunds())
	}
	if n := w.answer("admin1", "reject"); !strings.Contains(n, "took part") && !strings.Contains(n, "answered") {
		t.Fatalf("answering again: %q", n)
	}
	if refunds() != 1 {
		t.Fatalf("%d refunds after a second answer", refunds())
	}
}
