package inventory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// LegCounts are one leg's figures from both owners.
type LegCounts struct {
	Leg            int
	Total          int
	RedisFree      int
	RedisHeld      int
	RedisConfirmed int
	PGHeld         int
	PGConfirmed    int
}

// Report is the result of checking one shard's invariants.
type Report struct {
	ShardID    int64
	Epoch      int64
	Ready      bool
	Legs       []LegCounts
	Violations []string
	// Unsafe are the Violations that may sell a berth twice: a berth-leg
	// PostgreSQL holds or sold that Redis has free (Redis would sell it
	// again), or a berth PostgreSQL itself gives twice. The others keep
	// berths from sale (a hold whose process died before its commit), say
	// a record or a counter is stale (the seat sync and the sweep put it
	// right) or refuse holds outright (fail closed).
	Unsafe    []string
	CheckedAt time.Time
}

// OK reports whether no invariant is broken. A shard with no Redis state
// breaks none: it refuses every hold until it is rebuilt (fail closed).
func (r Report) OK() bool { return len(r.Violations) == 0 }

// String renders the report for a terminal.
func (r Report) String() string {
	var b strings.Builder
	status := "OK"
	if !r.Ready {
		status = "NOT LOADED in Redis: holds are refused until it is rebuilt"
	}
	if !r.OK() {
		status = fmt.Sprintf("%d VIOLATION(S)", len(r.Violations))
	}
	fmt.Fprintf(&b, "shard %d  epoch %d  %s\n", r.ShardID, r.Epoch, status)
	fmt.Fprintf(&b, "  %-4s %6s %6s %6s %6s  %6s %6s\n", "leg", "total", "free", "held", "conf", "pgheld", "pgconf")
	for _, l := range r.Legs {
		fmt.Fprintf(&b, "  %-4d %6d %6d %6d %6d  %6d %6d\n", l.Leg, l.Total, l.RedisFree, l.RedisHeld, l.RedisConfirmed, l.PGHeld, l.PGConfirmed)
	}
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "  ! %s\n", v)
	}
	return b.String()
}

// InFlightGrace is how young a Redis hold without a row may be and still
// count as a write in progress rather than a violation.
const InFlightGrace = 10 * time.Second

// Check verifies one shard's invariants, Redis against PostgreSQL: per leg
// free + live holds + confirmed = total with both sides agreeing; no berth
// taken twice on any leg; every hold and booking agrees between the two;
// one booking per hold; every confirmed passenger has one berth for the
// whole journey; Redis at PostgreSQL's epoch and no failed rebuild pending.
// Under live traffic the two owners are read a moment apart, so a
// disagreement is re-checked a few times before it is reported, with how
// long it has lasted.
func Check(ctx context.Context, pool *pgxpool.Pool, s *Store, shardID int64, holdWindow time.Duration) (Report, error) {
	var rep Report
	var err error
	for attempt := 0; attempt < 4; attempt++ {
		rep, err = checkOnce(ctx, pool, s, shardID, holdWindow)
		if err != nil || rep.OK() {
			return rep, err
		}
		select {
		case <-ctx.Done():
			return rep, ctx.Err()
		case <-time.After(time.Duration(100*(attempt+1)) * time.Millisecond):
		}
	}
	return rep, nil
}

type pgHold struct {
	id       string
	state    string // H C W X, or '' for holds that occupy nothing
	from, to int
	berths   []int
	npax     int
	desc     string    // PostgreSQL's words for it: "EXPIRED", "booking CANCELLED"
	changed  time.Time // when PostgreSQL last changed it
}

// age renders how long a disagreement has lasted at most.
func age(since, now time.Time) string {
	return now.Sub(since).Round(100 * time.Millisecond).String()
}

func checkOnce(ctx context.Context, pool *pgxpool.Pool, s *Store, shardID int64, holdWindow time.Duration) (Report, error) {
	rep := Report{ShardID: shardID, CheckedAt: time.Now()}
	var total, legs int
	var pgEpoch int64
	var failedAt *time.Time
	var failure string
	if err := pool.QueryRow(ctx, `SELECT total_berths, legs, epoch, rebuild_failed_at, coalesce(rebuild_error, '')
		FROM inventory_shards WHERE id = $1`, shardID).Scan(&total, &legs, &pgEpoch, &failedAt, &failure); err != nil {
		return rep, fmt.Errorf("check shard %d: %w", shardID, err)
	}
	snap, err := s.Snapshot(ctx, shardID)
	if err != nil {
		return rep, fmt.Errorf("check shard %d: %w", shardID, err)
	}
	rep.Ready, rep.Epoch = snap.Ready, snap.Epoch
	if failedAt != nil {
		rep.Violations = append(rep.Violations, fmt.Sprintf("the last rebuild failed %s ago: %s", age(*failedAt, rep.CheckedAt), failure))
	}
	if snap.Ready && snap.Epoch != pgEpoch {
		// A rebuild bumped the epoch and never loaded: every hold is refused.
		rep.Violations = append(rep.Violations, fmt.Sprintf("Redis is at epoch %d, PostgreSQL at %d: holds are refused until a rebuild loads", snap.Epoch, pgEpoch))
	}

	// PostgreSQL's view: what occupies berths and waitlist places, and
	// every hold Redis has a record of, whatever its state.
	var redisIDs []uuid.UUID
	for _, h := range snap.Holds {
		if id, err := uuid.Parse(h.ID); err == nil {
			redisIDs = append(redisIDs, id)
		}
	}
	rows, err := pool.Query(ctx, `
		SELECT h.id::text, h.kind, h.state, coalesce(b.status, ''), coalesce(b.kept_for_promotion, false), h.from_seq, h.to_seq,
		       h.berths, h.seat_count, greatest(h.updated_at, coalesce(b.cancelled_at, h.updated_at))
		FROM holds h LEFT JOIN bookings b ON b.hold_id = h.id
		WHERE h.shard_id = $1 AND (h.state IN ('HELD', 'CONFIRMED') OR h.id = ANY($2))`, shardID, redisIDs)
	if err != nil {
		return rep, fmt.Errorf("check shard %d: %w", shardID, err)
	}
	pg := map[string]pgHold{}
	var id, kind, state, bstatus string
	var kept bool
	var from, to, npax int
	var berths []int32
	var changed time.Time
	if _, err := pgx.ForEachRow(rows, []any{&id, &kind, &state, &bstatus, &kept, &from, &to, &berths, &npax, &changed}, func() error {
		h := pgHold{id: id, from: from, to: to, npax: npax, desc: state, changed: changed}
		if bstatus != "" {
			h.desc = "booking " + bstatus
		}
		if st := RecordState(state, kind, bstatus, kept); st != 0 {
			h.state = string(st)
		} else if state == "CONFIRMED" && bstatus == "" {
			rep.Violations = append(rep.Violations, fmt.Sprintf("hold %s is CONFIRMED but has no booking", id))
		}
		if h.state == "H" || h.state == "C" {
			for _, b := range berths {
				h.berths = append(h.berths, int(b))
			}
		}
		pg[id] = h
		return nil
	}); err != nil {
		return rep, fmt.Errorf("check shard %d: %w", shardID, err)
	}

	unsafe := func(v string) {
		rep.Violations = append(rep.Violations, v)
		rep.Unsafe = append(rep.Unsafe, v)
	}
	pgHeld, pgConf := make([]int, legs), make([]int, legs)
	claimed := make([]uint16, total)
	ids := make([]string, 0, len(pg))
	for id, h := range pg {
		if h.state != "" {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		h := pg[id]
		var mask uint16
		for l := h.from; l < h.to; l++ {
			mask |= 1 << l
			if h.state == "H" {
				pgHeld[l] += len(h.berths)
			}
			if h.state == "C" {
				pgConf[l] += len(h.berths)
			}
		}
		for _, b := range h.berths {
			if b < 0 || b >= total {
				rep.Violations = append(rep.Violations, fmt.Sprintf("hold %s: berth %d out of range", id, b))
				continue
			}
			if claimed[b]&mask != 0 {
				unsafe(fmt.Sprintf("berth %d sold twice: hold %s overlaps another on legs %d-%d", b, id, h.from, h.to-1))
			}
			claimed[b] |= mask
		}
	}

	// Bookings: one per hold, and every confirmed passenger on one berth for
	// the whole journey.
	var dupHolds, badPax int
	if err := pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM (SELECT hold_id FROM bookings WHERE shard_id = $1 GROUP BY hold_id HAVING count(*) > 1) d),
		(SELECT count(*) FROM booking_passengers p JOIN bookings b ON b.id = p.booking_id
		  WHERE b.shard_id = $1 AND b.status = 'CONFIRMED'
		    AND (p.status <> 'CONFIRMED' OR p.berth_idx IS NULL OR p.from_seq <> b.from_seq OR p.to_seq <> b.to_seq))`,
		shardID).Scan(&dupHolds, &badPax); err != nil {
		return rep, fmt.Errorf("check shard %d: %w", shardID, err)
	}
	if dupHolds > 0 {
		rep.Violations = append(rep.Violations, fmt.Sprintf("%d hold(s) with more than one booking", dupHolds))
	}
	if badPax > 0 {
		rep.Violations = append(rep.Violations, fmt.Sprintf("%d confirmed passenger(s) without one berth for the whole journey", badPax))
	}
	var paxMismatch int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM bookings b JOIN holds h ON h.id = b.hold_id
		WHERE b.shard_id = $1 AND b.status = 'CONFIRMED' AND h.kind = 'SEAT'
		  AND (SELECT count(*) FROM booking_passengers p WHERE p.booking_id = b.id AND p.status = 'CONFIRMED') <> h.seat_count`,
		shardID).Scan(&paxMismatch); err != nil {
		return rep, fmt.Errorf("check shard %d: %w", shardID, err)
	}
	if paxMismatch > 0 {
		rep.Violations = append(rep.Violations, fmt.Sprintf("%d booking(s) whose confirmed passengers differ from the hold's seat count", paxMismatch))
	}

	if !snap.Ready {
		for l := 0; l < legs; l++ {
			rep.Legs = append(rep.Legs, LegCounts{Leg: l, Total: total, PGHeld: pgHeld[l], PGConfirmed: pgConf[l]})
		}
		return rep, nil
	}
	rep.Violations = append(rep.Violations, snap.SelfCheck()...)
	if snap.Berths != total || snap.Legs != legs {
		rep.Violations = append(rep.Violations, fmt.Sprintf("Redis shape %d berths x %d legs, PostgreSQL %d x %d", snap.Berths, snap.Legs, total, legs))
		return rep, nil
	}

	// Redis records against rows, each disagreement with its age. Only a
	// write in flight is forgiven, while young: a Redis hold whose row is not
	// committed yet, or seats a retake (R) took before its commit. A row that
	// exists and says otherwise is reported however young: the after-commit
	// Redis update lands within the re-checks, and one that did not land is
	// exactly what must be seen.
	now := rep.CheckedAt
	inRedis := map[string]bool{}
	for _, h := range snap.Holds {
		inRedis[h.ID] = true
		p, ok := pg[h.ID]
		created := time.UnixMilli(h.ExpiresMs).Add(-holdWindow)
		unsold := h.State == 'H' || h.State == 'W' || h.State == 'R'
		switch {
		case unsold && (!ok || (h.State == 'R' && p.state == "")) && now.Sub(created) < InFlightGrace:
			// in flight
		case !ok:
			rep.Violations = append(rep.Violations, fmt.Sprintf("Redis has hold %s (%c) that PostgreSQL does not hold, for %s",
				h.ID, h.State, age(created, now)))
		case p.state == "":
			rep.Violations = append(rep.Violations, fmt.Sprintf("hold %s occupies nothing in PostgreSQL (%s) but is %c in Redis, for %s",
				h.ID, p.desc, h.State, age(p.changed, now)))
		case p.state != string(h.State):
			rep.Violations = append(rep.Violations, fmt.Sprintf("hold %s is %s in PostgreSQL but %c in Redis, for %s",
				h.ID, p.state, h.State, age(p.changed, now)))
		case !slices.Equal(p.berths, h.Berths) && p.state != "W" && p.state != "X":
			rep.Violations = append(rep.Violations, fmt.Sprintf("hold %s berths %v in PostgreSQL, %v in Redis, for %s",
				h.ID, p.berths, h.Berths, age(p.changed, now)))
		}
	}
	for _, id := range ids {
		if !inRedis[id] {
			rep.Violations = append(rep.Violations, fmt.Sprintf("hold %s (%s) is missing from Redis, for %s", id, pg[id].state, age(pg[id].changed, now)))
		}
	}
	// What may sell twice: a berth-leg PostgreSQL holds or sold that
	// Redis, which allots berths from its leg bitmaps, has free.
	for b := 0; b < total && b < len(snap.Occupancy); b++ {
		if gap := claimed[b] &^ snap.Occupancy[b]; gap != 0 {
			unsafe(fmt.Sprintf("berth %d is free in Redis on legs %s that PostgreSQL holds or sold: Redis could sell it again", b, legList(gap)))
		}
	}
	free := snap.Free()
	for l := 0; l < legs; l++ {
		lc := LegCounts{Leg: l, Total: total, RedisFree: free[l], RedisHeld: snap.Held[l], RedisConfirmed: snap.Confirmed[l],
			PGHeld: pgHeld[l], PGConfirmed: pgConf[l]}
		rep.Legs = append(rep.Legs, lc)
		if lc.RedisConfirmed != lc.PGConfirmed {
			rep.Violations = append(rep.Violations, fmt.Sprintf("leg %d: %d confirmed in Redis, %d in PostgreSQL", l, lc.RedisConfirmed, lc.PGConfirmed))
		}
		if lc.RedisHeld < lc.PGHeld {
			rep.Violations = append(rep.Violations, fmt.Sprintf("leg %d: %d held in Redis, %d in PostgreSQL", l, lc.RedisHeld, lc.PGHeld))
		}
	}
	return rep, nil
}

// legList names the legs of a mask: "0, 2-4".
func legList(mask uint16) string {
	var parts []string
	for l := 0; l < 16; l++ {
		if mask&(1<<l) == 0 {
			continue
		}
		end := l
		for end+1 < 16 && mask&(1<<(end+1)) != 0 {
			end++
		}
		if end == l {
			parts = append(parts, fmt.Sprint(l))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", l, end))
		}
		l = end
	}
	return strings.Join(parts, ", ")
}

// OpenShards lists the shards that still sell (not charted, journey not
// past), by id: the ones the invariant watch checks.
func OpenShards(ctx context.Context, pool *pgxpool.Pool) ([]int64, error) {
	rows, err := pool.Query(ctx, `SELECT id FROM inventory_shards
		WHERE chart_state = 'OPEN' AND journey_date >= (now() AT TIME ZONE 'Asia/Kolkata')::date - 1 ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("open shards: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("open shards: %w", err)
	}
	return ids, nil
}

// CheckShards checks each shard (Check): the console's live view and the
// invariant watch both read their reports here. A shard whose check could
// not run is left out of the reports, and its error joined into err; the
// others are checked all the same.
func CheckShards(ctx context.Context, pool *pgxpool.Pool, s *Store, ids []int64, holdWindow time.Duration) (map[int64]Report, error) {
	reports := make(map[int64]Report, len(ids))
	var errs []error
	for _, id := range ids {
		rep, err := Check(ctx, pool, s, id, holdWindow)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		reports[id] = rep
	}
	return reports, errors.Join(errs...)
}
