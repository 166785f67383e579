package admission

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/riverqueue/river"

	"tatkal/booking"
	"tatkal/booking/admission/token"
	"tatkal/booking/db"
	"tatkal/booking/funnel"
)

// ControllerConfig tunes the admission controller; zero values are defaults.
type ControllerConfig struct {
	ID            string        // instance id (default random)
	Tick          time.Duration // how often it admits (200ms)
	LeaseTTL      time.Duration // leader lease (2s); a dead leader is replaced after this
	BaseRate      float64       // admissions per second per shard to start from (50)
	MinRate       float64       // the adaptive rate never drops below this (1)
	MaxRate       float64       // nor rises above this (5000)
	HoldP95Target time.Duration // hold p95 above this halves the rate (800ms)
	MaxErrorRate  float64       // hold refusals above this share halve the rate (0.3)
	MinPaySuccess float64       // payment success below this slows admission (0.5)
	Grace         time.Duration // wait this long after the randomisation window before sealing (500ms)
	// SoldOutEvidence: the last this many admitted holds answered
	// SOLD_OUT (within EvidenceSpan), at least nine in ten of the holds
	// that found an answer since the first of them, end the queue with a
	// sold-out answer although berths are left on some legs (10): parties
	// cannot fit the fragments.
	SoldOutEvidence int64
	// EvidenceSpan is how far back sold-out evidence is looked for (60s):
	// near the end admissions are few, and so are holds.
	EvidenceSpan time.Duration
}

func (c *ControllerConfig) defaults() {
	if c.ID == "" {
		b := make([]byte, 6)
		rand.Read(b) //nolint:errcheck
		c.ID = "ctl-" + hex.EncodeToString(b)
	}
	if c.Tick <= 0 {
		c.Tick = 200 * time.Millisecond
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = 2 * time.Second
	}
	if c.BaseRate <= 0 {
		c.BaseRate = 50
	}
	if c.MinRate <= 0 {
		c.MinRate = 1
	}
	if c.MaxRate <= 0 {
		c.MaxRate = 5000
	}
	if c.HoldP95Target <= 0 {
		c.HoldP95Target = 800 * time.Millisecond
	}
	if c.MaxErrorRate <= 0 {
		c.MaxErrorRate = 0.3
	}
	if c.MinPaySuccess <= 0 {
		c.MinPaySuccess = 0.5
	}
	if c.Grace <= 0 {
		c.Grace = 500 * time.Millisecond
	}
	if c.SoldOutEvidence <= 0 {
		c.SoldOutEvidence = 10
	}
	if c.EvidenceSpan <= 0 {
		c.EvidenceSpan = time.Minute
	}
}

// Controller admits waiting entrants. Any number run (one per worker
// process); one leads at a time, by a lease in Redis whose every holder
// gets a larger fence, and the queue scripts refuse a leader whose fence
// is older than one they have seen.
type Controller struct {
	s   *Service
	cfg ControllerConfig

	mu    sync.Mutex
	fence int64
	// fenceFloor is the largest fence a queue showed us that our lease's
	// was below: the fence counter went back (lost with Redis), and the
	// next lease is taken above it.
	fenceFloor int64
	shards     map[int64]*shardState
	active     []int64
	activeAt   time.Time

	abandon atomic.Bool // tests: stop as if crashed, keeping the lease
	// afterWitness, in tests, runs between a tick's witness and its ADMIT.
	afterWitness func()
}

type shardState struct {
	rate, carry float64
	// good is the rate that last ran without distress, which the rate
	// climbs back to quickly once the distress is over; cutAt is when the
	// rate was last cut.
	good     float64
	cutAt    time.Time
	pace     float64 // admissions a second, measured (moving average over ~5 s)
	last     time.Time
	sigAt    time.Time
	released int // what the queue was last told: 0 not yet, 1 open, 2 sold out, 3 every place held
	// exhausted: admitted travellers' holds keep finding no seats, though
	// berths are free on some legs (fragments no party fits). The queue is
	// told sold out and nobody more is admitted until berth-legs come back
	// (a hold lapsed, was declined or cancelled): then it reopens and needs
	// fresh evidence (seconds from evidenceFrom on) to end again.
	exhausted     bool
	exhaustedFree int // berth-legs free when it was declared (or the lowest since); -1 not yet read
	evidenceFrom  time.Time
	// logged is how many of the shard's admissions PostgreSQL is known to
	// hold (-1: not read yet): a queue with fewer admitted lost writes.
	logged int64
	// witnessAt is when the cohort was last witnessed (witness).
	witnessAt time.Time
}

// NewController returns a controller over s.
func (s *Service) NewController(cfg ControllerConfig) *Controller {
	cfg.defaults()
	return &Controller{s: s, cfg: cfg, shards: map[int64]*shardState{}}
}

// Fence is the lease fence this instance holds (0: not leading).
func (c *Controller) Fence() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fence
}

// Run admits every tick until ctx ends, then gives the lease up.
func (c *Controller) Run(ctx context.Context) {
	t := time.NewTicker(c.cfg.Tick)
	defer t.Stop()
	for {
		if err := c.Step(ctx); err != nil && ctx.Err() == nil {
			c.s.log.Warn("admission controller step", "id", c.cfg.ID, "err", err)
		}
		select {
		case <-ctx.Done():
			if !c.abandon.Load() {
				c.release()
			}
			return
		case <-t.C:
		}
	}
}

// leaseKeys share the hash tag {admission}: the lease script reads and
// writes both, which a Redis Cluster allows only within one slot.
func (c *Controller) leaseKeys() []string {
	return []string{c.s.cfg.Prefix + ":{admission}:leader", c.s.cfg.Prefix + ":{admission}:fence"}
}

func (c *Controller) release() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c.mu.Lock()
	f := c.fence
	c.fence = 0
	c.mu.Unlock()
	if f > 0 {
		c.s.unlease.Run(ctx, c.s.rdb, c.leaseKeys()[:1], c.cfg.ID, f) //nolint:errcheck
	}
}

// Step takes or renews the lease and, when leading, admits on every
// active queue-mode shard once.
func (c *Controller) Step(ctx context.Context) error {
	c.mu.Lock()
	floor := c.fenceFloor
	c.mu.Unlock()
	f, err := c.s.lease.Run(ctx, c.s.rdb, c.leaseKeys(), c.cfg.ID, c.cfg.LeaseTTL.Milliseconds(), floor).Int64()
	c.mu.Lock()
	if err != nil {
		c.fence = 0
	} else {
		c.fence = f
	}
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("lease: %w", err)
	}
	if f == 0 {
		return nil
	}
	now := c.s.now()
	ids, err := c.activeShards(ctx, now)
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		if err := c.stepShard(ctx, f, id, now); err != nil {
			errs = append(errs, fmt.Errorf("shard %d: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

func (c *Controller) activeShards(ctx context.Context, now time.Time) ([]int64, error) {
	if time.Since(c.activeAt) < 2*time.Second && c.active != nil {
		return c.active, nil
	}
	// From the pre-queue on, so every window's seed is committed (and its
	// SHA-256 published) before the window opens.
	rows, err := c.s.pool.Query(ctx, `SELECT id FROM inventory_shards
		WHERE mode = 'queue' AND window_opens_at <= $2 AND window_closes_at > $1 ORDER BY id`, now, now.Add(c.s.cfg.Prequeue))
	if err != nil {
		return nil, fmt.Errorf("active shards: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("active shards: %w", err)
	}
	c.active, c.activeAt = ids, time.Now()
	if c.active == nil {
		c.active = []int64{}
	}
	return c.active, nil
}

func (c *Controller) stepShard(ctx context.Context, fence, id int64, now time.Time) error {
	s := c.s
	shard, err := s.cfg.Catalog.ByID(ctx, id)
	if err != nil {
		return err
	}
	w, err := s.WindowFor(ctx, shard)
	if err != nil {
		return err
	}
	st := c.shards[id]
	if st == nil {
		st = &shardState{rate: c.cfg.BaseRate, pace: c.cfg.BaseRate, last: now.Add(-c.cfg.Tick), logged: -1}
		c.shards[id] = st
	}
	drawing := now.Before(w.RandomiseUntil.Add(c.cfg.Grace))
	// Until the seal the cohort lives in Redis alone: witnessed once a
	// second while the draw is open, and on every tick from its close to
	// the seal, so the first admission is never from a lost queue.
	seen := cohort{count: -1} // what ADMIT must still find, or refuse to seal (-1: not witnessed)
	if w.SealedAt == nil && (!drawing || now.Sub(st.witnessAt) >= time.Second) {
		st.witnessAt = now
		var stop bool
		if seen, stop, err = c.witness(ctx, shard, now); err != nil || stop {
			return err
		}
	}
	if drawing {
		return nil // nobody from the cohort goes before the draw is closed
	}
	if c.afterWitness != nil {
		c.afterWitness()
	}
	if now.Sub(st.sigAt) >= time.Second {
		c.signals(ctx, shard, st, now)
	}
	rate := st.rate
	if s.cfg.Levers != nil {
		if s.cfg.Levers.AdmissionPaused(id) {
			rate = 0
		} else if r, ok := s.cfg.Levers.AdmissionRate(id); ok {
			rate = float64(r)
		}
	}
	dt := min(now.Sub(st.last), 2*c.cfg.Tick).Seconds()
	st.last = now
	want := rate*max(dt, 0) + st.carry
	n := math.Floor(want)
	st.carry = min(want-n, 1)
	// Offers first, then places: a claim landing between the two reads is
	// counted in both (admits one fewer this tick), never in neither.
	room := int64(0) // places or offers unknown: admit nobody, fail closed
	off, err := c.offers(ctx, shard, now)
	if s.cfg.anyPlaces {
		room = -1
	} else if err != nil {
		s.log.Warn("admission: outstanding offers unknown", "shard", id, "err", err)
	} else if places, wl, free, ok := c.places(ctx, shard); ok {
		want := off.demand(places, wl, free)
		room = int64(max(want-off.outstanding+off.allowance(want, s.cfg.Allowance), 0))
		if st.exhausted {
			switch {
			case st.exhaustedFree < 0 || free < st.exhaustedFree:
				st.exhaustedFree = free
			case free >= st.exhaustedFree+off.partyLegs():
				// A party's worth of berth-legs came back (a hold lapsed,
				// was declined or cancelled): worth offering again.
				st.exhausted, st.evidenceFrom = false, time.Now()
			}
		}
		if st.exhausted {
			room, places = 0, 0
		}
		held, known := 0, true
		if places == 0 {
			held, known = c.heldReach(ctx, shard.ID)
		}
		// Held berth-legs unknown: the queue is told nothing new this tick
		// (a guess would release waiters for good).
		if known {
			c.releaseQueue(ctx, shard, st, places, held, off, now)
		}
	}
	if w.SealedAt != nil && st.logged < 0 {
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM admission_log WHERE shard_id = $1`, id).Scan(&st.logged); err != nil {
			return fmt.Errorf("admissions logged: %w", err)
		}
	}
	res, err := s.admit.Run(ctx, s.rdb, s.queueKeys(id), fence, int64(n), now.UnixMilli(), room, w.keysExpireAt(),
		w.sealedFlag(), max(st.logged, 0), seen.mark, seen.count).Slice()
	if err != nil {
		return fmt.Errorf("admit: %w", err)
	}
	switch res[0] {
	case "LOST":
		return c.rebuild(ctx, fence, shard, w, st)
	case "REOPEN": // lost between the witness and this call
		left, _ := res[1].(int64)
		return c.reopen(ctx, shard, seen.count, left, now)
	case "STALE":
		return c.stale(fence, res[1])
	}
	from, upto := res[1].(int64), res[2].(int64)
	if upto > from {
		s.cfg.Funnel.Add(id, funnel.Admitted, upto-from)
	}
	// The cursor's real speed, which waiters are paced by: below the
	// target rate whenever places, not the rate, bound admission.
	if dt > 0 {
		st.pace += (float64(upto-from)/dt - st.pace) * min(dt/5, 1)
	}
	if w.SealedAt == nil {
		if err := c.seal(ctx, shard); err != nil {
			return err
		}
	}
	logged, err := c.logAdmissions(ctx, shard)
	st.logged = max(st.logged, logged)
	return err
}

// stale gives up leading after a queue refused fence for an older one
// than it has seen. The lease may still be ours (the fence counter was
// lost with Redis while the queues' fences survived in PostgreSQL's log):
// it is given back, and the next one is taken above what was seen.
func (c *Controller) stale(fence int64, seen any) error {
	n, _ := strconv.ParseInt(fmt.Sprint(seen), 10, 64)
	c.mu.Lock()
	c.fenceFloor = max(c.fenceFloor, n)
	c.mu.Unlock()
	c.release()
	return fmt.Errorf("fence %d is stale (seen %v): no longer leading", fence, seen)
}

// places reads the places left now: the most berths free on any leg plus
// the Tatkal waitlist places (wl); and the berth-legs free in all.
func (c *Controller) places(ctx context.Context, shard *booking.Shard) (places, wl, free int, ok bool) {
	s := c.s
	best := 0
	for l := 0; l < shard.Legs; l++ {
		a, err := s.cfg.Store.Available(ctx, shard.ID, l, l+1)
		if err != nil {
			return 0, 0, 0, false
		}
		best, wl = max(best, a.Free), a.WaitlistLeft
		free += a.Free
	}
	if !s.cfg.Rules.Waitlist {
		wl = 0
	}
	return best + wl, wl, free, true
}

// offerCount sums up the offers made in the last OfferTTL + TokenTTL.
type offerCount struct {
	outstanding int // not used, not lapsed: each keeps a place for its holder
	shown       int // used for a hold
	lapsed      int // never used: unclaimed in OfferTTL, or claimed and not used in TokenTTL
	held        int // used for a hold that took berths
	heldLegs    int // the berth-legs those holds took
}

// partiesKnown is how many admitted parties must have held before their
// size sizes admission: fewer say little about the rest.
const partiesKnown = 10

// demand is how many parties the places left can serve. A party takes
// several berths over several legs, so one offer per berth free on the
// freest leg over-admits (about twice, with parties of 1-4 on mixed
// segments) and the admitted race each other for the seats: the faster
// poller wins. Until partiesKnown admitted parties have held, at most
// that many offers are out at once (a probe, a second or two); then the
// berths are offered at the berth-legs the parties took on average. The
// waitlist places are offered one each.
func (o offerCount) demand(places, wl, free int) int {
	per, ok := o.perParty()
	if !ok {
		return min(places, partiesKnown)
	}
	return min(places-wl, int(math.Ceil(float64(free)/per))) + wl
}

// perParty is the berth-legs an admitted party took on average, known once
// partiesKnown parties have held.
func (o offerCount) perParty() (float64, bool) {
	if o.held < partiesKnown || o.heldLegs <= 0 {
		return 0, false
	}
	return float64(o.heldLegs) / float64(o.held), true
}

// partyLegs is perParty rounded up: 1 while it is not known.
func (o offerCount) partyLegs() int {
	per, ok := o.perParty()
	if !ok {
		return 1
	}
	return int(math.Ceil(per))
}

// allowance is how many more than the places left may be offered: the
// no-show rate measured so far times the places, starting from nothing
// (as if 10 offers had been used before any lapsed), at most most.
func (o offerCount) allowance(places, most int) int {
	rate := float64(o.lapsed) / float64(o.shown+o.lapsed+10)
	return min(int(rate*float64(places)), most)
}

// offers counts the shard's offers still able to claim a place. An offer
// is used once its token's used-mark exists (set by the HOLD script in the
// same step that takes the seat, with the berth-legs taken); that mark
// outlives the permit by a minute, so every offer in the scanned span is
// classified right.
func (c *Controller) offers(ctx context.Context, shard *booking.Shard, now time.Time) (offerCount, error) {
	s := c.s
	keys := s.queueKeys(shard.ID)
	horizon := now.Add(-s.cfg.OfferTTL - s.cfg.TokenTTL).UnixMilli()
	var out offerCount
	p := s.rdb.Pipeline()
	before := p.ZRevRangeByScore(ctx, keys[3], &redis.ZRangeBy{Max: strconv.FormatInt(horizon, 10), Min: "-inf", Count: 1})
	adm := p.HGet(ctx, keys[1], "admitted")
	if _, err := p.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return out, fmt.Errorf("offers: %w", err)
	}
	lo, hi := int64(0), atoi64(adm.Val())
	if b := before.Val(); len(b) > 0 {
		lo = atoi64(b[0])
	}
	if hi <= lo {
		return out, nil
	}
	p = s.rdb.Pipeline()
	mem := p.ZRange(ctx, keys[0], lo, hi-1)
	bat := p.ZRangeByScoreWithScores(ctx, keys[2], &redis.ZRangeBy{Min: "(" + strconv.FormatInt(lo, 10), Max: "+inf"})
	if _, err := p.Exec(ctx); err != nil {
		return out, fmt.Errorf("offers: %w", err)
	}
	members, batches := mem.Val(), bat.Val()
	p = s.rdb.Pipeline()
	claims := p.HMGet(ctx, keys[4], members...)
	used := make([]*redis.StringCmd, len(members))
	for i, m := range members {
		uid, _ := strconv.ParseInt(m, 10, 64)
		used[i] = p.Get(ctx, token.UsedKey(s.cfg.Prefix, token.Claims{ShardID: shard.ID, TokenID: token.TokenID(shard.ID, uid, 0)}))
	}
	if _, err := p.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return out, fmt.Errorf("offers: %w", err)
	}
	cl := claims.Val()
	b := 0
	for i := range members {
		rank := lo + int64(i)
		for b < len(batches) && int64(batches[b].Score) <= rank {
			b++
		}
		if b == len(batches) {
			return out, fmt.Errorf("offers: no batch for place %d", rank)
		}
		offered := atoi64(strings.Split(batches[b].Member.(string), ":")[1])
		claimed := atoi64(cl[i])
		// A claim of -1 (the waiter was told sold out and left) falls to
		// lapsed: its offer keeps no place.
		switch mark := used[i].Val(); {
		case mark != "":
			out.shown++
			// hold_id|berth-legs (a mark without them took nothing we know of)
			if _, legs, ok := strings.Cut(mark, "|"); ok {
				if n := atoi64(legs); n > 0 {
					out.held++
					out.heldLegs += int(n)
				}
			}
		case claimed == 0 && now.UnixMilli() < offered+s.cfg.OfferTTL.Milliseconds(),
			claimed > 0 && now.UnixMilli() < claimed+s.cfg.TokenTTL.Milliseconds():
			out.outstanding++
		default:
			out.lapsed++
		}
	}
	return out, nil
}

// releaseQueue tells the queue what is left: the places not promised to an
// outstanding offer (its odds), and sold out with alternatives once no
// place is left at all. While places are left but all promised, the queue
// waits: offers that lapse give their places back to it. While no place
// is free but held parties are still paying, the queue waits too: a
// payment that fails gives its berths back, and they go to the next in the
// queue, not to nobody. Only so many waiters can be reached (held: the
// held berth-legs); the ones behind them are told sold out now rather than
// kept for nothing.
func (c *Controller) releaseQueue(ctx context.Context, shard *booking.Shard, st *shardState, places, held int, off offerCount, now time.Time) {
	s := c.s
	m := s.qkey(shard.ID, "m")
	s.rdb.HSet(ctx, m, "cap", strconv.Itoa(max(places-off.outstanding, 0))) //nolint:errcheck
	switch {
	case places == 0 && held > 0:
		fields := []any{"reach", strconv.Itoa(held)}
		if st.released != 3 { // those released for good are shown the other trains
			alts, _ := json.Marshal(c.alternatives(ctx, shard, now))
			fields = append(fields, "alts", string(alts))
		}
		if s.rdb.HSet(ctx, m, fields...).Err() == nil {
			if st.released == 2 {
				s.rdb.HDel(ctx, m, "soldout") //nolint:errcheck
			}
			st.released = 3
		}
	case places == 0 && st.released != 2:
		alts, _ := json.Marshal(c.alternatives(ctx, shard, now))
		why := "1" // every place taken
		if st.exhausted {
			why = "2" // fragments left that the admitted parties could not use
		}
		if s.rdb.HSet(ctx, m, "soldout", why, "alts", string(alts)).Err() == nil {
			s.rdb.HDel(ctx, m, "reach") //nolint:errcheck
			st.released = 2
		}
	case places > 0 && st.released != 1:
		if s.rdb.HDel(ctx, m, "soldout", "alts", "reach").Err() == nil {
			st.released = 1
		}
	}
}

// heldReach bounds how many waiters the shard's holds still waiting for
// their payment could serve if every one failed: the berth-legs they hold
// (a party takes at least one; a failed end-to-end party of four gives back
// enough for many short journeys). ok is false when the read failed: the
// caller then leaves the queue as it was rather than guess a reach, which
// would release every waiter past it for good.
func (c *Controller) heldReach(ctx context.Context, shardID int64) (int, bool) {
	var n int
	if err := c.s.pool.QueryRow(ctx, `SELECT coalesce(sum(seat_count * (to_seq - from_seq)), 0) FROM holds
		WHERE shard_id = $1 AND state = 'HELD'`, shardID).Scan(&n); err != nil {
		c.s.log.Warn("admission: held berth-legs unknown", "shard", shardID, "err", err)
		return 0, false
	}
	return n, true
}

// signalSpan is how far back the rate's signals look: the holds and
// payments of the last five seconds (up to a second ago).
const signalSpan = 5 * time.Second

// signals reads the live state the rate follows: hold latency and
// refusals, payment success.
func (c *Controller) signals(ctx context.Context, shard *booking.Shard, st *shardState, now time.Time) {
	s := c.s
	st.sigAt = now
	m := s.qkey(shard.ID, "m")
	// Adaptive rate: multiplicative decrease on distress, gentle increase otherwise.
	from, to := time.Now().Add(-signalSpan), time.Now().Add(-time.Second)
	var attempts, refused, paid, failed, found, soldOut int64
	var p95 time.Duration
	var n int64
	if s.cfg.Funnel == nil {
		// no signals: keep growing towards the ceiling
	} else if secs, err := s.cfg.Funnel.Read(ctx, shard.ID, to.Add(-c.cfg.EvidenceSpan), to); err == nil {
		for _, sec := range secs {
			if sec.At.Before(from.Truncate(time.Second)) {
				continue
			}
			attempts += sec.Counts[funnel.HoldAttempt]
			refused += sec.Counts[funnel.HoldRefused]
			paid += sec.Counts[funnel.PaySucceeded]
			failed += sec.Counts[funnel.PayFailed]
		}
		// The latest holds first, back until enough evidence is in.
		for i := len(secs) - 1; i >= 0 && soldOut < c.cfg.SoldOutEvidence; i-- {
			if secs[i].At.Before(st.evidenceFrom.Truncate(time.Second)) {
				break
			}
			found += secs[i].Counts[funnel.Held] + secs[i].Counts[funnel.Waitlisted]
			soldOut += secs[i].Counts[funnel.SoldOut]
		}
	}
	// Holds of admitted travellers that keep finding no seats: what is
	// left are fragments the parties in the queue cannot use. Admitting
	// more would only cost each of them a hold call and a refusal.
	if !st.exhausted && soldOut >= c.cfg.SoldOutEvidence && 10*soldOut >= 9*(soldOut+found) {
		st.exhausted, st.exhaustedFree = true, -1
		s.log.Info("admission: holds of admitted travellers find no seats; the queue ends sold out", "shard", shard.ID, "sold_out", soldOut, "held", found)
	}
	if s.cfg.Funnel != nil {
		p95, n, _ = s.cfg.Funnel.Quantile(ctx, funnel.HoldAttempt, from, to, 0.95)
		// Holds the API turned away at the door (its in-flight bound) are
		// counted on no shard; they are refusals an admitted traveller pays
		// for with a retry, so they count against every queue's rate.
		if secs, err := s.cfg.Funnel.Read(ctx, 0, from, to); err == nil {
			for _, sec := range secs {
				attempts += sec.Counts[funnel.Shed]
				refused += sec.Counts[funnel.Shed]
			}
		}
	}
	cut := 1.0 // no distress
	switch {
	case n >= 20 && p95 > c.cfg.HoldP95Target:
		cut = 0.5
	case attempts >= 20 && float64(refused)/float64(attempts) > c.cfg.MaxErrorRate:
		cut = 0.5
	case paid+failed >= 10 && float64(paid)/float64(paid+failed) < c.cfg.MinPaySuccess:
		cut = 0.7
	}
	st.adapt(now, cut, signalSpan, c.cfg)
	// Waiters are told the cursor's measured speed, not the target.
	s.rdb.HSet(ctx, m, "rate", strconv.FormatFloat(st.pace, 'f', 2, 64)) //nolint:errcheck
}

// adapt moves the adaptive rate one step: cut by the factor on distress
// (cut < 1), otherwise grow. A spell of distress cuts once per span, the
// time the signals look back: a cut's effect shows only in holds made
// after it, and cutting every second on the same old evidence drove the
// rate from 50 to its floor of 1 in one 8 s fault and kept it there long
// after (issue 15: the queue then sold next to nothing). Once the distress
// is over the rate doubles back to the last rate that ran without it, then
// grows gently, probing for more.
func (st *shardState) adapt(now time.Time, cut float64, span time.Duration, cfg ControllerConfig) {
	switch {
	case cut < 1 && now.Sub(st.cutAt) < span:
		// the signals still describe holds made before the last cut
	case cut < 1:
		if st.cutAt.IsZero() || now.Sub(st.cutAt) >= 2*span {
			st.good = st.rate // a new spell: remember what ran well
		}
		st.rate *= cut
		st.cutAt = now
	case st.rate < st.good:
		st.rate = min(st.rate*2, st.good)
	default:
		st.rate = st.rate*1.1 + 1
	}
	st.rate = min(max(st.rate, cfg.MinRate), cfg.MaxRate)
}

// alternatives lists other trains and classes on the same date whose
// window is open and that still have seats for their whole route.
func (c *Controller) alternatives(ctx context.Context, shard *booking.Shard, now time.Time) []Alternative {
	s := c.s
	rows, err := s.pool.Query(ctx, `SELECT id FROM inventory_shards WHERE journey_date = $1 AND id <> $2
		AND window_opens_at <= $3 AND window_closes_at > $3 ORDER BY train_number, class LIMIT 20`, shard.Date, shard.ID, now)
	if err != nil {
		return nil
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil
	}
	var out []Alternative
	for _, id := range ids {
		o, err := s.cfg.Catalog.ByID(ctx, id)
		if err != nil {
			continue
		}
		a, err := s.cfg.Store.Available(ctx, id, 0, o.Legs)
		if err != nil || a.Free == 0 {
			continue
		}
		out = append(out, Alternative{TrainNo: o.Train, TrainName: o.TrainName, JourneyDate: o.Date.Format(time.DateOnly),
			Class: o.Class, Quota: o.Quota, SeatsLeft: a.Free, Mode: o.Mode})
		if len(out) == 5 {
			break
		}
	}
	return out
}

// cohort is a queue's randomised cohort as the witness saw it: the queue's
// mark (its creation time, "" for no queue) and how many entrants it held.
type cohort struct {
	mark  string
	count int64
}

// witness keeps PostgreSQL's record of the cohort while it lives in Redis
// alone (admission_windows.cohort_seen and cohort_mark: the entrants last
// seen and the queue's mark) and says whether the tick must stop: the
// queue was lost since (another mark, or fewer entrants than were seen)
// and the draw reopens (reopen), a reopening's PostgreSQL step is still to
// be done, or the window was sealed meanwhile by another leader (the
// cached window is dropped: its next tick reads it sealed). Else it
// answers the cohort now on record, which ADMIT checks again as it seals.
func (c *Controller) witness(ctx context.Context, shard *booking.Shard, now time.Time) (cohort, bool, error) {
	s := c.s
	inRedis, reopenedUntil, err := c.cohortInRedis(ctx, shard.ID)
	if err != nil {
		return cohort{}, true, err
	}
	was, drawUntil, err := c.witnessed(ctx, shard.ID)
	if errors.Is(err, pgx.ErrNoRows) {
		s.windows.Delete(shard.ID)
		return cohort{}, true, nil
	}
	if err != nil {
		return cohort{}, true, err
	}
	if reopenedUntil > drawUntil.UnixMilli() {
		// The queue was cleared and flagged but PostgreSQL did not take the
		// reopening: take it now, and keep those who joined since.
		return cohort{}, true, c.recordReopen(ctx, shard, time.UnixMilli(reopenedUntil), now)
	}
	if lostSince(was, inRedis) {
		return cohort{}, true, c.reopen(ctx, shard, was.count, inRedis.count, now)
	}
	if inRedis.mark != was.mark || inRedis.count > was.count {
		if _, err := s.pool.Exec(ctx, `UPDATE admission_windows SET cohort_seen = $2, cohort_mark = $3 WHERE shard_id = $1 AND sealed_at IS NULL`,
			shard.ID, inRedis.count, inRedis.mark); err != nil {
			return cohort{}, true, fmt.Errorf("cohort witness: %w", err)
		}
	}
	return inRedis, false, nil
}

// witnessed is PostgreSQL's record of the cohort of an unsealed window and
// when its draw closes (pgx.ErrNoRows once sealed).
func (c *Controller) witnessed(ctx context.Context, shardID int64) (was cohort, drawUntil time.Time, err error) {
	err = c.s.pool.QueryRow(ctx, `SELECT cohort_seen, cohort_mark, randomise_until FROM admission_windows WHERE shard_id = $1 AND sealed_at IS NULL`,
		shardID).Scan(&was.count, &was.mark, &drawUntil)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		err = fmt.Errorf("cohort witness: %w", err)
	}
	return was, drawUntil, err
}

// lostSince says whether the queue in Redis (now) is not the one
// witnessed (was): another queue, or one missing entrants.
func lostSince(was, now cohort) bool {
	return was.mark != "" && (now.mark != was.mark || now.count < was.count)
}

// cohortInRedis is the queue's cohort, and until when (ms) its draw was
// last reopened (0: never).
func (c *Controller) cohortInRedis(ctx context.Context, shardID int64) (cohort, int64, error) {
	s := c.s
	pipe := s.rdb.Pipeline() // one hash tag: one slot, one node
	meta := pipe.HMGet(ctx, s.qkey(shardID, "m"), "created", "reopened")
	count := pipe.ZCount(ctx, s.qkey(shardID, "z"), "-inf", "("+strconv.FormatInt(LateBase, 10))
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return cohort{}, 0, fmt.Errorf("cohort in Redis: %w", err)
	}
	f := meta.Val()
	mark, _ := f[0].(string)
	reopened, _ := f[1].(string)
	until, _ := strconv.ParseInt(reopened, 10, 64)
	return cohort{mark: mark, count: count.Val()}, until, nil
}

// reopen: the queue was lost before its seal (a wipe, a failover to a
// replica that missed the entries), so the cohort PostgreSQL was to record
// is gone. Sealing what is left would put everyone who joined in time
// behind whoever joined again first, the fastest pollers; instead the
// queue's keys are cleared and the draw reopens for Config.Reopen, and
// everyone who joins again in it gets the place the seed gives them: the
// same as before for those who had one (their arrival is the new entry).
//
// Redis first, in one transaction: the keys cleared and the queue flagged
// reopened together, so nobody joins the cleared queue without the flag
// (a process whose window predates the reopening still gives the drawn
// place by it). Then PostgreSQL (recordReopen); if that fails, the next
// tick's witness finds the flag ahead of the window and finishes it.
func (c *Controller) reopen(ctx context.Context, shard *booking.Shard, seen, left int64, now time.Time) error {
	s := c.s
	until := now.Add(s.cfg.Reopen)
	m := s.qkey(shard.ID, "m")
	pipe := s.rdb.TxPipeline() // one hash tag: one slot
	pipe.Del(ctx, append(s.queueKeys(shard.ID), s.qkey(shard.ID, "at"))...)
	pipe.HSet(ctx, m, "reopened", until.UnixMilli())
	pipe.PExpireAt(ctx, m, until.Add(time.Hour))
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("reopen the draw of window %d: %w", shard.ID, err)
	}
	s.log.Error("admission: queue lost before its seal; the draw reopens for everyone to join again",
		"shard", shard.ID, "entrants_seen", seen, "entrants_left", left, "randomise_until", until)
	return c.recordReopen(ctx, shard, until, now)
}

// recordReopen is a reopening's PostgreSQL step: the draw runs until
// until, the witness starts afresh, and the reopening is counted.
func (c *Controller) recordReopen(ctx context.Context, shard *booking.Shard, until, now time.Time) error {
	s := c.s
	if _, err := s.pool.Exec(ctx, `UPDATE admission_windows SET randomise_until = greatest(randomise_until, $2), cohort_seen = 0, cohort_mark = '',
		draws_reopened = draws_reopened + 1, draw_reopened_at = $3
		WHERE shard_id = $1 AND sealed_at IS NULL`, shard.ID, until, now); err != nil {
		return fmt.Errorf("reopen the draw of window %d: %w", shard.ID, err)
	}
	s.windows.Delete(shard.ID)
	return nil
}

// seal records the randomised cohort in PostgreSQL and reveals the seed,
// once (the first leader to get here wins; the queue is already sealed in
// Redis, so the cohort cannot change any more).
func (c *Controller) seal(ctx context.Context, shard *booking.Shard) error {
	s := c.s
	z := s.qkey(shard.ID, "z")
	var entrants [][]any
	for off := int64(0); ; off += 50000 {
		zs, err := s.rdb.ZRangeByScoreWithScores(ctx, z, &redis.ZRangeBy{Min: "-inf", Max: "(" + strconv.FormatInt(LateBase, 10), Offset: off, Count: 50000}).Result()
		if err != nil {
			return fmt.Errorf("read cohort: %w", err)
		}
		for _, m := range zs {
			uid, err := strconv.ParseInt(m.Member.(string), 10, 64)
			if err != nil {
				return fmt.Errorf("read cohort: member %v: %w", m.Member, err)
			}
			entrants = append(entrants, []any{shard.ID, s.Ticket(shard.ID, uid), uid, int64(m.Score)})
		}
		if len(zs) < 50000 {
			break
		}
	}
	// Each entrant's arrival, as ENTER noted it (missing for places taken
	// before arrivals were noted: left null).
	at := s.qkey(shard.ID, "at")
	for i := 0; i < len(entrants); i += 5000 {
		batch := entrants[i:min(i+5000, len(entrants))]
		fields := make([]string, len(batch))
		for j, e := range batch {
			fields[j] = strconv.FormatInt(e[2].(int64), 10)
		}
		vs, err := s.rdb.HMGet(ctx, at, fields...).Result()
		if err != nil {
			return fmt.Errorf("read arrivals: %w", err)
		}
		for j, v := range vs {
			var enteredAt *time.Time
			if str, ok := v.(string); ok {
				if ms, err := strconv.ParseInt(str, 10, 64); err == nil {
					t := time.UnixMilli(ms)
					enteredAt = &t
				}
			}
			batch[j] = append(batch[j], enteredAt)
		}
	}
	// The cohort just read must be the one witnessed: lost between the
	// first admission and here, it is not sealed (the next tick reopens).
	inRedis, _, err := c.cohortInRedis(ctx, shard.ID)
	if err != nil {
		return err
	}
	was, _, err := c.witnessed(ctx, shard.ID)
	if errors.Is(err, pgx.ErrNoRows) {
		s.windows.Delete(shard.ID) // sealed by another leader meanwhile
		return nil
	}
	if err != nil {
		return fmt.Errorf("seal window %d: %w", shard.ID, err)
	}
	if lostSince(was, cohort{mark: inRedis.mark, count: int64(len(entrants))}) {
		return fmt.Errorf("seal window %d: the cohort was lost from Redis before its seal (%d entrants read, %d seen): not sealed", shard.ID, len(entrants), was.count)
	}
	err = db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE admission_windows SET sealed_at = $2, revealed_at = $2, cohort_size = $3
			WHERE shard_id = $1 AND sealed_at IS NULL`, shard.ID, s.now(), len(entrants))
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		if _, err = tx.CopyFrom(ctx, pgx.Identifier{"admission_entrants"}, []string{"shard_id", "ticket", "user_id", "score", "entered_at"},
			pgx.CopyFromRows(entrants)); err != nil {
			return err
		}
		// The window's fairness figures, once its offers and holds have
		// had time to play out (recomputed by anyone who asks sooner).
		if s.cfg.Jobs != nil {
			_, err = s.cfg.Jobs.InsertTx(ctx, tx, FairnessArgs{ShardID: shard.ID}, &river.InsertOpts{ScheduledAt: s.now().Add(s.cfg.FairnessAfter)})
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("seal window %d: %w", shard.ID, err)
	}
	s.windows.Delete(shard.ID)
	return nil
}

// logAdmissions writes admissions not yet in admission_log, in order; it
// catches up after a leader died between admitting and logging. It returns
// how many PostgreSQL holds now (as far as Redis knows).
func (c *Controller) logAdmissions(ctx context.Context, shard *booking.Shard) (int64, error) {
	s := c.s
	keys := s.queueKeys(shard.ID)
	mv, err := s.rdb.HMGet(ctx, keys[1], "admitted", "logged").Result()
	if err != nil {
		return 0, fmt.Errorf("log admissions: %w", err)
	}
	admitted, logged := atoi64(mv[0]), atoi64(mv[1])
	if logged >= admitted {
		return logged, nil
	}
	upto := min(admitted, logged+5000)
	members, err := s.rdb.ZRange(ctx, keys[0], logged, upto-1).Result()
	if err != nil {
		return 0, fmt.Errorf("log admissions: %w", err)
	}
	batches, err := s.rdb.ZRangeByScoreWithScores(ctx, keys[2], &redis.ZRangeBy{Min: "(" + strconv.FormatInt(logged, 10), Max: "+inf"}).Result()
	if err != nil {
		return 0, fmt.Errorf("log admissions: %w", err)
	}
	n := len(members)
	tids, tickets, intents := make([]string, n), make([]string, n), make([]string, n)
	uids, seqs, fences := make([]int64, n), make([]int64, n), make([]int64, n)
	issued, expires := make([]time.Time, n), make([]time.Time, n)
	b := 0
	for i, m := range members {
		rank := logged + int64(i)
		for b < len(batches) && int64(batches[b].Score) <= rank {
			b++
		}
		if b == len(batches) {
			return 0, fmt.Errorf("log admissions: no batch for place %d", rank)
		}
		f := strings.Split(batches[b].Member.(string), ":")
		ms, fence := atoi64(f[1]), atoi64(f[2])
		uid, _ := strconv.ParseInt(m, 10, 64)
		tids[i], tickets[i], intents[i] = token.TokenID(shard.ID, uid, 0), s.Ticket(shard.ID, uid), shard.Key()
		uids[i], seqs[i], fences[i] = uid, rank, fence
		issued[i] = time.UnixMilli(ms)
		expires[i] = issued[i].Add(s.cfg.OfferTTL) // the pick-up deadline
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO admission_log (token_id, user_id, intent, issued_at, shard_id, seq, ticket, fence, expires_at)
		SELECT t, u, i, at, $9, q, k, f, e FROM unnest($1::text[], $2::bigint[], $3::text[], $4::timestamptz[], $5::bigint[], $6::text[], $7::bigint[], $8::timestamptz[])
		AS x(t, u, i, at, q, k, f, e) ON CONFLICT DO NOTHING`, tids, uids, intents, issued, seqs, tickets, fences, expires, shard.ID); err != nil {
		return 0, fmt.Errorf("log admissions: %w", err)
	}
	return upto, s.maxset.Run(ctx, s.rdb, keys[1:2], "logged", upto).Err()
}

func atoi64(v any) int64 {
	str, _ := v.(string)
	n, _ := strconv.ParseInt(str, 10, 64)
	return n
}
