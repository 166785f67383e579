package inventory_test

import (
	"context"
	"reflect"
	"testing"

	"tatkal/booking/inventory"
)

// PROMOTE applies a waitlist promotion as a delta: from the epoch it
// started from only (STALE otherwise), and only when Redis agrees with it
// (MISMATCH otherwise); either refusal changes nothing. Applied, the shard
// is exactly what LOAD makes of the state after the promotion.
func TestPromoteScript(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _, _ := newStore(t)
	types, coach := shape(1, 4, "LMUS")
	rec := func(id string, state byte, user int64, berths []int, wl int) inventory.HoldRecord {
		return inventory.HoldRecord{ID: id, State: state, UserID: user, From: 0, To: 3, ExpiresMs: expiry.UnixMilli(), Berths: berths,
			WaitlistNo: wl, Passengers: 1}
	}
	before := inventory.ShardState{Epoch: 5, Legs: 3, BerthTypes: types, Coaches: coach, WaitlistCap: 5, Holds: []inventory.HoldRecord{
		rec("a", 'C', 1, []int{0}, 0), rec("b", 'C', 2, []int{1}, 0), rec("c", 'H', 3, []int{2}, 0),
		rec("d", 'X', 4, nil, 1), rec("e", 'X', 5, nil, 2), rec("f", 'X', 6, nil, 3),
	}}
	const shard, want = 301, 302
	mustLoad(t, s, shard, before)
	orig := snap(t, s, shard)
	refused := func(epoch int64, cancelled []string, promos []inventory.Promotion, outcome inventory.PromoteOutcome) {
		t.Helper()
		got, err := s.Promote(ctx, shard, epoch, cancelled, promos)
		if err != nil || got != outcome {
			t.Fatalf("promote at %d: %s %v, want %s", epoch, got, err, outcome)
		}
		if now := snap(t, s, shard); !reflect.DeepEqual(now, orig) {
			t.Fatalf("a refused promotion (%s) changed the shard:\n%+v\nwas\n%+v", outcome, now, orig)
		}
	}
	ok := []inventory.Promotion{{HoldID: "d", Berths: []int{1}}, {HoldID: "e", Berths: []int{0}}}
	refused(7, []string{"a", "b"}, ok, inventory.PromoteStale)                                                        // Redis is at 5, not 6
	refused(6, []string{"a"}, ok, inventory.PromoteMismatch)                                                          // berth 1 is still b's
	refused(6, []string{"a", "b"}, []inventory.Promotion{{HoldID: "d", Berths: []int{2}}}, inventory.PromoteMismatch) // c holds berth 2
	refused(6, []string{"a", "b"}, []inventory.Promotion{{HoldID: "c", Berths: []int{0}}}, inventory.PromoteMismatch) // c is no waitlisted booking
	refused(6, []string{"a", "b"}, []inventory.Promotion{{HoldID: "d", Berths: []int{0}}, {HoldID: "e", Berths: []int{0}}}, inventory.PromoteMismatch)
	if _, err := s.Promote(ctx, shard, 6, []string{"a|b"}, nil); err == nil {
		t.Fatal("a hold id the script cannot carry was sent")
	}

	got, err := s.Promote(ctx, shard, 6, []string{"a", "b", "gone"}, ok)
	if err != nil || got != inventory.PromoteApplied {
		t.Fatalf("promote: %s %v", got, err)
	}
	after := before
	after.Epoch = 6
	after.Holds = []inventory.HoldRecord{rec("c", 'H', 3, []int{2}, 0), rec("d", 'C', 4, []int{1}, 1), rec("e", 'C', 5, []int{0}, 2),
		rec("f", 'X', 6, nil, 3)}
	mustLoad(t, s, want, after)
	if g, w := snap(t, s, shard), snap(t, s, want); !reflect.DeepEqual(g, w) {
		t.Fatalf("after PROMOTE:\n%+v\nLOAD of the same state:\n%+v", g, w)
	}
}
