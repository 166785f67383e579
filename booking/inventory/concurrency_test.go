package inventory_test

import (
	"context"
	"math/rand"
	"slices"
	"sync"
	"testing"

	"tatkal/booking/inventory"
)

type attempt struct {
	req inventory.HoldRequest
	res inventory.HoldResult
	err error
	// phase 2: what was done to a HELD answer, and its answer
	action string
	answer string
}

// TestConcurrentHolds: 200 goroutines hold 1-2 seats on random journeys of
// a 64-berth shard at once; then, while 100 more hold, the first ones
// confirm, release or undo theirs. No berth-leg is ever claimed twice and
// the records are exactly the HELD answers that were kept.
func TestConcurrentHolds(t *testing.T) {
	t.Parallel()
	s, _, _ := newStore(t)
	ctx := context.Background()
	const legs, berths = 6, 64
	types, coaches := shape(4, 16, "LMULMUST")
	mustLoad(t, s, testShard, inventory.ShardState{Epoch: 1, Legs: legs, BerthTypes: types, Coaches: coaches})
	rng := rand.New(rand.NewSource(42))
	newAttempts := func(n int, firstUser int64) []*attempt {
		out := make([]*attempt, n)
		for i := range out {
			from := rng.Intn(legs)
			to := from + 1 + rng.Intn(legs-from)
			prefs := make([]byte, 1+rng.Intn(2))
			for j := range prefs {
				prefs[j] = "LMU-"[rng.Intn(4)]
			}
			r := req(testShard, firstUser+int64(i), from, to, string(prefs))
			out[i] = &attempt{req: r}
		}
		return out
	}
	run := func(jobs []func()) {
		var start, wg sync.WaitGroup
		start.Add(1)
		for _, job := range jobs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start.Wait()
				job()
			}()
		}
		start.Done()
		wg.Wait()
	}
	holdJob := func(a *attempt) func() {
		return func() { a.res, a.err = s.Hold(ctx, a.req) }
	}

	// Phase 1: 200 holders at once.
	first := newAttempts(200, 1)
	var jobs []func()
	for _, a := range first {
		jobs = append(jobs, holdJob(a))
	}
	run(jobs)
	sn := snap(t, s, testShard)
	held := checkAnswers(t, first, sn)
	if len(held) < 40 || len(held) == len(first) {
		t.Fatalf("%d of %d held: the shard should fill up part way", len(held), len(first))
	}
	for l := 0; l < legs; l++ {
		if sn.Held[l] > berths || sn.Confirmed[l] != 0 {
			t.Fatalf("leg %d: held %d confirmed %d", l, sn.Held[l], sn.Confirmed[l])
		}
	}
	// Occupancy only grew in phase 1, so a journey refused then must still
	// be refused by the final state.
	for _, a := range first {
		if a.res.Outcome == inventory.SoldOut {
			need, free := legMask(a.req.From, a.req.To), 0
			for _, m := range sn.Occupancy {
				if m&need == 0 {
					free++
				}
			}
			if free >= len(a.req.Prefs) {
				t.Fatalf("user %d refused %d-%d for %d passengers, yet %d berths are free for it", a.req.UserID, a.req.From, a.req.To, len(a.req.Prefs), free)
			}
		}
	}

	// Phase 2: the held ones confirm, release or undo while 100 more hold.
	second := newAttempts(100, 1001)
	jobs = jobs[:0]
	for i, a := range held {
		a.action = []string{"confirm", "release", "undo", "keep"}[i%4]
		switch a.action {
		case "confirm":
			jobs = append(jobs, func() { a.answer, a.err = s.Confirm(ctx, testShard, a.res.HoldID) })
		case "release":
			jobs = append(jobs, func() {
				a.answer, a.err = s.Release(ctx, testShard, a.res.HoldID, inventory.ReleaseHold, a.req.UserID, a.req.IdemKey)
			})
		case "undo":
			jobs = append(jobs, func() {
				a.answer, a.err = s.Release(ctx, testShard, a.res.HoldID, inventory.ReleaseUndo, a.req.UserID, a.req.IdemKey)
			})
		}
	}
	for _, a := range second {
		jobs = append(jobs, holdJob(a))
	}
	run(jobs)
	for _, a := range held {
		if a.err != nil {
			t.Fatalf("%s %s: %v", a.action, a.res.HoldID, a.err)
		}
		if want := map[string]string{"confirm": "CONFIRMED", "release": "RELEASED", "undo": "RELEASED", "keep": ""}[a.action]; a.answer != want {
			t.Fatalf("%s %s answered %q, want %q", a.action, a.res.HoldID, a.answer, want)
		}
	}
	sn = snap(t, s, testShard)
	kept := map[string]byte{}
	for _, a := range held {
		switch a.action {
		case "confirm":
			kept[a.res.HoldID] = 'C'
		case "keep":
			kept[a.res.HoldID] = 'H'
		}
	}
	held2 := checkAnswers(t, second, inventory.Snapshot{})
	if len(held2) == 0 {
		t.Fatal("no phase-2 hold succeeded though seats were freed")
	}
	for _, a := range held2 {
		kept[a.res.HoldID] = 'H'
	}
	t.Logf("phase 1: %d of %d held; phase 2: %d of %d held", len(held), len(first), len(held2), len(second))
	all := append(slices.Clone(held), held2...)
	if len(sn.Holds) != len(kept) {
		t.Fatalf("%d records, want %d", len(sn.Holds), len(kept))
	}
	for _, a := range all {
		state, ok := kept[a.res.HoldID]
		rec, found := findHold(sn, a.res.HoldID)
		if found != ok {
			t.Fatalf("hold %s (%s): in snapshot %v, want %v", a.res.HoldID, a.action, found, ok)
		}
		if ok && (rec.State != state || !slices.Equal(rec.Berths, a.res.Berths) || rec.From != a.req.From || rec.To != a.req.To || rec.UserID != a.req.UserID) {
			t.Fatalf("hold %s: record %+v, answer %+v state %c", a.res.HoldID, rec, a.res, state)
		}
	}
	for l := 0; l < legs; l++ {
		if sn.Held[l]+sn.Confirmed[l] > berths {
			t.Fatalf("leg %d: %d held + %d confirmed > %d berths", l, sn.Held[l], sn.Confirmed[l], berths)
		}
	}
}

// checkAnswers fails on errors or unexpected outcomes, checks that HELD
// answers never share a berth on a leg, and (when sn is ready) that every
// HELD answer is a record with exactly its berths. It returns the HELD ones.
func checkAnswers(t *testing.T, as []*attempt, sn inventory.Snapshot) []*attempt {
	t.Helper()
	var held []*attempt
	claimed := map[int]uint16{}
	for _, a := range as {
		if a.err != nil {
			t.Fatalf("user %d: %v", a.req.UserID, a.err)
		}
		switch a.res.Outcome {
		case inventory.Held:
			if a.res.Replayed || a.res.HoldID != a.req.HoldID || len(a.res.Berths) != len(a.req.Prefs) {
				t.Fatalf("user %d: %+v", a.req.UserID, a.res)
			}
			held = append(held, a)
			need := legMask(a.req.From, a.req.To)
			for _, b := range a.res.Berths {
				if claimed[b]&need != 0 {
					t.Fatalf("berth %d given twice on legs %06b (hold %s)", b, claimed[b]&need, a.res.HoldID)
				}
				claimed[b] |= need
			}
			if sn.Ready {
				rec, ok := findHold(sn, a.res.HoldID)
				if !ok || !slices.Equal(rec.Berths, a.res.Berths) || rec.State != 'H' {
					t.Fatalf("HELD %s %v: record %+v (found %v)", a.res.HoldID, a.res.Berths, rec, ok)
				}
			}
		case inventory.SoldOut:
		default:
			t.Fatalf("user %d: unexpected %+v", a.req.UserID, a.res)
		}
	}
	if sn.Ready {
		if len(sn.Holds) != len(held) {
			t.Fatalf("%d records for %d HELD answers", len(sn.Holds), len(held))
		}
		for b, m := range sn.Occupancy {
			if claimed[b] != m {
				t.Fatalf("berth %d: occupancy %06b, answers claim %06b", b, m, claimed[b])
			}
		}
		// Held counters equal the passengers of the HELD answers.
		want := make([]int, sn.Legs)
		for _, a := range held {
			for l := a.req.From; l < a.req.To; l++ {
				want[l] += len(a.res.Berths)
			}
		}
		if !slices.Equal(sn.Held, want) {
			t.Fatalf("held counters %v, answers say %v", sn.Held, want)
		}
	}
	return held
}
