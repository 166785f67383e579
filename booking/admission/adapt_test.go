package admission

import (
	"testing"
	"time"
)

// stepRate runs the rate one second at a time through a spell of distress
// (cut factor from t = from to t < to, seconds) and returns the rate each
// second. The signals lag: a fault seen from t is still in them until
// t + signalSpan.
func stepRate(cut float64, from, to, secs int) []float64 {
	var cfg ControllerConfig
	cfg.defaults()
	st := &shardState{rate: cfg.BaseRate}
	t0 := time.Unix(1_700_000_000, 0)
	out := make([]float64, secs)
	lag := int(signalSpan / time.Second)
	for s := range secs {
		c := 1.0
		if s >= from && s < to+lag {
			c = cut
		}
		st.adapt(t0.Add(time.Duration(s)*time.Second), c, signalSpan, cfg)
		out[s] = st.rate
	}
	return out
}

// TestRateCutsOncePerSpellAndRecovers: an 8 s slow core (hold p95 over
// target) and a 10 s degraded gateway (payments failing) each cut the
// rate once per signal span, not every second on the same evidence, and
// the rate is back at its pre-fault level within seconds of the signals
// clearing. Cutting every second took it from 50 to its floor of 1, where
// the queue of a 30 s rehearsal sold next to nothing.
func TestRateCutsOncePerSpellAndRecovers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cut      float64
		from, to int
	}{
		{"core slow 0-8s", 0.5, 0, 8},
		{"gateway degraded 1-11s", 0.7, 1, 11},
	} {
		rates := stepRate(tc.cut, tc.from, tc.to, 40)
		lowest := rates[0]
		for _, r := range rates {
			lowest = min(lowest, r)
		}
		clear := tc.to + int(signalSpan/time.Second) // the first second without distress in the signals
		if lowest < 50*tc.cut*tc.cut*tc.cut-0.01 {
			t.Errorf("%s: the rate fell to %.1f: cut more than once per %v (%v)", tc.name, lowest, signalSpan, rates)
		}
		if lowest > 50*tc.cut+0.01 {
			t.Errorf("%s: the rate never fell below %.1f: distress did not cut it (%v)", tc.name, lowest, rates)
		}
		if r := rates[clear+4]; r < 50 {
			t.Errorf("%s: 5 s after the signals cleared the rate is %.1f, want back at 50 (%v)", tc.name, r, rates)
		}
		if r := rates[len(rates)-1]; r <= 50 {
			t.Errorf("%s: the rate stopped at %.1f once healthy, want it to keep probing upwards", tc.name, r)
		}
	}
	// Distress that never ends keeps cutting, down to the floor.
	if r := stepRate(0.5, 0, 1000, 60)[59]; r != 1 {
		t.Errorf("a minute of distress left the rate at %.1f, want the floor 1", r)
	}
}
