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
		g, err := Generate(ctx, b.env.Pool, b.rec, AdversarialPopulation(seed))
		if err != nil {
			t.Fatal(err)
		}
		res, err := Clusterer{Config: cfg}.Run(ctx, b.env.Pool, g.OpensAt)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = Measure(res, g)
		t.Logf("seed %d: %s", seed, out[i])
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
