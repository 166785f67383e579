package inventory_test

import (
	"context"
	"reflect"
	"slices"
	"testing"

	"tatkal/booking/inventory"
)

func emptyShard(legs, berths, wlcap int) inventory.ShardState {
	types, coaches := shape(1, berths, "LMULMUST")
	return inventory.ShardState{Epoch: 1, Legs: legs, BerthTypes: types, Coaches: coaches, WaitlistCap: wlcap}
}

func TestReleaseFreesSeatsLiveHoldAndDailyCount(t *testing.T) {
	t.Parallel()
	s, rdb, prefix := newStore(t)
	ctx := context.Background()
	mustLoad(t, s, testShard, emptyShard(3, 4, 0))
	empty := snap(t, s, testShard)
	r := req(testShard, 1, 0, 2, "--")
	h := mustHeld(t, s, r)
	sn := snap(t, s, testShard)
	if !slices.Equal(sn.Held, []int{2, 2, 0}) || !slices.Equal(sn.Occupancy, []uint16{0b011, 0b011, 0, 0}) {
		t.Fatalf("held %v occupancy %03b", sn.Held, sn.Occupancy)
	}
	if due, err := s.DueHolds(ctx, testShard, expiry, 10); err != nil || !slices.Equal(due, []string{h.HoldID}) {
		t.Fatalf("due holds %v %v, want [%s]", due, err, h.HoldID)
	}
	if due, _ := s.DueHolds(ctx, testShard, expiry.Add(-1), 10); len(due) != 0 {
		t.Fatalf("due before expiry: %v", due)
	}

	mustRelease(t, s, testShard, h.HoldID, inventory.ReleaseHold, 1, r.IdemKey, "RELEASED")
	if after := snap(t, s, testShard); !reflect.DeepEqual(after, empty) {
		t.Fatalf("after release %+v, want the empty shard %+v", after, empty)
	}
	if _, ok := hashGet(t, rdb, shardKey(prefix, testShard, "live"), "1"); ok {
		t.Fatal("live hold left after release")
	}
	if _, ok := hashGet(t, rdb, shardKey(prefix, testShard, "daily"), "1"); ok {
		t.Fatal("daily count not given back")
	}
	if due, _ := s.DueHolds(ctx, testShard, expiry, 10); len(due) != 0 {
		t.Fatalf("released hold still due: %v", due)
	}
	// Gone now, whatever the mode; confirming it too.
	for _, m := range []inventory.ReleaseMode{inventory.ReleaseHold, inventory.ReleaseCancel} {
		mustRelease(t, s, testShard, h.HoldID, m, 1, r.IdemKey, "GONE")
	}
	mustConfirm(t, s, testShard, h.HoldID, "GONE")
	// A plain release keeps the idempotency key: the retry replays.
	first := r
	r.HoldID = newHoldID()
	if got := mustHold(t, s, r); !got.Replayed || got.HoldID != h.HoldID {
		t.Fatalf("retry after release: %+v, want replay of %s", got, h.HoldID)
	}
	if after := snap(t, s, testShard); !reflect.DeepEqual(after, empty) {
		t.Fatal("replay after release took seats")
	}
	// An undo of the gone hold answers GONE too, and forgets the key it
	// made, so the retry is a fresh attempt rather than a replay of a hold
	// that was never durable.
	mustRelease(t, s, testShard, h.HoldID, inventory.ReleaseUndo, 1, r.IdemKey, "GONE")
	if rdb.Exists(ctx, shardKey(prefix, testShard, "idem:1:"+r.IdemKey)).Val() != 0 {
		t.Fatal("undo of a gone hold kept its idempotency key")
	}
	again := mustHeld(t, s, r)
	mustRelease(t, s, testShard, again.HoldID, inventory.ReleaseHold, 1, r.IdemKey, "RELEASED")
	// An undo of the first attempt leaves the key alone now that it names
	// another attempt's hold.
	mustRelease(t, s, testShard, first.HoldID, inventory.ReleaseUndo, 1, r.IdemKey, "GONE")
	if got := mustHold(t, s, r); !got.Replayed || got.HoldID != again.HoldID {
		t.Fatalf("retry after a stale undo: %+v, want replay of %s", got, again.HoldID)
	}
	// The user is free to hold again with a new key.
	mustHeld(t, s, req(testShard, 1, 0, 2, "--"))
}

func TestUndoForgetsTheIdempotencyKey(t *testing.T) {
	t.Parallel()
	s, rdb, prefix := newStore(t)
	ctx := context.Background()
	mustLoad(t, s, testShard, emptyShard(2, 4, 0))
	r := req(testShard, 1, 0, 2, "L")
	h := mustHeld(t, s, r)
	idem := shardKey(prefix, testShard, "idem:1:"+r.IdemKey)
	if rdb.Exists(ctx, idem).Val() != 1 {
		t.Fatal("no idempotency key after a hold")
	}
	if ttl := rdb.TTL(ctx, idem).Val(); ttl <= 0 || ttl > r.IdemTTL {
		t.Fatalf("idempotency key ttl %v, want within %v", ttl, r.IdemTTL)
	}
	mustRelease(t, s, testShard, h.HoldID, inventory.ReleaseUndo, 1, r.IdemKey, "RELEASED")
	if rdb.Exists(ctx, idem).Val() != 0 {
		t.Fatal("undo kept the idempotency key")
	}
	sn := snap(t, s, testShard)
	if len(sn.Holds) != 0 || slices.Max(sn.Held) != 0 || slices.Max(sn.Occupancy) != 0 {
		t.Fatalf("undo left %+v", sn)
	}
	if _, ok := hashGet(t, rdb, shardKey(prefix, testShard, "daily"), "1"); ok {
		t.Fatal("undo kept the daily count")
	}
	r.HoldID = newHoldID()
	again := mustHeld(t, s, r)
	if again.HoldID == h.HoldID || !slices.Equal(again.Berths, h.Berths) {
		t.Fatalf("retry after undo: %+v (first %+v)", again, h)
	}
	mustRelease(t, s, testShard, h.HoldID, inventory.ReleaseUndo, 1, r.IdemKey, "GONE")
}

func TestReleaseOfConfirmedAndCancel(t *testing.T) {
	t.Parallel()
	s, rdb, prefix := newStore(t)
	ctx := context.Background()
	mustLoad(t, s, testShard, emptyShard(3, 4, 0))
	r := req(testShard, 1, 1, 3, "--")
	h := mustHeld(t, s, r)
	mustConfirm(t, s, testShard, h.HoldID, "CONFIRMED")
	sold := snap(t, s, testShard)
	if !slices.Equal(sold.Confirmed, []int{0, 2, 2}) || !slices.Equal(sold.Held, []int{0, 0, 0}) {
		t.Fatalf("after confirm held %v confirmed %v", sold.Held, sold.Confirmed)
	}
	for _, m := range []inventory.ReleaseMode{inventory.ReleaseHold, inventory.ReleaseUndo} {
		mustRelease(t, s, testShard, h.HoldID, m, 1, r.IdemKey, "CONFIRMED")
		if after := snap(t, s, testShard); !reflect.DeepEqual(after, sold) {
			t.Fatalf("release (%s) of a confirmed hold changed the shard", m)
		}
	}
	if rdb.Exists(ctx, shardKey(prefix, testShard, "idem:1:"+r.IdemKey)).Val() != 1 {
		t.Fatal("undo of a confirmed hold dropped its idempotency key")
	}
	mustRelease(t, s, testShard, h.HoldID, inventory.ReleaseCancel, 1, r.IdemKey, "RELEASED")
	sn := snap(t, s, testShard)
	if len(sn.Holds) != 0 || !slices.Equal(sn.Confirmed, []int{0, 0, 0}) || !slices.Equal(sn.Held, []int{0, 0, 0}) || slices.Max(sn.Occupancy) != 0 {
		t.Fatalf("after cancel %+v", sn)
	}
	if v, _ := hashGet(t, rdb, shardKey(prefix, testShard, "daily"), "1"); v != "1" {
		t.Fatalf("daily count after cancel %q, want 1 (a ticket used the cap)", v)
	}
	mustRelease(t, s, testShard, h.HoldID, inventory.ReleaseCancel, 1, r.IdemKey, "GONE")
	// The berths sell again.
	if got := mustHeld(t, s, req(testShard, 2, 0, 3, "--")); !slices.Equal(got.Berths, h.Berths) {
		t.Fatalf("freed berths %v not reused: got %v", h.Berths, got.Berths)
	}
}

func TestWaitlistHoldRelease(t *testing.T) {
	t.Parallel()
	s, rdb, prefix := newStore(t)
	ctx := context.Background()
	mustLoad(t, s, testShard, emptyShard(2, 2, 5))
	mustHeld(t, s, req(testShard, 1, 0, 2, "--"))
	wr := req(testShard, 2, 0, 2, "---")
	wr.AllowWaitlist = true
	w := mustHold(t, s, wr)
	if w.Outcome != inventory.WaitlistOffered || w.WaitlistNo != 1 {
		t.Fatalf("waitlist %+v", w)
	}
	if av, _ := s.Available(ctx, testShard, 0, 2); av.WaitlistLeft != 2 {
		t.Fatalf("waitlist left %d, want 2", av.WaitlistLeft)
	}
	seats := snap(t, s, testShard)
	mustRelease(t, s, testShard, w.HoldID, inventory.ReleaseHold, 2, wr.IdemKey, "RELEASED")
	sn := snap(t, s, testShard)
	if sn.WaitlistLen != 0 || len(sn.Holds) != 1 || !slices.Equal(sn.Occupancy, seats.Occupancy) || !slices.Equal(sn.Held, seats.Held) {
		t.Fatalf("after waitlist release %+v", sn)
	}
	if av, _ := s.Available(ctx, testShard, 0, 2); av.WaitlistLeft != 5 {
		t.Fatalf("waitlist left %d, want 5", av.WaitlistLeft)
	}
	if _, ok := hashGet(t, rdb, shardKey(prefix, testShard, "live"), "2"); ok {
		t.Fatal("live waitlist hold left behind")
	}

	// A confirmed waitlist offer becomes a waitlisted booking (X): it keeps
	// its place until cancelled.
	wr2 := req(testShard, 3, 0, 1, "----")
	wr2.AllowWaitlist = true
	w2 := mustHold(t, s, wr2)
	if w2.Outcome != inventory.WaitlistOffered || w2.WaitlistNo != 2 {
		t.Fatalf("second waitlist %+v", w2)
	}
	mustConfirm(t, s, testShard, w2.HoldID, "CONFIRMED")
	sn = snap(t, s, testShard)
	if x, _ := findHold(sn, w2.HoldID); x.State != 'X' || sn.WaitlistLen != 4 {
		t.Fatalf("confirmed waitlist: record %+v, waitlist %d", x, sn.WaitlistLen)
	}
	if !slices.Equal(sn.Held, seats.Held) || !slices.Equal(sn.Confirmed, seats.Confirmed) {
		t.Fatal("confirming a waitlist offer moved seat counters")
	}
	mustConfirm(t, s, testShard, w2.HoldID, "CONFIRMED")
	mustRelease(t, s, testShard, w2.HoldID, inventory.ReleaseHold, 3, wr2.IdemKey, "CONFIRMED")
	mustRelease(t, s, testShard, w2.HoldID, inventory.ReleaseCancel, 3, wr2.IdemKey, "RELEASED")
	if sn := snap(t, s, testShard); sn.WaitlistLen != 0 || len(sn.Holds) != 1 {
		t.Fatalf("after waitlist cancel %+v", sn)
	}
}

func TestConfirm(t *testing.T) {
	t.Parallel()
	s, rdb, prefix := newStore(t)
	ctx := context.Background()
	mustLoad(t, s, testShard, emptyShard(4, 6, 0))
	h := mustHeld(t, s, req(testShard, 1, 1, 3, "LU"))
	held := snap(t, s, testShard)
	if !slices.Equal(held.Held, []int{0, 2, 2, 0}) || !slices.Equal(held.Confirmed, []int{0, 0, 0, 0}) {
		t.Fatalf("held %v confirmed %v", held.Held, held.Confirmed)
	}
	mustConfirm(t, s, testShard, h.HoldID, "CONFIRMED")
	sn := snap(t, s, testShard)
	if !slices.Equal(sn.Held, []int{0, 0, 0, 0}) || !slices.Equal(sn.Confirmed, []int{0, 2, 2, 0}) {
		t.Fatalf("after confirm held %v confirmed %v", sn.Held, sn.Confirmed)
	}
	if !slices.Equal(sn.Occupancy, held.Occupancy) {
		t.Fatalf("confirm moved berths: %v -> %v", held.Occupancy, sn.Occupancy)
	}
	rec, _ := findHold(sn, h.HoldID)
	if rec.State != 'C' || !slices.Equal(rec.Berths, h.Berths) || rec.Passengers != 2 || rec.From != 1 || rec.To != 3 || rec.UserID != 1 || rec.ExpiresMs != expiry.UnixMilli() {
		t.Fatalf("confirmed record %+v, berths %v", rec, h.Berths)
	}
	if _, ok := hashGet(t, rdb, shardKey(prefix, testShard, "live"), "1"); ok {
		t.Fatal("confirmed hold is still the user's live hold")
	}
	if due, _ := s.DueHolds(ctx, testShard, expiry, 10); len(due) != 0 {
		t.Fatalf("confirmed hold still due for expiry: %v", due)
	}
	// Idempotent.
	mustConfirm(t, s, testShard, h.HoldID, "CONFIRMED")
	if again := snap(t, s, testShard); !reflect.DeepEqual(again, sn) {
		t.Fatal("second confirm changed the shard")
	}
	mustConfirm(t, s, testShard, "no-such-hold", "GONE")
	if again := snap(t, s, testShard); !reflect.DeepEqual(again, sn) {
		t.Fatal("confirm of an unknown hold changed the shard")
	}
}

func TestLoadEpochs(t *testing.T) {
	t.Parallel()
	s, _, _ := newStore(t)
	ctx := context.Background()
	five := emptyShard(2, 4, 1)
	five.Epoch = 5
	mustLoad(t, s, testShard, five)
	h := mustHeld(t, s, req(testShard, 1, 0, 2, "-"))
	if h.Epoch != 5 {
		t.Fatalf("epoch %d, want 5", h.Epoch)
	}
	before := snap(t, s, testShard)
	for _, e := range []int64{5, 4, 1} {
		other := emptyShard(3, 8, 0)
		other.Epoch = e
		ok, err := s.Load(ctx, testShard, other)
		if err != nil || ok {
			t.Fatalf("load epoch %d over 5: %v %v, want false", e, ok, err)
		}
		if after := snap(t, s, testShard); !reflect.DeepEqual(after, before) {
			t.Fatalf("stale load (epoch %d) changed the shard", e)
		}
	}
	six := emptyShard(3, 8, 0)
	six.Epoch = 6
	mustLoad(t, s, testShard, six)
	sn := snap(t, s, testShard)
	if sn.Epoch != 6 || sn.Berths != 8 || sn.Legs != 3 || len(sn.Holds) != 0 || slices.Max(sn.Occupancy) != 0 || sn.WaitlistCap != 0 {
		t.Fatalf("after newer load %+v", sn)
	}
	// The old live hold went with the old state.
	if got := mustHeld(t, s, req(testShard, 1, 0, 3, "-")); got.Epoch != 6 {
		t.Fatalf("epoch %d, want 6", got.Epoch)
	}
}

func TestLoadRejectsBadInput(t *testing.T) {
	t.Parallel()
	s, _, _ := newStore(t)
	ctx := context.Background()
	good := emptyShard(3, 4, 2)
	good.Holds = []inventory.HoldRecord{
		// Berth 1 on legs 0 and on 1-2: disjoint, allowed.
		{ID: "a", State: 'C', UserID: 1, From: 0, To: 1, Berths: []int{1}, Passengers: 1, ExpiresMs: 1},
		{ID: "b", State: 'H', UserID: 2, From: 1, To: 3, Berths: []int{1, 2}, Passengers: 2, ExpiresMs: 2},
		{ID: "w", State: 'W', UserID: 3, From: 0, To: 3, Passengers: 2, WaitlistNo: 4, ExpiresMs: 3},
	}
	mustLoad(t, s, testShard, good)
	sn := snap(t, s, testShard)
	if !slices.Equal(sn.Occupancy, []uint16{0, 0b111, 0b110, 0}) || sn.WaitlistLen != 2 {
		t.Fatalf("loaded %+v", sn)
	}

	bad := map[string]func(*inventory.ShardState){
		"overlapping berths": func(st *inventory.ShardState) {
			st.Holds = append(st.Holds, inventory.HoldRecord{ID: "o", State: 'C', UserID: 4, From: 2, To: 3, Berths: []int{2}, Passengers: 1})
		},
		"berth twice in one hold": func(st *inventory.ShardState) {
			st.Holds = append(st.Holds, inventory.HoldRecord{ID: "o", State: 'C', UserID: 4, From: 0, To: 1, Berths: []int{3, 3}, Passengers: 2})
		},
		"berth out of range": func(st *inventory.ShardState) {
			st.Holds = append(st.Holds, inventory.HoldRecord{ID: "o", State: 'C', UserID: 4, From: 0, To: 1, Berths: []int{4}, Passengers: 1})
		},
		"negative berth": func(st *inventory.ShardState) {
			st.Holds = append(st.Holds, inventory.HoldRecord{ID: "o", State: 'C', UserID: 4, From: 0, To: 1, Berths: []int{-1}, Passengers: 1})
		},
		"journey past the last leg": func(st *inventory.ShardState) {
			st.Holds = append(st.Holds, inventory.HoldRecord{ID: "o", State: 'C', UserID: 4, From: 2, To: 4, Berths: []int{3}, Passengers: 1})
		},
		"empty journey": func(st *inventory.ShardState) {
			st.Holds = append(st.Holds, inventory.HoldRecord{ID: "o", State: 'C', UserID: 4, From: 1, To: 1, Berths: []int{3}, Passengers: 1})
		},
		"fewer berths than passengers": func(st *inventory.ShardState) {
			st.Holds = append(st.Holds, inventory.HoldRecord{ID: "o", State: 'H', UserID: 4, From: 0, To: 1, Berths: []int{3}, Passengers: 2})
		},
		"waitlist record with berths": func(st *inventory.ShardState) {
			st.Holds = append(st.Holds, inventory.HoldRecord{ID: "o", State: 'X', UserID: 4, From: 0, To: 1, Berths: []int{3}, Passengers: 1, WaitlistNo: 1})
		},
		"unknown state": func(st *inventory.ShardState) {
			st.Holds = append(st.Holds, inventory.HoldRecord{ID: "o", State: 'Z', UserID: 4, From: 0, To: 1, Berths: []int{3}, Passengers: 1})
		},
		"duplicate id": func(st *inventory.ShardState) {
			st.Holds = append(st.Holds, inventory.HoldRecord{ID: "a", State: 'C', UserID: 4, From: 0, To: 1, Berths: []int{3}, Passengers: 1})
		},
		"id with separator": func(st *inventory.ShardState) {
			st.Holds = append(st.Holds, inventory.HoldRecord{ID: "o=1", State: 'C', UserID: 4, From: 0, To: 1, Berths: []int{3}, Passengers: 1})
		},
		"no berths":         func(st *inventory.ShardState) { st.BerthTypes, st.Coaches = nil, nil },
		"coach count wrong": func(st *inventory.ShardState) { st.Coaches = st.Coaches[:3] },
		"no legs":           func(st *inventory.ShardState) { st.Legs, st.Holds = 0, nil },
		"too many legs":     func(st *inventory.ShardState) { st.Legs = inventory.MaxLegs + 1 },
	}
	for name, edit := range bad {
		t.Run(name, func(t *testing.T) {
			st := good
			st.Holds = slices.Clone(good.Holds)
			st.Epoch = 9
			edit(&st)
			ok, err := s.Load(ctx, testShard, st)
			if err == nil || ok {
				t.Fatalf("load accepted it: %v %v", ok, err)
			}
			if after := snap(t, s, testShard); !reflect.DeepEqual(after, sn) {
				t.Fatalf("refused load changed the shard")
			}
		})
	}
	// Onto a fresh shard as well: nothing is written.
	st := good
	st.Holds = append(slices.Clone(good.Holds), inventory.HoldRecord{ID: "o", State: 'C', UserID: 4, From: 1, To: 2, Berths: []int{1}, Passengers: 1})
	if ok, err := s.Load(ctx, testShard+1, st); err == nil || ok {
		t.Fatalf("overlap on fresh shard: %v %v", ok, err)
	}
	if ready, _, _ := s.Ready(ctx, testShard+1); ready {
		t.Fatal("a refused load made the shard ready")
	}
	// A full 16-leg shard is fine.
	full := emptyShard(inventory.MaxLegs, 2, 0)
	full.Holds = []inventory.HoldRecord{{ID: "z", State: 'C', UserID: 1, From: 0, To: inventory.MaxLegs, Berths: []int{1}, Passengers: 1}}
	mustLoad(t, s, testShard+2, full)
	if sn := snap(t, s, testShard+2); sn.Occupancy[1] != 0xFFFF {
		t.Fatalf("16-leg mask %016b", sn.Occupancy[1])
	}
	if got := mustHeld(t, s, req(testShard+2, 2, 15, 16, "-")); !slices.Equal(got.Berths, []int{0}) {
		t.Fatalf("last leg took %v", got.Berths)
	}
}

// The state Load builds from records equals the state the scripts built
// for the same records.
func TestLoadFromRecordsEqualsScriptState(t *testing.T) {
	t.Parallel()
	s, rdb, prefix := newStore(t)
	ctx := context.Background()
	types, coaches := shape(3, 8, "LMULMUST")
	st := inventory.ShardState{Epoch: 1, Legs: 5, BerthTypes: types, Coaches: coaches, WaitlistCap: 6}
	mustLoad(t, s, testShard, st)

	var live []inventory.HoldResult
	journeys := [][2]int{{0, 5}, {1, 3}, {2, 5}, {0, 2}, {3, 4}, {0, 1}, {4, 5}, {1, 5}}
	prefs := []string{"L", "--", "LU-", "----", "S", "T-", "-", "MM"}
	for i := 0; i < 30; i++ {
		j := journeys[i%len(journeys)]
		r := req(testShard, int64(100+i), j[0], j[1], prefs[i%len(prefs)])
		r.AllowWaitlist = true
		res := mustHold(t, s, r)
		if res.Outcome != inventory.Held && res.Outcome != inventory.WaitlistOffered && res.Outcome != inventory.SoldOut {
			t.Fatalf("hold %d: %+v", i, res)
		}
		if res.HoldID != "" {
			live = append(live, res)
		}
	}
	for i, h := range live {
		switch i % 5 {
		case 0, 1:
			mustConfirm(t, s, testShard, h.HoldID, "CONFIRMED")
		case 2:
			mustRelease(t, s, testShard, h.HoldID, inventory.ReleaseHold, 0, "", "RELEASED")
		}
	}
	before := snap(t, s, testShard)
	var kinds = map[byte]int{}
	for _, h := range before.Holds {
		kinds[h.State]++
	}
	if kinds['H'] == 0 || kinds['C'] == 0 || kinds['W']+kinds['X'] == 0 {
		t.Fatalf("setup made too few kinds of records: %v", kinds)
	}
	liveBefore := userHash(t, rdb, shardKey(prefix, testShard, "live"))
	dailyBefore := userHash(t, rdb, shardKey(prefix, testShard, "daily"))
	dueBefore, _ := s.DueHolds(ctx, testShard, expiry, 100)

	if err := s.Wipe(ctx, testShard); err != nil {
		t.Fatal(err)
	}
	st.Epoch = 2
	st.Holds = before.Holds
	mustLoad(t, s, testShard, st)
	after := snap(t, s, testShard)
	before.Epoch = 2
	if !reflect.DeepEqual(after, before) {
		t.Fatalf("loaded state differs:\nscripts %+v\nloaded  %+v", before, after)
	}
	if liveAfter := userHash(t, rdb, shardKey(prefix, testShard, "live")); !reflect.DeepEqual(liveAfter, liveBefore) {
		t.Fatalf("live holds %v, scripts had %v", liveAfter, liveBefore)
	}
	// Nothing was cancelled, so the day's counts agree too.
	if dailyAfter := userHash(t, rdb, shardKey(prefix, testShard, "daily")); !reflect.DeepEqual(dailyAfter, dailyBefore) {
		t.Fatalf("daily counts %v, scripts had %v", dailyAfter, dailyBefore)
	}
	dueAfter, _ := s.DueHolds(ctx, testShard, expiry, 100)
	slices.Sort(dueBefore)
	slices.Sort(dueAfter)
	if !slices.Equal(dueAfter, dueBefore) {
		t.Fatalf("due holds %v, scripts had %v", dueAfter, dueBefore)
	}
	// Loaded records work with the scripts: release and confirm them all.
	for i, h := range before.Holds {
		switch h.State {
		case 'H', 'W':
			if i%2 == 0 {
				mustRelease(t, s, testShard, h.ID, inventory.ReleaseHold, h.UserID, "", "RELEASED")
			} else {
				mustConfirm(t, s, testShard, h.ID, "CONFIRMED")
				mustRelease(t, s, testShard, h.ID, inventory.ReleaseCancel, h.UserID, "", "RELEASED")
			}
		default:
			mustRelease(t, s, testShard, h.ID, inventory.ReleaseCancel, h.UserID, "", "RELEASED")
		}
	}
	end := snap(t, s, testShard)
	if len(end.Holds) != 0 || slices.Max(end.Occupancy) != 0 || slices.Max(end.Held) != 0 || slices.Max(end.Confirmed) != 0 || end.WaitlistLen != 0 {
		t.Fatalf("after releasing everything %+v", end)
	}
}

func TestAvailableCountsWholeJourney(t *testing.T) {
	t.Parallel()
	s, _, _ := newStore(t)
	ctx := context.Background()
	// Berth 0 busy on leg 0, berth 1 on leg 2, berth 2 free: every leg has
	// 2 free, yet only 1 berth is free from 0 to 3.
	mustLoad(t, s, testShard, inventory.ShardState{Epoch: 1, Legs: 3, BerthTypes: []byte("LMU"), Coaches: []byte{1, 1, 1}, WaitlistCap: 7,
		Holds: []inventory.HoldRecord{
			{ID: "a", State: 'C', UserID: 1, From: 0, To: 1, Berths: []int{0}, Passengers: 1},
			{ID: "b", State: 'H', UserID: 2, From: 2, To: 3, Berths: []int{1}, Passengers: 1, ExpiresMs: 5},
			{ID: "w", State: 'X', UserID: 3, From: 0, To: 3, Passengers: 3, WaitlistNo: 1},
		}})
	sn := snap(t, s, testShard)
	if !slices.Equal(sn.Free(), []int{2, 3, 2}) {
		t.Fatalf("per-leg free %v", sn.Free())
	}
	for _, c := range []struct{ from, to, free int }{{0, 3, 1}, {0, 1, 2}, {1, 2, 3}, {2, 3, 2}, {0, 2, 2}, {1, 3, 2}} {
		av, err := s.Available(ctx, testShard, c.from, c.to)
		if err != nil {
			t.Fatal(err)
		}
		if want := (inventory.Availability{Free: c.free, WaitlistLeft: 4, Total: 3}); av != want {
			t.Fatalf("available %d-%d = %+v, want %+v", c.from, c.to, av, want)
		}
	}
	// Two passengers 0-3 do not fit though every leg shows 2 free.
	if got := mustHold(t, s, req(testShard, 9, 0, 3, "--")); got.Outcome != inventory.SoldOut {
		t.Fatalf("two passengers 0-3: %+v, want SOLD_OUT", got)
	}
	// A journey outside the shard is an error, not a count.
	for _, j := range [][2]int{{0, 0}, {2, 1}, {-1, 2}, {0, 4}} {
		if av, err := s.Available(ctx, testShard, j[0], j[1]); err == nil {
			t.Fatalf("available %d-%d = %+v, want an error", j[0], j[1], av)
		}
	}
}

func TestReleaseRefusesUnknownMode(t *testing.T) {
	t.Parallel()
	s, _, _ := newStore(t)
	ctx := context.Background()
	mustLoad(t, s, testShard, emptyShard(2, 2, 0))
	h := mustHeld(t, s, req(testShard, 1, 0, 2, "-"))
	before := snap(t, s, testShard)
	if got, err := s.Release(ctx, testShard, h.HoldID, inventory.ReleaseMode("expire"), 1, ""); err == nil {
		t.Fatalf("unknown mode answered %q and no error", got)
	}
	if after := snap(t, s, testShard); !reflect.DeepEqual(after, before) {
		t.Fatal("unknown release mode changed the shard")
	}
}

// PostgreSQL cancelled a booking whose confirmation never reached Redis:
// cancel frees the record Redis still calls held, and the ticket keeps its
// place in the day's cap (problem 3 of issue 9: it answered STILL_HELD and
// the berth was never free again).
func TestCancelFreesARecordThatMissedItsConfirmation(t *testing.T) {
	t.Parallel()
	s, rdb, prefix := newStore(t)
	mustLoad(t, s, testShard, emptyShard(3, 4, 0))
	empty := snap(t, s, testShard)
	r := req(testShard, 1, 0, 3, "--")
	h := mustHeld(t, s, r)
	mustRelease(t, s, testShard, h.HoldID, inventory.ReleaseCancel, 1, "", "RELEASED")
	if after := snap(t, s, testShard); !reflect.DeepEqual(after, empty) {
		t.Fatalf("after cancel %+v, want the empty shard %+v", after, empty)
	}
	if _, ok := hashGet(t, rdb, shardKey(prefix, testShard, "live"), "1"); ok {
		t.Fatal("live hold left after cancel")
	}
	if n, _ := hashGet(t, rdb, shardKey(prefix, testShard, "daily"), "1"); n != "1" {
		t.Fatalf("daily count %q after a cancelled ticket, want 1", n)
	}
}

// A retake's record (R) is the retake's: a late release of the lapsed hold
// under the same id leaves it alone, HOLD never overwrites a record, and
// CONFIRM sells it (problem 2 of issue 9).
func TestRetakeRecordIsNotTheLapsedHolds(t *testing.T) {
	t.Parallel()
	s, rdb, prefix := newStore(t)
	mustLoad(t, s, testShard, emptyShard(3, 4, 0))
	r := req(testShard, 1, 0, 3, "-")
	lapsed := mustHeld(t, s, r)

	// HOLD under an id that has a record is refused and changes nothing.
	before := snap(t, s, testShard)
	again := r
	again.IdemKey, again.Retake = "retake-key-1", true
	if got := mustHold(t, s, again); got.Outcome != inventory.HoldExists {
		t.Fatalf("hold over an existing record: %+v, want HOLD_EXISTS", got)
	}
	if after := snap(t, s, testShard); !reflect.DeepEqual(after, before) {
		t.Fatal("a refused HOLD changed the shard")
	}

	// The retake frees the lapsed record first, then holds: R, not live.
	mustRelease(t, s, testShard, lapsed.HoldID, inventory.ReleaseUndo, 1, r.IdemKey, "RELEASED")
	got := mustHold(t, s, again)
	if got.Outcome != inventory.Held {
		t.Fatalf("retake: %+v", got)
	}
	rec, ok := findHold(snap(t, s, testShard), lapsed.HoldID)
	if !ok || rec.State != 'R' {
		t.Fatalf("retake record %+v (found %v), want state R", rec, ok)
	}
	if _, ok := hashGet(t, rdb, shardKey(prefix, testShard, "live"), "1"); ok {
		t.Fatal("a retake became the user's live hold")
	}
	held := snap(t, s, testShard)
	if len(held.SelfCheck()) != 0 {
		t.Fatalf("self check: %v", held.SelfCheck())
	}
	// The lapsed hold's late release: not its record, nothing changes.
	mustRelease(t, s, testShard, lapsed.HoldID, inventory.ReleaseHold, 1, "", "RETAKING")
	if after := snap(t, s, testShard); !reflect.DeepEqual(after, held) {
		t.Fatal("a late release changed the retake's record")
	}
	mustConfirm(t, s, testShard, lapsed.HoldID, "CONFIRMED")
	sold := snap(t, s, testShard)
	if !slices.Equal(sold.Confirmed, []int{1, 1, 1}) || !slices.Equal(sold.Held, []int{0, 0, 0}) || len(sold.SelfCheck()) != 0 {
		t.Fatalf("after confirm held %v confirmed %v, self check %v", sold.Held, sold.Confirmed, sold.SelfCheck())
	}
	mustRelease(t, s, testShard, lapsed.HoldID, inventory.ReleaseHold, 1, "", "CONFIRMED")
}
