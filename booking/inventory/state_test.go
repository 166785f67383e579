package inventory_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"tatkal/booking/inventory"
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/testenv"
)

// stateShard is a small shard with a live hold, a confirmed booking, a
// waitlist offer and a waitlisted booking, over two coaches of 5 and 4.
func stateShard() inventory.ShardState {
	return inventory.ShardState{Epoch: 1, Legs: 3, BerthTypes: []byte("LMULMUSTL"), Coaches: []byte{1, 1, 1, 1, 1, 2, 2, 2, 2}, WaitlistCap: 6,
		Holds: []inventory.HoldRecord{
			{ID: "h", State: 'H', UserID: 1, From: 0, To: 2, Berths: []int{0, 5}, Passengers: 2, ExpiresMs: expiry.UnixMilli()},
			{ID: "c", State: 'C', UserID: 2, From: 1, To: 3, Berths: []int{1}, Passengers: 1, ExpiresMs: 1},
			{ID: "w", State: 'W', UserID: 3, From: 0, To: 3, Passengers: 2, WaitlistNo: 1, ExpiresMs: expiry.UnixMilli()},
			{ID: "x", State: 'X', UserID: 4, From: 0, To: 1, Passengers: 1, WaitlistNo: 2, ExpiresMs: 1},
		}}
}

// SelfCheck finds every kind of disagreement the scripts must never make,
// each written straight into Redis behind their back.
func TestSelfCheckFindsCorruption(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	type redo func(args ...any) // a raw command on the shard's keys: k() names them
	cases := []struct {
		name, want string
		corrupt    func(do redo, k func(string) string)
	}{
		{"held counter off", "held counters", func(do redo, k func(string) string) { do("HINCRBY", k("cnt"), "h2", 1) }},
		{"confirmed counter off", "confirmed counters", func(do redo, k func(string) string) { do("HINCRBY", k("cnt"), "c1", -1) }},
		{"berth taken without a record", "holds claim", func(do redo, k func(string) string) { do("SETBIT", k("free:2"), 8, 0) }},
		{"record's berth shown free", "holds claim", func(do redo, k func(string) string) { do("SETBIT", k("free:0"), 0, 1) }},
		{"waitlist length off", "waitlist length", func(do redo, k func(string) string) { do("HINCRBY", k("meta"), "wlcount", 1) }},
		{"waitlist over its cap", "over cap", func(do redo, k func(string) string) { do("HSET", k("meta"), "wlcap", 2) }},
		{"bit past the last berth", "past the last berth", func(do redo, k func(string) string) { do("SETBIT", k("free:1"), 12, 1) }},
		{"berth of two types", "has 2 types", func(do redo, k func(string) string) { do("SETBIT", k("type:U"), 0, 1) }},
		{"berth of no type", "has 0 types", func(do redo, k func(string) string) { do("SETBIT", k("type:L"), 8, 0) }},
		{"coach table out of order", "coach table", func(do redo, k func(string) string) { do("HSET", k("meta"), "coaches", "\x00\x05\x00\x00\x00\x09") }},
		{"record with a berth twice", "a berth twice", func(do redo, k func(string) string) {
			do("HSET", k("holds"), "d", "C|9|2|3|1|7,7||2")
			do("HINCRBY", k("cnt"), "c2", 2)
		}},
		{"waitlist record without a number", "waitlist no 0", func(do redo, k func(string) string) {
			do("HSET", k("holds"), "v", "X|9|0|1|1|||1")
			do("HINCRBY", k("meta"), "wlcount", 1)
		}},
		{"hash without its pad", "no pad", func(do redo, k func(string) string) { do("HDEL", k("daily"), "|") }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, rdb, prefix := newStore(t)
			mustLoad(t, s, testShard, stateShard())
			snap(t, s, testShard) // clean before
			c.corrupt(func(args ...any) {
				if err := rdb.Do(ctx, args...).Err(); err != nil {
					t.Fatalf("%v: %v", args, err)
				}
			}, func(name string) string { return shardKey(prefix, testShard, name) })
			sn, err := s.Snapshot(ctx, testShard)
			if err != nil {
				t.Fatal(err)
			}
			bad := strings.Join(sn.SelfCheck(), "\n")
			if !strings.Contains(bad, c.want) {
				t.Fatalf("self-check said %q, want a finding with %q", bad, c.want)
			}
		})
	}
}

// A partial loss (the meta survived, some seat key did not) is refused
// like a full one by every script that needs the lost key, and nothing is
// written; Ready reports it, so the service rebuilds; a newer load heals it.
func TestPartialLossIsNotReady(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, lost := range []string{"free:1", "type:L", "cnt", "holds", "live", "daily"} {
		t.Run(lost, func(t *testing.T) {
			s, rdb, prefix := newStore(t)
			mustLoad(t, s, testShard, stateShard())
			if ok, _, err := s.Ready(ctx, testShard); !ok || err != nil {
				t.Fatalf("ready before the loss: %v %v", ok, err)
			}
			rdb.Del(ctx, shardKey(prefix, testShard, lost))
			keysBefore := prefixKeys(t, rdb, prefix)
			if ok, epoch, err := s.Ready(ctx, testShard); ok || epoch != 0 || err != nil {
				t.Fatalf("ready after losing %s: %v %d %v", lost, ok, epoch, err)
			}
			// A hold over legs 0-2 wanting a lower berth reads every kind of key.
			r := req(testShard, 50, 0, 3, "L-")
			if got := mustHold(t, s, r); got.Outcome != inventory.NotReady || got.HoldID != "" {
				t.Fatalf("hold: %+v, want NOT_READY", got)
			}
			if rdb.Exists(ctx, shardKey(prefix, testShard, "idem:50:"+r.IdemKey)).Val() != 0 {
				t.Fatal("NOT_READY was remembered under the idempotency key")
			}
			// Releasing the live hold needs legs 0-1, cnt, holds, live, daily.
			if lost != "type:L" {
				if _, err := s.Release(ctx, testShard, "h", inventory.ReleaseHold, 1, ""); !errors.Is(err, inventory.ErrNotReady) {
					t.Fatalf("release: %v, want ErrNotReady", err)
				}
			}
			if lost == "free:1" {
				if _, err := s.Available(ctx, testShard, 0, 3); !errors.Is(err, inventory.ErrNotReady) {
					t.Fatalf("available: %v, want ErrNotReady", err)
				}
			}
			if lost == "cnt" || lost == "live" || lost == "holds" {
				if _, err := s.Confirm(ctx, testShard, "h"); !errors.Is(err, inventory.ErrNotReady) {
					t.Fatalf("confirm: %v, want ErrNotReady", err)
				}
			}
			if keys := prefixKeys(t, rdb, prefix); !slices.Equal(sortedCopy(keys), sortedCopy(keysBefore)) {
				t.Fatalf("refused scripts changed the keys: %v -> %v", keysBefore, keys)
			}
			st := stateShard()
			st.Epoch = 2
			mustLoad(t, s, testShard, st)
			if ok, epoch, _ := s.Ready(ctx, testShard); !ok || epoch != 2 {
				t.Fatalf("ready after the reload: %v %d", ok, epoch)
			}
			mustHeld(t, s, req(testShard, 51, 0, 3, "L-"))
		})
	}
}

func sortedCopy(s []string) []string { return slices.Sorted(slices.Values(s)) }

// Load refuses shapes the bitmaps cannot represent, writing nothing.
func TestLoadRejectsBadLayout(t *testing.T) {
	t.Parallel()
	s, _, _ := newStore(t)
	ctx := context.Background()
	bad := map[string]inventory.ShardState{
		"coach split in two":  {Epoch: 1, Legs: 2, BerthTypes: []byte("LMUL"), Coaches: []byte{1, 2, 1, 1}},
		"unknown type code":   {Epoch: 1, Legs: 2, BerthTypes: []byte("LMXL"), Coaches: []byte{1, 1, 1, 1}},
		"'-' as a berth type": {Epoch: 1, Legs: 2, BerthTypes: []byte("LM-L"), Coaches: []byte{1, 1, 1, 1}},
		"too many berths":     {Epoch: 1, Legs: 2, BerthTypes: make([]byte, 65536), Coaches: make([]byte, 65536)},
	}
	for name, st := range bad {
		t.Run(name, func(t *testing.T) {
			if ok, err := s.Load(ctx, testShard, st); err == nil || ok {
				t.Fatalf("load accepted it: %v %v", ok, err)
			}
			if ready, _, _ := s.Ready(ctx, testShard); ready {
				t.Fatal("a refused load made the shard ready")
			}
		})
	}
	// Every code BerthCode yields is a type, '?' included.
	codes := []byte{}
	for _, t := range []string{"LB", "MB", "UB", "SL", "SU", "WS", "MS", "AS", "XX"} {
		codes = append(codes, inventory.BerthCode(t))
	}
	mustLoad(t, s, testShard, inventory.ShardState{Epoch: 1, Legs: 1, BerthTypes: codes, Coaches: []byte{1, 1, 1, 2, 2, 2, 3, 3, 3}})
	if got := mustHeld(t, s, req(testShard, 1, 0, 1, "?A")); !slices.Equal(got.Berths, []int{8, 7}) {
		t.Fatalf("preferences ?A took %v, want [8 7]", got.Berths)
	}
}

// The per-shard hashes are hash tables from the load on (see padField),
// however few entries they have, and stay so through holds and releases;
// the pad never shows as a record.
func TestHashesStayHashTables(t *testing.T) {
	t.Parallel()
	s, rdb, prefix := newStore(t)
	ctx := context.Background()
	mustLoad(t, s, testShard, emptyShard(2, 8, 4))
	enc := func() []string {
		var out []string
		for _, k := range []string{"cnt", "holds", "live", "daily"} {
			out = append(out, k+"="+rdb.ObjectEncoding(ctx, shardKey(prefix, testShard, k)).Val())
		}
		return out
	}
	want := []string{"cnt=hashtable", "holds=hashtable", "live=hashtable", "daily=hashtable"}
	if got := enc(); !slices.Equal(got, want) {
		t.Fatalf("after load %v, want %v", got, want)
	}
	h := mustHeld(t, s, req(testShard, 1, 0, 2, "L"))
	mustRelease(t, s, testShard, h.HoldID, inventory.ReleaseHold, 1, "", "RELEASED")
	if got := enc(); !slices.Equal(got, want) {
		t.Fatalf("after a hold and its release %v, want %v", got, want)
	}
	if sn := snap(t, s, testShard); len(sn.Holds) != 0 {
		t.Fatalf("records %+v, want none", sn.Holds)
	}
}

// Rebuild reads PostgreSQL: live holds, confirmed and waitlisted bookings,
// and the day's count of each user, in which a cancelled booking still
// counts, as it does for the scripts.
func TestRebuildKeepsCancelledBookingsInTheDailyCount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := testenv.New(t)
	date := time.Now().AddDate(0, 0, 3)
	open := -time.Minute
	if _, err := seed.Demo(ctx, env.Pool, seed.DemoOptions{OpensIn: &open}); err != nil {
		t.Fatal(err)
	}
	shardID, err := seed.Shard(ctx, env.Pool, seed.ShardSpec{Train: "12951", Date: date, Class: "3A", Berths: 8, OpensAt: time.Now().Add(-time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	users, err := seed.Users(ctx, env.Pool, seed.UsersSpec{Count: 3, Prefix: "rb", PasswordHash: "x"})
	if err != nil {
		t.Fatal(err)
	}
	epoch, err := inventory.Rebuild(ctx, env.Pool, env.Store, shardID)
	if err != nil {
		t.Fatal(err)
	}
	pnr := int64(4000000000)
	insert := func(user int64, state, kind string, berths []int32, wl *int, bstatus string) uuid.UUID {
		t.Helper()
		pnr++
		id := uuid.New()
		if _, err := env.Pool.Exec(ctx, `INSERT INTO holds (id, shard_id, user_id, idempotency_key, kind, from_seq, to_seq, seat_count,
			berths, waitlist_no, passengers, fare_paise, fare_breakup, state, epoch, opening_day, expires_at)
			VALUES ($1, $2, $3, $4, $5, 0, 2, 1, $6, $7, '[]', 100, '{}', $8, $9, current_date, now() + interval '10 minutes')`,
			id, shardID, user, id.String(), kind, berths, wl, state, epoch); err != nil {
			t.Fatal(err)
		}
		if bstatus != "" {
			if _, err := env.Pool.Exec(ctx, `INSERT INTO bookings (pnr, hold_id, user_id, shard_id, from_seq, to_seq, status, fare_paise)
				VALUES ($1, $2, $3, $4, 0, 2, $5, 100)`, strconv.FormatInt(pnr, 10), id, user, shardID, bstatus); err != nil {
				t.Fatal(err)
			}
		}
		return id
	}
	one := 1
	insert(users[0], "CONFIRMED", "SEAT", []int32{3}, nil, "CANCELLED")      // cancelled ticket: counts, occupies nothing
	insert(users[1], "HELD", "SEAT", []int32{4}, nil, "")                    // live hold: counts, occupies berth 4
	insert(users[2], "CONFIRMED", "WAITLIST", []int32{}, &one, "WAITLISTED") // waitlisted: counts, one place
	if _, err := inventory.Rebuild(ctx, env.Pool, env.Store, shardID); err != nil {
		t.Fatal(err)
	}
	daily := userHash(t, env.Redis, env.KeyPrefix+":{s"+strconv.FormatInt(shardID, 10)+"}:daily")
	want := map[string]string{strconv.FormatInt(users[0], 10): "1", strconv.FormatInt(users[1], 10): "1", strconv.FormatInt(users[2], 10): "1"}
	if !maps.Equal(daily, want) {
		t.Fatalf("daily counts after rebuild %v, want %v", daily, want)
	}
	sn, err := env.Store.Snapshot(ctx, shardID)
	if err != nil {
		t.Fatal(err)
	}
	if bad := sn.SelfCheck(); len(bad) > 0 {
		t.Fatalf("self-check: %v", bad)
	}
	if len(sn.Holds) != 2 || sn.WaitlistLen != 1 || sn.Occupancy[3] != 0 || sn.Occupancy[4] != 0b11 {
		t.Fatalf("rebuilt %+v", sn)
	}
	rep, err := inventory.Check(ctx, env.Pool, env.Store, shardID, 10*time.Minute)
	if err != nil || !rep.OK() {
		t.Fatalf("check after rebuild: %v\n%s", err, rep)
	}
}

// A shard whose state was loaded on another node (a replica promoted by a
// failover may have missed the last writes) is not ready: hold and
// promote refuse it and Ready says so, so the service rebuilds it; the
// rebuild, on this node, heals it. Outside a cluster a node's id is "", so
// a foreign id written into meta stands in for the failover here.
func TestStateLoadedOnAnotherNodeIsNotReady(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, rdb, prefix := newStore(t)
	mustLoad(t, s, testShard, stateShard())
	mustHeld(t, s, req(testShard, 50, 0, 3, "L-"))
	rdb.HSet(ctx, shardKey(prefix, testShard, "meta"), "node", "a-node-that-failed-over")
	if ok, _, err := s.Ready(ctx, testShard); ok || err != nil {
		t.Fatalf("ready on another node's state: %v %v", ok, err)
	}
	if got := mustHold(t, s, req(testShard, 51, 0, 3, "L-")); got.Outcome != inventory.NotReady {
		t.Fatalf("hold: %+v, want NOT_READY", got)
	}
	if _, err := s.Promote(ctx, testShard, 2, nil, nil); !errors.Is(err, inventory.ErrNotReady) {
		t.Fatalf("promote: %v, want ErrNotReady", err)
	}
	st := stateShard()
	st.Epoch = 2
	mustLoad(t, s, testShard, st)
	if ok, epoch, _ := s.Ready(ctx, testShard); !ok || epoch != 2 {
		t.Fatalf("ready after the rebuild: %v %d", ok, epoch)
	}
	mustHeld(t, s, req(testShard, 51, 0, 3, "L-"))
}
