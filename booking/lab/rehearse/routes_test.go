package rehearse

import (
	"testing"
	"time"

	"tatkal/booking/payment/pspapi"
)

// TestEveryBankAnswerFitsTheDrain: whatever a rehearsal's simulated bank
// does (the customer's page lapsing, a pending answer, a late success), it
// answers within half the default drain, leaving the other half to our
// callbacks and inquiries: a payment still open after the drain is ours to
// explain, never the bank's schedule.
func TestEveryBankAnswerFitsTheDrain(t *testing.T) {
	drain := Defaults().Drain
	for name, routes := range map[string][]pspapi.RouteConfig{"normal": normalRoutes(), "degraded": degradedRoutes(), "clean": cleanRoutes()} {
		for _, r := range routes {
			for what, ms := range map[string]int{"page expiry": r.ExpireAfterMs, "pending answer": r.PendingResolveMs, "late success": r.LateSuccessMs} {
				if d := time.Duration(ms) * time.Millisecond; d > drain/2 {
					t.Errorf("%s route %s/%s: %s after %s, past half the %s drain", name, r.Gateway, r.Method, what, d, drain)
				}
			}
		}
	}
}
