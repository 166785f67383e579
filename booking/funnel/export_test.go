package funnel

import "time"

// AddAt counts as Add does, at a chosen time, so a test can place counts
// in the buckets it means.
func (r *Recorder) AddAt(shardID int64, stage string, n int64, at time.Time) {
	r.addAt(shardID, stage, n, at)
}
