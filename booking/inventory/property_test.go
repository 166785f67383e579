package inventory_test

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"tatkal/booking/inventory"
)

// modelRec is one hold as the model expects Redis to keep it.
type modelRec struct {
	id       string
	state    byte
	user     int64
	from, to int
	berths   []int
	n        int
	wl       int
	key      string
}

// model is an independent Go account of a shard, kept from the answers.
type model struct {
	legs, nberths int
	types, coach  []byte
	wlcap         int
	dailyCap      int
	epoch         int64
	occ           []uint16
	recs          map[string]*modelRec
	live          map[int64]string
	daily         map[int64]int
	wlcount       int
	wlnext        int
	idem          map[string]inventory.HoldResult // user|key -> first answer
	outcomes      map[string]int
}

func newModel(st inventory.ShardState, dailyCap int) *model {
	return &model{
		legs: st.Legs, nberths: len(st.BerthTypes), types: st.BerthTypes, coach: st.Coaches,
		wlcap: st.WaitlistCap, dailyCap: dailyCap, epoch: st.Epoch,
		occ: make([]uint16, len(st.BerthTypes)), recs: map[string]*modelRec{},
		live: map[int64]string{}, daily: map[int64]int{}, idem: map[string]inventory.HoldResult{},
		outcomes: map[string]int{},
	}
}

func idemID(user int64, key string) string { return strconv.FormatInt(user, 10) + "|" + key }

// freeFor lists, per coach in order of first free berth, the berths free
// for the whole journey.
func (m *model) freeFor(from, to int) (order []byte, byCoach map[byte][]int, all []int) {
	need := legMask(from, to)
	byCoach = map[byte][]int{}
	for b := 0; b < m.nberths; b++ {
		if m.occ[b]&need == 0 {
			c := m.coach[b]
			if _, ok := byCoach[c]; !ok {
				order = append(order, c)
			}
			byCoach[c] = append(byCoach[c], b)
			all = append(all, b)
		}
	}
	return order, byCoach, all
}

// possible is the most preferences any assignment from list can meet.
func (m *model) possible(prefs string, list []int) int {
	want, have := map[byte]int{}, map[byte]int{}
	for i := 0; i < len(prefs); i++ {
		if prefs[i] != '-' {
			want[prefs[i]]++
		}
	}
	for _, b := range list {
		have[m.types[b]]++
	}
	n := 0
	for t, w := range want {
		n += min(w, have[t])
	}
	return n
}

// checkHeld verifies a HELD answer against the model before applying it:
// one berth per passenger, distinct, each free for the whole journey; the
// group in one coach when any coach could take it; as many preferences met
// as the chosen coach (or the whole shard, when spread) allows.
func (m *model) checkHeld(prefs string, from, to int, berths []int) error {
	if len(berths) != len(prefs) {
		return fmt.Errorf("%d berths for %d passengers", len(berths), len(prefs))
	}
	need := legMask(from, to)
	seen := map[int]bool{}
	for _, b := range berths {
		if b < 0 || b >= m.nberths {
			return fmt.Errorf("berth %d out of range", b)
		}
		if seen[b] {
			return fmt.Errorf("berth %d given twice", b)
		}
		seen[b] = true
		if m.occ[b]&need != 0 {
			return fmt.Errorf("berth %d already taken (mask %06b) on journey %d-%d", b, m.occ[b], from, to)
		}
	}
	met := 0
	for i, b := range berths {
		if prefs[i] != '-' && m.types[b] == prefs[i] {
			met++
		}
	}
	order, byCoach, all := m.freeFor(from, to)
	best, oneCoach := -1, false
	for _, c := range order {
		if len(byCoach[c]) >= len(prefs) {
			oneCoach = true
			best = max(best, m.possible(prefs, byCoach[c]))
		}
	}
	if oneCoach {
		c := m.coach[berths[0]]
		for _, b := range berths {
			if m.coach[b] != c {
				return fmt.Errorf("group spread over coaches (%v) though a coach could take it", berths)
			}
		}
		if met != best {
			return fmt.Errorf("berths %v meet %d preferences of %q, a coach could meet %d", berths, met, prefs, best)
		}
	} else if p := m.possible(prefs, all); met != p {
		return fmt.Errorf("spread berths %v meet %d preferences of %q, %d possible", berths, met, prefs, p)
	}
	return nil
}

// hold runs one attempt and checks its answer against the model's
// prediction, then applies it.
func (m *model) hold(ctx context.Context, s *inventory.Store, r inventory.HoldRequest) error {
	got, err := s.Hold(ctx, r)
	if err != nil {
		return err
	}
	if got.Replayed {
		m.outcomes["replayed "+string(got.Outcome)]++
	} else {
		m.outcomes[string(got.Outcome)]++
	}
	prefs := string(r.Prefs)
	ik := idemID(r.UserID, r.IdemKey)
	expect := func(o inventory.Outcome, holdID string) error {
		want := inventory.HoldResult{Outcome: o, Epoch: m.epoch, HoldID: holdID}
		if !reflect.DeepEqual(got, want) {
			return fmt.Errorf("got %+v, want %+v", got, want)
		}
		return nil
	}
	if prior, ok := m.idem[ik]; ok {
		want := prior
		want.Replayed = true
		if !reflect.DeepEqual(got, want) {
			return fmt.Errorf("replay: got %+v, want %+v", got, want)
		}
		return nil
	}
	switch {
	case len(prefs) < 1 || len(prefs) > r.MaxPassengers:
		return expect(inventory.BadPassengers, "")
	case !r.IDOK:
		return expect(inventory.NoID, "")
	case r.From < 0 || r.To > m.legs || r.From >= r.To:
		return expect(inventory.BadJourney, "")
	}
	if id, ok := m.live[r.UserID]; ok {
		return expect(inventory.LiveHold, id)
	}
	if m.daily[r.UserID] >= r.DailyCap {
		return expect(inventory.DailyCap, "")
	}
	_, _, free := m.freeFor(r.From, r.To)
	switch {
	case len(free) >= len(prefs):
		if got.Outcome != inventory.Held || got.Replayed || got.HoldID != r.HoldID || !got.ExpiresAt.Equal(r.ExpiresAt) || got.Epoch != m.epoch || got.WaitlistNo != 0 {
			return fmt.Errorf("%d free for %d passengers: got %+v, want HELD %s", len(free), len(prefs), got, r.HoldID)
		}
		if err := m.checkHeld(prefs, r.From, r.To, got.Berths); err != nil {
			return fmt.Errorf("HELD %s %d-%d %q: %w", r.HoldID, r.From, r.To, prefs, err)
		}
		if want := referenceBerths(m.types, m.coach, m.occ, prefs, r.From, r.To); !slices.Equal(got.Berths, want) {
			return fmt.Errorf("HELD %s %d-%d %q: berths %v, the original script chose %v", r.HoldID, r.From, r.To, prefs, got.Berths, want)
		}
		for _, b := range got.Berths {
			m.occ[b] |= legMask(r.From, r.To)
		}
		m.recs[r.HoldID] = &modelRec{id: r.HoldID, state: 'H', user: r.UserID, from: r.From, to: r.To, berths: slices.Clone(got.Berths), n: len(prefs), key: r.IdemKey}
	case r.AllowWaitlist && m.wlcount+len(prefs) <= m.wlcap:
		m.wlnext++
		want := inventory.HoldResult{Outcome: inventory.WaitlistOffered, Epoch: m.epoch, HoldID: r.HoldID, ExpiresAt: r.ExpiresAt, WaitlistNo: m.wlnext}
		if !reflect.DeepEqual(got, want) {
			return fmt.Errorf("waitlist: got %+v, want %+v", got, want)
		}
		m.wlcount += len(prefs)
		m.recs[r.HoldID] = &modelRec{id: r.HoldID, state: 'W', user: r.UserID, from: r.From, to: r.To, n: len(prefs), wl: m.wlnext, key: r.IdemKey}
	default:
		if err := expect(inventory.SoldOut, ""); err != nil {
			return err
		}
		m.idem[ik] = got
		return nil
	}
	m.live[r.UserID] = r.HoldID
	m.daily[r.UserID]++
	m.idem[ik] = got
	return nil
}

func (m *model) release(ctx context.Context, s *inventory.Store, id string, mode inventory.ReleaseMode) error {
	rec := m.recs[id]
	user, key := int64(0), ""
	if rec != nil {
		user, key = rec.user, rec.key
	}
	got, err := s.Release(ctx, testShard, id, mode, user, key)
	if err != nil {
		return err
	}
	want := "RELEASED"
	switch {
	case rec == nil:
		want = "GONE"
	case (rec.state == 'C' || rec.state == 'X') && mode != inventory.ReleaseCancel:
		want = "CONFIRMED"
	}
	if got != want {
		return fmt.Errorf("release %s (%s): got %s, want %s", id, mode, got, want)
	}
	if want != "RELEASED" {
		return nil
	}
	switch rec.state {
	case 'H', 'C':
		for _, b := range rec.berths {
			m.occ[b] &^= legMask(rec.from, rec.to)
		}
	default:
		m.wlcount -= rec.n
	}
	if rec.state == 'H' || rec.state == 'W' {
		// Cancel frees a live record too (PostgreSQL cancelled a booking
		// whose confirmation Redis missed), and the ticket keeps its place
		// in the day's cap.
		if m.live[rec.user] == id {
			delete(m.live, rec.user)
		}
		if mode != inventory.ReleaseCancel {
			if m.daily[rec.user]--; m.daily[rec.user] <= 0 {
				delete(m.daily, rec.user)
			}
		}
	}
	if mode == inventory.ReleaseUndo {
		delete(m.idem, idemID(rec.user, rec.key))
	}
	delete(m.recs, id)
	return nil
}

func (m *model) confirm(ctx context.Context, s *inventory.Store, id string) error {
	got, err := s.Confirm(ctx, testShard, id)
	if err != nil {
		return err
	}
	rec := m.recs[id]
	want := "CONFIRMED"
	if rec == nil {
		want = "GONE"
	}
	if got != want {
		return fmt.Errorf("confirm %s: got %s, want %s", id, got, want)
	}
	if rec == nil {
		return nil
	}
	switch rec.state {
	case 'H':
		if len(rec.berths) != rec.n {
			return fmt.Errorf("confirmed %s has %d berths for %d passengers", id, len(rec.berths), rec.n)
		}
		rec.state = 'C'
		delete(m.live, rec.user)
	case 'W':
		rec.state = 'X'
		delete(m.live, rec.user)
	}
	return nil
}

// reload does what a Redis loss and a rebuild do: wipe, then load the
// snapshot's records under the next epoch.
func (m *model) reload(ctx context.Context, s *inventory.Store, sn inventory.Snapshot) error {
	if err := s.Wipe(ctx, testShard); err != nil {
		return err
	}
	m.epoch++
	ok, err := s.Load(ctx, testShard, inventory.ShardState{Epoch: m.epoch, Legs: m.legs, BerthTypes: m.types, Coaches: m.coach, WaitlistCap: m.wlcap, Holds: sn.Holds})
	if err != nil || !ok {
		return fmt.Errorf("reload epoch %d: %v %v", m.epoch, ok, err)
	}
	// Answers given under the old epoch are no longer replayed; the day's
	// counts are rebuilt from the records (a cancelled ticket has none).
	m.idem = map[string]inventory.HoldResult{}
	m.daily = map[int64]int{}
	m.wlnext = 0
	for _, r := range m.recs {
		m.daily[r.user]++
		m.wlnext = max(m.wlnext, r.wl)
	}
	return nil
}

// compare checks the snapshot (already self-checked) against the model.
func (m *model) compare(tb testing.TB, rdb redis.UniversalClient, prefix string, sn inventory.Snapshot) error {
	if sn.Epoch != m.epoch || sn.Berths != m.nberths || sn.Legs != m.legs {
		return fmt.Errorf("shape: epoch %d berths %d legs %d", sn.Epoch, sn.Berths, sn.Legs)
	}
	if !slices.Equal(sn.Occupancy, m.occ) {
		return fmt.Errorf("occupancy\nredis %v\nmodel %v", sn.Occupancy, m.occ)
	}
	if sn.WaitlistLen != m.wlcount {
		return fmt.Errorf("waitlist length %d, model %d", sn.WaitlistLen, m.wlcount)
	}
	held, conf := make([]int, m.legs), make([]int, m.legs)
	for _, r := range m.recs {
		c := held
		if r.state == 'C' {
			c = conf
		} else if r.state != 'H' {
			continue
		}
		for l := r.from; l < r.to; l++ {
			c[l] += r.n
		}
	}
	if !slices.Equal(sn.Held, held) || !slices.Equal(sn.Confirmed, conf) {
		return fmt.Errorf("counters held %v confirmed %v, model %v %v", sn.Held, sn.Confirmed, held, conf)
	}
	if len(sn.Holds) != len(m.recs) {
		return fmt.Errorf("%d records, model %d", len(sn.Holds), len(m.recs))
	}
	for _, h := range sn.Holds {
		r := m.recs[h.ID]
		if r == nil {
			return fmt.Errorf("record %s unknown to the model", h.ID)
		}
		if h.State != r.state || h.UserID != r.user || h.From != r.from || h.To != r.to || !slices.Equal(h.Berths, r.berths) ||
			h.Passengers != r.n || h.WaitlistNo != r.wl || h.ExpiresMs != expiry.UnixMilli() {
			return fmt.Errorf("record %+v, model %+v", h, *r)
		}
	}
	live := map[string]string{}
	for u, id := range m.live {
		live[strconv.FormatInt(u, 10)] = id
	}
	if got := userHash(tb, rdb, shardKey(prefix, testShard, "live")); !reflect.DeepEqual(got, live) {
		return fmt.Errorf("live holds %v, model %v", got, live)
	}
	daily := map[string]string{}
	for u, n := range m.daily {
		daily[strconv.FormatInt(u, 10)] = strconv.Itoa(n)
	}
	if got := userHash(tb, rdb, shardKey(prefix, testShard, "daily")); !reflect.DeepEqual(got, daily) {
		return fmt.Errorf("daily counts %v, model %v", got, daily)
	}
	return nil
}

// TestPropertyRandomOperations drives a shard of 40 berths, 6 legs and 3
// coaches through thousands of random holds, releases, undos, confirms,
// cancels, replays and rebuilds, and after every one compares Redis with
// the model and runs the self-checks. TATKAL_PROPERTY_SEED and
// TATKAL_PROPERTY_OPS override the seeds and the length.
func TestPropertyRandomOperations(t *testing.T) {
	t.Parallel()
	seeds := []int64{1, 2, 3}
	if v := os.Getenv("TATKAL_PROPERTY_SEED"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		seeds = []int64{n}
	}
	ops := 2500
	if v := os.Getenv("TATKAL_PROPERTY_OPS"); v != "" {
		ops, _ = strconv.Atoi(v)
	}
	if testing.Short() {
		ops = 500
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed %d", seed), func(t *testing.T) {
			runProperty(t, seed, ops)
		})
	}
}

func runProperty(t *testing.T, seed int64, ops int) {
	s, rdb, prefix := newStore(t)
	ctx := context.Background()
	rng := rand.New(rand.NewSource(seed))
	// Three coaches of 16, 16 and 8 berths.
	types, coaches := shape(2, 16, "LMULMUST")
	t3, c3 := shape(1, 8, "LMULMUST")
	for i := range c3 {
		c3[i] = 3
	}
	st := inventory.ShardState{Epoch: 1, Legs: 6, BerthTypes: append(types, t3...), Coaches: append(coaches, c3...), WaitlistCap: 6}
	mustLoad(t, s, testShard, st)
	m := newModel(st, 3)
	userKeys := map[int64][]string{}
	counts := map[string]int{}

	pickRec := func(want func(*modelRec) bool) string {
		var ids []string
		for id, r := range m.recs {
			if want(r) {
				ids = append(ids, id)
			}
		}
		if len(ids) == 0 || rng.Intn(20) == 0 {
			return "nosuch-" + strconv.Itoa(rng.Intn(1000))
		}
		slices.Sort(ids) // map order is random; the seed must decide
		return ids[rng.Intn(len(ids))]
	}
	isLive := func(r *modelRec) bool { return r.state == 'H' || r.state == 'W' }
	isSold := func(r *modelRec) bool { return r.state == 'C' || r.state == 'X' }
	anyRec := func(*modelRec) bool { return true }

	for i := 0; i < ops; i++ {
		var desc string
		var err error
		switch p := rng.Intn(100); {
		case p < 50:
			user := int64(i/250*15 + rng.Intn(25)) // a sliding crowd, so caps and live holds bite but do not choke
			from := rng.Intn(m.legs)
			to := from + 1 + rng.Intn(m.legs-from)
			npax := 1 + rng.Intn(4)
			if rng.Intn(40) == 0 {
				npax = []int{0, 5}[rng.Intn(2)]
			}
			pb := make([]byte, npax)
			for j := range pb {
				pb[j] = "LLMUSTW---"[rng.Intn(10)]
			}
			r := inventory.HoldRequest{
				ShardID: testShard, HoldID: fmt.Sprintf("p%d-%05d", seed, i), UserID: user, From: from, To: to,
				ExpiresAt: expiry, DailyCap: m.dailyCap, Prefs: pb, IDOK: rng.Intn(40) != 0,
				AllowWaitlist: rng.Intn(2) == 0, IdemTTL: 10 * time.Minute, MaxPassengers: 4,
			}
			if rng.Intn(50) == 0 {
				r.From, r.To = []int{-1, 3, 4, 2}[rng.Intn(4)], []int{7, 3, 2, 9}[rng.Intn(4)]
			}
			if keys := userKeys[user]; len(keys) > 0 && rng.Intn(10) == 0 {
				r.IdemKey = keys[rng.Intn(len(keys))] // a retry
			} else {
				r.IdemKey = "k" + strconv.Itoa(i)
				userKeys[user] = append(userKeys[user], r.IdemKey)
			}
			desc = fmt.Sprintf("hold %s user %d key %s %d-%d %q id %v wl %v", r.HoldID, user, r.IdemKey, r.From, r.To, pb, r.IDOK, r.AllowWaitlist)
			err = m.hold(ctx, s, r)
			counts["hold"]++
		case p < 63:
			id := pickRec(isLive)
			desc, err = "release "+id, m.release(ctx, s, id, inventory.ReleaseHold)
			counts["release"]++
		case p < 68:
			id := pickRec(isLive)
			desc, err = "undo "+id, m.release(ctx, s, id, inventory.ReleaseUndo)
			counts["undo"]++
		case p < 85:
			id := pickRec(isLive)
			if rng.Intn(10) == 0 {
				id = pickRec(anyRec)
			}
			desc, err = "confirm "+id, m.confirm(ctx, s, id)
			counts["confirm"]++
		case p < 99:
			id := pickRec(isSold)
			mode := inventory.ReleaseCancel
			if rng.Intn(10) == 0 {
				id, mode = pickRec(anyRec), []inventory.ReleaseMode{inventory.ReleaseHold, inventory.ReleaseUndo, inventory.ReleaseCancel}[rng.Intn(3)]
			}
			desc, err = fmt.Sprintf("%s %s", mode, id), m.release(ctx, s, id, mode)
			counts["cancel"]++
		default:
			desc = "reload"
			sn, serr := s.Snapshot(ctx, testShard)
			if serr != nil {
				t.Fatal(serr)
			}
			err = m.reload(ctx, s, sn)
			counts["reload"]++
		}
		if err != nil {
			t.Fatalf("seed %d op %d %s: %v", seed, i, desc, err)
		}
		sn, err := s.Snapshot(ctx, testShard)
		if err != nil {
			t.Fatalf("seed %d op %d: %v", seed, i, err)
		}
		if bad := sn.SelfCheck(); len(bad) > 0 {
			t.Fatalf("seed %d op %d %s: self-check:\n%s", seed, i, desc, strings.Join(bad, "\n"))
		}
		if err := m.compare(t, rdb, prefix, sn); err != nil {
			t.Fatalf("seed %d op %d %s: %v", seed, i, desc, err)
		}
		counts["occupied berth-legs"] += bitsSet(sn.Occupancy)
	}
	t.Logf("seed %d: %v, outcomes %v, mean occupancy %.0f%%", seed, counts, m.outcomes, 100*float64(counts["occupied berth-legs"])/float64(ops*m.nberths*m.legs))
	if ops >= 1000 {
		// The run must have visited every branch it claims to check.
		if counts["reload"] == 0 {
			t.Errorf("seed %d: no reload in %d operations", seed, ops)
		}
		for _, o := range []string{"HELD", "WAITLIST_OFFERED", "SOLD_OUT", "LIVE_HOLD", "DAILY_CAP", "BAD_PASSENGERS", "NO_ID", "BAD_JOURNEY", "replayed HELD"} {
			if m.outcomes[o] == 0 {
				t.Errorf("seed %d: no %s in %d operations", seed, o, ops)
			}
		}
	}
}

func bitsSet(occ []uint16) int {
	n := 0
	for _, m := range occ {
		for ; m != 0; m &= m - 1 {
			n++
		}
	}
	return n
}
