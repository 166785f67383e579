package rehearse

import "testing"

// TestMatchedPickBalancesTheBlock: the aggressive share of a block is
// exact and matched to the block in the bank's answer and party size:
// with 3 decliners in 10 and a share of 0.3, 0 or 1 of the 3 picked
// decline (0.9 expected), never 2 or 3, whatever the seed. (The party
// size, sorted on second, is balanced only roughly.)
func TestMatchedPickBalancesTheBlock(t *testing.T) {
	seen := map[int]int{}
	for seed := range uint64(500) {
		block := make([]*traveller, 10)
		for i := range block {
			block[i] = &traveller{profile: profile{Index: i, Party: 1 + i%2, From: "NDLS", To: "MMCT", Decline: i%3 == 0 && i < 9}}
		}
		block[9].Party = 4
		matchedPick(block, 0.3, newRand(seed, 10))
		picked, declining := 0, 0
		for _, tv := range block {
			if tv.Aggressive {
				picked++
				if tv.Decline {
					declining++
				}
			}
		}
		if picked != 3 {
			t.Fatalf("seed %d: %d aggressive in a block of 10 at 0.3", seed, picked)
		}
		if declining > 1 {
			t.Fatalf("seed %d: %d of the 3 aggressive decline, the block has 3 decliners in 10", seed, declining)
		}
		seen[declining]++
	}
	// Each traveller can be picked: both answers occur.
	if seen[0] == 0 || seen[1] == 0 {
		t.Fatalf("decliners picked: %v, want both 0 and 1 to occur", seen)
	}
}
