package console

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"tatkal/booking/metrics"
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
)

// systemGauges reads the gauges that are the same whichever process
// answers; a source that fails is left out of that scrape (and logged).
type systemGauges struct{ c *Console }

func (g systemGauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- unresolvedDesc
	ch <- pendingDesc
	ch <- successDesc
	ch <- breakerDesc
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
	}
}

// slogPrinter lets promhttp log through the console's logger.
type slogPrinter struct{ c *Console }

func (p slogPrinter) Println(v ...any) { p.c.log.Error("metrics", "err", v) }
