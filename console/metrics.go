package console

import (
	"bufio"
	"fmt"
	"net/http"
	"time"

	"tatkal/booking/funnel"
)

// metrics writes Prometheus text exposition by hand: funnel counts of the
// last complete minute per shard and stage (summed over every process in
// Redis), p95 latency per stage, route health, and payments unresolved.
func (c *Console) metrics(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	now := time.Now() // the current, partial second included: metrics are fresh
	from := now.Add(-59 * time.Second)
	shards, err := c.cfg.Funnel.Shards(ctx)
	if err != nil {
		http.Error(w, "funnel unavailable", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	b := bufio.NewWriter(w)
	defer b.Flush()
	fmt.Fprintln(b, "# HELP tatkal_funnel_events_last_minute Funnel events in the last 60 s, all processes.")
	fmt.Fprintln(b, "# TYPE tatkal_funnel_events_last_minute gauge")
	for _, id := range append([]int64{0}, shards...) {
		if id == 0 && len(shards) > 0 && shards[0] == 0 {
			continue
		}
		secs, err := c.cfg.Funnel.Read(ctx, id, from, now)
		if err != nil {
			continue
		}
		for _, st := range funnel.Stages {
			var n int64
			for _, s := range secs {
				n += s.Counts[st]
			}
			fmt.Fprintf(b, "tatkal_funnel_events_last_minute{shard=\"%d\",stage=\"%s\"} %d\n", id, st, n)
		}
	}
	fmt.Fprintln(b, "# HELP tatkal_stage_latency_p95_seconds p95 latency per stage over the last minute.")
	fmt.Fprintln(b, "# TYPE tatkal_stage_latency_p95_seconds gauge")
	for _, st := range funnel.Stages {
		if d, n, err := c.cfg.Funnel.Quantile(ctx, st, from, now, 0.95); err == nil && n > 0 {
			fmt.Fprintf(b, "tatkal_stage_latency_p95_seconds{stage=\"%s\"} %g\n", st, d.Seconds())
		}
	}
	if hs, err := c.cfg.Payments.Healths(ctx); err == nil {
		fmt.Fprintln(b, "# HELP tatkal_payment_route_success_ratio Share of gateway calls that succeeded in the last minute.")
		fmt.Fprintln(b, "# TYPE tatkal_payment_route_success_ratio gauge")
		for _, h := range hs {
			fmt.Fprintf(b, "tatkal_payment_route_success_ratio{gateway=\"%s\",method=\"%s\"} %g\n", h.Gateway, h.Method, h.SuccessRate)
		}
		fmt.Fprintln(b, "# TYPE tatkal_payment_route_breaker_open gauge")
		for _, h := range hs {
			open := 0
			if h.Open {
				open = 1
			}
			fmt.Fprintf(b, "tatkal_payment_route_breaker_open{gateway=\"%s\",method=\"%s\"} %d\n", h.Gateway, h.Method, open)
		}
	}
	var unresolved int64
	if err := c.pool.QueryRow(ctx, `SELECT count(*) FROM payments WHERE state IN ('INITIATED', 'AWAITING_USER', 'PENDING_AT_BANK', 'UNKNOWN')`).Scan(&unresolved); err == nil {
		fmt.Fprintln(b, "# HELP tatkal_payments_unresolved Payments not yet a ticket or a refund.")
		fmt.Fprintln(b, "# TYPE tatkal_payments_unresolved gauge")
		fmt.Fprintf(b, "tatkal_payments_unresolved %d\n", unresolved)
	}
	var pending int64
	if err := c.pool.QueryRow(ctx, `SELECT count(*) FROM lever_changes WHERE state = 'PENDING'`).Scan(&pending); err == nil {
		fmt.Fprintln(b, "# TYPE tatkal_lever_changes_pending gauge")
		fmt.Fprintf(b, "tatkal_lever_changes_pending %d\n", pending)
	}
}
