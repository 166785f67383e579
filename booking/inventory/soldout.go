package inventory

import (
	"context"
	"fmt"
	"math/bits"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultSoldOutRecheck is how long a sold-out answer from process memory
// may stand without Redis vouching for it again: a seat that comes back is
// offered again by every process within it.
const DefaultSoldOutRecheck = 50 * time.Millisecond

// SoldOutCache answers from process memory the hold attempts the HOLD
// script would answer SOLD_OUT, so a sold-out shard's rush costs no Redis
// call per attempt.
//
// It keeps, per shard, what SOLDOUT read in one atomic step: each journey's
// free berths, the waitlist places left, and every user with state on the
// shard (a live hold, the day's count, an answered hold or offer), under a
// stamp that HOLD moves on each hold or offer, RELEASE on each release,
// and LOAD and PROMOTE by their new epoch. While the stamp stands still the
// counts can only have fallen and no user gained state, so an attempt the
// view finds short of berths and waitlist is SOLD_OUT in Redis too. The
// view answers for at most recheck after the SOLDOUT call that vouched for
// it was sent; then one caller asks Redis again (SAME costs one small
// script) while the others wait for it.
//
// It answers only attempts HOLD would decide on seats alone: no admission
// token (the script marks it used), not a retake, a user with no state on
// the shard, passengers and journey within the shard's rules. What it does
// not do is remember its answer under the idempotency key, as HOLD does
// with SOLD_OUT: a retry is answered SOLD_OUT again while the shard stays
// sold out (without Idempotent-Replayed), and decided afresh once seats
// come back. A SOLD_OUT holds nothing, so no retry can hold twice.
type SoldOutCache struct {
	store   *Store
	recheck time.Duration
	now     func() time.Time
	pause   func(ctx context.Context, point string)

	mu     sync.Mutex
	shards map[int64]*soldShard
}

type soldShard struct {
	id   int64
	view atomic.Pointer[soldView]
	// check is held by the one caller asking Redis; the others wait on it.
	check sync.Mutex
	// primed is when a caller last read the whole state (unix ns), so a
	// shard whose journeys sell out one by one is read at most once per
	// recheck, however many SOLD_OUTs the script gives.
	primed atomic.Int64
	// gen moves with each Drop: a reading sent before it is not published.
	gen atomic.Int64
}

// soldView is one SOLDOUT reading; never changed once published.
type soldView struct {
	gen     int64 // the shard's gen when the reading was sent
	stamp   string
	checked time.Time // when the SOLDOUT call vouching for it was sent
	legs    int
	wlLeft  int
	// free[from][to]: berths free for the whole journey from..to at the
	// reading, an upper bound on them while the stamp stands.
	free  [MaxLegs][MaxLegs + 1]int32
	users map[int64]struct{}
}

// SoldOutConfig wires a SoldOutCache.
type SoldOutConfig struct {
	Recheck time.Duration    // zero means DefaultSoldOutRecheck
	Now     func() time.Time // nil means time.Now
	// Pause is a test hook at "soldout.checked" (a SOLDOUT answer read, not
	// yet published) and "soldout.answer" (about to answer SOLD_OUT); nil
	// in production.
	Pause func(ctx context.Context, point string)
}

// NewSoldOutCache returns an empty cache over s.
func NewSoldOutCache(s *Store, cfg SoldOutConfig) *SoldOutCache {
	if cfg.Recheck <= 0 {
		cfg.Recheck = DefaultSoldOutRecheck
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Pause == nil {
		cfg.Pause = func(context.Context, string) {}
	}
	return &SoldOutCache{store: s, recheck: cfg.Recheck, now: cfg.Now, pause: cfg.Pause, shards: map[int64]*soldShard{}}
}

// Recheck is the bound on how stale a sold-out answer may be.
func (c *SoldOutCache) Recheck() time.Duration { return c.recheck }

func (c *SoldOutCache) shard(id int64, create bool) *soldShard {
	c.mu.Lock()
	defer c.mu.Unlock()
	sh := c.shards[id]
	if sh == nil && create {
		sh = &soldShard{id: id}
		c.shards[id] = sh
	}
	return sh
}

// SoldOut reports whether HOLD would answer r SOLD_OUT, from memory no
// older than the recheck bound. False means "ask the script", never "not
// sold out". A failed Redis check drops the shard's view (the script then
// answers, or fails, as it would without the cache).
func (c *SoldOutCache) SoldOut(ctx context.Context, r HoldRequest) bool {
	if c == nil || !c.eligible(r) {
		return false
	}
	sh := c.shard(r.ShardID, false)
	if sh == nil {
		return false
	}
	v := sh.view.Load()
	if v == nil || v.gen != sh.gen.Load() {
		return false // none, or this process released seats since
	}
	if c.now().Sub(v.checked) >= c.recheck {
		// The view published may predate a Drop that raced its Store.
		if v = c.refresh(ctx, sh, v); v == nil || v.gen != sh.gen.Load() {
			return false
		}
	}
	if !v.soldOut(r) {
		return false
	}
	c.pause(ctx, "soldout.answer")
	return true
}

// Prime reads the shard's state after the script answered SOLD_OUT, unless
// another caller is reading it or did within the recheck bound.
func (c *SoldOutCache) Prime(ctx context.Context, shardID int64) {
	if c == nil {
		return
	}
	sh := c.shard(shardID, true)
	if last := sh.primed.Load(); last != 0 && c.now().Sub(time.Unix(0, last)) < c.recheck {
		return
	}
	if !sh.check.TryLock() {
		return
	}
	defer sh.check.Unlock()
	sh.primed.Store(c.now().UnixNano())
	c.read(ctx, sh, nil)
}

// eligible: an attempt HOLD decides on seats alone, given a user with no
// state on the shard (checked against the view).
func (c *SoldOutCache) eligible(r HoldRequest) bool {
	n := len(r.Prefs)
	return r.TokenKey == "" && !r.Retake && r.IDOK && n >= 1 && n <= r.MaxPassengers && r.DailyCap >= 1 &&
		r.From >= 0 && r.From < r.To
}

func (v *soldView) soldOut(r HoldRequest) bool {
	if r.To > v.legs {
		return false
	}
	if _, ok := v.users[r.UserID]; ok {
		return false
	}
	n := len(r.Prefs)
	return int(v.free[r.From][r.To]) < n && (!r.AllowWaitlist || n > v.wlLeft)
}

// refresh has Redis vouch for v again, or replace it; one caller asks while
// the others wait for its answer.
func (c *SoldOutCache) refresh(ctx context.Context, sh *soldShard, v *soldView) *soldView {
	sh.check.Lock()
	defer sh.check.Unlock()
	cur := sh.view.Load()
	if cur != v && (cur == nil || c.now().Sub(cur.checked) < c.recheck) {
		return cur // another caller asked meanwhile (or dropped it)
	}
	// Ours, or one vouched for by a check sent longer ago than the bound
	// (a slow Redis): ask again rather than answer from it.
	return c.read(ctx, sh, cur)
}

// read runs SOLDOUT and publishes what it says (cur, when it still holds,
// re-vouched); the caller holds sh.check.
func (c *SoldOutCache) read(ctx context.Context, sh *soldShard, cur *soldView) *soldView {
	gen, sent := sh.gen.Load(), c.now()
	v, err := c.store.soldOutState(ctx, sh.id, cur, sent)
	c.pause(ctx, "soldout.checked")
	if err != nil || v == nil || gen != sh.gen.Load() {
		// Failed, not ready, or this process released seats meanwhile (a
		// Drop racing the Store below leaves a view SoldOut ignores).
		sh.view.Store(nil)
		return nil
	}
	v.gen = gen
	sh.view.Store(v)
	return v
}

// Drop forgets a shard's view: the Store calls it after each script that
// gives seats back (RELEASE, PROMOTE, LOAD, Wipe), so this process offers
// them at once; other processes within the recheck bound.
func (c *SoldOutCache) Drop(shardID int64) {
	if c == nil {
		return
	}
	if sh := c.shard(shardID, false); sh != nil {
		sh.gen.Add(1)
		sh.view.Store(nil)
	}
}

// soldOutState runs SOLDOUT for the shard. With SAME it returns cur
// vouched for at sent; nil (no error) for a shard not ready.
func (s *Store) soldOutState(ctx context.Context, shardID int64, cur *soldView, sent time.Time) (*soldView, error) {
	stamp := ""
	if cur != nil {
		stamp = cur.stamp
	}
	keys := []string{s.key(shardID, "meta"), s.key(shardID, "cnt"), s.key(shardID, "holds"),
		s.key(shardID, "live"), s.key(shardID, "daily"), s.key(shardID, "seen")}
	keys = append(keys, s.legKeys(shardID, 0, MaxLegs)...)
	keys = append(keys, s.typeKeys(shardID)...)
	res, err := s.soldout.Run(ctx, s.rdb, keys, stamp, MaxLegs).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("sold-out state shard %d: %w", shardID, err)
	}
	switch {
	case len(res) == 2 && res[0] == "SAME" && cur != nil:
		v := *cur
		v.checked = sent
		return &v, nil
	case res[0] == string(NotReady):
		return nil, nil
	case res[0] != "STATE" || len(res) < 4:
		return nil, fmt.Errorf("sold-out state shard %d: unexpected answer %.40q", shardID, res)
	}
	v := &soldView{stamp: res[1], checked: sent, users: map[int64]struct{}{}}
	if v.legs, err = strconv.Atoi(res[2]); err != nil || v.legs < 1 || v.legs > MaxLegs || len(res) < 4+v.legs {
		return nil, fmt.Errorf("sold-out state shard %d: bad legs %q", shardID, res[2])
	}
	if v.wlLeft, err = strconv.Atoi(res[3]); err != nil {
		return nil, fmt.Errorf("sold-out state shard %d: bad waitlist %q", shardID, res[3])
	}
	maps := res[4 : 4+v.legs]
	for from := range v.legs {
		acc := []byte(maps[from])
		for to := from + 1; to <= v.legs; to++ {
			if to > from+1 {
				next := maps[to-1]
				acc = acc[:min(len(acc), len(next))]
				for i := range acc {
					acc[i] &= next[i]
				}
			}
			n := 0
			for _, b := range acc {
				n += bits.OnesCount8(b)
			}
			v.free[from][to] = int32(n)
		}
	}
	for _, u := range res[4+v.legs:] {
		// A user that is no number matches no caller: skipping it is safe.
		if id, err := strconv.ParseInt(u, 10, 64); err == nil {
			v.users[id] = struct{}{}
		}
	}
	return v, nil
}
