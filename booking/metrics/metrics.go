// Package metrics holds this process's Prometheus counters and latency
// histograms (client_golang), served at /metrics. They count what this
// process saw since it started, as Prometheus expects; the funnel's
// per-second sums over every process (booking/funnel, in Redis) stay the
// console's view and are not read per scrape.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Registry holds every per-process metric of tatkal plus the Go runtime's
// and the process's own.
var Registry = prometheus.NewRegistry()

// latencyBuckets run from 1 ms to about 16 s, doubling: holds answer in
// milliseconds, gateway calls in up to seconds.
var latencyBuckets = prometheus.ExponentialBuckets(0.001, 2, 15)

var (
	// FunnelEvents counts funnel events (booking/funnel's stages) by stage.
	FunnelEvents = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tatkal_funnel_events_total", Help: "Funnel events seen by this process, by stage.",
	}, []string{"stage"})
	// Hold times a hold attempt from the service's entry to its answer,
	// by outcome (held, waitlisted, sold_out, replayed, refused, throttled).
	Hold = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "tatkal_hold_duration_seconds", Help: "Time to decide a hold attempt, by outcome.", Buckets: latencyBuckets,
	}, []string{"outcome"})
	// Payment times a payment step: initiate (the gateway call included)
	// and callback (a gateway's notification applied).
	Payment = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "tatkal_payment_duration_seconds", Help: "Time of a payment step (initiate, callback).", Buckets: latencyBuckets,
	}, []string{"step"})
	// Queue times the waiting room's requests (enter, status).
	Queue = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "tatkal_queue_request_duration_seconds", Help: "Time to answer a waiting-room request, by operation.", Buckets: latencyBuckets,
	}, []string{"op"})
)

func init() {
	Registry.MustRegister(FunnelEvents, Hold, Payment, Queue,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
}
