package payment_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"tatkal/booking/lab/teststack"
	"tatkal/booking/payment"
	"tatkal/booking/payment/pspapi"
)

// The webhook secrets once compiled into the source are public: a stack
// started with its own random secrets refuses a "payment succeeded"
// callback signed with them, and no booking comes of it.
func TestCallbackSignedWithOldCompiledInSecretIsRefused(t *testing.T) {
	t.Parallel()
	w := newWorld(t, teststack.Options{Routes: fastRoutes(func(rc *pspapi.RouteConfig) { rc.AutoApproveMs = -1 })}, 4, 1)
	ctx := context.Background()
	h := w.hold(t, w.users[0], "forge-hold-1")
	v, err := w.pay(t, w.users[0], h.HoldID, payment.UPI, "forge-pay-1")
	if err != nil || v.State != payment.AwaitingUser {
		t.Fatalf("upi pay: %+v %v", v, err)
	}
	var pspRef string
	w.s.Pool.QueryRow(ctx, `SELECT psp_ref FROM payments WHERE id = $1`, v.ID).Scan(&pspRef) //nolint:errcheck
	body, _ := json.Marshal(pspapi.Webhook{EventID: "evt-forged-1", PSPRef: pspRef, MerchantRef: v.ID.String(), Gateway: v.Gateway,
		Method: "UPI", Status: pspapi.StatusSuccess, AmountPaise: v.AmountPaise, BankEventTime: time.Now()})
	ts := time.Now()
	req, _ := http.NewRequest("POST", w.s.Server.URL+"/v1/internal/payments/callback", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(pspapi.HeaderGateway, v.Gateway)
	req.Header.Set(pspapi.HeaderTimestamp, fmt.Sprint(ts.Unix()))
	req.Header.Set(pspapi.HeaderSignature, pspapi.Sign([]byte("whsec_dev_"+v.Gateway), ts, body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(b), "BAD_SIGNATURE") {
		t.Fatalf("forged callback: %d %s, want 401 BAD_SIGNATURE", resp.StatusCode, b)
	}
	var state string
	var bookings int
	w.s.Pool.QueryRow(ctx, `SELECT state, (SELECT count(*) FROM bookings) FROM payments WHERE id = $1`, v.ID).Scan(&state, &bookings) //nolint:errcheck
	if state != payment.AwaitingUser || bookings != 0 {
		t.Fatalf("after the forged callback: payment %s, %d bookings; want %s and none", state, bookings, payment.AwaitingUser)
	}
}
