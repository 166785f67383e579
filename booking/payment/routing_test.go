package payment_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"tatkal/booking"
	"tatkal/booking/funnel"
	"tatkal/booking/lab/teststack"
	"tatkal/booking/payment"
	"tatkal/booking/payment/pspapi"
)

// Routing weighs gateways by health: after a failure the heavily weighted
// but failing gateway gets only a trickle; a route failing call after call
// opens its breaker and gets nothing while it is open; with every route of
// a method off, that method is refused and nothing changes.
func TestRoutingAvoidsAFailingGateway(t *testing.T) {
	t.Parallel()
	routes := fastRoutes(func(rc *pspapi.RouteConfig) {
		if rc.Gateway == "swiftpay" && rc.Method == pspapi.UPI {
			rc.Outage = true
		}
	})
	w := newWorld(t, teststack.Options{Routes: routes}, 60, 60)
	ctx := context.Background()
	start := time.Now()
	if err := w.s.Payments.SetRouteWeight(ctx, "swiftpay", "UPI", 1000, true); err != nil {
		t.Fatal(err)
	}
	if err := w.s.Payments.SetRouteWeight(ctx, "bharatpg", "UPI", 1, true); err != nil {
		t.Fatal(err)
	}
	var gateways []string
	for i, u := range w.users[:30] {
		h := w.hold(t, u, fmt.Sprintf("route-hold-%02d", i))
		v, err := w.pay(t, u, h.HoldID, payment.UPI, fmt.Sprintf("route-pay-%02d", i))
		if err != nil {
			t.Fatalf("payment %d: %v", i, err)
		}
		gateways = append(gateways, v.Gateway)
	}
	healthy := 0
	for _, g := range gateways[1:] {
		if g == "bharatpg" {
			healthy++
		}
	}
	if healthy < 26 {
		t.Fatalf("only %d of 29 payments avoided the failing gateway: %v", healthy, gateways)
	}
	// The console's route charts count the same calls, summed in Redis per
	// 5-second step and split as the breaker sees them.
	if err := w.s.Funnel.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	steps, err := w.s.Funnel.RouteSeries(ctx, start, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]int64{}
	for _, st := range steps {
		for k, n := range st.Counts {
			calls[k] += n
		}
	}
	// Counted over all 30 payments: the first may have gone either way.
	var toFailing int64
	for _, g := range gateways {
		if g == "swiftpay" {
			toFailing++
		}
	}
	toHealthy := int64(len(gateways)) - toFailing
	if calls["swiftpay/UPI|no_answer"] < toFailing || calls["bharatpg/UPI|answered"] < toHealthy || calls["swiftpay/UPI|answered"] != 0 {
		t.Fatalf("route series %v: want at least %d unanswered calls to swiftpay/UPI (inquiries may add more), none answered and at least %d answered by bharatpg/UPI", calls, toFailing, toHealthy)
	}
	// Now bharatpg fails too, call after call: its breaker opens.
	for _, rc := range routes {
		if rc.Gateway == "bharatpg" && rc.Method == pspapi.UPI {
			rc.Outage = true
			w.s.SetRoute(t, rc)
		}
	}
	var after []string
	for i, u := range w.users[30:50] {
		h := w.hold(t, u, fmt.Sprintf("route-hold-b%02d", i))
		v, err := w.pay(t, u, h.HoldID, payment.UPI, fmt.Sprintf("route-pay-b%02d", i))
		if booking.ErrorReason(err) == "METHOD_UNAVAILABLE" {
			after = append(after, "refused") // every UPI breaker open
			break
		}
		if err != nil {
			t.Fatalf("payment b%d: %v", i, err)
		}
		after = append(after, v.Gateway)
	}
	sentToB := 0
	for _, g := range after {
		if g == "bharatpg" {
			sentToB++
		}
	}
	if sentToB > 6 || after[len(after)-1] != "refused" {
		t.Fatalf("with both UPI gateways failing: %v; want bharatpg cut off after a few failures, then UPI refused", after)
	}
	hs, err := w.s.Payments.Healths(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		if h.Gateway == "bharatpg" && h.Method == "UPI" && !h.Open {
			t.Fatalf("bharatpg/UPI failed %d calls and its breaker is closed (success %.2f); gateways %v", h.Calls, h.SuccessRate, after)
		}
	}
	// Its opening is in the route series, once however many calls saw it.
	if err := w.s.Funnel.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if steps, err = w.s.Funnel.RouteSeries(ctx, start, time.Now()); err != nil {
		t.Fatal(err)
	}
	opened := 0
	for _, st := range steps {
		opened += int(st.Counts["bharatpg/UPI|"+funnel.RouteBreakerOpened])
	}
	if opened != 1 {
		t.Fatalf("bharatpg/UPI's breaker opened %d times in the route series, want 1", opened)
	}
	// Every UPI route off: UPI is refused, the hold and the money untouched.
	if err := w.s.Payments.SetRouteWeight(ctx, "bharatpg", "UPI", 0, false); err != nil {
		t.Fatal(err)
	}
	if err := w.s.Payments.SetRouteWeight(ctx, "swiftpay", "UPI", 0, false); err != nil {
		t.Fatal(err)
	}
	u := w.users[55]
	h := w.hold(t, u, "route-hold-off")
	if _, err := w.pay(t, u, h.HoldID, payment.UPI, "route-pay-off"); booking.ErrorReason(err) != "METHOD_UNAVAILABLE" {
		t.Fatalf("UPI with every route off: %v", err)
	}
	var n int
	w.s.Pool.QueryRow(ctx, `SELECT count(*) FROM payments WHERE hold_id = $1`, h.HoldID).Scan(&n) //nolint:errcheck
	if n != 0 {
		t.Fatalf("a refused payment left %d rows", n)
	}
}
