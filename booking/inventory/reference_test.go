package inventory_test

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"

	"tatkal/booking/inventory"
)

// TestHoldMatchesReference: on shards of many small and uneven coaches
// (not aligned to bytes), at several densities, every HELD answer names
// exactly the berths the original per-berth script chose. Each hold is
// undone, so every request sees the loaded state. The test counts how
// often the group had to look past the first free berths for one coach,
// and how often no coach could take it, so both paths are known to run.
func TestHoldMatchesReference(t *testing.T) {
	t.Parallel()
	shapes := []struct {
		name  string
		sizes []int
	}{
		{"20 coaches of 6", []int{6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6}},
		{"uneven coaches", []int{1, 7, 9, 13, 3, 17, 8, 2, 21, 5, 11}},
		{"one coach", []int{37}},
	}
	var scanned, spread, held int
	for si, sh := range shapes {
		for _, density := range []float64{0.1, 0.5, 0.85} {
			t.Run(fmt.Sprintf("%s at %.0f%%", sh.name, 100*density), func(t *testing.T) {
				s, _, _ := newStore(t)
				rng := rand.New(rand.NewSource(int64(si)*100 + int64(100*density)))
				var types, coach []byte
				for c, n := range sh.sizes {
					for i := 0; i < n; i++ {
						types = append(types, "LMULMUSTWCA?"[rng.Intn(12)])
						coach = append(coach, byte(c+1))
					}
				}
				const legs = 5
				occ := make([]uint16, len(types))
				var recs []inventory.HoldRecord
				for i := 0; i < int(density*float64(len(types)*legs)); i++ {
					from := rng.Intn(legs)
					to := from + 1 + rng.Intn(legs-from)
					b := rng.Intn(len(types))
					if occ[b]&legMask(from, to) != 0 {
						continue
					}
					occ[b] |= legMask(from, to)
					recs = append(recs, inventory.HoldRecord{ID: fmt.Sprintf("c%d", i), State: 'C', UserID: int64(5000 + i), From: from, To: to, Berths: []int{b}, Passengers: 1, ExpiresMs: 1})
				}
				mustLoad(t, s, testShard, inventory.ShardState{Epoch: 1, Legs: legs, BerthTypes: types, Coaches: coach, Holds: recs})
				before := snap(t, s, testShard)
				for i := 0; i < 150; i++ {
					from := rng.Intn(legs)
					to := from + 1 + rng.Intn(legs-from)
					prefs := make([]byte, 1+rng.Intn(4))
					for j := range prefs {
						prefs[j] = "LMUSTWCA?Z----"[rng.Intn(14)]
					}
					r := req(testShard, int64(i+1), from, to, string(prefs))
					want := referenceBerths(types, coach, occ, string(prefs), from, to)
					got := mustHold(t, s, r)
					if want == nil {
						if got.Outcome != inventory.SoldOut {
							t.Fatalf("%d-%d %q: %+v, want SOLD_OUT", from, to, prefs, got)
						}
						continue
					}
					if got.Outcome != inventory.Held || !slices.Equal(got.Berths, want) {
						t.Fatalf("%d-%d %q: %+v, the original script chose %v", from, to, prefs, got, want)
					}
					held++
					if firstFree := referenceBerths(types, make([]byte, len(types)), occ, string(prefs), from, to); !slices.Equal(firstFree, want) {
						scanned++ // the one-coach rule moved the group
					}
					if len(want) > 1 && !sameCoach(coach, want) {
						spread++
					}
					mustRelease(t, s, testShard, got.HoldID, inventory.ReleaseUndo, r.UserID, r.IdemKey, "RELEASED")
				}
				if after := snap(t, s, testShard); !slices.Equal(after.Occupancy, before.Occupancy) {
					t.Fatal("undoing every hold did not restore the occupancy")
				}
			})
		}
	}
	t.Logf("%d held; the one-coach rule moved %d groups; %d spread over coaches", held, scanned, spread)
	if scanned < 20 || spread < 20 {
		t.Fatalf("the coach scan ran %d times and spread %d times: too few to trust", scanned, spread)
	}
}

func sameCoach(coach []byte, berths []int) bool {
	for _, b := range berths {
		if coach[b] != coach[berths[0]] {
			return false
		}
	}
	return true
}
