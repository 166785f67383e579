package console

import (
	"testing"
	"time"

	"tatkal/booking/payment"
)

// TestSuggestRules: a failing or broken route is suggested off (never one
// already off); a deep queue is suggested a faster rate only while holds
// are fast, clamped below the two-admin line.
func TestSuggestRules(t *testing.T) {
	route := func(gw string, enabled, open bool, calls int, ok float64) payment.Health {
		return payment.Health{Route: payment.Route{Gateway: gw, Method: "UPI", Weight: 100, Enabled: enabled}, Calls: calls, SuccessRate: ok, Open: open}
	}
	hs := []payment.Health{
		route("good", true, false, 100, 0.99),
		route("failing", true, false, 20, 0.3),
		route("few", true, false, 5, 0.0), // too few calls to judge
		route("broken", true, true, 3, 0.0),
		route("off", false, true, 50, 0.0),
	}
	qs := []queueDepthOf{{shardID: 1, waiting: 10}, {shardID: 2, waiting: 600}, {shardID: 3, waiting: 1_000_000}}
	got := suggest(hs, qs, 20*time.Millisecond, 100)
	want := []struct{ name, scope, value string }{
		{"route", "failing/UPI", "0,off"}, {"route", "broken/UPI", "0,off"},
		{"admission_rate", "shard:2", "50"}, {"admission_rate", "shard:3", "5000"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i, w := range want {
		if got[i].Name != w.name || got[i].Scope != w.scope || got[i].Value != w.value {
			t.Errorf("%d: %+v, want %+v", i, got[i], w)
		}
	}
	if slow := suggest(nil, qs, 2*time.Second, 100); len(slow) != 0 {
		t.Fatalf("slow holds, still suggested: %+v", slow)
	}
	if mid := suggest(nil, []queueDepthOf{{shardID: 4, waiting: 6000}}, 0, 0); len(mid) != 1 || mid[0].Value != "100" {
		t.Fatalf("6000 waiting: %+v", mid)
	}
}
