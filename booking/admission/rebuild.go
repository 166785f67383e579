package admission

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"tatkal/booking"
)

// rebuild restores a sealed window's queue that lost its Redis state (a
// wipe, or a failover to a replica that missed the last writes) from
// PostgreSQL, which holds what a sealed queue's answers rest on:
//
//   - the cohort, admission_entrants, with the scores that placed it;
//   - the admitted prefix, admission_log in seq order: their places come
//     first, in that order, and admitted = logged = the log's count, so
//     the cursor goes on after the last admitted and nobody is offered a
//     place twice (admission_log is unique per shard and seq, and user);
//   - the batches (offer times and fences), from the log's issue times, so
//     admitted entrants' offers and pick-up windows still answer.
//
// Late entrants (after the randomisation window) not yet admitted are not
// in PostgreSQL: those the lost queue still holds (a failover to a replica
// that has them, a node change alone) keep their order behind everyone
// else; after a wipe they are told NOT_IN_QUEUE and join again, behind.
// Admissions Redis made but had not logged are not in PostgreSQL either:
// their entrants wait at the head of the queue (or of the late ones) and
// are admitted again, in the same order, with the same (single-use) token
// id. Claims of offers are not in PostgreSQL either: an
// offer whose pick-up window has passed counts as claimed at its end, so
// nobody holding a permit is told it lapsed (one who never claimed may
// still claim until that permit would have lapsed).
//
// Only the leader rebuilds, and the REBUILD script replaces the queue only
// while it is still lost, so a slower second rebuild changes nothing.
func (c *Controller) rebuild(ctx context.Context, fence int64, shard *booking.Shard, w *Window, st *shardState) error {
	s := c.s
	now := s.now()
	type entry struct {
		uid   int64
		score float64
	}
	var members []entry
	scores := map[int64]int64{}
	rows, err := s.pool.Query(ctx, `SELECT user_id, score FROM admission_entrants WHERE shard_id = $1`, shard.ID)
	if err != nil {
		return fmt.Errorf("rebuild queue %d: %w", shard.ID, err)
	}
	var uid, score int64
	if _, err := pgx.ForEachRow(rows, []any{&uid, &score}, func() error {
		scores[uid] = score
		return nil
	}); err != nil {
		return fmt.Errorf("rebuild queue %d: entrants: %w", shard.ID, err)
	}
	type admission struct {
		uid, fence int64
		issued     time.Time
	}
	var logged []admission
	rows, err = s.pool.Query(ctx, `SELECT seq, user_id, fence, issued_at FROM admission_log WHERE shard_id = $1 ORDER BY seq`, shard.ID)
	if err != nil {
		return fmt.Errorf("rebuild queue %d: %w", shard.ID, err)
	}
	var a admission
	var seq int64
	if _, err := pgx.ForEachRow(rows, []any{&seq, &a.uid, &a.fence, &a.issued}, func() error {
		if seq != int64(len(logged)) {
			return fmt.Errorf("admission %d missing before seq %d", len(logged), seq)
		}
		logged = append(logged, a)
		return nil
	}); err != nil {
		return fmt.Errorf("rebuild queue %d: log: %w", shard.ID, err)
	}

	// The admitted first, in the log's order: cohort members keep their
	// scores, admitted late entrants go after the cohort in their order.
	n := int64(len(logged))
	maxFence := fence
	admitted := map[int64]bool{}
	for i, a := range logged {
		sc, ok := scores[a.uid]
		if !ok {
			sc = LateBase + 1 + int64(i)
		}
		members = append(members, entry{a.uid, float64(sc)})
		admitted[a.uid] = true
		maxFence = max(maxFence, a.fence)
	}
	for u, sc := range scores {
		if !admitted[u] {
			members = append(members, entry{u, float64(sc)})
		}
	}
	// The late entrants the lost queue still holds, in its order, numbered
	// on after the log's (the queue's 'seq' goes on from there). It takes
	// no new entrant while it is lost, so this read is what REBUILD replaces.
	late, err := s.rdb.ZRangeByScore(ctx, s.qkey(shard.ID, "z"), &redis.ZRangeBy{Min: strconv.FormatInt(LateBase, 10), Max: "+inf"}).Result()
	if err != nil {
		return fmt.Errorf("rebuild queue %d: late entrants: %w", shard.ID, err)
	}
	lastLate := n
	for _, m := range late {
		u, err := strconv.ParseInt(m, 10, 64)
		if err != nil || admitted[u] {
			continue
		}
		lastLate++
		members = append(members, entry{u, float64(LateBase + lastLate)})
	}
	// Redis orders by score, then member: the log must be the prefix of
	// that order, or the rebuilt queue would move admitted places. It
	// cannot be unless the records disagree; then the queue stays closed.
	order := slices.Clone(members)
	slices.SortFunc(order, func(x, y entry) int {
		if c := cmp.Compare(x.score, y.score); c != 0 {
			return c
		}
		return strings.Compare(strconv.FormatInt(x.uid, 10), strconv.FormatInt(y.uid, 10))
	})
	for i := range logged {
		if order[i].uid != logged[i].uid {
			return fmt.Errorf("rebuild queue %d: admission %d (user %d) is not at its place in the cohort's order", shard.ID, i, logged[i].uid)
		}
	}

	keys := s.queueKeys(shard.ID)
	keys = append(keys, s.qkey(shard.ID, "at"))
	tmp := func(name string) string { return s.qkey(shard.ID, name+".rebuild"+strconv.FormatInt(fence, 10)) }
	staged := []string{tmp("z"), tmp("ba"), tmp("bt"), tmp("cl")}
	p := s.rdb.Pipeline()
	p.Del(ctx, staged...)
	const chunk = 5000
	for i := 0; i < len(members); i += chunk {
		zs := make([]redis.Z, 0, chunk)
		for _, e := range members[i:min(i+chunk, len(members))] {
			zs = append(zs, redis.Z{Score: e.score, Member: strconv.FormatInt(e.uid, 10)})
		}
		p.ZAdd(ctx, staged[0], zs...)
	}
	// A batch is a run of admissions made in one step: one issue time, one
	// fence (lua/admit.lua: member "<count>:<ms>:<fence>", score count).
	var claims []any
	for i, a := range logged {
		if i+1 == len(logged) || !logged[i+1].issued.Equal(a.issued) || logged[i+1].fence != a.fence {
			count, ms := int64(i+1), a.issued.UnixMilli()
			p.ZAdd(ctx, staged[1], redis.Z{Score: float64(count), Member: fmt.Sprintf("%d:%d:%d", count, ms, a.fence)})
			p.ZAdd(ctx, staged[2], redis.Z{Score: float64(ms), Member: count})
		}
		if end := a.issued.Add(s.cfg.OfferTTL); !now.Before(end) && now.Before(end.Add(s.cfg.TokenTTL)) {
			claims = append(claims, strconv.FormatInt(a.uid, 10), end.UnixMilli())
		}
	}
	if len(claims) > 0 {
		p.HSet(ctx, staged[3], claims...)
	}
	// A rebuilder that dies here leaves nothing behind for long.
	for _, k := range staged {
		p.PExpire(ctx, k, time.Minute)
	}
	if _, err := p.Exec(ctx); err != nil {
		return fmt.Errorf("rebuild queue %d: stage: %w", shard.ID, err)
	}
	res, err := s.rebuild.Run(ctx, s.rdb, append(keys, staged...), fence, n, w.keysExpireAt(), maxFence, lastLate).StringSlice()
	if err != nil {
		return fmt.Errorf("rebuild queue %d: %w", shard.ID, err)
	}
	switch res[0] {
	case "STALE":
		return c.stale(fence, res[1])
	case "NOTLOST":
		return nil
	}
	s.log.Warn("admission: a sealed queue lost its Redis state; rebuilt from PostgreSQL", "shard", shard.ID,
		"entrants", len(members), "admitted", n, "fence", maxFence)
	// What the controller last told the queue went with it: tell it again.
	st.logged, st.released, st.sigAt = n, 0, time.Time{}
	if maxFence > fence {
		// The log saw a newer fence than ours: our lease's counter went back.
		return c.stale(fence, maxFence)
	}
	return nil
}
