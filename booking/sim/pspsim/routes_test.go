package pspsim

import (
	"testing"

	"tatkal/booking/payment/pspapi"
)

func TestDefaultRoutesAreSensible(t *testing.T) {
	carried := map[string]bool{}
	for _, rc := range DefaultRoutes() {
		carried[routeKey(rc.Gateway, rc.Method)] = true
		if err := validateRoute(rc); err != nil {
			t.Errorf("%s/%s: %v", rc.Gateway, rc.Method, err)
		}
		if rc.LatencyP50Ms < 80 || rc.LatencyP50Ms > 200 || rc.LatencyP99Ms < 600 || rc.LatencyP99Ms > 1500 {
			t.Errorf("%s/%s latency p50 %d p99 %d", rc.Gateway, rc.Method, rc.LatencyP50Ms, rc.LatencyP99Ms)
		}
		if rc.AutoApproveMs < 1000 || rc.AutoApproveMs > 3000 || rc.DeclineRate < 0.02 || rc.DeclineRate > 0.04 || rc.Outage {
			t.Errorf("%s/%s customer %d ms, decline %v", rc.Gateway, rc.Method, rc.AutoApproveMs, rc.DeclineRate)
		}
		switch rc.Method {
		case pspapi.Card:
			if rc.FeeBps < 150 || rc.FeeBps > 200 {
				t.Errorf("%s card fee %d bps", rc.Gateway, rc.FeeBps)
			}
		case pspapi.UPI:
			if rc.FeeBps > 50 {
				t.Errorf("%s UPI fee %d bps", rc.Gateway, rc.FeeBps)
			}
		}
	}
	for _, g := range testGateways {
		for _, m := range []string{pspapi.UPI, pspapi.Card, pspapi.NetBanking} {
			if !carried[routeKey(g.ID, m)] {
				t.Errorf("%s does not carry %s", g.ID, m)
			}
		}
	}
	if len(carried) != 6 {
		t.Errorf("%d routes, want 6", len(carried))
	}
}
