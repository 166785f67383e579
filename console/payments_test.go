package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"

	"tatkal/booking/teststack"
)

// Payments in review are listed for ops, finance and admin; finance may
// credit a refused refund to the wallet, once, audited; ops may only look.
func TestPaymentReviewsAreListedAndResolved(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{})
	ctx := context.Background()
	users := s.Users(t, "rvw", 1)
	pay, refund := uuid.New(), uuid.New()
	var review int64
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO payments (id, purpose, user_id, psp, route, method, amount_paise, state, idempotency_key, deadline, psp_ref)
			VALUES ($1, 'TOPUP', $2, 'swiftpay', 'UPI', 'UPI', 50000, 'SUCCESS', 'rvw-pay-1', now(), 'pay_rvw_1')`, []any{pay, users[0]}},
		{`INSERT INTO refunds (id, payment_id, reason, amount_paise, state) VALUES ($1, $2, 'AMOUNT_MISMATCH', 50000, 'FAILED')`, []any{refund, pay}},
	} {
		if _, err := s.Pool.Exec(ctx, q.sql, q.args...); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Pool.QueryRow(ctx, `INSERT INTO payment_reviews (payment_id, refund_id, kind, detail) VALUES ($1, $2, 'REFUND_REFUSED', '{"error":"account closed"}')
		RETURNING id`, pay, refund).Scan(&review); err != nil {
		t.Fatal(err)
	}
	ops := newBrowser(t, s.Server.URL)
	ops.login("ops1")
	code, body, _ := ops.get("/console/payments")
	if code != 200 || !strings.Contains(body, "REFUND_REFUSED") || !strings.Contains(body, pay.String()) || strings.Contains(body, "Credit refund to wallet") {
		t.Fatalf("ops sees the review without actions: %d\n%.3000s", code, body)
	}
	path := "/console/payments/reviews/" + strconv.FormatInt(review, 10)
	if code, _, _ := ops.post(path, url.Values{"action": {"wallet"}}); code != http.StatusForbidden {
		t.Fatalf("ops crediting the wallet: %d, want 403", code)
	}
	fin := newBrowser(t, s.Server.URL)
	fin.login("finance1")
	if _, body, _ := fin.get("/console/payments"); !strings.Contains(body, "Credit refund to wallet") {
		t.Fatalf("finance sees no wallet fallback:\n%.3000s", body)
	}
	if code, body, _ := fin.post(path, url.Values{"action": {"wallet"}}); code != http.StatusSeeOther {
		t.Fatalf("wallet fallback: %d %.2000s", code, body)
	}
	if code, _, _ := fin.post(path, url.Values{"action": {"wallet"}}); code == http.StatusSeeOther {
		t.Fatal("the wallet fallback was accepted twice")
	}
	var balance, entries, audits int64
	s.Pool.QueryRow(ctx, `SELECT coalesce((SELECT balance_paise FROM wallet_accounts WHERE user_id = $1), 0),
		(SELECT count(*) FROM wallet_entries WHERE kind = 'REFUND' AND ref = $2),
		(SELECT count(*) FROM audit_log WHERE action = 'payment.review.wallet')`, users[0], refund.String()).Scan(&balance, &entries, &audits) //nolint:errcheck
	if balance != 50000 || entries != 1 || audits != 2 {
		t.Fatalf("after the fallback: balance %d, %d ledger entries, %d audit rows", balance, entries, audits)
	}
	if _, body, _ := fin.get("/console/payments"); strings.Contains(body, pay.String()) {
		t.Fatal("a resolved review is still listed")
	}
}
