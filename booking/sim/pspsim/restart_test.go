package pspsim

import (
	"net/http"
	"testing"
	"time"

	"tatkal/booking/payment/pspapi"
)

func TestRestartKeepsEverything(t *testing.T) {
	t.Parallel()
	first := setup(t, opts{route: func(rc *pspapi.RouteConfig) { rc.AutoApproveMs = 600 }})
	done := first.captured(t, "bharatpg", "pay-restart-done", 2000) // waits ~600 ms
	first.putRoute(t, "bharatpg", pspapi.Card, func(rc *pspapi.RouteConfig) { rc.FeeBps = 222 })
	req := first.createReq("pay-restart", pspapi.UPI, 3100)
	p := first.create(t, "swiftpay", req)
	first.stop() // the process goes away before the customer approves
	if s := first.dbStatus(t, p.PSPRef); s != pspapi.StatusCreated {
		t.Fatalf("status at restart = %s, want CREATED", s)
	}

	// A new process on the same schema, configured with other route
	// defaults: stored routes win, stored payments are served.
	second := setup(t, opts{env: first.env, route: func(rc *pspapi.RouteConfig) { rc.FeeBps = 1 }})
	second.hooks = first.hooks // webhooks still go to the callback_url given at create
	if got := second.inquire(t, "bharatpg", done.PSPRef); got.Status != pspapi.StatusSuccess || got.AmountPaise != 2000 {
		t.Fatalf("captured payment after restart = %+v", got)
	}
	rc, _, err := second.srv.route(t.Context(), second.env.Pool, "bharatpg", pspapi.Card)
	if err != nil || rc.FeeBps != 222 {
		t.Fatalf("route after restart: fee %d, %v", rc.FeeBps, err)
	}
	// The pending customer approval is carried out by the new process.
	first.hooks.waitStatus(t, p.PSPRef, pspapi.StatusSuccess, 3*time.Second)
	if got := second.inquireByMerchantRef(t, "swiftpay", "pay-restart"); got.PSPRef != p.PSPRef || got.Status != pspapi.StatusSuccess {
		t.Fatalf("inquiry after restart = %+v", got)
	}
	// Idempotency survives too.
	r := second.must(t, "POST", "/gw/swiftpay/v1/payments", apiKey("swiftpay"), "key-pay-restart", req)
	if again := decodeAs[pspapi.Payment](t, r, http.StatusOK); again.PSPRef != p.PSPRef {
		t.Fatalf("replay after restart = %s, want %s", again.PSPRef, p.PSPRef)
	}
	decodeAs[pspapi.Refund](t, second.refund(t, "bharatpg", "rk", pspapi.CreateRefund{PSPRef: done.PSPRef, AmountPaise: 2000, MerchantRef: "rf-r"}), http.StatusCreated)
	if n := second.count(t, `SELECT count(*) FROM {s}.payments`); n != 2 {
		t.Fatalf("payments = %d", n)
	}
}
