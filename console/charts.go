package console

import (
	"context"
	"fmt"
	"slices"
	"time"

	"tatkal/booking/funnel"
	"tatkal/views"
)

// chartStages are the stages charted over time; a chart may sum several.
var chartStages = []struct {
	key    string
	title  string
	stages []string
}{
	{"queue", "Queue entered", []string{funnel.QueueEntered}},
	{"admitted", "Admitted", []string{funnel.Admitted}},
	{"attempts", "Hold attempts", []string{funnel.HoldAttempt}},
	{"held", "Held", []string{funnel.Held}},
	{"refused", "Refused or sold out", []string{funnel.SoldOut, funnel.HoldRefused, funnel.Shed}},
	{"pay", "Payments initiated", []string{funnel.PayInitiated}},
	{"paid", "Payments succeeded", []string{funnel.PaySucceeded}},
	{"payfail", "Payments failed or unknown", []string{funnel.PayFailed, funnel.PayUnknown}},
	{"confirmed", "Confirmed", []string{funnel.Confirmed}},
}

const (
	chartMinutes = 10
	// chartBuckets spans chartMinutes in funnel.SeriesStep buckets, both ends in.
	chartBuckets = chartMinutes*60/int(funnel.SeriesStep/time.Second) + 1
	// quietShare: a shard with fewer events than this share of the busiest
	// shard's is quiet, so one busy shard is not lost among many.
	quietShare = 0.05
	// quietLine is the ChartLine.Shard of the quiet shards' sum.
	quietLine = -1
)

// quiet says whether n events are few beside the busiest shard's top.
func quiet(n, top int64) bool {
	return n == 0 || float64(n) < quietShare*float64(top)
}

// chartShard is a shard to chart, its label and its queue's depth now.
type chartShard struct {
	id      int64
	label   string
	waiting int64
}

// charts reads the last chartMinutes of the funnel's series from Redis
// (the sum over every app process) and draws one chart per stage, one
// line per busy shard and one for the quiet shards together.
func (c *Console) charts(ctx context.Context, shards []chartShard, now time.Time) (views.FunnelCharts, error) {
	step := funnel.SeriesStep
	// The last complete bucket: the flusher adds a process's counts within a second.
	last := now.Add(-time.Second).Truncate(step).Add(-step)
	first := last.Add(-time.Duration(chartBuckets-1) * step)
	out := views.FunnelCharts{From: ist(first), To: ist(last.Add(step)), Minutes: chartMinutes, StepS: int(step / time.Second)}
	ids := make([]int64, len(shards))
	for i, s := range shards {
		ids[i] = s.id
	}
	// Read on to now: the queue's depth is walked back from its live value.
	series, err := c.cfg.Funnel.Series(ctx, ids, first, now)
	if err != nil {
		return out, err
	}
	// vals[chart][shard] is the chart's count per bucket.
	vals := make([]map[int64][]int64, len(chartStages))
	for ci, ch := range chartStages {
		vals[ci] = map[int64][]int64{}
		for _, s := range shards {
			xs := make([]int64, chartBuckets)
			for i, b := range series[s.id] {
				if i < len(xs) {
					for _, st := range ch.stages {
						xs[i] += b.Counts[st]
					}
				}
			}
			vals[ci][s.id] = xs
		}
	}
	// Events over every charted stage, for the busy-or-quiet split.
	events := map[int64]int64{}
	var top int64
	for ci := range chartStages {
		for id, xs := range vals[ci] {
			for _, x := range xs {
				events[id] += x
			}
		}
	}
	for _, n := range events {
		top = max(top, n)
	}
	var busy, calm []views.ChartShard
	for _, s := range shards {
		cs := views.ChartShard{ID: s.id, Label: s.label, Quiet: quiet(events[s.id], top), Events: events[s.id]}
		if cs.Quiet {
			calm = append(calm, cs)
		} else {
			busy = append(busy, cs)
		}
	}
	out.Shards = append(busy, calm...)
	for i := range out.Shards {
		out.Shards[i].Class = views.LineClass(i)
	}
	out.Quiet = len(calm)
	for ci, ch := range chartStages {
		sum := make([]int64, chartBuckets)
		var peak int64
		for _, s := range busy {
			peak = max(peak, slices.Max(vals[ci][s.ID]))
		}
		for _, s := range calm {
			for i, x := range vals[ci][s.ID] {
				sum[i] += x
			}
		}
		peak = max(peak, slices.Max(sum))
		fc := views.FunnelChart{Key: ch.key, Title: ch.title, Peak: perSecond(peak, step)}
		for _, s := range out.Shards {
			fc.Lines = append(fc.Lines, views.ChartLine{Shard: s.ID, Points: views.LinePoints(vals[ci][s.ID], peak, views.ChartW, views.ChartH)})
		}
		fc.Lines = append(fc.Lines, views.ChartLine{Shard: quietLine, Points: views.LinePoints(sum, peak, views.ChartW, views.ChartH)})
		out.Charts = append(out.Charts, fc)
	}
	// Depth beside arrivals and admissions, which move it.
	out.Charts = slices.Insert(out.Charts, 2, depthChart(shards, series, busy, calm))
	return out, nil
}

// perSecond is a bucket's count as a rate, for the y axis.
func perSecond(n int64, step time.Duration) string {
	r := float64(n) / step.Seconds()
	if r == float64(int64(r)) {
		return fmt.Sprintf("%d/s", int64(r))
	}
	return fmt.Sprintf("%.1f/s", r)
}

// depthChart draws each shard's waiting room depth at the end of every
// step. The depth is not sampled: it is the live depth less the arrivals
// and plus the admissions counted since (the queue holds every entrant
// and admits by a cursor, so both counts move it exactly), which needs
// nothing to run while nobody watches.
func depthChart(shards []chartShard, series map[int64][]funnel.Bucket, busy, calm []views.ChartShard) views.FunnelChart {
	depth := map[int64][]int64{}
	for _, s := range shards {
		xs := make([]int64, chartBuckets)
		d := s.waiting
		bs := series[s.id]
		for i := len(bs) - 1; i >= 0; i-- {
			if i < chartBuckets {
				xs[i] = max(d, 0)
			}
			d -= bs[i].Counts[funnel.QueueEntered] - bs[i].Counts[funnel.Admitted]
		}
		depth[s.id] = xs
	}
	sum := make([]int64, chartBuckets)
	var peak int64
	for _, s := range calm {
		for i, x := range depth[s.ID] {
			sum[i] += x
		}
	}
	peak = slices.Max(sum)
	for _, s := range busy {
		peak = max(peak, slices.Max(depth[s.ID]))
	}
	fc := views.FunnelChart{Key: "depth", Title: "Queue depth", Peak: fmt.Sprintf("%d waiting", peak)}
	for _, s := range append(slices.Clone(busy), calm...) {
		fc.Lines = append(fc.Lines, views.ChartLine{Shard: s.ID, Points: views.LinePoints(depth[s.ID], peak, views.ChartW, views.ChartH)})
	}
	fc.Lines = append(fc.Lines, views.ChartLine{Shard: quietLine, Points: views.LinePoints(sum, peak, views.ChartW, views.ChartH)})
	return fc
}
