package inventory_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"tatkal/booking/inventory"
)

const testShard = int64(7)

// A hold takes berths free on every leg of its journey, and only those:
// a berth busy on any overlapping leg is skipped, a berth busy only on
// other legs is reused.
func TestHoldTakesBerthsFreeOnEveryLeg(t *testing.T) {
	t.Parallel()
	s, _, _ := newStore(t)
	ctx := context.Background()
	mustLoad(t, s, testShard, inventory.ShardState{
		Epoch: 1, Legs: 4, BerthTypes: []byte("LMUL"), Coaches: []byte{1, 1, 1, 1},
		Holds: []inventory.HoldRecord{
			{ID: "c1", State: 'C', UserID: 900, From: 0, To: 2, Berths: []int{0}, Passengers: 1, ExpiresMs: 1},
			{ID: "c2", State: 'C', UserID: 901, From: 2, To: 3, Berths: []int{1}, Passengers: 1, ExpiresMs: 1},
			{ID: "h1", State: 'H', UserID: 902, From: 3, To: 4, Berths: []int{2}, Passengers: 1, ExpiresMs: expiry.UnixMilli()},
		},
	})
	sn := snap(t, s, testShard)
	if want := []uint16{0b0011, 0b0100, 0b1000, 0}; !slices.Equal(sn.Occupancy, want) {
		t.Fatalf("loaded occupancy %04b, want %04b", sn.Occupancy, want)
	}

	// Legs 1 and 2: berth 0 is busy on leg 1, berth 1 on leg 2; berth 2 is
	// busy only on leg 3, so it is the first one free for the journey.
	r := mustHeld(t, s, req(testShard, 1, 1, 3, "-"))
	if !slices.Equal(r.Berths, []int{2}) {
		t.Fatalf("hold 1-3 took berths %v, want [2]", r.Berths)
	}
	if r.Epoch != 1 {
		t.Fatalf("epoch %d, want 1", r.Epoch)
	}
	sn = snap(t, s, testShard)
	if want := []uint16{0b0011, 0b0100, 0b1110, 0}; !slices.Equal(sn.Occupancy, want) {
		t.Fatalf("occupancy %04b, want %04b", sn.Occupancy, want)
	}
	if want := []int{0, 1, 1, 1}; !slices.Equal(sn.Held, want) {
		t.Fatalf("held %v, want %v", sn.Held, want)
	}
	if want := []int{1, 1, 1, 0}; !slices.Equal(sn.Confirmed, want) {
		t.Fatalf("confirmed %v, want %v", sn.Confirmed, want)
	}

	// Two passengers 1-3: only berth 3 is free for the whole journey.
	if got := mustHold(t, s, req(testShard, 2, 1, 3, "--")); got.Outcome != inventory.SoldOut {
		t.Fatalf("two passengers 1-3: %+v, want SOLD_OUT", got)
	}
	if after := snap(t, s, testShard); !reflect.DeepEqual(after, sn) {
		t.Fatalf("SOLD_OUT changed the shard:\nbefore %+v\nafter  %+v", sn, after)
	}

	// Leg 0 alone: berths 1 and 2 are busy only later, then berth 3.
	for i, want := range []int{1, 2, 3} {
		got := mustHeld(t, s, req(testShard, int64(10+i), 0, 1, "-"))
		if !slices.Equal(got.Berths, []int{want}) {
			t.Fatalf("hold %d on leg 0 took %v, want [%d]", i, got.Berths, want)
		}
	}
	if got := mustHold(t, s, req(testShard, 20, 0, 1, "-")); got.Outcome != inventory.SoldOut {
		t.Fatalf("leg 0 full: %+v, want SOLD_OUT", got)
	}
	sn = snap(t, s, testShard)
	if want := []uint16{0b0011, 0b0101, 0b1111, 0b0001}; !slices.Equal(sn.Occupancy, want) {
		t.Fatalf("occupancy %04b, want %04b", sn.Occupancy, want)
	}
	av, err := s.Available(ctx, testShard, 3, 4)
	if err != nil {
		t.Fatal(err)
	}
	if av.Free != 3 || av.Total != 4 {
		t.Fatalf("available 3-4 = %+v, want 3 free of 4", av)
	}
}

// DESIGN.md "Segment-aware seats": one berth free on A-B and another on
// B-C must not sell A-C.
func TestHoldFragmentedLegsDoNotAddUp(t *testing.T) {
	t.Parallel()
	t.Run("built by scripts", func(t *testing.T) {
		s, _, _ := newStore(t)
		mustLoad(t, s, testShard, inventory.ShardState{Epoch: 1, Legs: 2, BerthTypes: []byte("LU"), Coaches: []byte{1, 1}, WaitlistCap: 5})
		a := mustHeld(t, s, req(testShard, 1, 0, 1, "-")) // berth 0, leg 0
		b := mustHeld(t, s, req(testShard, 2, 0, 1, "-")) // berth 1, leg 0
		c := mustHeld(t, s, req(testShard, 3, 1, 2, "-")) // berth 0, leg 1
		if a.Berths[0] != 0 || b.Berths[0] != 1 || c.Berths[0] != 0 {
			t.Fatalf("setup berths %v %v %v, want 0 1 0", a.Berths, b.Berths, c.Berths)
		}
		mustRelease(t, s, testShard, a.HoldID, inventory.ReleaseHold, 1, "", "RELEASED")
		checkFragmented(t, s)
	})
	t.Run("loaded", func(t *testing.T) {
		s, _, _ := newStore(t)
		mustLoad(t, s, testShard, inventory.ShardState{Epoch: 1, Legs: 2, BerthTypes: []byte("LU"), Coaches: []byte{1, 1}, WaitlistCap: 5,
			Holds: []inventory.HoldRecord{
				{ID: "x", State: 'H', UserID: 1, From: 1, To: 2, Berths: []int{0}, Passengers: 1, ExpiresMs: expiry.UnixMilli()},
				{ID: "y", State: 'C', UserID: 2, From: 0, To: 1, Berths: []int{1}, Passengers: 1, ExpiresMs: expiry.UnixMilli()},
			}})
		checkFragmented(t, s)
	})
}

// checkFragmented expects berth 0 busy on leg 1 only and berth 1 on leg 0 only.
func checkFragmented(t *testing.T, s *inventory.Store) {
	t.Helper()
	ctx := context.Background()
	before := snap(t, s, testShard)
	if want := []uint16{0b10, 0b01}; !slices.Equal(before.Occupancy, want) {
		t.Fatalf("occupancy %02b, want %02b", before.Occupancy, want)
	}
	if free := before.Free(); !slices.Equal(free, []int{1, 1}) {
		t.Fatalf("per-leg free %v, want [1 1]", free)
	}
	for _, j := range []struct{ from, to, free int }{{0, 2, 0}, {0, 1, 1}, {1, 2, 1}} {
		av, err := s.Available(ctx, testShard, j.from, j.to)
		if err != nil {
			t.Fatal(err)
		}
		if av.Free != j.free || av.Total != 2 {
			t.Fatalf("available %d-%d = %+v, want %d free of 2", j.from, j.to, av, j.free)
		}
	}
	if got := mustHold(t, s, req(testShard, 50, 0, 2, "-")); got.Outcome != inventory.SoldOut || len(got.Berths) != 0 {
		t.Fatalf("A-C over fragmented legs: %+v, want SOLD_OUT", got)
	}
	wl := req(testShard, 51, 0, 2, "-")
	wl.AllowWaitlist = true
	if got := mustHold(t, s, wl); got.Outcome != inventory.WaitlistOffered || len(got.Berths) != 0 {
		t.Fatalf("A-C over fragmented legs with waitlist: %+v, want WAITLIST_OFFERED", got)
	}
	after := snap(t, s, testShard)
	if !slices.Equal(after.Occupancy, before.Occupancy) || !slices.Equal(after.Held, before.Held) || !slices.Equal(after.Confirmed, before.Confirmed) {
		t.Fatalf("refused journey changed seats: before %+v after %+v", before, after)
	}
	// Each leg alone still sells its one berth.
	if got := mustHeld(t, s, req(testShard, 52, 0, 1, "-")); got.Berths[0] != 0 {
		t.Fatalf("leg 0 took %v, want [0]", got.Berths)
	}
	if got := mustHeld(t, s, req(testShard, 53, 1, 2, "-")); got.Berths[0] != 1 {
		t.Fatalf("leg 1 took %v, want [1]", got.Berths)
	}
	if sn := snap(t, s, testShard); !slices.Equal(sn.Occupancy, []uint16{0b11, 0b11}) {
		t.Fatalf("occupancy %02b, want all taken", sn.Occupancy)
	}
}

func TestHoldSoldOutThenWaitlistThenSoldOut(t *testing.T) {
	t.Parallel()
	s, _, _ := newStore(t)
	ctx := context.Background()
	mustLoad(t, s, testShard, inventory.ShardState{Epoch: 1, Legs: 2, BerthTypes: []byte("LMUL"), Coaches: []byte{1, 1, 1, 1}, WaitlistCap: 3})
	full := mustHeld(t, s, req(testShard, 1, 0, 2, "----"))
	if !slices.Equal(full.Berths, []int{0, 1, 2, 3}) {
		t.Fatalf("four passengers took %v", full.Berths)
	}
	if got := mustHold(t, s, req(testShard, 2, 0, 1, "-")); got.Outcome != inventory.SoldOut || got.HoldID != "" || got.Replayed {
		t.Fatalf("full shard without waitlist: %+v, want SOLD_OUT", got)
	}

	wreq := func(user int64, prefs string) inventory.HoldRequest {
		r := req(testShard, user, 0, 1, prefs)
		r.AllowWaitlist = true
		return r
	}
	w1r := wreq(3, "--")
	w1 := mustHold(t, s, w1r)
	if w1.Outcome != inventory.WaitlistOffered || w1.WaitlistNo != 1 || w1.HoldID != w1r.HoldID || !w1.ExpiresAt.Equal(expiry) || len(w1.Berths) != 0 {
		t.Fatalf("first waitlist offer: %+v", w1)
	}
	sn := snap(t, s, testShard)
	if sn.WaitlistLen != 2 || !slices.Equal(sn.Held, []int{4, 4}) {
		t.Fatalf("after waitlist offer: waitlist %d held %v, want 2 and [4 4]", sn.WaitlistLen, sn.Held)
	}
	if h, ok := findHold(sn, w1.HoldID); !ok || h.State != 'W' || h.Passengers != 2 || h.WaitlistNo != 1 || len(h.Berths) != 0 || h.UserID != 3 {
		t.Fatalf("waitlist record %+v (found %v)", h, ok)
	}
	// 2 + 2 > 3: sold out, though a single passenger still fits.
	if got := mustHold(t, s, wreq(4, "--")); got.Outcome != inventory.SoldOut {
		t.Fatalf("over waitlist cap: %+v, want SOLD_OUT", got)
	}
	w2 := mustHold(t, s, wreq(5, "-"))
	if w2.Outcome != inventory.WaitlistOffered || w2.WaitlistNo != 2 {
		t.Fatalf("second waitlist offer: %+v, want WAITLIST_OFFERED no 2", w2)
	}
	lateKey := wreq(6, "-")
	if got := mustHold(t, s, lateKey); got.Outcome != inventory.SoldOut {
		t.Fatalf("waitlist full: %+v, want SOLD_OUT", got)
	}
	av, err := s.Available(ctx, testShard, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if av != (inventory.Availability{Free: 0, WaitlistLeft: 0, Total: 4}) {
		t.Fatalf("availability %+v", av)
	}
	// The waitlist place comes back on release; the same key replays its
	// SOLD_OUT, a new key gets the next number.
	mustRelease(t, s, testShard, w1.HoldID, inventory.ReleaseHold, 3, "", "RELEASED")
	if sn := snap(t, s, testShard); sn.WaitlistLen != 1 {
		t.Fatalf("waitlist length after release %d, want 1", sn.WaitlistLen)
	}
	if got := mustHold(t, s, lateKey); got.Outcome != inventory.SoldOut || !got.Replayed {
		t.Fatalf("replayed key: %+v, want replayed SOLD_OUT", got)
	}
	w3 := mustHold(t, s, wreq(6, "--"))
	if w3.Outcome != inventory.WaitlistOffered || w3.WaitlistNo != 3 || w3.Replayed {
		t.Fatalf("after release: %+v, want WAITLIST_OFFERED no 3", w3)
	}
	if av, _ := s.Available(ctx, testShard, 0, 1); av.WaitlistLeft != 0 {
		t.Fatalf("waitlist left %d, want 0", av.WaitlistLeft)
	}
	snap(t, s, testShard)
}

func TestHoldOneLiveHoldPerUser(t *testing.T) {
	t.Parallel()
	s, rdb, prefix := newStore(t)
	mustLoad(t, s, testShard, inventory.ShardState{Epoch: 3, Legs: 2, BerthTypes: []byte("LMULMU"), Coaches: []byte{1, 1, 1, 1, 1, 1}, WaitlistCap: 4})
	first := mustHeld(t, s, req(testShard, 1, 0, 2, "-"))
	before := snap(t, s, testShard)
	got := mustHold(t, s, req(testShard, 1, 0, 1, "--"))
	if got.Outcome != inventory.LiveHold || got.HoldID != first.HoldID || got.Epoch != 3 || len(got.Berths) != 0 {
		t.Fatalf("second hold: %+v, want LIVE_HOLD naming %s", got, first.HoldID)
	}
	if after := snap(t, s, testShard); !reflect.DeepEqual(after, before) {
		t.Fatalf("LIVE_HOLD changed the shard")
	}
	if v, _ := hashGet(t, rdb, shardKey(prefix, testShard, "daily"), "1"); v != "1" {
		t.Fatalf("daily count %q, want 1", v)
	}
	// Confirming ends the live hold.
	mustConfirm(t, s, testShard, first.HoldID, "CONFIRMED")
	second := mustHeld(t, s, req(testShard, 1, 0, 1, "-"))
	// Releasing ends it too.
	mustRelease(t, s, testShard, second.HoldID, inventory.ReleaseHold, 1, "", "RELEASED")
	mustHeld(t, s, req(testShard, 1, 0, 1, "-"))

	// A waitlist offer is a live hold as well.
	// Berth 0 is sold and berth 1 held on leg 0: four berths remain.
	for u := int64(10); u < 14; u++ {
		mustHeld(t, s, req(testShard, u, 0, 2, "-"))
	}
	wr := req(testShard, 20, 0, 2, "-")
	wr.AllowWaitlist = true
	w := mustHold(t, s, wr)
	if w.Outcome != inventory.WaitlistOffered {
		t.Fatalf("waitlist: %+v", w)
	}
	again := req(testShard, 20, 0, 2, "-")
	again.AllowWaitlist = true
	if got := mustHold(t, s, again); got.Outcome != inventory.LiveHold || got.HoldID != w.HoldID {
		t.Fatalf("after waitlist offer: %+v, want LIVE_HOLD naming %s", got, w.HoldID)
	}
}

func TestHoldDailyCap(t *testing.T) {
	t.Parallel()
	s, rdb, prefix := newStore(t)
	mustLoad(t, s, testShard, inventory.ShardState{Epoch: 1, Legs: 2, BerthTypes: []byte("LMULMULM"), Coaches: []byte{1, 1, 1, 1, 2, 2, 2, 2}})
	capped := func(user int64) inventory.HoldRequest {
		r := req(testShard, user, 0, 2, "-")
		r.DailyCap = 2
		return r
	}
	a := mustHeld(t, s, capped(1))
	mustConfirm(t, s, testShard, a.HoldID, "CONFIRMED")
	b := mustHeld(t, s, capped(1))
	mustConfirm(t, s, testShard, b.HoldID, "CONFIRMED")
	before := snap(t, s, testShard)
	got := mustHold(t, s, capped(1))
	if got.Outcome != inventory.DailyCap || got.Epoch != 1 || got.HoldID != "" {
		t.Fatalf("third hold: %+v, want DAILY_CAP", got)
	}
	if after := snap(t, s, testShard); !reflect.DeepEqual(after, before) {
		t.Fatal("DAILY_CAP changed the shard")
	}
	// A cancelled ticket still used the day's cap; a lapsed hold does not.
	mustRelease(t, s, testShard, a.HoldID, inventory.ReleaseCancel, 1, "", "RELEASED")
	if got := mustHold(t, s, capped(1)); got.Outcome != inventory.DailyCap {
		t.Fatalf("after cancel: %+v, want DAILY_CAP", got)
	}
	if v, _ := hashGet(t, rdb, shardKey(prefix, testShard, "daily"), "1"); v != "2" {
		t.Fatalf("daily count %q, want 2", v)
	}

	one := func(user int64) inventory.HoldRequest {
		r := req(testShard, user, 0, 1, "-")
		r.DailyCap = 1
		return r
	}
	x := mustHeld(t, s, one(2))
	mustRelease(t, s, testShard, x.HoldID, inventory.ReleaseHold, 2, "", "RELEASED")
	if _, ok := hashGet(t, rdb, shardKey(prefix, testShard, "daily"), "2"); ok {
		t.Fatal("daily count of user 2 left behind after its only hold was released")
	}
	y := mustHeld(t, s, one(2))
	mustConfirm(t, s, testShard, y.HoldID, "CONFIRMED")
	if got := mustHold(t, s, one(2)); got.Outcome != inventory.DailyCap {
		t.Fatalf("cap 1 after a ticket: %+v, want DAILY_CAP", got)
	}
	// Cap 0: nothing at all.
	z := req(testShard, 3, 0, 1, "-")
	z.DailyCap = 0
	if got := mustHold(t, s, z); got.Outcome != inventory.DailyCap {
		t.Fatalf("cap 0: %+v, want DAILY_CAP", got)
	}
}

// Every refused input answers its outcome, changes nothing and is not
// remembered under the idempotency key.
func TestHoldBadInputsChangeNothing(t *testing.T) {
	t.Parallel()
	s, rdb, prefix := newStore(t)
	ctx := context.Background()
	mustLoad(t, s, testShard, inventory.ShardState{Epoch: 2, Legs: 3, BerthTypes: []byte("LMULMU"), Coaches: []byte{1, 1, 1, 2, 2, 2}, WaitlistCap: 10})
	mustHeld(t, s, req(testShard, 99, 0, 3, "LM"))
	before := snap(t, s, testShard)

	cases := []struct {
		name string
		edit func(*inventory.HoldRequest)
		want inventory.Outcome
	}{
		{"no passengers", func(r *inventory.HoldRequest) { r.Prefs = nil }, inventory.BadPassengers},
		{"five passengers", func(r *inventory.HoldRequest) { r.Prefs = []byte("-----") }, inventory.BadPassengers},
		{"max passengers 0", func(r *inventory.HoldRequest) { r.MaxPassengers = 0 }, inventory.BadPassengers},
		{"no id", func(r *inventory.HoldRequest) { r.IDOK = false }, inventory.NoID},
		{"from below 0", func(r *inventory.HoldRequest) { r.From = -1 }, inventory.BadJourney},
		{"to past last stop", func(r *inventory.HoldRequest) { r.To = 4 }, inventory.BadJourney},
		{"empty journey", func(r *inventory.HoldRequest) { r.From, r.To = 2, 2 }, inventory.BadJourney},
		{"backwards", func(r *inventory.HoldRequest) { r.From, r.To = 2, 1 }, inventory.BadJourney},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := req(testShard, 5, 0, 3, "L-")
			r.AllowWaitlist = true
			c.edit(&r)
			got := mustHold(t, s, r)
			if got.Outcome != c.want || got.Epoch != 2 || got.HoldID != "" || got.Replayed || len(got.Berths) != 0 {
				t.Fatalf("got %+v, want %s", got, c.want)
			}
			if after := snap(t, s, testShard); !reflect.DeepEqual(after, before) {
				t.Fatalf("%s changed the shard", c.want)
			}
			if n := rdb.Exists(ctx, shardKey(prefix, testShard, "idem:5:"+r.IdemKey)).Val(); n != 0 {
				t.Fatalf("%s was remembered under the idempotency key", c.want)
			}
			if _, ok := hashGet(t, rdb, shardKey(prefix, testShard, "live"), "5"); ok {
				t.Fatal("a refused attempt left a live hold")
			}
			if _, ok := hashGet(t, rdb, shardKey(prefix, testShard, "daily"), "5"); ok {
				t.Fatal("a refused attempt used the daily cap")
			}
		})
	}
	// The same key, now valid, makes a fresh hold.
	r := req(testShard, 5, 0, 3, "L-")
	r.IDOK = false
	if got := mustHold(t, s, r); got.Outcome != inventory.NoID {
		t.Fatalf("no id: %+v", got)
	}
	r.IDOK = true
	r.HoldID = newHoldID()
	mustHeld(t, s, r)
}

// Inputs the script cannot represent are refused before Redis is touched:
// a Lua error after its first write would leave a half-made hold behind
// (Redis does not roll scripts back).
func TestHoldRefusesMalformedRequestsWithoutSideEffects(t *testing.T) {
	t.Parallel()
	s, rdb, prefix := newStore(t)
	mustLoad(t, s, testShard, inventory.ShardState{Epoch: 1, Legs: 2, BerthTypes: []byte("LMUL"), Coaches: []byte{1, 1, 1, 1}})
	before := snap(t, s, testShard)
	cases := []struct {
		name string
		edit func(*inventory.HoldRequest)
	}{
		{"idempotency ttl 0", func(r *inventory.HoldRequest) { r.IdemTTL = 0 }},
		{"idempotency ttl under a second", func(r *inventory.HoldRequest) { r.IdemTTL = 500 * time.Millisecond }},
		{"empty hold id", func(r *inventory.HoldRequest) { r.HoldID = "" }},
		{"hold id with a field separator", func(r *inventory.HoldRequest) { r.HoldID = "a|b" }},
		{"hold id with a load separator", func(r *inventory.HoldRequest) { r.HoldID = "a=b" }},
		{"hold id with a newline", func(r *inventory.HoldRequest) { r.HoldID = "a\nb" }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := req(testShard, 1, 0, 2, "-")
			c.edit(&r)
			if got, err := s.Hold(context.Background(), r); err == nil {
				t.Fatalf("got %+v and no error", got)
			}
			if after := snap(t, s, testShard); !reflect.DeepEqual(after, before) {
				t.Fatalf("refused request changed the shard:\nbefore %+v\nafter  %+v", before, after)
			}
			if _, ok := hashGet(t, rdb, shardKey(prefix, testShard, "live"), "1"); ok {
				t.Fatal("refused request left a live hold")
			}
		})
	}
	mustHeld(t, s, req(testShard, 1, 0, 2, "-"))
}

func TestNotReadyWhenNeverLoadedOrWiped(t *testing.T) {
	t.Parallel()
	s, rdb, prefix := newStore(t)
	ctx := context.Background()
	check := func(stage string) {
		t.Helper()
		got := mustHold(t, s, req(testShard, 1, 0, 1, "-"))
		if got.Outcome != inventory.NotReady || got.HoldID != "" || len(got.Berths) != 0 {
			t.Fatalf("%s: hold %+v, want NOT_READY", stage, got)
		}
		if _, err := s.Release(ctx, testShard, "h", inventory.ReleaseHold, 1, ""); !errors.Is(err, inventory.ErrNotReady) {
			t.Fatalf("%s: release error %v, want ErrNotReady", stage, err)
		}
		if _, err := s.Confirm(ctx, testShard, "h"); !errors.Is(err, inventory.ErrNotReady) {
			t.Fatalf("%s: confirm error %v, want ErrNotReady", stage, err)
		}
		if _, err := s.Available(ctx, testShard, 0, 1); !errors.Is(err, inventory.ErrNotReady) {
			t.Fatalf("%s: available error %v, want ErrNotReady", stage, err)
		}
		ok, _, err := s.Ready(ctx, testShard)
		if err != nil || ok {
			t.Fatalf("%s: ready %v %v, want false", stage, ok, err)
		}
		sn, err := s.Snapshot(ctx, testShard)
		if err != nil || sn.Ready || len(sn.SelfCheck()) != 0 {
			t.Fatalf("%s: snapshot %+v %v", stage, sn, err)
		}
	}
	check("never loaded")
	if keys := prefixKeys(t, rdb, prefix); len(keys) != 0 {
		t.Fatalf("NOT_READY calls wrote keys %v", keys)
	}

	mustLoad(t, s, testShard, inventory.ShardState{Epoch: 1, Legs: 2, BerthTypes: []byte("LM"), Coaches: []byte{1, 1}})
	kept := req(testShard, 1, 0, 2, "-")
	h := mustHeld(t, s, kept)
	if ok, epoch, err := s.Ready(ctx, testShard); !ok || epoch != 1 || err != nil {
		t.Fatalf("ready %v %d %v", ok, epoch, err)
	}
	if err := s.Wipe(ctx, testShard); err != nil {
		t.Fatal(err)
	}
	check("wiped")
	// Only the idempotency key outlives a wipe.
	if keys := prefixKeys(t, rdb, prefix); len(keys) != 1 || keys[0] != shardKey(prefix, testShard, "idem:1:"+kept.IdemKey) {
		t.Fatalf("keys after wipe: %v", keys)
	}
	// A rebuild under a newer epoch serves again, and the old key's answer
	// (given under epoch 1) is not replayed.
	mustLoad(t, s, testShard, inventory.ShardState{Epoch: 2, Legs: 2, BerthTypes: []byte("LM"), Coaches: []byte{1, 1}})
	kept.HoldID = newHoldID()
	again := mustHeld(t, s, kept)
	if again.HoldID == h.HoldID || again.Epoch != 2 {
		t.Fatalf("after rebuild: %+v", again)
	}
	if replay := mustHold(t, s, kept); !replay.Replayed || replay.HoldID != again.HoldID || replay.Epoch != 2 {
		t.Fatalf("replay under epoch 2: %+v", replay)
	}
}

func TestPreferences(t *testing.T) {
	t.Parallel()
	t.Run("senior gets a lower berth when one is free", func(t *testing.T) {
		s, _, _ := newStore(t)
		mustLoad(t, s, testShard, inventory.ShardState{Epoch: 1, Legs: 2, BerthTypes: []byte("LMULMUST"), Coaches: []byte{1, 1, 1, 1, 1, 1, 1, 1},
			Holds: []inventory.HoldRecord{{ID: "c", State: 'C', UserID: 9, From: 0, To: 2, Berths: []int{0}, Passengers: 1, ExpiresMs: 1}}})
		if got := mustHeld(t, s, req(testShard, 1, 0, 2, "L")); !slices.Equal(got.Berths, []int{3}) {
			t.Fatalf("senior took %v, want lower berth 3", got.Berths)
		}
		if got := mustHeld(t, s, req(testShard, 2, 0, 2, "-")); !slices.Equal(got.Berths, []int{1}) {
			t.Fatalf("no preference took %v, want first free berth 1", got.Berths)
		}
		// No lower berth left: any free berth, in shard order.
		if got := mustHeld(t, s, req(testShard, 3, 0, 2, "LL")); !slices.Equal(got.Berths, []int{2, 4}) {
			t.Fatalf("two seniors with no lower left took %v, want [2 4]", got.Berths)
		}
		if got := mustHeld(t, s, req(testShard, 4, 0, 2, "-T")); !slices.Equal(got.Berths, []int{5, 7}) {
			t.Fatalf("side-upper preference took %v, want [5 7]", got.Berths)
		}
	})
	t.Run("preferences per passenger in order", func(t *testing.T) {
		s, _, _ := newStore(t)
		mustLoad(t, s, testShard, inventory.ShardState{Epoch: 1, Legs: 1, BerthTypes: []byte("LMULMUST"), Coaches: []byte{1, 1, 1, 1, 1, 1, 1, 1}})
		got := mustHeld(t, s, req(testShard, 1, 0, 1, "U-LS"))
		if !slices.Equal(got.Berths, []int{2, 1, 0, 6}) {
			t.Fatalf("U-LS took %v, want [2 1 0 6]", got.Berths)
		}
	})
	t.Run("senior lower berth in another coach", func(t *testing.T) {
		s, _, _ := newStore(t)
		mustLoad(t, s, testShard, inventory.ShardState{Epoch: 1, Legs: 1, BerthTypes: []byte("MMUULMUL"), Coaches: []byte{1, 1, 1, 1, 2, 2, 2, 2}})
		if got := mustHeld(t, s, req(testShard, 1, 0, 1, "L")); !slices.Equal(got.Berths, []int{4}) {
			t.Fatalf("senior took %v, want coach 2 lower berth 4", got.Berths)
		}
	})
	t.Run("group of four in one coach", func(t *testing.T) {
		s, _, _ := newStore(t)
		types, coaches := shape(2, 6, "LMU")
		mustLoad(t, s, testShard, inventory.ShardState{Epoch: 1, Legs: 2, BerthTypes: types, Coaches: coaches,
			Holds: []inventory.HoldRecord{{ID: "c", State: 'C', UserID: 9, From: 0, To: 2, Berths: []int{0, 2, 4}, Passengers: 3, ExpiresMs: 1}}})
		// Coach 1 has 3 free (1, 3, 5): the group goes to coach 2.
		got := mustHeld(t, s, req(testShard, 1, 0, 2, "----"))
		if !slices.Equal(got.Berths, []int{6, 7, 8, 9}) {
			t.Fatalf("group took %v, want coach 2 [6 7 8 9]", got.Berths)
		}
		// Now coach 1 has 3 free and coach 2 has 2: spread, in shard order.
		got = mustHeld(t, s, req(testShard, 2, 0, 2, "----"))
		if !slices.Equal(got.Berths, []int{1, 3, 5, 10}) {
			t.Fatalf("spread group took %v, want [1 3 5 10]", got.Berths)
		}
	})
	t.Run("group picks the coach that meets more preferences", func(t *testing.T) {
		s, _, _ := newStore(t)
		mustLoad(t, s, testShard, inventory.ShardState{Epoch: 1, Legs: 1, BerthTypes: []byte("MMUUMU" + "LMULMU"), Coaches: []byte{1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2}})
		if got := mustHeld(t, s, req(testShard, 1, 0, 1, "L--L")); !slices.Equal(got.Berths, []int{6, 7, 8, 9}) {
			t.Fatalf("group with seniors took %v, want coach 2 [6 7 8 9]", got.Berths)
		}
		if got := mustHeld(t, s, req(testShard, 2, 0, 1, "----")); !slices.Equal(got.Berths, []int{0, 1, 2, 3}) {
			t.Fatalf("group without preferences took %v, want coach 1 [0 1 2 3]", got.Berths)
		}
	})
}

func TestIdempotentReplay(t *testing.T) {
	t.Parallel()
	s, rdb, prefix := newStore(t)
	mustLoad(t, s, testShard, inventory.ShardState{Epoch: 4, Legs: 3, BerthTypes: []byte("LMULMU"), Coaches: []byte{1, 1, 1, 1, 1, 1}, WaitlistCap: 2})
	r := req(testShard, 1, 0, 2, "L-")
	first := mustHeld(t, s, r)
	before := snap(t, s, testShard)
	// A retry carries the same key but may differ in everything else.
	retry := r
	retry.HoldID = newHoldID()
	retry.Prefs = []byte("---")
	retry.From, retry.To = 1, 3
	retry.ExpiresAt = expiry.Add(time.Hour)
	for i := 0; i < 3; i++ {
		got := mustHold(t, s, retry)
		want := first
		want.Replayed = true
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("replay %d: %+v, want %+v", i, got, want)
		}
	}
	if after := snap(t, s, testShard); !reflect.DeepEqual(after, before) {
		t.Fatalf("replay changed the shard:\nbefore %+v\nafter  %+v", before, after)
	}
	if v, _ := hashGet(t, rdb, shardKey(prefix, testShard, "daily"), "1"); v != "1" {
		t.Fatalf("daily count %q after replays, want 1", v)
	}
	// The same key of another user is another attempt.
	other := r
	other.UserID, other.HoldID = 2, newHoldID()
	if got := mustHeld(t, s, other); got.HoldID == first.HoldID {
		t.Fatal("another user's attempt was answered with user 1's hold")
	}
	// WAITLIST_OFFERED and SOLD_OUT answers are replayed too.
	for u := int64(3); u < 5; u++ {
		mustHeld(t, s, req(testShard, u, 0, 3, "-"))
	}
	wr := req(testShard, 6, 0, 1, "--")
	wr.AllowWaitlist = true
	w := mustHold(t, s, wr)
	if w.Outcome != inventory.WaitlistOffered {
		t.Fatalf("waitlist %+v", w)
	}
	wr.HoldID = newHoldID()
	if got := mustHold(t, s, wr); !got.Replayed || got.Outcome != inventory.WaitlistOffered || got.HoldID != w.HoldID || got.WaitlistNo != w.WaitlistNo || !got.ExpiresAt.Equal(w.ExpiresAt) {
		t.Fatalf("waitlist replay %+v, want %+v", got, w)
	}
	so := req(testShard, 7, 0, 1, "-")
	if got := mustHold(t, s, so); got.Outcome != inventory.SoldOut || got.Replayed {
		t.Fatalf("sold out %+v", got)
	}
	if got := mustHold(t, s, so); got.Outcome != inventory.SoldOut || !got.Replayed {
		t.Fatalf("sold out replay %+v", got)
	}
	snap(t, s, testShard)
}

func TestIdempotentReplayConcurrent(t *testing.T) {
	t.Parallel()
	s, _, _ := newStore(t)
	mustLoad(t, s, testShard, inventory.ShardState{Epoch: 1, Legs: 4, BerthTypes: []byte("LMULMUSTLMULMUST"), Coaches: []byte{1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2}})
	base := req(testShard, 42, 1, 4, "L-U")
	const n = 50
	results := make([]inventory.HoldResult, n)
	ids := make([]string, n)
	errs := make([]error, n)
	var start, wg sync.WaitGroup
	start.Add(1)
	for i := 0; i < n; i++ {
		r := base
		r.HoldID = newHoldID() // each attempt has its own id; the key decides
		ids[i] = r.HoldID
		wg.Add(1)
		go func(i int, r inventory.HoldRequest) {
			defer wg.Done()
			start.Wait()
			results[i], errs[i] = s.Hold(context.Background(), r)
		}(i, r)
	}
	start.Done()
	wg.Wait()
	fresh := -1
	for i, res := range results {
		if errs[i] != nil {
			t.Fatalf("attempt %d: %v", i, errs[i])
		}
		if res.Outcome != inventory.Held {
			t.Fatalf("attempt %d: %+v", i, res)
		}
		if !res.Replayed {
			if fresh >= 0 {
				t.Fatalf("attempts %d and %d both made a hold", fresh, i)
			}
			fresh = i
		}
	}
	if fresh < 0 {
		t.Fatal("no attempt made the hold")
	}
	want := results[fresh]
	if want.HoldID != ids[fresh] {
		t.Fatalf("fresh hold id %s, want its own %s", want.HoldID, ids[fresh])
	}
	for i, res := range results {
		res.Replayed = false
		if !reflect.DeepEqual(res, want) {
			t.Fatalf("attempt %d answered %+v, attempt %d %+v", i, res, fresh, want)
		}
	}
	sn := snap(t, s, testShard)
	if len(sn.Holds) != 1 || sn.Holds[0].ID != want.HoldID || !slices.Equal(sn.Holds[0].Berths, want.Berths) {
		t.Fatalf("records %+v, want one hold %s with %v", sn.Holds, want.HoldID, want.Berths)
	}
	if !slices.Equal(sn.Held, []int{0, 3, 3, 3}) {
		t.Fatalf("held %v, want [0 3 3 3]", sn.Held)
	}
}
