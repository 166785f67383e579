package console

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"tatkal/booking"
	"tatkal/booking/funnel"
	"tatkal/booking/inventory"
	"tatkal/console/levers"
	"tatkal/views"
)

// Snapshot is one reading of the live funnel.
type Snapshot = views.FunnelView

// stageLabels name the stages for people.
var stageLabels = map[string]string{
	funnel.QueueEntered: "queue entered", funnel.Admitted: "admitted", funnel.HoldAttempt: "hold attempts",
	funnel.Held: "held", funnel.Waitlisted: "waitlisted", funnel.SoldOut: "sold out", funnel.HoldRefused: "refused",
	funnel.Shed: "shed (overload, throttle)", funnel.PayInitiated: "payments initiated", funnel.PaySucceeded: "payments succeeded",
	funnel.PayFailed: "payments failed", funnel.PayUnknown: "payments unknown", funnel.Confirmed: "confirmed",
	funnel.Expired: "expired (seats back)", funnel.Released: "released (seats back)", funnel.RefundStarted: "refunds started",
	funnel.RefundDone: "refunds done",
}

// convFrom names the stage each stage's conversion is measured against.
var convFrom = map[string]string{
	funnel.Admitted: funnel.QueueEntered, funnel.Held: funnel.HoldAttempt, funnel.Waitlisted: funnel.HoldAttempt,
	funnel.SoldOut: funnel.HoldAttempt, funnel.HoldRefused: funnel.HoldAttempt, funnel.PayInitiated: funnel.Held,
	funnel.PaySucceeded: funnel.PayInitiated, funnel.PayFailed: funnel.PayInitiated, funnel.PayUnknown: funnel.PayInitiated,
	funnel.Confirmed: funnel.PaySucceeded, funnel.Expired: funnel.Held, funnel.RefundDone: funnel.RefundStarted,
}

const (
	sparkSeconds  = 60
	totalSeconds  = 120
	checkInterval = 5 * time.Second
	maxShards     = 16
)

// checks caches each shard's invariant report: the check reads every hold,
// so it runs every few seconds, not every tick.
type checks struct {
	mu      sync.Mutex
	at      time.Time
	reports map[int64]inventory.Report
}

type shardInfo struct {
	id                 int64
	train, class, date string
	total              int
}

// snapshot reads the funnel from Redis and the shards from Redis and
// PostgreSQL: the sum over every app process.
func (c *Console) snapshot(ctx context.Context) (Snapshot, error) {
	now := time.Now().Truncate(time.Second).Add(-time.Second) // the last complete second
	snap := Snapshot{At: ist(time.Now()), WindowSeconds: totalSeconds}
	shards, err := c.shardList(ctx)
	if err != nil {
		return snap, err
	}
	fshards, err := c.cfg.Funnel.Shards(ctx)
	if err != nil {
		return snap, err
	}
	// The "all shards" view sums every counted shard (0: events of no shard).
	all := map[string][]int64{}
	add := func(dst map[string][]int64, secs []funnel.Second) {
		for _, st := range funnel.Stages {
			if dst[st] == nil {
				dst[st] = make([]int64, len(secs))
			}
			for i, s := range secs {
				dst[st][i] += s.Counts[st]
			}
		}
	}
	from := now.Add(-(totalSeconds - 1) * time.Second)
	per := map[int64]map[string][]int64{}
	ids := []int64{0}
	for _, s := range shards {
		ids = append(ids, s.id)
	}
	for _, id := range fshards {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	for _, id := range ids {
		secs, err := c.cfg.Funnel.Read(ctx, id, from, now)
		if err != nil {
			return snap, err
		}
		m := map[string][]int64{}
		add(m, secs)
		add(all, secs)
		per[id] = m
	}
	p95 := map[string]int64{}
	for _, st := range funnel.Stages {
		d, n, err := c.cfg.Funnel.Quantile(ctx, st, now.Add(-sparkSeconds*time.Second), now, 0.95)
		if err != nil {
			return snap, err
		}
		p95[st] = -1
		if n > 0 {
			p95[st] = d.Milliseconds()
		}
	}
	labels := map[int64]string{0: "no shard (shed at the door)"}
	for _, s := range shards {
		labels[s.id] = fmt.Sprintf("%d %s %s %s", s.id, s.train, s.class, s.date)
	}
	// Every charted shard's queue, read once for the charts and the panels.
	depth := map[int64][2]int64{}
	var cs []chartShard
	for _, id := range ids {
		l, ok := labels[id]
		if !ok {
			l = fmt.Sprintf("%d (not listed)", id)
		}
		if id != 0 && c.cfg.QueueDepth != nil {
			if w, a, err := c.cfg.QueueDepth(ctx, id); err == nil {
				depth[id] = [2]int64{w, a}
			}
		}
		cs = append(cs, chartShard{id: id, label: l, waiting: depth[id][0]})
	}
	hs, err := c.cfg.Payments.Healths(ctx)
	if err != nil {
		return snap, err
	}
	routes := make([]string, len(hs))
	for i, h := range hs {
		routes[i] = h.Gateway + "/" + h.Method
	}
	if snap.Charts, err = c.charts(ctx, cs, routes, time.Now()); err != nil {
		return snap, err
	}
	reports := c.invariants(ctx, shards)
	snap.Shards = append(snap.Shards, views.FunnelShard{ID: 0, Label: "All shards", Stages: stages(all, p95)})
	var busiest int64
	for _, s := range shards {
		busiest = max(busiest, eventCount(per[s.id]))
	}
	var calm []views.FunnelShard
	for _, s := range shards {
		fs := views.FunnelShard{ID: s.id, Label: fmt.Sprintf("%s %s %s", s.train, s.class, s.date), Total: s.total,
			Stages: stages(per[s.id], p95), InvariantOK: true}
		if snapRedis, err := c.cfg.Store.Snapshot(ctx, s.id); err == nil && snapRedis.Ready {
			fs.Ready, fs.Epoch = true, snapRedis.Epoch
			for i, m := range snapRedis.Occupancy {
				if i < snapRedis.Berths && m == 0 {
					fs.SeatsLeft++
				}
			}
			fs.Held, fs.Confirmed = maxOf(snapRedis.Held), maxOf(snapRedis.Confirmed)
		}
		if rep, ok := reports[s.id]; ok {
			fs.Checked, fs.InvariantOK, fs.Violations = true, rep.OK(), rep.Violations
			if !rep.Ready {
				fs.Ready = false
			}
		}
		if !fs.Ready && fs.InvariantOK && !active(fs.Stages) {
			snap.Idle = append(snap.Idle, fmt.Sprintf("%d %s", s.id, fs.Label))
			continue
		}
		// A quiet shard is one line, after the busy ones; one in trouble never is.
		if fs.Quiet = quiet(eventCount(per[s.id]), busiest) && fs.InvariantOK && fs.Ready; fs.Quiet {
			calm = append(calm, fs)
			continue
		}
		snap.Shards = append(snap.Shards, fs)
	}
	snap.Shards = append(snap.Shards, calm...)
	for _, h := range hs {
		r := views.RouteHealth{Route: h.Gateway + "/" + h.Method, Weight: h.Weight, Enabled: h.Enabled, Calls: h.Calls,
			ErrorPct: (1 - h.SuccessRate) * 100, P95ms: h.P95.Milliseconds(), BreakerOpen: h.Open}
		if h.Calls == 0 {
			r.ErrorPct, r.P95ms = -1, -1
		}
		snap.Routes = append(snap.Routes, r)
	}
	if vals, err := c.levers.InForce(ctx); err == nil {
		for _, v := range vals {
			if v.Name != "route" {
				snap.Levers = append(snap.Levers, v.Name+" "+v.Scope+" = "+v.Value)
			}
		}
	}
	for i := range snap.Shards {
		if id := snap.Shards[i].ID; id != 0 {
			snap.Shards[i].Paused = c.isPaused(snap.Levers, id)
			snap.Shards[i].Rate = shardLever(snap.Levers, levers.AdmissionRate, id, "adaptive")
			snap.Shards[i].Throttle = throttleText(shardLever(snap.Levers, levers.ShardThrottle, id, "off"))
			snap.Shards[i].Waiting, snap.Shards[i].Admitted = depth[id][0], depth[id][1]
		}
	}
	return snap, nil
}

func (c *Console) isPaused(inForce []string, id int64) bool {
	return slices.Contains(inForce, "admission_paused global = on") ||
		slices.Contains(inForce, fmt.Sprintf("admission_paused shard:%d = on", id))
}

// shardLever is a per-shard lever's value in force for the shard (the
// admission rate, the throttle): its own, else the global one, else unset.
// A shard set to the unset value ("adaptive", "off") has nothing of its
// own and falls back to the global one, as the levers' reader does.
func shardLever(inForce []string, name string, id int64, unset string) string {
	v, ok := levers.ForShard(func(scope string) (string, bool) {
		for _, l := range inForce {
			if v, ok := strings.CutPrefix(l, name+" "+scope+" = "); ok {
				return v, true
			}
		}
		return "", false
	}, id, unset)
	if !ok {
		return unset
	}
	return v
}

// throttleText says what a shard_throttle value lets through: a budget
// for holds and as many for payment starts, every second.
func throttleText(v string) string {
	if v == "off" {
		return v
	}
	return v + " holds + " + v + " payments /s"
}

func active(stages []views.FunnelStage) bool {
	for _, st := range stages {
		if st.Total > 0 {
			return true
		}
	}
	return false
}

// eventCount counts a shard's events over the funnel's window.
func eventCount(m map[string][]int64) int64 {
	var n int64
	for _, xs := range m {
		for _, x := range xs {
			n += x
		}
	}
	return n
}

func maxOf(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

func stages(m map[string][]int64, p95 map[string]int64) []views.FunnelStage {
	totals := map[string]int64{}
	for st, xs := range m {
		for _, x := range xs {
			totals[st] += x
		}
	}
	var out []views.FunnelStage
	for _, st := range funnel.Stages {
		xs := m[st]
		if xs == nil {
			xs = make([]int64, totalSeconds)
		}
		series := xs[max(0, len(xs)-sparkSeconds):]
		fs := views.FunnelStage{Stage: st, Label: stageLabels[st], Total: totals[st], Series: series, ConvPct: -1, P95ms: p95[st]}
		if len(series) > 0 {
			fs.LastSec = series[len(series)-1]
		}
		if from, ok := convFrom[st]; ok {
			fs.ConvOf = stageLabels[from]
			if totals[from] > 0 {
				fs.ConvPct = float64(totals[st]) * 100 / float64(totals[from])
			}
		}
		out = append(out, fs)
	}
	return out
}

func (c *Console) shardList(ctx context.Context) ([]shardInfo, error) {
	rows, err := c.pool.Query(ctx, `SELECT id, train_number, class, journey_date::text, total_berths FROM inventory_shards
		ORDER BY (now() BETWEEN window_opens_at AND window_closes_at) DESC, window_opens_at DESC, id LIMIT $1`, maxShards)
	if err != nil {
		return nil, fmt.Errorf("list shards: %w", err)
	}
	defer rows.Close()
	var out []shardInfo
	for rows.Next() {
		var s shardInfo
		if err := rows.Scan(&s.id, &s.train, &s.class, &s.date, &s.total); err != nil {
			return nil, fmt.Errorf("list shards: %w", err)
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b shardInfo) int { return int(a.id - b.id) })
	return out, rows.Err()
}

// invariants returns the latest reports, re-checking every few seconds.
func (c *Console) invariants(ctx context.Context, shards []shardInfo) map[int64]inventory.Report {
	c.checks.mu.Lock()
	defer c.checks.mu.Unlock()
	if time.Since(c.checks.at) < checkInterval && c.checks.reports != nil {
		return c.checks.reports
	}
	ids := make([]int64, len(shards))
	for i, s := range shards {
		ids[i] = s.id
	}
	reports, err := inventory.CheckShards(ctx, c.pool, c.cfg.Store, ids, c.cfg.HoldWindow)
	if err != nil {
		c.log.Warn("invariant check", "err", err)
	}
	c.checks.at, c.checks.reports = time.Now(), reports
	return reports
}

var _ = booking.IST
