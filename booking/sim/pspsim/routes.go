package pspsim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/jackc/pgx/v5"

	"tatkal/booking/db"
	"tatkal/booking/payment/pspapi"
)

func knownMethod(m string) bool {
	return m == pspapi.UPI || m == pspapi.Card || m == pspapi.NetBanking
}

// defaultExpiry is the customer's time to answer when ExpireAfterMs is 0,
// the usual life of a UPI collect request.
const defaultExpiryMs = 5 * 60 * 1000

// DefaultRoutes is every route of GatewayIDs: UPI, CARD and
// NETBANKING on each, with ordinary production behaviour (a few percent
// declines, rare pending and lost callbacks). swiftpay is the faster and
// cleaner of the two; bharatpg is slower with more pending answers.
func DefaultRoutes() []pspapi.RouteConfig {
	var out []pspapi.RouteConfig
	for _, id := range GatewayIDs {
		out = append(out, defaultRoutesFor(id)...)
	}
	return out
}

// defaultRoutesFor gives gateway gw the three methods; any gateway other
// than bharatpg gets swiftpay's profile.
func defaultRoutesFor(gw string) []pspapi.RouteConfig {
	upi := pspapi.RouteConfig{
		Gateway: gw, Method: pspapi.UPI,
		LatencyP50Ms: 90, LatencyP99Ms: 700,
		TimeoutRate: 0.002, DeclineRate: 0.03,
		PendingRate: 0.04, PendingResolveMs: 8000,
		LateSuccessRate: 0.003, LateSuccessMs: 10 * 60 * 1000,
		LostCallbackRate: 0.01, DuplicateCallbackRate: 0.02, CallbackDelayMs: 300,
		CapacityTPS:   1000,
		AutoApproveMs: 1500, AbandonRate: 0.04, ExpireAfterMs: defaultExpiryMs,
		FeeBps: 0, // zero MDR on UPI
	}
	card := upi
	card.Method = pspapi.Card
	card.LatencyP50Ms, card.LatencyP99Ms = 150, 1200
	card.PendingRate = 0.01
	card.CapacityTPS = 300
	card.AutoApproveMs, card.AbandonRate = 2500, 0.06
	card.ExpireAfterMs = 10 * 60 * 1000
	card.FeeBps = 180
	nb := card
	nb.Method = pspapi.NetBanking
	nb.LatencyP50Ms, nb.LatencyP99Ms = 200, 1500
	nb.DeclineRate = 0.035
	nb.CapacityTPS = 150
	nb.AutoApproveMs, nb.AbandonRate = 3000, 0.08
	nb.FeeBps = 150
	routes := []pspapi.RouteConfig{upi, card, nb}
	if gw == "bharatpg" {
		p50 := []int{120, 180, 200}
		p99 := []int{900, 1400, 1500}
		for i := range routes {
			r := &routes[i]
			r.LatencyP50Ms, r.LatencyP99Ms = p50[i], p99[i]
			r.TimeoutRate = 0.005
			r.PendingRate *= 2
			r.PendingResolveMs = 15000
			r.LostCallbackRate = 0.02
		}
		routes[0].FeeBps = 30
		routes[1].FeeBps = 195
		routes[2].FeeBps = 160
	}
	return routes
}

// validateRoute says everything wrong with rc in one error.
func validateRoute(rc pspapi.RouteConfig) error {
	var problems []string
	if !knownMethod(rc.Method) {
		problems = append(problems, fmt.Sprintf("method %q is not one of UPI, CARD, NETBANKING", rc.Method))
	}
	rates := []struct {
		name string
		v    float64
	}{
		{"timeout_rate", rc.TimeoutRate}, {"decline_rate", rc.DeclineRate}, {"pending_rate", rc.PendingRate},
		{"late_success_rate", rc.LateSuccessRate}, {"lost_callback_rate", rc.LostCallbackRate},
		{"duplicate_callback_rate", rc.DuplicateCallbackRate}, {"abandon_rate", rc.AbandonRate},
		{"refund_fail_rate", rc.RefundFailRate},
	}
	for _, r := range rates {
		if math.IsNaN(r.v) || r.v < 0 || r.v > 1 {
			problems = append(problems, fmt.Sprintf("%s must be within [0, 1], got %v", r.name, r.v))
		}
	}
	durations := []struct {
		name string
		v    int
	}{
		{"latency_p50_ms", rc.LatencyP50Ms}, {"latency_p99_ms", rc.LatencyP99Ms},
		{"pending_resolve_ms", rc.PendingResolveMs}, {"late_success_ms", rc.LateSuccessMs},
		{"callback_delay_ms", rc.CallbackDelayMs}, {"expire_after_ms", rc.ExpireAfterMs},
		{"capacity_tps", rc.CapacityTPS},
	}
	for _, d := range durations {
		if d.v < 0 {
			problems = append(problems, fmt.Sprintf("%s must not be negative, got %d", d.name, d.v))
		}
	}
	if rc.LatencyP99Ms < rc.LatencyP50Ms {
		problems = append(problems, fmt.Sprintf("latency_p99_ms (%d) must be at least latency_p50_ms (%d)", rc.LatencyP99Ms, rc.LatencyP50Ms))
	}
	if rc.FeeBps < 0 || rc.FeeBps > 10000 {
		problems = append(problems, fmt.Sprintf("fee_bps must be within [0, 10000], got %d", rc.FeeBps))
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// expiry is how long the customer has to answer on this route.
func expiry(rc pspapi.RouteConfig) int {
	if rc.ExpireAfterMs == 0 {
		return defaultExpiryMs
	}
	return rc.ExpireAfterMs
}

// seedRoutes inserts the routes that are not stored yet; stored ones keep
// whatever the admin API last set.
func (s *Server) seedRoutes(ctx context.Context, routes []pspapi.RouteConfig) error {
	now := s.now()
	for _, rc := range routes {
		b, err := json.Marshal(rc)
		if err != nil {
			return fmt.Errorf("pspsim: encode route: %w", err)
		}
		if _, err := s.pool.Exec(ctx, s.q(`INSERT INTO {s}.routes (gateway, method, config, updated_at)
			VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`), rc.Gateway, rc.Method, b, now); err != nil {
			return fmt.Errorf("pspsim: seed route %s/%s: %w", rc.Gateway, rc.Method, err)
		}
	}
	return nil
}

// route reads one route's current settings; ok is false when the gateway
// does not carry the method.
func (s *Server) route(ctx context.Context, q db.Querier, gw, method string) (pspapi.RouteConfig, bool, error) {
	var rc pspapi.RouteConfig
	err := q.QueryRow(ctx, s.q(`SELECT config FROM {s}.routes WHERE gateway = $1 AND method = $2`), gw, method).Scan(&rc)
	if errors.Is(err, pgx.ErrNoRows) {
		return rc, false, nil
	}
	if err != nil {
		return rc, false, fmt.Errorf("read route %s/%s: %w", gw, method, err)
	}
	return rc, true, nil
}

// allRoutes reads every route, keyed gateway/method.
func (s *Server) allRoutes(ctx context.Context, q db.Querier) (map[string]pspapi.RouteConfig, error) {
	rows, err := q.Query(ctx, s.q(`SELECT config FROM {s}.routes ORDER BY gateway, method`))
	if err != nil {
		return nil, fmt.Errorf("read routes: %w", err)
	}
	list, err := pgx.CollectRows(rows, pgx.RowTo[pspapi.RouteConfig])
	if err != nil {
		return nil, fmt.Errorf("read routes: %w", err)
	}
	out := make(map[string]pspapi.RouteConfig, len(list))
	for _, rc := range list {
		out[routeKey(rc.Gateway, rc.Method)] = rc
	}
	return out, nil
}

func routeKey(gw, method string) string { return gw + "/" + method }

// putRoute replaces one route's settings.
func (s *Server) putRoute(ctx context.Context, rc pspapi.RouteConfig) error {
	b, err := json.Marshal(rc)
	if err != nil {
		return fmt.Errorf("encode route: %w", err)
	}
	_, err = s.pool.Exec(ctx, s.q(`INSERT INTO {s}.routes (gateway, method, config, updated_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (gateway, method) DO UPDATE SET config = EXCLUDED.config, updated_at = EXCLUDED.updated_at`),
		rc.Gateway, rc.Method, b, s.now())
	if err != nil {
		return fmt.Errorf("store route %s/%s: %w", rc.Gateway, rc.Method, err)
	}
	return nil
}

// outageFilter is a WHERE clause fragment that skips rows (alias a, with
// gateway and method columns) whose route is in full outage: a gateway
// that is down neither moves payments on nor sends webhooks.
const outageFilter = `NOT EXISTS (SELECT 1 FROM {s}.routes r
	WHERE r.gateway = a.gateway AND r.method = a.method AND (r.config->>'outage')::boolean)`
