package payment_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"tatkal/booking"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
	"tatkal/booking/payment"
	"tatkal/booking/payment/pspapi"
)

// sendWebhook posts a webhook signed with the gateway's secret, as the
// gateway would, or as anyone who has the secret could.
func sendWebhook(t *testing.T, w *world, gw string, ev pspapi.Webhook) int {
	t.Helper()
	var secret []byte
	for _, g := range w.s.Gateways {
		if g.ID == gw {
			secret = g.WebhookSecrets[0]
		}
	}
	body, _ := json.Marshal(ev)
	now := time.Now()
	req, _ := http.NewRequest("POST", w.s.Server.URL+"/v1/internal/payments/callback", bytes.NewReader(body))
	req.Header.Set(pspapi.HeaderGateway, gw)
	req.Header.Set(pspapi.HeaderTimestamp, fmt.Sprint(now.Unix()))
	req.Header.Set(pspapi.HeaderSignature, pspapi.Sign(secret, now, body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// decline plays the customer refusing on the gateway's page.
func decline(t *testing.T, w *world, id uuid.UUID) {
	t.Helper()
	var gw, ref string
	w.s.Pool.QueryRow(context.Background(), `SELECT psp, psp_ref FROM payments WHERE id = $1`, id).Scan(&gw, &ref) //nolint:errcheck
	noRedirect := testenv.FormClient()
	resp, err := noRedirect.Post(w.s.PSP.URL+"/gw/"+gw+"/pay/"+ref+"/decline", "application/x-www-form-urlencoded", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 400 {
		t.Fatalf("decline %s: %d", ref, resp.StatusCode)
	}
}

func openReviews(t *testing.T, w *world, id uuid.UUID) []string {
	t.Helper()
	rows, err := w.s.Pool.Query(context.Background(), `SELECT kind FROM payment_reviews WHERE payment_id = $1 AND resolved_at IS NULL ORDER BY id`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var kinds []string
	for rows.Next() {
		var k string
		rows.Scan(&k) //nolint:errcheck
		kinds = append(kinds, k)
	}
	return kinds
}

// A "payment succeeded" callback signed with the gateway's secret (forged
// by someone who read it, say) confirms the booking at once, but the status
// inquiry that follows asks the gateway itself. When the gateway says the
// payment failed, that is an alarm: a durable review, the payment in review,
// listed for operators; not a log line. Issue 8 (2) and issue 9 (9).
func TestSuccessCallbackContradictedByTheGatewayIsRaised(t *testing.T) {
	t.Parallel()
	w := newWorld(t, teststack.Options{Routes: fastRoutes(func(rc *pspapi.RouteConfig) { rc.AutoApproveMs = -1 })}, 4, 1)
	ctx := context.Background()
	u := w.users[0]
	h := w.hold(t, u, "contra-hold-1")
	v, err := w.pay(t, u, h.HoldID, payment.UPI, "contra-pay-1")
	if err != nil || v.State != payment.AwaitingUser {
		t.Fatalf("upi pay: %+v %v", v, err)
	}
	var pspRef string
	w.s.Pool.QueryRow(ctx, `SELECT psp_ref FROM payments WHERE id = $1`, v.ID).Scan(&pspRef) //nolint:errcheck
	forged := pspapi.Webhook{EventID: "evt-forged-1", PSPRef: pspRef, MerchantRef: v.ID.String(), Gateway: v.Gateway, Method: "UPI",
		Status: pspapi.StatusSuccess, AmountPaise: v.AmountPaise, Currency: "INR", BankEventTime: time.Now()}
	if code := sendWebhook(t, w, v.Gateway, forged); code != 200 {
		t.Fatalf("forged callback: %d", code)
	}
	st, _ := w.s.Service.Status(ctx, u, h.HoldID)
	if st.BookingStat != booking.BookingConfirmed {
		t.Fatalf("after the callback the hold is %+v", st)
	}
	// The inquiry asks: the gateway still waits for the customer. Nothing
	// is decided yet, and the inquiry keeps asking.
	again, err := w.s.Payments.Inquire(ctx, v.ID)
	if err != nil || again == 0 {
		t.Fatalf("inquiry while the gateway waits: %v %v", again, err)
	}
	if k := openReviews(t, w, v.ID); len(k) != 0 {
		t.Fatalf("reviews before any contradiction: %v", k)
	}
	// The customer never paid: the gateway says FAILED, by callback and
	// to the inquiry. Both are the same alarm, raised once.
	decline(t, w, v.ID)
	again, err = w.s.Payments.Inquire(ctx, v.ID)
	if err != nil || again != 0 {
		t.Fatalf("inquiry after the gateway failed it: %v %v (want done)", again, err)
	}
	if k := openReviews(t, w, v.ID); len(k) != 1 || k[0] != payment.ReviewFailedAfterSuccess {
		t.Fatalf("open reviews after the contradiction: %v", k)
	}
	failed := forged
	failed.EventID, failed.Status, failed.FailureReason = "evt-failed-1", pspapi.StatusFailed, pspapi.ReasonCustomerDeclined
	if code := sendWebhook(t, w, v.Gateway, failed); code != 200 {
		t.Fatalf("failure callback: %d", code)
	}
	if k := openReviews(t, w, v.ID); len(k) != 1 {
		t.Fatalf("raising again must change nothing: %v", k)
	}
	got, err := w.s.Payments.Get(ctx, u, v.ID)
	if err != nil || !got.InReview || got.State != payment.Success {
		t.Fatalf("payment after the contradiction: %+v %v", got, err)
	}
	reviews, err := w.s.Payments.OpenReviews(ctx, 10)
	if err != nil || len(reviews) != 1 || reviews[0].PNR == "" || reviews[0].PaymentID != v.ID {
		t.Fatalf("open reviews as operators see them: %+v %v", reviews, err)
	}
	// Closing the alarm takes two people: one proposes, the same one may
	// not approve, a second does after the gateway is asked again.
	if err := w.s.Payments.ProposeReview(ctx, reviews[0].ID, "finance1", payment.ProposeResolve, "booking cancelled by hand"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.s.Payments.ApproveReview(ctx, reviews[0].ID, payment.Approver{Login: "finance1"}); booking.ErrorReason(err) != "SAME_PERSON" {
		t.Fatalf("the proposer approving: %v", err)
	}
	if got, _ := w.s.Payments.Get(ctx, u, v.ID); !got.InReview {
		t.Fatal("a refused approval closed the review")
	}
	answer, err := w.s.Payments.ApproveReview(ctx, reviews[0].ID, payment.Approver{Login: "finance2"})
	if err != nil || !answer.Found || answer.Status != pspapi.StatusFailed {
		t.Fatalf("second person's approval: %v, gateway %+v", err, answer)
	}
	var resolution string
	w.s.Pool.QueryRow(ctx, `SELECT resolution FROM payment_reviews WHERE id = $1`, reviews[0].ID).Scan(&resolution) //nolint:errcheck
	for _, want := range []string{"finance1", "finance2", "booking cancelled by hand", "the gateway says FAILED"} {
		if !strings.Contains(resolution, want) {
			t.Fatalf("resolution %q lacks %q", resolution, want)
		}
	}
	if got, _ := w.s.Payments.Get(ctx, u, v.ID); got.InReview {
		t.Fatal("still in review after resolving")
	}
}

// A gateway that captured another amount than ours: recorded, the seats
// released, the captured amount refunded, a review raised, and the inquiry
// job finished instead of failing 200 times. Issue 9 (6).
func TestAmountMismatchIsRecordedRefundedAndRaised(t *testing.T) {
	t.Parallel()
	w := newWorld(t, teststack.Options{Work: true, Routes: fastRoutes(func(rc *pspapi.RouteConfig) { rc.AutoApproveMs = -1 })}, 4, 1)
	ctx := context.Background()
	u := w.users[0]
	h := w.hold(t, u, "mismatch-hold-1")
	// Our payment row asks for the fare; the gateway is made to capture
	// ₹1 less (a gateway bug, or a tampered create).
	id := uuid.New()
	if _, err := w.s.Pool.Exec(ctx, `INSERT INTO payments (id, hold_id, user_id, psp, route, method, amount_paise, state, idempotency_key, deadline)
		VALUES ($1, $2, $3, 'swiftpay', 'UPI', 'UPI', $4, 'AWAITING_USER', 'mismatch-pay-1', now() + interval '1 minute')`,
		id, h.HoldID, u, h.Fare.TotalPaise); err != nil {
		t.Fatal(err)
	}
	captured := h.Fare.TotalPaise - 100
	createAtGateway(t, w, id, captured)
	approve(t, w, id)
	w.drain(t, 30*time.Second)
	v, err := w.s.Payments.Get(ctx, u, id)
	if err != nil || v.State != payment.Refunded || v.Refund == nil || v.Refund.AmountPaise != captured ||
		v.Refund.Reason != booking.RefundAmountMismatch || v.FailureReason != "AMOUNT_MISMATCH" {
		t.Fatalf("mismatched payment: %+v %v", v, err)
	}
	var bookings, inquiryErrors int
	var holdState string
	w.s.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM bookings WHERE hold_id = $1), (SELECT state FROM holds WHERE id = $1),
		(SELECT count(*) FROM river_job WHERE kind = 'payment_inquiry' AND coalesce(array_length(errors, 1), 0) > 0)`, h.HoldID).
		Scan(&bookings, &holdState, &inquiryErrors) //nolint:errcheck
	if bookings != 0 || holdState != booking.HoldReleased || inquiryErrors != 0 {
		t.Fatalf("after the mismatch: %d bookings, hold %s, %d inquiry jobs with errors", bookings, holdState, inquiryErrors)
	}
	if k := openReviews(t, w, id); len(k) != 1 || k[0] != payment.ReviewAmountMismatch {
		t.Fatalf("reviews: %v", k)
	}
	if gp, _ := w.gatewayPayment(t, "swiftpay", id); gp.RefundedPaise != captured {
		t.Fatalf("the gateway refunded %d of %d", gp.RefundedPaise, captured)
	}
}

// A refund the gateway refuses is marked FAILED and raised instead of being
// retried forever under the same key; an operator's wallet fallback then
// credits it once, however often it is asked. Issue 9 (7).
func TestRefusedRefundStopsAndFallsBackToTheWalletOnce(t *testing.T) {
	t.Parallel()
	w := newWorld(t, teststack.Options{Work: true, Routes: fastRoutes(func(rc *pspapi.RouteConfig) {
		rc.AutoApproveMs, rc.RefundFailRate = -1, 1
	})}, 4, 1)
	ctx := context.Background()
	u := w.users[0]
	h := w.hold(t, u, "refuse-hold-1")
	if _, err := w.pay(t, u, h.HoldID, payment.Wallet, "refuse-pay-1"); err != nil {
		t.Fatal(err)
	}
	// A stray second charge on the paid hold: refunded as a duplicate, and
	// the customer's bank refuses the refund.
	stray := uuid.New()
	if _, err := w.s.Pool.Exec(ctx, `INSERT INTO payments (id, hold_id, user_id, psp, route, method, amount_paise, state, idempotency_key, deadline)
		VALUES ($1, $2, $3, 'swiftpay', 'UPI', 'UPI', $4, 'UNKNOWN', 'refuse-stray-1', now() + interval '1 minute')`,
		stray, h.HoldID, u, h.Fare.TotalPaise); err != nil {
		t.Fatal(err)
	}
	createAtGateway(t, w, stray, h.Fare.TotalPaise)
	approve(t, w, stray)
	var refundState string
	deadline := time.Now().Add(30 * time.Second)
	for refundState != "FAILED" {
		if time.Now().After(deadline) {
			t.Fatalf("refund is %q, want FAILED", refundState)
		}
		time.Sleep(200 * time.Millisecond)
		w.s.Pool.QueryRow(ctx, `SELECT state FROM refunds WHERE payment_id = $1`, stray).Scan(&refundState) //nolint:errcheck
	}
	var jobState string
	var attempts int
	deadline = time.Now().Add(20 * time.Second)
	for jobState != "completed" {
		if time.Now().After(deadline) {
			t.Fatalf("refund job is %s after %d attempts, want completed", jobState, attempts)
		}
		time.Sleep(200 * time.Millisecond)
		w.s.Pool.QueryRow(ctx, `SELECT state, attempt FROM river_job WHERE kind = 'refund_execute' ORDER BY id DESC LIMIT 1`).Scan(&jobState, &attempts) //nolint:errcheck
	}
	if k := openReviews(t, w, stray); len(k) != 1 || k[0] != payment.ReviewRefundRefused {
		t.Fatalf("reviews: %v", k)
	}
	before, _, _ := w.s.Payments.Wallet(ctx, u, 0)
	reviews, err := w.s.Payments.OpenReviews(ctx, 10)
	if err != nil || len(reviews) != 1 {
		t.Fatalf("open reviews: %+v %v", reviews, err)
	}
	// One person proposes the wallet credit; alone they move nothing.
	id := reviews[0].ID
	if _, err := w.s.Payments.ApproveReview(ctx, id, payment.Approver{Login: "finance2"}); booking.ErrorReason(err) != "NOT_PROPOSED" {
		t.Fatalf("approving with no proposal: %v", err)
	}
	if err := w.s.Payments.ProposeReview(ctx, id, "finance1", payment.ProposeWallet, "customer's bank account closed"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.s.Payments.ApproveReview(ctx, id, payment.Approver{Login: "finance1", Lead: true}); booking.ErrorReason(err) != "SAME_PERSON" {
		t.Fatalf("the proposer approving: %v", err)
	}
	// Four other people approve at once: the gateway confirms it holds the
	// money, and the wallet is credited once.
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i := range 4 {
		wg.Go(func() {
			_, err := w.s.Payments.ApproveReview(ctx, id, payment.Approver{Login: fmt.Sprintf("finance%d", i+2)})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if booking.ErrorCode(err) == booking.EINTERNAL {
			t.Fatalf("wallet fallback: %v", err)
		}
	}
	if _, err := w.s.Payments.ApproveReview(ctx, id, payment.Approver{Login: "finance9"}); booking.ErrorCode(err) != booking.ENOTFOUND {
		t.Fatalf("wallet fallback after it was done: %v, want a refusal", err)
	}
	after, _, _ := w.s.Payments.Wallet(ctx, u, 0)
	if after-before != h.Fare.TotalPaise {
		t.Fatalf("wallet moved by %d, want %d once", after-before, h.Fare.TotalPaise)
	}
	v, err := w.s.Payments.Get(ctx, u, stray)
	if err != nil || v.State != payment.Refunded || v.Refund.State != "PROCESSED" || v.InReview {
		t.Fatalf("stray payment after the wallet fallback: %+v %v", v, err)
	}
	w.drain(t, 20*time.Second)
	w.checkMoney(t)
}

// A wallet credit rests on two people and the gateway's fresh word: a
// refused refund of a payment the gateway never captured (crediting would
// mint money) is refused even when two people agree, and above the limit
// only a finance lead approves. Nothing moves on a refusal.
func TestWalletCreditNeedsTheGatewaysWordAndALeadAboveTheLimit(t *testing.T) {
	t.Parallel()
	w := newWorld(t, teststack.Options{Routes: fastRoutes(nil)}, 4, 1)
	ctx := context.Background()
	u := w.users[0]
	review := func(key string, amount int64) int64 {
		t.Helper()
		pay, refund := uuid.New(), uuid.New()
		var id int64
		if _, err := w.s.Pool.Exec(ctx, `INSERT INTO payments (id, purpose, user_id, psp, route, method, amount_paise, state, idempotency_key, deadline, psp_ref)
			VALUES ($1, 'TOPUP', $2, 'swiftpay', 'UPI', 'UPI', $3, 'SUCCESS', $4, now(), $4)`, pay, u, amount, key); err != nil {
			t.Fatal(err)
		}
		if _, err := w.s.Pool.Exec(ctx, `INSERT INTO refunds (id, payment_id, reason, amount_paise, state) VALUES ($1, $2, 'SYSTEM', $3, 'FAILED')`,
			refund, pay, amount); err != nil {
			t.Fatal(err)
		}
		if err := w.s.Pool.QueryRow(ctx, `INSERT INTO payment_reviews (payment_id, refund_id, kind) VALUES ($1, $2, 'REFUND_REFUSED') RETURNING id`,
			pay, refund).Scan(&id); err != nil {
			t.Fatal(err)
		}
		if err := w.s.Payments.ProposeReview(ctx, id, "finance1", payment.ProposeWallet, "the bank refused it"); err != nil {
			t.Fatal(err)
		}
		return id
	}
	before, _, _ := w.s.Payments.Wallet(ctx, u, 0)
	small, large := review("never-captured-1", 50000), review("never-captured-2", 2_000_000)
	if _, err := w.s.Payments.ApproveReview(ctx, large, payment.Approver{Login: "finance2"}); booking.ErrorReason(err) != "LEAD_REQUIRED" {
		t.Fatalf("₹20,000 approved by a clerk: %v", err)
	}
	for _, id := range []int64{small, large} {
		a, err := w.s.Payments.ApproveReview(ctx, id, payment.Approver{Login: "finance2", Lead: true})
		if booking.ErrorReason(err) != "GATEWAY_DISAGREES" || a.Found {
			t.Fatalf("crediting a capture the gateway never made: %v (%+v)", err, a)
		}
	}
	if after, _, _ := w.s.Payments.Wallet(ctx, u, 0); after != before {
		t.Fatalf("the wallet moved from %d to %d paise on refusals", before, after)
	}
	var open int
	w.s.Pool.QueryRow(ctx, `SELECT count(*) FROM payment_reviews WHERE resolved_at IS NULL AND proposal = 'WALLET'`).Scan(&open) //nolint:errcheck
	if open != 2 {
		t.Fatalf("%d proposals still open, want both", open)
	}
	// The proposer may withdraw; then there is nothing to approve.
	if err := w.s.Payments.RejectReview(ctx, small, "finance1"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.s.Payments.ApproveReview(ctx, small, payment.Approver{Login: "finance2"}); booking.ErrorReason(err) != "NOT_PROPOSED" {
		t.Fatalf("approving a withdrawn proposal: %v", err)
	}
}

// A gateway answer that says SUCCESS without an amount or currency proves
// nothing: 0 is "unknown", never a match. The payment is not confirmed on
// it, and the inquiry keeps asking. Issue 9 (6).
func TestSuccessWithoutAnAmountConfirmsNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t, teststack.Options{Routes: fastRoutes(func(rc *pspapi.RouteConfig) {
		rc.AutoApproveMs, rc.LostCallbackRate, rc.InquiryOmitsAmount = -1, 1, true
	})}, 4, 1)
	ctx := context.Background()
	u := w.users[0]
	h := w.hold(t, u, "noamount-hold-1")
	v, err := w.pay(t, u, h.HoldID, payment.UPI, "noamount-pay-1")
	if err != nil {
		t.Fatal(err)
	}
	approve(t, w, v.ID)
	if gp, _ := w.gatewayPayment(t, v.Gateway, v.ID); gp.Status != pspapi.StatusSuccess {
		t.Fatalf("at the gateway: %+v", gp)
	}
	again, err := w.s.Payments.Inquire(ctx, v.ID)
	if err != nil || again == 0 {
		t.Fatalf("inquiry answered without an amount: %v %v, want to ask again", again, err)
	}
	got, _ := w.s.Payments.Get(ctx, u, v.ID)
	st, _ := w.s.Service.Status(ctx, u, h.HoldID)
	if got.State == payment.Success || st.BookingStat != "" {
		t.Fatalf("a success with no amount was taken: payment %s, booking %q", got.State, st.BookingStat)
	}
}
