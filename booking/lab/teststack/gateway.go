package teststack

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"

	"tatkal/booking/lab/testenv"
	"tatkal/booking/payment/pspapi"
)

// CaptureAtGateway has the stack's gateway simulator create a UPI payment
// for merchantRef and its customer approve it, as a real charge would be
// made, and returns the gateway's reference once it is captured. Nothing
// of ours is told: the test records what it needs. The stack's routes
// must not decline or lose it (QuietRoutes).
func (s *Stack) CaptureAtGateway(t testing.TB, gateway string, merchantRef uuid.UUID, amountPaise int64) string {
	t.Helper()
	var key string
	for _, g := range s.Gateways {
		if g.ID == gateway {
			key = g.APIKey
		}
	}
	base := s.PSP.URL + "/gw/" + gateway
	r := testenv.Call(t, testenv.Request{Method: "POST", URL: base + "/v1/payments", Token: key,
		Header: map[string]string{pspapi.HeaderIdempotencyKey: "capture-" + merchantRef.String()},
		Body: pspapi.CreatePayment{MerchantRef: merchantRef.String(), AmountPaise: amountPaise, Currency: "INR", Method: pspapi.UPI,
			VPA: "payer@okbank", CallbackURL: s.Server.URL + "/v1/internal/payments/callback", ReturnURL: s.Server.URL + "/payments/return"}})
	var p pspapi.Payment
	if r.Status >= 300 || r.Decode(&p) != nil {
		t.Fatalf("create at %s: %d %s", gateway, r.Status, r.Raw)
	}
	s.approveAt(t, gateway, p.PSPRef)
	testenv.Eventually(t, 15*time.Second, "payment "+p.PSPRef+" captured at "+gateway, func() error {
		r := testenv.Call(t, testenv.Request{Method: "GET", URL: base + "/v1/payments/" + url.PathEscape(p.PSPRef), Token: key})
		if r.Status != 200 || r.Decode(&p) != nil {
			t.Fatalf("payment %s at %s: %d %s", p.PSPRef, gateway, r.Status, r.Raw)
		}
		if p.Status == pspapi.StatusFailed {
			t.Fatalf("payment %s at %s failed: the stack's routes declined or lost it (use QuietRoutes)", p.PSPRef, gateway)
		}
		return testenv.Want(p.Status == pspapi.StatusSuccess, "%s", p.Status)
	})
	return p.PSPRef
}

// ApproveAtGateway plays the customer of one of our payments on its
// gateway's page: they approve, and the gateway captures it (and tells us
// by callback, as it would).
func (s *Stack) ApproveAtGateway(t testing.TB, paymentID uuid.UUID) {
	t.Helper()
	var gateway, ref string
	if err := s.Pool.QueryRow(context.Background(), `SELECT psp, coalesce(psp_ref, '') FROM payments WHERE id = $1`, paymentID).Scan(&gateway, &ref); err != nil || ref == "" {
		t.Fatalf("payment %s at its gateway: %q %v", paymentID, ref, err)
	}
	s.approveAt(t, gateway, ref)
}

// approveAt posts the customer's approval on the gateway's page; the
// gateway then sends the browser back to us, which is not followed.
func (s *Stack) approveAt(t testing.TB, gateway, pspRef string) {
	t.Helper()
	noRedirect := testenv.FormClient()
	r := testenv.Call(t, testenv.Request{Method: "POST", URL: s.PSP.URL + "/gw/" + gateway + "/pay/" + url.PathEscape(pspRef) + "/approve",
		Client: noRedirect, Header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, Body: "otp=123456"})
	if r.Status >= 400 {
		t.Fatalf("approve %s at %s: %d %s", pspRef, gateway, r.Status, r.Raw)
	}
}
