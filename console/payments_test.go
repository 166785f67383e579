package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"

	"tatkal/booking/lab/teststack"
)

// Payments in review are listed for ops, finance and admin, and their
// money moves on two people's word (issue 32, 4): one finance person
// proposes crediting a refused refund to the wallet, or closing the alarm;
// alone it moves nothing, and they cannot approve it themselves; a second
// person approves, the gateway is asked first, and the wallet is credited
// once. Ops may only look. Every step is audited.
func TestPaymentReviewsAreListedAndResolved(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{Routes: teststack.QuietRoutes()}) // the gateway captures what the test pays, always
	ctx := context.Background()
	users := s.Users(t, "rvw", 1)
	pay, refund, alarm := uuid.New(), uuid.New(), uuid.New()
	pspRef := s.CaptureAtGateway(t, "swiftpay", pay, 50000)
	var review, alarmReview int64
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO payments (id, purpose, user_id, psp, route, method, amount_paise, state, idempotency_key, deadline, psp_ref)
			VALUES ($1, 'TOPUP', $2, 'swiftpay', 'UPI', 'UPI', 50000, 'SUCCESS', 'rvw-pay-1', now(), $3)`, []any{pay, users[0], pspRef}},
		{`INSERT INTO refunds (id, payment_id, reason, amount_paise, state) VALUES ($1, $2, 'AMOUNT_MISMATCH', 50000, 'FAILED')`, []any{refund, pay}},
		{`INSERT INTO payments (id, purpose, user_id, psp, route, method, amount_paise, state, idempotency_key, deadline, psp_ref)
			VALUES ($1, 'TOPUP', $2, 'swiftpay', 'UPI', 'UPI', 30000, 'SUCCESS', 'rvw-pay-2', now(), 'pay_rvw_2')`, []any{alarm, users[0]}},
	} {
		if _, err := s.Pool.Exec(ctx, q.sql, q.args...); err != nil {
			t.Fatal(err)
		}
	}
	teststack.Must(t, s.Pool.QueryRow(ctx, `INSERT INTO payment_reviews (payment_id, refund_id, kind, detail)
		VALUES ($1, $2, 'REFUND_REFUSED', '{"error":"account closed"}') RETURNING id`, pay, refund).Scan(&review), "review")
	teststack.Must(t, s.Pool.QueryRow(ctx, `INSERT INTO payment_reviews (payment_id, kind) VALUES ($1, 'FAILED_AFTER_SUCCESS') RETURNING id`,
		alarm).Scan(&alarmReview), "alarm")
	wallet := func() (balance, entries int64) {
		s.Pool.QueryRow(ctx, `SELECT coalesce((SELECT balance_paise FROM wallet_accounts WHERE user_id = $1), 0),
			(SELECT count(*) FROM wallet_entries WHERE kind = 'REFUND' AND ref = $2)`, users[0], refund.String()).Scan(&balance, &entries) //nolint:errcheck
		return
	}
	ops := newBrowser(t, s.Server.URL)
	ops.login("ops1")
	code, body, _ := ops.get("/console/payments")
	if code != 200 || !strings.Contains(body, "REFUND_REFUSED") || !strings.Contains(body, pay.String()) || strings.Contains(body, "Propose") {
		t.Fatalf("ops sees the review without actions: %d\n%.3000s", code, body)
	}
	path := "/console/payments/reviews/" + strconv.FormatInt(review, 10)
	alarmPath := "/console/payments/reviews/" + strconv.FormatInt(alarmReview, 10)
	if code, _, _ := ops.post(path, url.Values{"action": {"wallet"}, "note": {"x"}}); code != http.StatusForbidden {
		t.Fatalf("ops crediting the wallet: %d, want 403", code)
	}

	// One finance person alone: proposals, nothing moved, no self-approval.
	fin := newBrowser(t, s.Server.URL)
	fin.login("finance1")
	if code, body, _ := fin.post(path, url.Values{"action": {"wallet"}, "note": {"the customer's account is closed"}}); code != http.StatusSeeOther {
		t.Fatalf("proposing the wallet credit: %d %.2000s", code, body)
	}
	if code, _, _ := fin.post(alarmPath, url.Values{"action": {"resolve"}, "note": {"the gateway's ops say it failed"}}); code != http.StatusSeeOther {
		t.Fatalf("proposing to close the alarm: %d", code)
	}
	if balance, entries := wallet(); balance != 0 || entries != 0 {
		t.Fatalf("one person's proposal credited %d paise (%d entries)", balance, entries)
	}
	if _, body, _ := fin.get("/console/payments"); !strings.Contains(body, "Credit the refund to the wallet") {
		t.Fatalf("finance does not see the proposal:\n%.3000s", body)
	}
	var open int
	s.Pool.QueryRow(ctx, `SELECT count(*) FROM payment_reviews WHERE resolved_at IS NULL`).Scan(&open) //nolint:errcheck
	if open != 2 {
		t.Fatalf("%d reviews open after one person's proposals, want 2", open)
	}
	if _, body, _ := fin.get("/console/payments"); strings.Contains(body, "Approve (asks the gateway first)") || !strings.Contains(body, "Withdraw") {
		t.Fatalf("the proposer is offered their own approval:\n%.3000s", body)
	}
	for _, p := range []string{path, alarmPath} {
		if code, body, _ := fin.post(p, url.Values{"action": {"approve"}}); code != http.StatusForbidden || !strings.Contains(body, "second person") {
			t.Fatalf("the proposer approving %s: %d %.500s", p, code, body)
		}
	}

	// A second person approves: the gateway is asked first. It holds the
	// wallet credit's money; it has no record of the alarm's payment, which
	// a person may still close on two people's word.
	second := newBrowser(t, s.Server.URL)
	second.login("finance2")
	if code, body, _ := second.post(path, url.Values{"action": {"approve"}}); code != http.StatusSeeOther {
		t.Fatalf("second person's approval: %d %.2000s", code, body)
	}
	if code, _, _ := second.post(path, url.Values{"action": {"approve"}}); code == http.StatusSeeOther {
		t.Fatal("the wallet credit was approved twice")
	}
	if balance, entries := wallet(); balance != 50000 || entries != 1 {
		t.Fatalf("after the approval: balance %d, %d ledger entries", balance, entries)
	}
	if code, _, _ := second.post(alarmPath, url.Values{"action": {"approve"}}); code != http.StatusSeeOther {
		t.Fatalf("closing the alarm: %d", code)
	}
	var resolution string
	s.Pool.QueryRow(ctx, `SELECT resolution FROM payment_reviews WHERE id = $1`, alarmReview).Scan(&resolution) //nolint:errcheck
	if !strings.Contains(resolution, "finance1") || !strings.Contains(resolution, "finance2") || !strings.Contains(resolution, "no record") {
		t.Fatalf("the alarm's resolution names not both people and the gateway's answer: %q", resolution)
	}
	var audits int64
	s.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action LIKE 'payment.review.%' AND actor IN ('finance1', 'finance2', 'ops1')`).Scan(&audits) //nolint:errcheck
	// Two proposals, two refused self-approvals, two approvals and a refused
	// second approval (ops' attempt never reached the handler).
	if audits != 7 {
		t.Fatalf("%d audit rows of the review actions, want 7 (refusals included)", audits)
	}
	if _, body, _ := fin.get("/console/payments"); strings.Contains(body, pay.String()) || strings.Contains(body, alarm.String()) {
		t.Fatal("a resolved review is still listed")
	}
}
