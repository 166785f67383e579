package inventory_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"tatkal/booking/inventory"
	"tatkal/booking/lab/testenv"
)

func randHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// newStore returns a Store on the real Redis (DESIGN.md: never mocks of
// it) under a fresh key prefix whose keys are deleted when the test ends.
func newStore(tb testing.TB) (*inventory.Store, redis.UniversalClient, string) {
	tb.Helper()
	rdb := testenv.Redis(tb)
	prefix := testenv.RedisPrefix(tb, rdb)
	return inventory.New(rdb, prefix), rdb, prefix
}

func prefixKeys(tb testing.TB, rdb redis.UniversalClient, prefix string) []string {
	tb.Helper()
	return testenv.Keys(tb, rdb, prefix)
}

// shape builds berth types and coaches: coaches of perCoach berths each,
// types cycling through pattern.
func shape(coaches, perCoach int, pattern string) (types, coach []byte) {
	for c := 0; c < coaches; c++ {
		for i := 0; i < perCoach; i++ {
			types = append(types, pattern[(c*perCoach+i)%len(pattern)])
			coach = append(coach, byte(c+1))
		}
	}
	return types, coach
}

func mustLoad(tb testing.TB, s *inventory.Store, shard int64, st inventory.ShardState) {
	tb.Helper()
	ok, err := s.Load(context.Background(), shard, st)
	if err != nil {
		tb.Fatalf("load shard %d: %v", shard, err)
	}
	if !ok {
		tb.Fatalf("load shard %d epoch %d: refused as stale", shard, st.Epoch)
	}
}

// expiry is a fixed, millisecond-exact hold expiry.
var expiry = time.UnixMilli(4102444800123).UTC() // 2100-01-01

var holdSeq struct {
	sync.Mutex
	n int
}

func newHoldID() string {
	holdSeq.Lock()
	defer holdSeq.Unlock()
	holdSeq.n++
	return fmt.Sprintf("h%05d-%s", holdSeq.n, randHex(4))
}

// req is a valid hold request with test defaults: ID checked, cap 4,
// up to 4 passengers, no waitlist, a 10-minute idempotency window.
func req(shard, user int64, from, to int, prefs string) inventory.HoldRequest {
	return inventory.HoldRequest{
		ShardID:       shard,
		HoldID:        newHoldID(),
		UserID:        user,
		IdemKey:       "k-" + randHex(6),
		From:          from,
		To:            to,
		ExpiresAt:     expiry,
		DailyCap:      4,
		Prefs:         []byte(prefs),
		IDOK:          true,
		IdemTTL:       10 * time.Minute,
		MaxPassengers: 4,
	}
}

func mustHold(tb testing.TB, s *inventory.Store, r inventory.HoldRequest) inventory.HoldResult {
	tb.Helper()
	res, err := s.Hold(context.Background(), r)
	if err != nil {
		tb.Fatalf("hold %+v: %v", r, err)
	}
	return res
}

func mustHeld(tb testing.TB, s *inventory.Store, r inventory.HoldRequest) inventory.HoldResult {
	tb.Helper()
	res := mustHold(tb, s, r)
	if res.Outcome != inventory.Held || res.Replayed {
		tb.Fatalf("hold user %d %d-%d %q: got %+v, want a fresh HELD", r.UserID, r.From, r.To, r.Prefs, res)
	}
	if res.HoldID != r.HoldID || !res.ExpiresAt.Equal(r.ExpiresAt) || len(res.Berths) != len(r.Prefs) {
		tb.Fatalf("hold user %d: answer %+v does not match request id %s expiry %v pax %d", r.UserID, res, r.HoldID, r.ExpiresAt, len(r.Prefs))
	}
	return res
}

func mustRelease(tb testing.TB, s *inventory.Store, shard int64, id string, mode inventory.ReleaseMode, user int64, key, want string) {
	tb.Helper()
	got, err := s.Release(context.Background(), shard, id, mode, user, key)
	if err != nil {
		tb.Fatalf("release %s (%s): %v", id, mode, err)
	}
	if got != want {
		tb.Fatalf("release %s (%s) = %s, want %s", id, mode, got, want)
	}
}

func mustConfirm(tb testing.TB, s *inventory.Store, shard int64, id, want string) {
	tb.Helper()
	got, err := s.Confirm(context.Background(), shard, id)
	if err != nil {
		tb.Fatalf("confirm %s: %v", id, err)
	}
	if got != want {
		tb.Fatalf("confirm %s = %s, want %s", id, got, want)
	}
}

// snap takes a snapshot, fails on SelfCheck findings and sorts the records.
func snap(tb testing.TB, s *inventory.Store, shard int64) inventory.Snapshot {
	tb.Helper()
	sn, err := s.Snapshot(context.Background(), shard)
	if err != nil {
		tb.Fatalf("snapshot shard %d: %v", shard, err)
	}
	if bad := sn.SelfCheck(); len(bad) > 0 {
		tb.Fatalf("shard %d self-check:\n%s", shard, strings.Join(bad, "\n"))
	}
	sortHolds(sn.Holds)
	return sn
}

func sortHolds(h []inventory.HoldRecord) {
	sort.Slice(h, func(i, j int) bool { return h[i].ID < h[j].ID })
}

func legMask(from, to int) uint16 {
	var m uint16
	for l := from; l < to; l++ {
		m |= 1 << l
	}
	return m
}

func findHold(sn inventory.Snapshot, id string) (inventory.HoldRecord, bool) {
	for _, h := range sn.Holds {
		if h.ID == id {
			return h, true
		}
	}
	return inventory.HoldRecord{}, false
}

func hashGet(tb testing.TB, rdb redis.UniversalClient, key, field string) (string, bool) {
	tb.Helper()
	v, err := rdb.HGet(context.Background(), key, field).Result()
	if err == redis.Nil {
		return "", false
	}
	if err != nil {
		tb.Fatalf("hget %s %s: %v", key, field, err)
	}
	return v, true
}

// shardKey mirrors the Store's key layout, to look at per-user hashes the
// snapshot does not carry (live holds, daily counts, idempotency keys).
func shardKey(prefix string, shard int64, name string) string {
	return fmt.Sprintf("%s:{s%d}:%s", prefix, shard, name)
}

// userHash reads a per-user hash (live, daily) without the pad field that
// keeps it a hash table (see padField in load.go).
func userHash(tb testing.TB, rdb redis.UniversalClient, key string) map[string]string {
	tb.Helper()
	m, err := rdb.HGetAll(context.Background(), key).Result()
	if err != nil {
		tb.Fatalf("hgetall %s: %v", key, err)
	}
	delete(m, "|")
	return m
}

// referenceBerths is the berth choice of the original HOLD script, which
// scanned every berth in Lua: the free berths of the journey grouped by
// coach (coaches in order of their first free berth); a coach that can
// take the whole group and meets the most preferences, the first such;
// else the whole shard. Within the chosen berths, each passenger with a
// preference gets the first free berth of that type not yet given, then
// the others the first free berths left. It returns nil when fewer berths
// than passengers are free. The bitmap scripts must choose exactly this.
func referenceBerths(types, coach []byte, occ []uint16, prefs string, from, to int) []int {
	need := legMask(from, to)
	var order []byte
	byCoach := map[byte][]int{}
	var all []int
	for b := range occ {
		if occ[b]&need != 0 {
			continue
		}
		c := coach[b]
		if _, ok := byCoach[c]; !ok {
			order = append(order, c)
		}
		byCoach[c] = append(byCoach[c], b)
		all = append(all, b)
	}
	npax := len(prefs)
	if len(all) < npax {
		return nil
	}
	pick := func(list []int) ([]int, int) {
		out, set, taken, met := make([]int, npax), make([]bool, npax), map[int]bool{}, 0
		for i := 0; i < npax; i++ {
			if prefs[i] == '-' {
				continue
			}
			for _, b := range list {
				if !taken[b] && types[b] == prefs[i] {
					taken[b], out[i], set[i] = true, b, true
					met++
					break
				}
			}
		}
		for i := 0; i < npax; i++ {
			if set[i] {
				continue
			}
			for _, b := range list {
				if !taken[b] {
					taken[b], out[i], set[i] = true, b, true
					break
				}
			}
		}
		return out, met
	}
	var best []int
	bestMet := -1
	for _, c := range order {
		if list := byCoach[c]; len(list) >= npax {
			out, met := pick(list)
			if met > bestMet {
				best, bestMet = out, met
			}
			if met == npax {
				break
			}
		}
	}
	if best == nil {
		best, _ = pick(all)
	}
	return best
}
