package fraud

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// adversarialSeeds runs the clustering on AdversarialPopulation for each
// seed and returns the measure of each.
func adversarialSeeds(t *testing.T, cfg Config, seeds []uint64) []Quality {
	t.Helper()
	out := make([]Quality, len(seeds))
	for i, seed := range seeds {
		b := setup(t)
		ctx := context.Background()
		pop := AdversarialPopulation(seed)
		if os.Getenv("TATKAL_FRAUD_POP") == "classic" {
			pop = Population{Rings: 6, RingSize: 6, Families: 40, Honest: 800, WithinLimits: true, Seed: seed}
		}
		g, err := Generate(ctx, b.env.Pool, b.rec, pop)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Clusterer{Config: cfg}.Run(ctx, b.env.Pool, g.OpensAt)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = Measure(res, g)
		t.Logf("seed %d: %s", seed, out[i])
		if os.Getenv("TATKAL_FRAUD_DEBUG") != "" {
			seen := map[int64]bool{}
			for _, c := range res.Clusters {
				for _, m := range c.Members {
					seen[m] = true
					ms := c.Scores[m]
					_, ring := g.Ring[m]
					if ring != ms.Flagged {
						var kinds []string
						for _, e := range c.Evidence.all {
							if e.A == m || e.B == m {
								for _, ev := range e.Evidence {
									kinds = append(kinds, fmt.Sprintf("%s:%.2f/%d/%d", ev.Kind, ev.Weight, ev.Shared, ev.Group))
								}
							}
						}
						t.Logf("  %s %d in %d-cluster: %.2f %s | %v", g.Shape[m], m, len(c.Members), ms.Score, ms.Why, kinds)
					}
				}
			}
			for m := range g.Ring {
				if !seen[m] {
					t.Logf("  %s %d in no cluster", g.Shape[m], m)
				}
			}
		}
	}
	return out
}

// sumQuality adds up the measures of several seeds.
func sumQuality(qs []Quality) Quality {
	var tot Quality
	tot.ByShape = map[string][2]int{}
	for _, q := range qs {
		tot.RingFound += q.RingFound
		tot.Rings += q.Rings
		tot.Flagged += q.Flagged
		tot.Innocents += q.Innocents
		tot.FamilyFlagged += q.FamilyFlagged
		tot.FamilyTotal += q.FamilyTotal
		for sh, n := range q.ByShape {
			m := tot.ByShape[sh]
			tot.ByShape[sh] = [2]int{m[0] + n[0], m[1] + n[1]}
		}
	}
	return tot
}

// TestMeasureAdversarial prints the five-seed figures of the README
// (TATKAL_FRAUD_MEASURE=1; seeds from TATKAL_FRAUD_SEEDS, default 1-5).
func TestMeasureAdversarial(t *testing.T) {
	if os.Getenv("TATKAL_FRAUD_MEASURE") == "" {
		t.Skip("set TATKAL_FRAUD_MEASURE=1 to measure the detector over five seeds")
	}
	seeds := []uint64{1, 2, 3, 4, 5}
	if s := os.Getenv("TATKAL_FRAUD_SEEDS"); s != "" {
		seeds = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.ParseUint(f, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			seeds = append(seeds, n)
		}
	}
	tot := sumQuality(adversarialSeeds(t, DefaultConfig(), seeds))
	t.Logf("over %d seeds: ring recall %d/%d = %.3f; innocents flagged %d/%d = %.4f", len(seeds),
		tot.RingFound, tot.Rings, tot.Recall(), tot.Flagged, tot.Innocents, tot.InnocentRate())
	for _, sh := range slices.Sorted(maps.Keys(tot.ByShape)) {
		t.Logf("  %-13s %s", sh, fmt.Sprintf("%d/%d", tot.ByShape[sh][0], tot.ByShape[sh][1]))
	}
}

// TestAdversarialQuality holds the detector to the bounds on two
// seeds of AdversarialPopulation: ring accounts found ≥ 0.9, innocents
// flagged ≤ 1 %, and every shape of ring found at least half the time while
// no office desk, hostel or ring customer's relative is flagged. The
// detector before issue 37 found 0.23 of the ring accounts (every classic
// ring, no evasive, one-thing, small or surname one) and flagged every desk.
func TestAdversarialQuality(t *testing.T) {
	t.Parallel()
	tot := sumQuality(adversarialSeeds(t, DefaultConfig(), []uint64{1, 2}))
	t.Logf("two seeds: ring recall %d/%d = %.3f; innocents flagged %d/%d = %.4f",
		tot.RingFound, tot.Rings, tot.Recall(), tot.Flagged, tot.Innocents, tot.InnocentRate())
	if tot.Recall() < 0.9 {
		t.Errorf("ring recall %.3f < 0.9", tot.Recall())
	}
	if tot.InnocentRate() > 0.01 {
		t.Errorf("innocents flagged %.4f > 0.01", tot.InnocentRate())
	}
	for _, sh := range []string{ShapeRing, ShapeEvasive, ShapeRingCard, ShapeRingBank, ShapeRingPhone, ShapeRingSmall, ShapeRingSurname} {
		if n := tot.ByShape[sh]; n[1] == 0 || 2*n[0] < n[1] {
			t.Errorf("%s: %d of %d flagged, want at least half", sh, n[0], n[1])
		}
	}
	for _, sh := range []string{ShapeDesk, ShapeHostel, ShapeRelative, ShapeHonest, ShapeBigFamily} {
		if n := tot.ByShape[sh]; n[1] == 0 || n[0] > 0 {
			t.Errorf("%s: %d of %d flagged, want none (of some)", sh, n[0], n[1])
		}
	}
}

// TestNearMissesListWhatFellShort: the members scoring between NearMiss ×
// MemberScore and MemberScore are listed, highest first, with their why;
// flagged members and low scores are not.
func TestNearMissesListWhatFellShort(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	g, err := Generate(ctx, b.env.Pool, b.rec, AdversarialPopulation(3))
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	if _, err := (Clusterer{Config: cfg}).Run(ctx, b.env.Pool, g.OpensAt); err != nil {
		t.Fatal(err)
	}
	near, err := NearMisses(ctx, b.env.Pool, cfg, 500)
	if err != nil {
		t.Fatal(err)
	}
	if len(near) == 0 {
		t.Fatal("no near miss in an adversarial window")
	}
	flagged := flaggedUsers(t, b, g.OpensAt)
	for i, n := range near {
		if flagged[n.UserID] || n.Score < cfg.NearMiss*cfg.MemberScore-1e-6 || n.Score >= cfg.MemberScore || n.Why == "" {
			t.Errorf("near miss %+v (flagged %v)", n, flagged[n.UserID])
		}
		if i > 0 && n.Score > near[i-1].Score {
			t.Errorf("near misses out of order at %d", i)
		}
	}
	t.Logf("%d near misses; first %+v", len(near), near[0])
}
