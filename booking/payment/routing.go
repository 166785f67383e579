package payment

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"tatkal/booking/funnel"
)

// Route is one gateway carrying one method.
type Route struct {
	Gateway string
	Method  string
	Weight  int
	Enabled bool
}

// Health is a route's recent record, shared by every process through Redis.
type Health struct {
	Route
	Calls       int
	SuccessRate float64 // answers that were not errors or timeouts
	P95         time.Duration
	Open        bool // circuit open: no new payments are sent here
	// Streak is how many of the latest calls failed in a row.
	Streak int
}

// Breaker settings: a route whose calls mostly fail over the last minute,
// or whose latest calls all failed, stops receiving payments for a while,
// then gets traffic again.
const (
	healthWindow     = time.Minute
	breakerMinCalls  = 10
	breakerThreshold = 0.5
	breakerStreak    = 5 // this many failures in a row open it at once
	breakerCooldown  = 30 * time.Second
)

// router picks a gateway per payment by configured weight and live health.
type router struct {
	pool   *pgxpool.Pool
	rdb    redis.UniversalClient
	prefix string

	mu       sync.Mutex
	routes   []Route
	loadedAt time.Time
}

func (r *router) key(gw, method, what string) string {
	return r.prefix + ":psp:" + gw + ":" + method + ":" + what
}

// Routes returns the configured routes; changes reach every process within a second.
func (r *router) Routes(ctx context.Context) ([]Route, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.loadedAt) < time.Second && r.routes != nil {
		return r.routes, nil
	}
	rows, err := r.pool.Query(ctx, `SELECT gateway, method, weight, enabled FROM payment_routes ORDER BY method, gateway`)
	if err != nil {
		return nil, fmt.Errorf("payment routes: %w", err)
	}
	routes, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Route])
	if err != nil {
		return nil, fmt.Errorf("payment routes: %w", err)
	}
	r.routes, r.loadedAt = routes, time.Now()
	return routes, nil
}

// observeCall records one gateway call for routing (health and breaker)
// and for the console's route charts, with the breaker's opening.
func (s *Service) observeCall(ctx context.Context, gw, method string, err error, took time.Duration) {
	route, outcome := gw+"/"+method, routeOutcome(err)
	s.funnel.RouteEvent(route, outcome)
	if s.routes.observe(ctx, gw, method, outcome != funnel.RouteNoAnswer, took) {
		s.funnel.RouteEvent(route, funnel.RouteBreakerOpened)
	}
}

// observe records one call's outcome and latency, and opens the breaker
// when the route is failing; it says whether this call opened it.
func (r *router) observe(ctx context.Context, gw, method string, ok bool, took time.Duration) bool {
	now := time.Now()
	outcome := "0"
	if ok {
		outcome = "1"
	}
	member := strconv.FormatInt(now.UnixNano(), 10) + ":" + outcome + ":" + strconv.FormatInt(took.Milliseconds(), 10)
	key := r.key(gw, method, "obs")
	pipe := r.rdb.Pipeline()
	pipe.ZAdd(ctx, key, redis.Z{Score: float64(now.UnixMilli()), Member: member})
	pipe.ZRemRangeByScore(ctx, key, "-inf", strconv.FormatInt(now.Add(-healthWindow).UnixMilli(), 10))
	pipe.Expire(ctx, key, 2*healthWindow)
	pipe.Exec(ctx) //nolint:errcheck // health is advisory; a lost sample changes little
	if !ok {
		if h, err := r.health(ctx, Route{Gateway: gw, Method: method}); err == nil && !h.Open &&
			(h.Streak >= breakerStreak || (h.Calls >= breakerMinCalls && h.SuccessRate < breakerThreshold)) {
			// SetNX: of processes seeing the same failures at once, one opens it.
			opened, err := r.rdb.SetNX(ctx, r.key(gw, method, "open"), now.Format(time.RFC3339), breakerCooldown).Result()
			return err == nil && opened
		}
	}
	return false
}

// routeOutcome names a gateway call's outcome for the console's route
// charts, split as the breaker sees it: a refusal is an answer, so only
// no answer counts against the route.
func routeOutcome(err error) string {
	var ce *callError
	switch {
	case err == nil:
		return funnel.RouteAnswered
	case errors.As(err, &ce) && ce.Definitive:
		return funnel.RouteRefused
	}
	return funnel.RouteNoAnswer
}

func (r *router) health(ctx context.Context, rt Route) (Health, error) {
	h := Health{Route: rt, SuccessRate: 1}
	pipe := r.rdb.Pipeline()
	obs := pipe.ZRangeByScore(ctx, r.key(rt.Gateway, rt.Method, "obs"), &redis.ZRangeBy{
		Min: strconv.FormatInt(time.Now().Add(-healthWindow).UnixMilli(), 10), Max: "+inf"})
	open := pipe.Exists(ctx, r.key(rt.Gateway, rt.Method, "open"))
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return h, fmt.Errorf("route health %s/%s: %w", rt.Gateway, rt.Method, err)
	}
	h.Open = open.Val() == 1
	var lat []int
	good := 0
	for _, m := range obs.Val() {
		f := strings.Split(m, ":")
		if len(f) != 3 {
			continue
		}
		h.Calls++
		if f[1] == "1" {
			good++
			h.Streak = 0
		} else {
			h.Streak++
		}
		ms, _ := strconv.Atoi(f[2])
		lat = append(lat, ms)
	}
	if h.Calls > 0 {
		h.SuccessRate = float64(good) / float64(h.Calls)
		sort.Ints(lat)
		h.P95 = time.Duration(lat[(len(lat)*95+99)/100-1]) * time.Millisecond
	}
	return h, nil
}

// Healths reports every route's health, for the console.
func (r *router) Healths(ctx context.Context) ([]Health, error) {
	routes, err := r.Routes(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Health, 0, len(routes))
	for _, rt := range routes {
		h, err := r.health(ctx, rt)
		if err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, nil
}

// pick chooses a gateway for method among enabled routes whose breaker is
// closed: weight times success rate squared, halved when p95 is slow.
func (r *router) pick(ctx context.Context, method string, known func(string) bool) (string, error) {
	routes, err := r.Routes(ctx)
	if err != nil {
		return "", err
	}
	type cand struct {
		gw string
		w  float64
	}
	var cands []cand
	total := 0.0
	for _, rt := range routes {
		if rt.Method != method || !rt.Enabled || rt.Weight <= 0 || !known(rt.Gateway) {
			continue
		}
		h, err := r.health(ctx, rt)
		if err != nil {
			return "", err
		}
		if h.Open {
			continue
		}
		w := float64(rt.Weight) * h.SuccessRate * h.SuccessRate
		if h.P95 > 2*time.Second {
			w /= 2
		}
		if w <= 0 {
			w = 0.01 // a route with no recent success still gets a trickle, to notice recovery
		}
		cands = append(cands, cand{rt.Gateway, w})
		total += w
	}
	if len(cands) == 0 {
		return "", nil
	}
	slices.SortFunc(cands, func(a, b cand) int { return strings.Compare(a.gw, b.gw) })
	x := rand.Float64() * total
	for _, c := range cands {
		if x < c.w {
			return c.gw, nil
		}
		x -= c.w
	}
	return cands[len(cands)-1].gw, nil
}

// SetWeight changes a route's weight and whether it is enabled.
func (r *router) SetWeight(ctx context.Context, gw, method string, weight int, enabled bool) error {
	tag, err := r.pool.Exec(ctx, `UPDATE payment_routes SET weight = $3, enabled = $4, updated_at = now()
		WHERE gateway = $1 AND method = $2`, gw, method, weight, enabled)
	if err != nil {
		return fmt.Errorf("set route %s/%s: %w", gw, method, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("set route %s/%s: no such route", gw, method)
	}
	r.mu.Lock()
	r.loadedAt = time.Time{}
	r.mu.Unlock()
	return nil
}
