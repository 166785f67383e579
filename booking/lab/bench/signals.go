package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// abSlice is how long recording stays on or off in the signals A/B, and
// abSettle the start of each slice left out of its count: a hold decided
// across a switch may have been written either way.
const (
	abSlice  = time.Second
	abSettle = 100 * time.Millisecond
)

// abRecording says whether slice i records signals. The order is ABBA
// (on, off, off, on, on, off, ...), so a load that drifts steadily across
// the run weighs on both halves alike.
func abRecording(i int) bool { return (i+1)/2%2 == 0 }

// SignalsAB is the cost of recording fraud signals on the hold path,
// measured inside one run: durable holds through the service per slice,
// recording on and off in alternate slices.
type SignalsAB struct {
	Phase
	On, Off []float64 // durable holds per second of each slice, in order
}

// Ran reports whether the A/B ran.
func (s SignalsAB) Ran() bool { return len(s.On) > 0 }

// Ratio is the mean rate with recording over the mean rate without.
func (s SignalsAB) Ratio() float64 {
	if mean(s.Off) == 0 {
		return 0
	}
	return mean(s.On) / mean(s.Off)
}

// PairInterval is the geometric mean of the pair ratios and its 95 %
// interval (two standard errors of the mean log ratio): the cost of
// recording with the slice-to-slice noise it carries.
func (s SignalsAB) PairInterval() (mid, lo, hi float64) {
	n := min(len(s.On), len(s.Off))
	var logs []float64
	for i := range n {
		if s.On[i] > 0 && s.Off[i] > 0 {
			logs = append(logs, math.Log(s.On[i]/s.Off[i]))
		}
	}
	if len(logs) < 2 {
		return 0, 0, 0
	}
	m := mean(logs)
	var ss float64
	for _, l := range logs {
		ss += (l - m) * (l - m)
	}
	se := math.Sqrt(ss/float64(len(logs)-1)) / math.Sqrt(float64(len(logs)))
	return math.Exp(m), math.Exp(m - 2*se), math.Exp(m + 2*se)
}

// PairRatios are on/off of each neighbouring pair of slices (on, off) in
// run order, sorted: their spread is the noise the mean ratio carries.
func (s SignalsAB) PairRatios() []float64 {
	var out []float64
	for i := range min(len(s.On), len(s.Off)) {
		if s.Off[i] > 0 {
			out = append(out, s.On[i]/s.Off[i])
		}
	}
	slices.Sort(out)
	return out
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// signalsAB runs serviceHolds' clients on the hot shard for SignalsAB,
// switching the server's recording each slice, and counts the durable
// holds that end inside each slice (after its settling time).
func signalsAB(ctx context.Context, env *runEnv) (Phase, SignalsAB, error) {
	sw := env.opts.SignalsOff
	slicesN := max(2, int(env.opts.SignalsAB/abSlice)&^1) // whole pairs
	run := time.Duration(slicesN) * abSlice
	sw.Store(!abRecording(0))
	defer sw.Store(false)
	stop := make(chan struct{})
	switched := make(chan struct{})
	begin := time.Now()
	go func() {
		defer close(switched)
		t := time.NewTicker(abSlice)
		defer t.Stop()
		for i := 1; i < slicesN; i++ {
			select {
			case <-t.C:
				sw.Store(!abRecording(i))
			case <-stop:
				return
			}
		}
	}()
	t, elapsed := holdLoop(ctx, env, env.fresh[0], run, begin, false, true, env.serviceHold(ctx, "a"))
	close(stop)
	<-switched
	counts := make([]int, slicesN)
	for _, e := range t.events {
		i := int(e.end / abSlice)
		if e.durable && i < slicesN && e.end-time.Duration(i)*abSlice >= abSettle {
			counts[i]++
		}
	}
	var ab SignalsAB
	for i, c := range counts {
		r := float64(c) / (abSlice - abSettle).Seconds()
		if abRecording(i) {
			ab.On = append(ab.On, r)
		} else {
			ab.Off = append(ab.Off, r)
		}
	}
	t.events = nil // slices, not a rush: no fill time to find
	ph := t.phase("signals A/B: Service.Hold, recording on and off in alternate 1 s slices", elapsed)
	ab.Phase = ph
	return ph, ab, nil
}

// report is the A/B's lines of the report.
func (s SignalsAB) report(rawB float64) string {
	var b strings.Builder
	pr := s.PairRatios()
	fmt.Fprintf(&b, "signals A/B: %d slices of %s (the first %s of each not counted), recording on and off ABBA\n",
		len(s.On)+len(s.Off), abSlice, abSettle)
	fmt.Fprintf(&b, "  durable holds/s with recording     %s (of raw B %.3f)   slices %s\n", rate(mean(s.On), "/s"), mean(s.On)/rawB, rates(s.On))
	fmt.Fprintf(&b, "  durable holds/s without recording  %s (of raw B %.3f)   slices %s\n", rate(mean(s.Off), "/s"), mean(s.Off)/rawB, rates(s.Off))
	if len(pr) > 0 {
		mid, lo, hi := s.PairInterval()
		fmt.Fprintf(&b, "  with / without: %.3f (mean of each half); pairs: median %.3f, range %.3f-%.3f over %d pairs;\n",
			s.Ratio(), pr[len(pr)/2], pr[0], pr[len(pr)-1], len(pr))
		fmt.Fprintf(&b, "  geometric mean of the pairs %.3f, 95 %% interval %.3f-%.3f\n", mid, lo, hi)
	}
	return b.String()
}

func rates(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.0f", x)
	}
	return strings.Join(parts, " ")
}
