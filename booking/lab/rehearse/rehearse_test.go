package rehearse_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"tatkal/booking/admission"
	"tatkal/booking/app"
	"tatkal/booking/lab/rehearse"
	"tatkal/booking/lab/testenv"
)

// testConfig is the process configuration of a rehearsal in the tests:
// the tests' PostgreSQL server and Redis (the rehearsal makes its own
// scratch database and prefix there and removes them).
func testConfig() app.Config {
	return app.Config{DatabaseURL: testenv.BaseURL(), RedisURL: testenv.RedisURL(), DBPool: int(testenv.PoolSize()),
		FraudKey: "rehearsal-test-fraud-key-0123456789"}
}

// TestSmallRehearsal is issue 15's rehearsal in the suite: 300
// travellers, 40 berths, 30 s, both modes, three seeds at once (each on a
// stack of its own), the core slowed from the opening to +8 s (direct
// mode's rush, throttled at the door; the waiting room's draw) and the
// controller out from +12 s to +15 s (the queue's admissions: none new,
// the admitted go on). The gateway is not degraded here: under the suite's
// load its slow payments kept seats held past the 30 s window, most of the
// queue was still waiting when it ended, and the fastest pollers admitted
// last were the ones who booked (CI: 1.27). Every run: 0 oversold
// berth-legs, 0 payments unresolved after the drain, money balancing to
// the paisa, the seat invariants and (queue mode) the admission invariant
// and every entrant's arrival stored. Queue mode's calls stay under the
// backend's capacity (a quarter of it while the core is slow) through the
// fault windows, second by second; direct mode's go past it. Aggressive /
// ordinary success ≤ 1.25 in queue mode over the three seeds' travellers,
// or not beyond chance (TATKAL_REHEARSAL_SEEDS changes how many seeds).
func TestSmallRehearsal(t *testing.T) {
	if testing.Short() {
		t.Skip("rehearsal: two 30 s windows")
	}
	t.Parallel()
	o := rehearse.Defaults()
	o.Travellers, o.Berths, o.Duration, o.Mode, o.Seed, o.Seeds = 300, 40, 30*time.Second, rehearse.Both, 1, 3
	o.Aggressive = 0.3
	o.Stratify = true
	o.Parallel = true // the suite's time: three seeds in about the time of one
	if n, err := strconv.Atoi(os.Getenv("TATKAL_REHEARSAL_SEEDS")); err == nil && n > 0 {
		o.Seeds = n
	}
	for _, spec := range []string{"core-slow@0s-8s", "controller-outage@12s-15s"} {
		f, err := rehearse.ParseFault(spec)
		if err != nil {
			t.Fatal(err)
		}
		o.Faults = append(o.Faults, f)
	}
	var ticks atomic.Int64
	o.OnTick = func(rehearse.Tick) { ticks.Add(1) }
	cfg := testConfig()
	// Three stacks at once, each also with its simulators' 4 connections,
	// beside the package's other stacks, on a server of 100 connections
	// shared with other packages' tests: at 12 each it ran out of them;
	// at 4 the queue runs sold nothing on a loaded machine.
	cfg.DBPool = 6
	start := time.Now()
	rep, err := rehearse.Run(context.Background(), cfg, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("rehearsal took %v\n%s", time.Since(start).Round(time.Second), rep.Markdown())
	if len(rep.Runs) != 2*o.Seeds {
		t.Fatalf("%d runs, want %d", len(rep.Runs), 2*o.Seeds)
	}
	if ticks.Load() == 0 {
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
		// Booked counts travellers who saw their ticket inside the window;
		// on a machine loaded by the suite (backend p95 17 s in CI, direct
		// mode throttled through its rush) all of them may still be polling
		// when it ends. The tickets sold are the run's sign of life.
		if rr.Booked == 0 && rr.Money.TicketsPaise == 0 {
			t.Errorf("%s: nothing sold", name)
		} else if rr.Booked == 0 {
			t.Logf("%s: tickets for ₹%d sold, none seen by its traveller inside the window (p95 backend call %.1f s)", name, rr.Money.TicketsPaise/100, rr.P95BackendS)
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
		checkLoad(t, name, o, rr)
	}
	// The bound is over three seeds: the success rates of all
	// their travellers (the fairness job's bookings by client type, drain
	// included). Three seeds book about 90 tickets, 27 of them aggressive
	// with no advantage, so the pooled ratio's sd is about 0.2: over 1.25
	// by chance alone in about one run in ten (1.27, 1.375 in CI with
	// every check fine; 1.013 over six seeds on 6 Dec). A ratio over 1.25
	// fails only when the aggressive bookings are unlikely to be luck
	// (admission.ByChance < 1 %): at no advantage one run in a hundred at
	// most; over three seeds from about 1.7× observed (a true 2× advantage
	// in about four runs of five), the review's 6-9× at any seed count.
	var agg, ord admission.Rate
	for _, rr := range rep.Runs {
		if rr.Mode != rehearse.Queue || rr.Fairness == nil {
			continue
		}
		for _, g := range rr.Fairness.ByClient {
			switch g.Group {
			case "aggressive":
				agg.Entrants, agg.Booked = agg.Entrants+g.Entrants, agg.Booked+g.Booked
			case "ordinary":
				ord.Entrants, ord.Booked = ord.Entrants+g.Entrants, ord.Booked+g.Booked
			}
		}
	}
	if o.Seeds >= 3 {
		if agg.Entrants == 0 || ord.Entrants == 0 || ord.Booked == 0 {
			t.Fatalf("queue mode over %d seeds: aggressive %+v, ordinary %+v", o.Seeds, agg, ord)
		}
		ratio := (float64(agg.Booked) / float64(agg.Entrants)) / (float64(ord.Booked) / float64(ord.Entrants))
		chance := admission.ByChance(agg, ord)
		t.Logf("queue mode over %d seeds: aggressive %d/%d, ordinary %d/%d booked: %.3f (by chance: %.3g)", o.Seeds, agg.Booked, agg.Entrants, ord.Booked, ord.Entrants, ratio, chance)
		if ratio > 1.25 && chance < 0.01 {
			t.Errorf("queue mode: aggressive / ordinary success = %.2f over %d seeds, more than 1.25, and %.2g likely by chance alone", ratio, o.Seeds, chance)
		}
	}
	if !rep.OK() {
		t.Error("the report is not OK")
	}
	if _, err := json.Marshal(rep); err != nil {
		t.Fatal(err)
	}
}

// checkLoad: every second records the backend's capacity (a quarter of
// it in the core-slow window, the first 8 s); in queue mode the calls sent
// stay under it through the faults' windows; direct mode's go past it (its
// 300 travellers arrive in 2 s, each sending a hold: about 150/s against
// 25, however slow the machine), whatever the door then refuses.
func checkLoad(t *testing.T, name string, o rehearse.Options, rr rehearse.RunReport) {
	t.Helper()
	if len(rr.Seconds) < min(10, int(rr.ElapsedS)) { // a direct run may sell out in 6 s
		t.Errorf("%s: %d seconds recorded", name, len(rr.Seconds))
	}
	var inFault []string
	var sentOver bool // some second of a fault window sent more than the capacity
	for _, s := range rr.Seconds {
		want := o.Capacity
		if s.T < 8 {
			want /= 4
		}
		if s.T < 8 || s.T >= 12 && s.T < 15 {
			inFault = append(inFault, fmt.Sprintf("+%d %d/%g", s.T, s.Backend, s.Capacity))
			sentOver = sentOver || float64(s.Backend) > s.Capacity
			// Queue mode is held to what it sent, refused calls included:
			// the queue, not the door, keeps the backend under capacity.
			if rr.Mode == rehearse.Queue && float64(s.Backend) > s.Capacity {
				t.Errorf("%s: +%ds: backend load %d/s over the capacity %g/s in the fault window", name, s.T, s.Backend, s.Capacity)
			}
		}
		if s.Capacity != want {
			t.Errorf("%s: +%ds: capacity %g recorded, want %g", name, s.T, s.Capacity, want)
		}
	}
	l := rr.FaultPeakLoad
	if l == nil {
		t.Fatalf("%s: no peak load in the fault window", name)
	}
	if rr.Mode == rehearse.Queue && l.Ratio > 1 {
		t.Errorf("%s: peak load / capacity in the fault window %v", name, l)
	}
	if rr.Mode == rehearse.Direct && !sentOver {
		t.Errorf("%s: direct booking sent no more than the capacity in any second of the fault windows (%s): the rehearsal shows nothing", name, strings.Join(inFault, ", "))
	}
	t.Logf("%s: peak load / capacity %v, in the fault window %v; the window: %s", name, rr.PeakLoad, l, strings.Join(inFault, ", "))
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
		"| Backend (hold + payment) requests / successful booking | 2.00 |", "5.00 (9 refused retryably before the core)",
		"Backend capacity: 100 hold and payment calls / s", "| Peak backend load / capacity | 0.00× (+0s: 0/s of 0) |", "| … in the fault window | no fault |"} {
		if !strings.Contains(md, row) {
			t.Errorf("the report lacks %q:\n%s", row, md)
		}
	}
	if rep.OK() {
		t.Error("a report with an admission violation is OK")
	}
}

// TestReportPoolsAggressiveSuccessOverSeeds: with several seeds the report
// pools every seed's travellers by client type and says how likely that
// advantage is by chance alone (the hypergeometric tail; 33 of 270 against
// 57 of 630 is 9 %), and each run's row says the same of its own.
func TestReportPoolsAggressiveSuccessOverSeeds(t *testing.T) {
	o := rehearse.Defaults()
	o.Mode, o.Seeds = rehearse.Queue, 3
	if err := o.Check(); err != nil {
		t.Fatal(err)
	}
	rep := &rehearse.Report{Options: o}
	for i, c := range [][4]int{{11, 90, 18, 210}, {12, 90, 20, 210}, {10, 90, 19, 210}} {
		by := 1.0
		if i == 1 {
			by = 0.0042
		}
		rep.Runs = append(rep.Runs, rehearse.WithTravellers(rehearse.RunReport{Mode: rehearse.Queue, Seed: o.Seed + uint64(i), AggressiveByChance: &by}, c[0], c[1], c[2], c[3]))
	}
	md := rep.Markdown()
	for _, want := range []string{"Queue-controlled, all seeds' travellers pooled: aggressive 33 of 270 booked, ordinary 57 of 630: 1.35×, that far above by chance alone: 9 %.",
		"| … that far above ordinary by chance alone | not above |", "| … that far above ordinary by chance alone | 0.42 % (not luck) |"} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
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
