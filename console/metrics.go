package console

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"tatkal/booking/inventory"
	"tatkal/booking/metrics"
	"tatkal/console/alarms"
	"tatkal/console/levers"
)

// Metrics serves /metrics: this process's counters and latency histograms
// (booking/metrics) and, read per scrape, a few whole-system gauges (one
// PostgreSQL count each and the payment routes' health). The funnel's
// per-second sums over every process stay on the console's funnel page.
func (c *Console) Metrics() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(systemGauges{c})
	return promhttp.HandlerFor(prometheus.Gatherers{metrics.Registry, reg}, promhttp.HandlerOpts{ErrorLog: slogPrinter{c}})
}

var (
	unresolvedDesc = prometheus.NewDesc("tatkal_payments_unresolved", "Payments not yet a ticket or a refund.", nil, nil)
	pendingDesc    = prometheus.NewDesc("tatkal_lever_changes_pending", "Lever changes waiting for a second person's approval.", nil, nil)
	successDesc    = prometheus.NewDesc("tatkal_payment_route_success_ratio", "Share of gateway calls that succeeded in the last minute.", []string{"gateway", "method"}, nil)
	breakerDesc    = prometheus.NewDesc("tatkal_payment_route_breaker_open", "1 while a payment route's circuit breaker is open.", []string{"gateway", "method"}, nil)
	callsDesc      = prometheus.NewDesc("tatkal_payment_route_calls", "Gateway calls on a payment route in the last minute.", []string{"gateway", "method"}, nil)

	// The alarms' figures (console/alarms.ReadFigures), for the alerting
	// rules in console/prometheus/alerts.yml.
	alarmsOpenDesc   = prometheus.NewDesc("tatkal_alarms_open", "Open alarms of the invariant watch, by kind.", []string{"kind"}, nil)
	unknownDesc      = prometheus.NewDesc("tatkal_payments_unknown", "Payments whose outcome is UNKNOWN.", nil, nil)
	unknownAgeDesc   = prometheus.NewDesc("tatkal_payment_unknown_oldest_seconds", "Age of the oldest UNKNOWN payment (0: none).", nil, nil)
	refundsDesc      = prometheus.NewDesc("tatkal_refunds_pending", "Refunds not yet processed.", nil, nil)
	refundAgeDesc    = prometheus.NewDesc("tatkal_refund_pending_oldest_seconds", "Age of the oldest pending refund (0: none).", nil, nil)
	pastDeadlineDesc = prometheus.NewDesc("tatkal_payments_past_deadline", "Payments still unresolved past their deadline.", nil, nil)
	lastWatchDesc    = prometheus.NewDesc("tatkal_invariant_watch_last_pass_timestamp_seconds", "When the invariant watch last completed a pass (Unix time).", nil, nil)
	frozenDesc       = prometheus.NewDesc("tatkal_shard_frozen", "1 while a shard is frozen (shard_frozen on).", []string{"shard"}, nil)
	waitingDesc      = prometheus.NewDesc("tatkal_admission_queue_waiting", "Travellers waiting in an open shard's queue.", []string{"shard"}, nil)
)

// systemGauges reads the gauges that are the same whichever process
// answers; a source that fails is left out of that scrape (and logged).
type systemGauges struct{ c *Console }

func (g systemGauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- unresolvedDesc
	ch <- pendingDesc
	ch <- successDesc
	ch <- breakerDesc
	ch <- callsDesc
	for _, d := range []*prometheus.Desc{alarmsOpenDesc, unknownDesc, unknownAgeDesc, refundsDesc, refundAgeDesc, pastDeadlineDesc,
		lastWatchDesc, frozenDesc, waitingDesc} {
		ch <- d
	}
}

func (g systemGauges) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var unresolved, pending int64
	if err := g.c.pool.QueryRow(ctx, `SELECT count(*) FROM payments WHERE state IN ('INITIATED', 'AWAITING_USER', 'PENDING_AT_BANK', 'UNKNOWN')`).Scan(&unresolved); err != nil {
		g.c.log.Warn("metrics: unresolved payments", "err", err)
	} else {
		ch <- prometheus.MustNewConstMetric(unresolvedDesc, prometheus.GaugeValue, float64(unresolved))
	}
	if err := g.c.pool.QueryRow(ctx, `SELECT count(*) FROM lever_changes WHERE state = 'PENDING'`).Scan(&pending); err != nil {
		g.c.log.Warn("metrics: pending lever changes", "err", err)
	} else {
		ch <- prometheus.MustNewConstMetric(pendingDesc, prometheus.GaugeValue, float64(pending))
	}
	g.collectAlarms(ctx, ch)
	hs, err := g.c.cfg.Payments.Healths(ctx)
	if err != nil {
		g.c.log.Warn("metrics: payment routes", "err", err)
		return
	}
	for _, h := range hs {
		open := 0.0
		if h.Open {
			open = 1
		}
		ch <- prometheus.MustNewConstMetric(successDesc, prometheus.GaugeValue, h.SuccessRate, h.Gateway, h.Method)
		ch <- prometheus.MustNewConstMetric(breakerDesc, prometheus.GaugeValue, open, h.Gateway, h.Method)
		ch <- prometheus.MustNewConstMetric(callsDesc, prometheus.GaugeValue, float64(h.Calls), h.Gateway, h.Method)
	}
}

// collectAlarms sends the invariant watch's figures: the open alarms, the
// thresholds' figures, the frozen shards and the open shards' queues.
func (g systemGauges) collectAlarms(ctx context.Context, ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	if open, err := g.c.alarms.OpenByKind(ctx); err != nil {
		g.c.log.Warn("metrics: open alarms", "err", err)
	} else {
		for kind, n := range open {
			gauge(alarmsOpenDesc, float64(n), kind)
		}
	}
	if f, err := alarms.ReadFigures(ctx, g.c.pool); err != nil {
		g.c.log.Warn("metrics: alarm figures", "err", err)
	} else {
		gauge(unknownDesc, float64(f.UnknownPayments))
		gauge(unknownAgeDesc, f.UnknownOldest.Seconds())
		gauge(refundsDesc, float64(f.PendingRefunds))
		gauge(refundAgeDesc, f.RefundOldest.Seconds())
		gauge(pastDeadlineDesc, float64(f.PastDeadline))
		if f.LastWatch != nil {
			gauge(lastWatchDesc, float64(f.LastWatch.UnixMilli())/1000)
		}
	}
	ids, err := inventory.OpenShards(ctx, g.c.pool)
	if err != nil {
		g.c.log.Warn("metrics: open shards", "err", err)
		return
	}
	var frozen []string
	if rows, err := g.c.pool.Query(ctx, `SELECT scope FROM console_levers WHERE name = $1 AND value = 'on'`, levers.ShardFrozen); err != nil {
		g.c.log.Warn("metrics: frozen shards", "err", err)
	} else if frozen, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		g.c.log.Warn("metrics: frozen shards", "err", err)
	}
	for _, id := range ids {
		shard := strconv.FormatInt(id, 10)
		on := 0.0
		if slices.Contains(frozen, "shard:"+shard) {
			on = 1
		}
		gauge(frozenDesc, on, shard)
		if g.c.cfg.QueueDepth != nil {
			if waiting, _, err := g.c.cfg.QueueDepth(ctx, id); err == nil {
				gauge(waitingDesc, float64(waiting), shard)
			}
		}
	}
}

// slogPrinter lets promhttp log through the console's logger.
type slogPrinter struct{ c *Console }

func (p slogPrinter) Println(v ...any) { p.c.log.Error("metrics", "err", v) }
