package console

import (
	"context"
	"fmt"
	"slices"
	"strings"
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
func (c *Console) charts(ctx context.Context, shards []chartShard, routes []string, now time.Time) (views.FunnelCharts, error) {
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
		out.Charts = append(out.Charts, shardChart(ch.key, ch.title, perSecond(peak, step), out.Shards, vals[ci], sum, peak))
	}
	// Depth beside arrivals and admissions, which move it.
	out.Charts = slices.Insert(out.Charts, 2, depthChart(shards, series, out.Shards, len(busy)))
	if out.Latency, err = c.latencyCharts(ctx, first, last); err != nil {
		return out, err
	}
	if out.Routes, err = c.routeCharts(ctx, routes, first, last); err != nil {
		return out, err
	}
	return out, nil
}

// shardChart is one chart of the rush: a line per shard in the legend's
// order, then the quiet shards' sum.
func shardChart(key, title, peakWords string, shards []views.ChartShard, vals map[int64][]int64, sum []int64, peak int64) views.Chart {
	ch := views.Chart{Key: key, Title: title, Peak: peakWords, Describe: "one line per shard", Start: fmt.Sprintf("−%d min", chartMinutes), End: "now"}
	for _, s := range shards {
		l := views.NewLine(fmt.Sprint(s.ID), s.Label, s.Class, vals[s.ID], peak, chartBuckets)
		l.Quiet = s.Quiet
		ch.Lines = append(ch.Lines, l)
	}
	ch.Lines = append(ch.Lines, views.NewLine(fmt.Sprint(quietLine), "quiet shards together", "sum", sum, peak, chartBuckets))
	return ch
}

// timedStages are the stages whose latency the funnel records: charted
// even before their first event, so the page's layout holds still.
var timedStages = []string{funnel.HoldAttempt, funnel.PayInitiated}

// latencyCharts draws p95 per timed stage and step, over every shard:
// each step's p95 comes from the histograms summed over every process.
func (c *Console) latencyCharts(ctx context.Context, first, last time.Time) ([]views.Chart, error) {
	steps, err := c.cfg.Funnel.LatencySeries(ctx, first, last)
	if err != nil {
		return nil, err
	}
	stages := slices.Clone(timedStages)
	for _, st := range funnel.Stages {
		for _, b := range steps {
			if _, n := b.Quantile(st, 0.95); n > 0 && !slices.Contains(stages, st) {
				stages = append(stages, st)
			}
		}
	}
	var out []views.Chart
	for _, st := range stages {
		xs := make([]int64, chartBuckets)
		for i := range xs {
			xs[i] = -1 // no events in the step: no point (views.SpanPoints)
		}
		for i, b := range steps {
			if d, n := b.Quantile(st, 0.95); n > 0 && i < len(xs) {
				// The histogram's last bucket has no top: drawn just above the one before.
				xs[i] = min(d.Milliseconds(), slowest+1)
			}
		}
		peak := max(slices.Max(xs), 0)
		out = append(out, views.Chart{Key: "p95-" + st, Title: "p95 " + stageLabels[st], Peak: latencyWords(peak),
			Describe: "p95 latency per step", Start: fmt.Sprintf("−%d min", chartMinutes), End: "now",
			Lines: []views.Line{views.NewLine("p95", "p95 "+stageLabels[st], views.LineClass(0), xs, peak, chartBuckets)}})
	}
	return out, nil
}

// slowest is the top of the latency histogram's last bounded bucket, in ms.
var slowest = int64(funnel.Buckets[len(funnel.Buckets)-2])

// latencyWords is a p95 chart's peak: milliseconds below a second, else
// seconds; past the last bounded bucket, only that it is over it.
func latencyWords(ms int64) string {
	switch {
	case ms > slowest:
		return fmt.Sprintf("over %d s", slowest/1000)
	case ms >= 1000:
		return fmt.Sprintf("%g s", float64(ms)/1000)
	}
	return fmt.Sprintf("%d ms", ms)
}

// routeCharts draws each payment route's calls per second by outcome,
// summed over every process.
func (c *Console) routeCharts(ctx context.Context, routes []string, first, last time.Time) ([]views.Chart, error) {
	steps, err := c.cfg.Funnel.RouteSeries(ctx, first, last)
	if err != nil {
		return nil, err
	}
	var out []views.Chart
	for _, r := range routes {
		vals := make([][]int64, len(funnel.RouteOutcomes))
		var peak int64
		for oi, o := range funnel.RouteOutcomes {
			vals[oi] = make([]int64, chartBuckets)
			for i, b := range steps {
				if i < chartBuckets {
					vals[oi][i] = b.Counts[r+"|"+o]
				}
			}
			peak = max(peak, slices.Max(vals[oi]))
		}
		ch := views.Chart{Key: "route-" + strings.ReplaceAll(r, "/", "-"), Title: r, Peak: perSecond(peak, funnel.SeriesStep),
			Describe: "calls answered, refused and unanswered", Start: fmt.Sprintf("−%d min", chartMinutes), End: "now"}
		var opened int64
		for _, b := range steps {
			opened += b.Counts[r+"|"+funnel.RouteBreakerOpened]
		}
		if opened > 0 {
			ch.Note = fmt.Sprintf("breaker opened %d×", opened)
		}
		// No answer first and answered last: where all three lie at zero
		// the line on top is green, not an alarming red.
		for oi := len(funnel.RouteOutcomes) - 1; oi >= 0; oi-- {
			o := funnel.RouteOutcomes[oi]
			ch.Lines = append(ch.Lines, views.NewLine(o, views.RouteOutcomeLabels[oi], views.RouteOutcomeClass(oi), vals[oi], peak, chartBuckets))
		}
		out = append(out, ch)
	}
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
func depthChart(shards []chartShard, series map[int64][]funnel.Bucket, ordered []views.ChartShard, nbusy int) views.Chart {
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
	for _, s := range ordered[nbusy:] {
		for i, x := range depth[s.ID] {
			sum[i] += x
		}
	}
	peak := slices.Max(sum)
	for _, s := range ordered[:nbusy] {
		peak = max(peak, slices.Max(depth[s.ID]))
	}
	return shardChart("depth", "Queue depth", fmt.Sprintf("%d waiting", peak), ordered, depth, sum, peak)
}
