package funnel

import "time"

// AddAt counts as Add does, at a chosen time, so a test can place counts
// in the buckets it means.
func (r *Recorder) AddAt(shardID int64, stage string, n int64, at time.Time) {
	r.addAt(shardID, stage, n, at)
}

// ObserveAt records a latency as Observe does, at a chosen time.
func (r *Recorder) ObserveAt(stage string, d time.Duration, at time.Time) { r.observeAt(stage, d, at) }

// RouteEventAt counts a route event as RouteEvent does, at a chosen time.
func (r *Recorder) RouteEventAt(route, outcome string, at time.Time) {
	r.routeEventAt(route, outcome, at)
}
