package rehearse_test

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"tatkal/booking/app"
	"tatkal/booking/rehearse"
	"tatkal/booking/testenv"
)

// testConfig is the process configuration of a rehearsal in the tests:
// the tests' PostgreSQL server and Redis (the rehearsal makes its own
// scratch database and prefix there and removes them).
func testConfig() app.Config {
	return app.Config{DatabaseURL: testenv.BaseURL(), RedisURL: testenv.RedisURL(), DBPool: int(testenv.PoolSize()),
		FraudKey: "rehearsal-test-fraud-key-0123456789"}
}

// TestSmallRehearsal is issue 15's rehearsal in the suite: 300
// travellers, 40 berths, 30 s, both modes, gateway degradation from +10 s
// to +20 s. Every run: 0 oversold berth-legs, 0 payments unresolved after
// the drain, money balancing to the paisa, the seat invariants and (queue
// mode) the admission invariant and every entrant's arrival stored. In
// queue mode aggressive / ordinary success ≤ 1.25 is checked on the mean
// of three seeds (TATKAL_REHEARSAL_SEEDS=3, about 6 minutes here); one
// seed by default (CI's budget) only logs it.
func TestSmallRehearsal(t *testing.T) {
	if testing.Short() {
		t.Skip("rehearsal: two 30 s windows")
	}
	t.Parallel()
	o := rehearse.Defaults()
	o.Travellers, o.Berths, o.Duration, o.Mode, o.Seed = 300, 40, 30*time.Second, rehearse.Both, 1
	o.Aggressive = 0.3
	o.Stratify = true
	o.Drain = 90 * time.Second // ends as soon as every payment has resolved (0-20 s here)
	if n, err := strconv.Atoi(os.Getenv("TATKAL_REHEARSAL_SEEDS")); err == nil && n > 0 {
		o.Seeds = n
	}
	f, err := rehearse.ParseFault("gateway-degraded@10s-20s")
	if err != nil {
		t.Fatal(err)
	}
	o.Faults = []rehearse.Fault{f}
	var ticks int
	o.OnTick = func(rehearse.Tick) { ticks++ }
	start := time.Now()
	rep, err := rehearse.Run(context.Background(), testConfig(), o, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("rehearsal took %v\n%s", time.Since(start).Round(time.Second), rep.Markdown())
	if len(rep.Runs) != 2*o.Seeds {
		t.Fatalf("%d runs, want %d", len(rep.Runs), 2*o.Seeds)
	}
	if ticks == 0 {
		t.Error("no live ticks")
	}
	for _, rr := range rep.Runs {
		name := rr.Mode + "/seed-" + strconv.FormatUint(rr.Seed, 10)
		if rr.OversoldBerthLegs != 0 {
			t.Errorf("%s: %d oversold berth-legs", name, rr.OversoldBerthLegs)
		}
		if rr.UnresolvedPayments != 0 {
			t.Errorf("%s: %d payments unresolved after the drain", name, rr.UnresolvedPayments)
		}
		if !rr.Money.Balanced {
			t.Errorf("%s: money does not balance: %+v", name, rr.Money)
		}
		if len(rr.InvariantViolations) > 0 {
			t.Errorf("%s: seat invariants: %v", name, rr.InvariantViolations)
		}
		if rr.AdmissionViolations != nil && *rr.AdmissionViolations != 0 {
			t.Errorf("%s: %d admission invariant violations", name, *rr.AdmissionViolations)
		}
		if rr.Booked == 0 {
			t.Errorf("%s: nothing booked", name)
		} else if reached := float64(rr.BackendRequests-rr.BackendRefused) / float64(rr.Booked); rr.BackendRefused < 0 ||
			rr.BackendRefused > rr.BackendRequests || math.Abs(rr.BackendReachedPerBooking-reached) > 0.001 {
			t.Errorf("%s: %d backend calls, %d refused, %d booked: %.3f reached per booking, want %.3f",
				name, rr.BackendRequests, rr.BackendRefused, rr.Booked, rr.BackendReachedPerBooking, reached)
		}
		// No bound of bookings by berths: the shard's journeys are of mixed
		// segments, so a berth sells once per leg (42 bookings on 40 berths
		// is honest); oversold berth-legs above are the bound.
		if rr.Errors > 0 {
			t.Errorf("%s: %d unexpected answers: %v", name, rr.Errors, rr.ErrorKinds)
		}
		if rr.Mode == rehearse.Queue {
			t.Logf("%s: aggressive / ordinary success = %.2f", name, rr.SuccessRatio)
		}
		if rr.Mode == rehearse.Queue {
			// Every entrant's arrival was noted and stored with the draw.
			if f := rr.Fairness; f == nil || f.Entrants == 0 || f.WithArrival != f.Entrants || f.SpearmanRho == nil || !f.Verified {
				t.Errorf("%s: fairness figures %+v", name, f)
			} else {
				t.Logf("%s: Spearman rho %.3f over %d entrants; by client %+v", name, *f.SpearmanRho, f.Entrants, f.ByClient)
			}
		}
		if len(rr.Follow.Steps) == 0 {
			t.Errorf("%s: the followed traveller has no steps", name)
		}
	}
	// The bound is over three seeds: one seed's ~40 bookings swing
	// the ratio between about 1.0 and 1.5 here (README, The rehearsal lab).
	var mean float64
	for _, sm := range rep.Summary[rehearse.Queue] {
		if sm.Figure == "aggressive_over_ordinary" {
			mean = sm.Mean
		}
	}
	if o.Seeds >= 3 && mean > 1.25 {
		t.Errorf("queue mode: aggressive / ordinary success = %.2f over %d seeds, more than 1.25", mean, o.Seeds)
	}
	if !rep.OK() {
		t.Error("the report is not OK")
	}
	if _, err := json.Marshal(rep); err != nil {
		t.Fatal(err)
	}
}

// TestProfilesAreTheSameInBothModes: a traveller's kind, party, journey,
// method and the bank's answer come from the seed alone, and the share of
// aggressive travellers is exact.
func TestProfilesAreTheSameInBothModes(t *testing.T) {
	o := rehearse.Defaults()
	o.Travellers = 500
	a, b := rehearse.Profiles(o, 7), rehearse.Profiles(o, 7)
	aggr, declines := 0, 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("traveller %d: %+v, then %+v", i, a[i], b[i])
		}
		if a[i].Aggressive {
			aggr++
		}
		if a[i].Decline {
			declines++
			if a[i].Method == "WALLET" {
				t.Fatalf("traveller %d declines a wallet payment", i)
			}
		}
	}
	if aggr != 50 {
		t.Fatalf("%d aggressive of 500 at 10%%", aggr)
	}
	if declines == 0 {
		t.Fatal("no seeded declines")
	}
	if c := rehearse.Profiles(o, 8); c[0] == a[0] && c[1] == a[1] && c[2] == a[2] {
		t.Fatal("another seed gave the same travellers")
	}
}

// TestReportHasSeeds001Rows: the Markdown report carries every row of
// seeds/001's comparison table for both modes, and the rows the model
// cannot show.
func TestReportHasSeeds001Rows(t *testing.T) {
	one := 1
	o := rehearse.Defaults()
	o.Mode, o.Seeds = rehearse.Both, 1
	if err := o.Check(); err != nil {
		t.Fatal(err)
	}
	rep := &rehearse.Report{Options: o, Runs: []rehearse.RunReport{{Mode: rehearse.Direct, Seed: o.Seed, Booked: 3,
		BackendRequests: 15, BackendRefused: 9, BackendPerBooking: 5, BackendReachedPerBooking: 2},
		{Mode: rehearse.Queue, Seed: o.Seed, Booked: 4, AdmissionViolations: &one}}}
	md := rep.Markdown()
	for _, row := range []string{"Run status", "Elapsed time after opening", "Successful bookings", "Bookings / min", "requests / successful booking",
		"Total edge requests", "Origin rejections · retryable", "p95 completed backend call latency", "p95 opening → terminal result",
		"Ordinary traveller booking success", "Aggressive traveller booking success", "Still waiting or in progress",
		"Declined / expired / sold out / refund due", "Observed admission invariant violations", "Oversold berth-legs",
		"Payments unresolved after drain", "Money in and out", "CPU used", "| Metric | Direct booking | Queue-controlled |", "| Not applicable | 1 |",
		"| Backend (hold + payment) requests / successful booking | 2.00 |", "5.00 (9 refused retryably before the core)"} {
		if !strings.Contains(md, row) {
			t.Errorf("the report lacks %q:\n%s", row, md)
		}
	}
	if rep.OK() {
		t.Error("a report with an admission violation is OK")
	}
}

// TestParseFault reads NAME@FROM-TO and refuses the rest.
func TestParseFault(t *testing.T) {
	f, err := rehearse.ParseFault("core-slow@20s-40s")
	if err != nil || f.Name != rehearse.FaultCoreSlow || f.From != 20*time.Second || f.To != 40*time.Second {
		t.Fatalf("core-slow@20s-40s: %+v %v", f, err)
	}
	for _, bad := range []string{"nothing@1s-2s", "core-slow@40s-20s", "gateway-degraded@x-2s"} {
		if _, err := rehearse.ParseFault(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
