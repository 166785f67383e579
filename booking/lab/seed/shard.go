package seed

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"tatkal/booking/db"
	"tatkal/booking/india"
)

// maxLegs mirrors the inventory_shards CHECK (and inventory.MaxLegs): a
// berth's leg mask is two bytes in Redis.
const maxLegs = 16

// maxShardCoaches: the Redis state keeps one byte per berth for its coach
// (inventory.ShardState.Coaches, numbered from 1).
const maxShardCoaches = 255

// tatkalPct is the share of each coach set aside for the Tatkal quota
// (DOMAIN.md: "at most 30% of a coach").
const tatkalPct = 30

// ShardSpec describes one inventory shard to create.
type ShardSpec struct {
	Train string
	// Date is the journey date from the origin station: its calendar date,
	// read in its own location, is used.
	Date  time.Time
	Class string
	// Quota defaults to "TQ".
	Quota string
	// Berths is how many berths the shard sells. Zero means the Tatkal
	// quota: 30% of each coach of the class (rounded down per coach), spread
	// evenly over the coach. A positive number takes free berths of the
	// class in coach order, whole coaches at a time, appending coaches to the
	// train when it has too few.
	Berths int
	// OpensAt defaults to the real opening: the day before the journey,
	// 10:00 IST for AC classes, 11:00 IST for the others.
	OpensAt time.Time
	// ClosesAt defaults to the train's departure from its origin on the
	// journey date minus 4 hours (the charting cut-off).
	ClosesAt time.Time
	// Mode is "direct" (default) or "queue".
	Mode string
	// WaitlistCap defaults (nil) to 60% of the shard's berths for AC classes
	// and 30% for the others.
	WaitlistCap *int
}

func (s ShardSpec) withDefaults() ShardSpec {
	if s.Quota == "" {
		s.Quota = "TQ"
	}
	if s.Mode == "" {
		s.Mode = "direct"
	}
	return s
}

func (s ShardSpec) label() string {
	s = s.withDefaults()
	return fmt.Sprintf("%s %s %s %s", s.Train, s.Date.Format(time.DateOnly), s.Class, s.Quota)
}

// shardInfo is a shard as created (or found, for Demo).
type shardInfo struct {
	ID          int64
	Berths      int
	Legs        int
	WaitlistCap int
	OpensAt     time.Time
	ClosesAt    time.Time
	Mode        string
	Created     bool
}

// Shard creates one inventory shard and its berths in one transaction and
// returns its id. The train must exist. A shard with the same train, date,
// class and quota gives ErrShardExists and writes nothing.
func Shard(ctx context.Context, pool *pgxpool.Pool, spec ShardSpec) (int64, error) {
	var info shardInfo
	err := db.Transact(ctx, pool, func(tx pgx.Tx) error {
		var err error
		info, err = createShard(ctx, tx, spec, false)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("seed shard %s: %w", spec.label(), err)
	}
	return info.ID, nil
}

type berthRef struct {
	coach string
	no    int
	typ   string
}

// createShard does Shard's work in tx. With skipExisting an existing shard
// is returned (Created false) instead of ErrShardExists.
func createShard(ctx context.Context, tx pgx.Tx, spec ShardSpec, skipExisting bool) (shardInfo, error) {
	spec = spec.withDefaults()
	lay, ok := layoutOf(spec.Class)
	switch {
	case spec.Train == "":
		return shardInfo{}, errors.New("no train given")
	case spec.Date.IsZero():
		return shardInfo{}, errors.New("no journey date given")
	case !ok:
		return shardInfo{}, fmt.Errorf("unknown class %q", spec.Class)
	case spec.Berths < 0:
		return shardInfo{}, fmt.Errorf("negative berth count %d", spec.Berths)
	case spec.Mode != "direct" && spec.Mode != "queue":
		return shardInfo{}, fmt.Errorf("mode %q is neither direct nor queue", spec.Mode)
	case spec.WaitlistCap != nil && *spec.WaitlistCap < 0:
		return shardInfo{}, fmt.Errorf("negative waitlist cap %d", *spec.WaitlistCap)
	}
	day := journeyDay(spec.Date)
	date := pgDate(day)

	var ac bool
	err := tx.QueryRow(ctx, "SELECT ac FROM fare_rules WHERE class = $1", spec.Class).Scan(&ac)
	if errors.Is(err, pgx.ErrNoRows) {
		return shardInfo{}, fmt.Errorf("no fare rule for class %s", spec.Class)
	}
	if err != nil {
		return shardInfo{}, fmt.Errorf("read fare rule: %w", err)
	}
	// Locking the train serialises shard creation per train, so two callers
	// never append the same coach names.
	var departs pgtype.Time
	err = tx.QueryRow(ctx, "SELECT departs_at FROM trains WHERE number = $1 FOR UPDATE", spec.Train).Scan(&departs)
	if errors.Is(err, pgx.ErrNoRows) {
		return shardInfo{}, fmt.Errorf("train %s: %w", spec.Train, ErrUnknownTrain)
	}
	if err != nil {
		return shardInfo{}, fmt.Errorf("read train: %w", err)
	}
	var stops int
	if err := tx.QueryRow(ctx, "SELECT count(*) FROM train_stops WHERE train_number = $1", spec.Train).Scan(&stops); err != nil {
		return shardInfo{}, fmt.Errorf("count stops: %w", err)
	}
	legs := stops - 1
	if legs < 1 || legs > maxLegs {
		return shardInfo{}, fmt.Errorf("train %s has %d stops: a shard needs 2 to %d", spec.Train, stops, maxLegs+1)
	}

	existing, found, err := findShard(ctx, tx, spec, date)
	if err != nil {
		return shardInfo{}, err
	}
	if found {
		if skipExisting {
			return existing, nil
		}
		return shardInfo{}, fmt.Errorf("shard %d: %w", existing.ID, ErrShardExists)
	}

	opens := spec.OpensAt
	if opens.IsZero() {
		opens = realOpening(day, ac)
	}
	closes := spec.ClosesAt
	if closes.IsZero() {
		closes = day.Add(time.Duration(departs.Microseconds)*time.Microsecond - 4*time.Hour)
	}
	if !closes.After(opens) {
		return shardInfo{}, fmt.Errorf("window closes (%s) before it opens (%s)", closes.In(india.IST), opens.In(india.IST))
	}

	picked, err := pickBerths(ctx, tx, spec, lay, date)
	if err != nil {
		return shardInfo{}, err
	}
	coaches := 1
	for i := 1; i < len(picked); i++ {
		if picked[i].coach != picked[i-1].coach {
			coaches++
		}
	}
	if coaches > maxShardCoaches {
		return shardInfo{}, fmt.Errorf("%d berths span %d coaches; the Redis state numbers at most %d", len(picked), coaches, maxShardCoaches)
	}
	wlCap := defaultWaitlistCap(len(picked), ac)
	if spec.WaitlistCap != nil {
		wlCap = *spec.WaitlistCap
	}

	info := shardInfo{Berths: len(picked), Legs: legs, WaitlistCap: wlCap, OpensAt: opens, ClosesAt: closes, Mode: spec.Mode, Created: true}
	// ON CONFLICT keeps a concurrent creator from aborting the transaction
	// (Demo carries on after an existing shard).
	err = tx.QueryRow(ctx, `INSERT INTO inventory_shards (train_number, journey_date, class, quota, total_berths,
			legs, waitlist_cap, window_opens_at, window_closes_at, mode)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
		ON CONFLICT (train_number, journey_date, class, quota) DO NOTHING
		RETURNING id`,
		spec.Train, date, spec.Class, spec.Quota, len(picked), legs, wlCap, opens, closes, spec.Mode).Scan(&info.ID)
	if errors.Is(err, pgx.ErrNoRows) {
		return shardInfo{}, ErrShardExists
	}
	if err != nil {
		return shardInfo{}, fmt.Errorf("insert shard: %w", err)
	}
	_, err = tx.CopyFrom(ctx, pgx.Identifier{"shard_berths"}, []string{"shard_id", "idx", "coach", "berth_no", "berth_type"},
		pgx.CopyFromSlice(len(picked), func(i int) ([]any, error) {
			b := picked[i]
			return []any{info.ID, int32(i), b.coach, int32(b.no), b.typ}, nil
		}))
	if err != nil {
		return shardInfo{}, fmt.Errorf("insert shard berths: %w", err)
	}
	return info, nil
}

// findShard reads the shard with spec's key, if there is one.
func findShard(ctx context.Context, tx pgx.Tx, spec ShardSpec, date pgtype.Date) (shardInfo, bool, error) {
	info := shardInfo{}
	err := tx.QueryRow(ctx, `SELECT id, total_berths, legs, waitlist_cap, window_opens_at, window_closes_at, mode
		FROM inventory_shards WHERE train_number = $1 AND journey_date = $2 AND class = $3 AND quota = $4`,
		spec.Train, date, spec.Class, spec.Quota).
		Scan(&info.ID, &info.Berths, &info.Legs, &info.WaitlistCap, &info.OpensAt, &info.ClosesAt, &info.Mode)
	if errors.Is(err, pgx.ErrNoRows) {
		return shardInfo{}, false, nil
	}
	if err != nil {
		return shardInfo{}, false, fmt.Errorf("look for existing shard: %w", err)
	}
	return info, true, nil
}

// pickBerths chooses the shard's berths, in coach order with each coach's
// berths together. Berths already sold by another shard of the same train,
// date and class (another quota) are never picked, so quotas cannot sell
// the same berth twice.
func pickBerths(ctx context.Context, tx pgx.Tx, spec ShardSpec, lay layout, date pgtype.Date) ([]berthRef, error) {
	taken := map[berthRef]bool{}
	rows, err := tx.Query(ctx, `SELECT sb.coach, sb.berth_no FROM shard_berths sb
		JOIN inventory_shards s ON s.id = sb.shard_id
		WHERE s.train_number = $1 AND s.journey_date = $2 AND s.class = $3`, spec.Train, date, spec.Class)
	if err != nil {
		return nil, fmt.Errorf("read berths of other quotas: %w", err)
	}
	var b berthRef
	if _, err := pgx.ForEachRow(rows, []any{&b.coach, &b.no}, func() error {
		taken[berthRef{coach: b.coach, no: b.no}] = true
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read berths of other quotas: %w", err)
	}

	// Every berth of the class, grouped by coach in train order.
	type coachBerths struct {
		all, free []berthRef
	}
	var coaches []*coachBerths
	rows, err = tx.Query(ctx, `SELECT b.coach, b.berth_no, b.berth_type FROM coaches c
		JOIN berths b ON b.train_number = c.train_number AND b.coach = c.coach
		WHERE c.train_number = $1 AND c.class = $2
		ORDER BY c.seq, c.coach, b.berth_no`, spec.Train, spec.Class)
	if err != nil {
		return nil, fmt.Errorf("read berths: %w", err)
	}
	if _, err := pgx.ForEachRow(rows, []any{&b.coach, &b.no, &b.typ}, func() error {
		if len(coaches) == 0 || coaches[len(coaches)-1].all[0].coach != b.coach {
			coaches = append(coaches, &coachBerths{})
		}
		c := coaches[len(coaches)-1]
		c.all = append(c.all, b)
		if !taken[berthRef{coach: b.coach, no: b.no}] {
			c.free = append(c.free, b)
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read berths: %w", err)
	}

	var picked []berthRef
	if spec.Berths == 0 {
		// Tatkal quota: 30% of each coach, rounded down per coach.
		for _, c := range coaches {
			picked = append(picked, spread(c.free, min(len(c.all)*tatkalPct/100, len(c.free)))...)
		}
		if len(picked) == 0 {
			return nil, fmt.Errorf("train %s has no free %s berths for a %d%% quota", spec.Train, spec.Class, tatkalPct)
		}
		return picked, nil
	}

	for _, c := range coaches {
		picked = append(picked, c.free...)
	}
	if len(picked) < spec.Berths {
		extra, err := appendCoaches(ctx, tx, spec.Train, spec.Class, lay, spec.Berths-len(picked))
		if err != nil {
			return nil, err
		}
		picked = append(picked, extra...)
	}
	return picked[:spec.Berths], nil
}

// appendCoaches adds enough coaches of class to the train for need more
// berths, numbered after the train's last coach of that letter and placed
// after its last coach, and returns their berths in order.
func appendCoaches(ctx context.Context, tx pgx.Tx, train, class string, lay layout, need int) ([]berthRef, error) {
	var (
		maxSeq int
		names  []string
	)
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(seq), 0), coalesce(array_agg(coach), '{}')
		FROM coaches WHERE train_number = $1`, train).Scan(&maxSeq, &names); err != nil {
		return nil, fmt.Errorf("read coaches: %w", err)
	}
	last := 0
	for _, n := range names {
		last = max(last, lay.coachNumber(n))
	}
	count := (need + lay.perCoach - 1) / lay.perCoach
	defs := make([]coachDef, count)
	var berths []berthRef
	for i := range defs {
		defs[i] = coachDef{class: class, name: fmt.Sprintf("%s%d", lay.prefix, last+1+i), seq: maxSeq + 1 + i, berths: lay.perCoach}
		for no := 1; no <= lay.perCoach; no++ {
			berths = append(berths, berthRef{coach: defs[i].name, no: no, typ: lay.berthType(no)})
		}
	}
	if err := insertCoaches(ctx, tx, train, defs); err != nil {
		return nil, fmt.Errorf("append %d %s coaches: %w", count, class, err)
	}
	return berths, nil
}

// spread picks k of a coach's free berths (given in berth order) so that
// every berth type gets its proportional share, and each type's picks are
// spread evenly along the coach (the middle of each of q equal stretches): the quota then holds lower, middle, upper
// and side berths from every part of the coach, not one bay or one type.
// A plain "every n-th berth" does not do that: every 3rd 2A berth is always
// LB or UB, and an even spread of 21 over 72 never lands on a side upper.
//
// Shares are k*len(type)/len(free) rounded down; the berths left over go to
// the types with the largest remainders (ties to the type seen first). The
// result is in berth order.
func spread(free []berthRef, k int) []berthRef {
	if k <= 0 {
		return nil
	}
	var types []string
	groups := map[string][]int{} // positions in free, per type
	for i, b := range free {
		if _, ok := groups[b.typ]; !ok {
			types = append(types, b.typ)
		}
		groups[b.typ] = append(groups[b.typ], i)
	}
	share := map[string]int{}
	left := k
	for _, t := range types {
		share[t] = k * len(groups[t]) / len(free)
		left -= share[t]
	}
	for ; left > 0; left-- {
		best, bestRem := "", -1
		for _, t := range types {
			// Each type gets at most one extra berth.
			if rem := k * len(groups[t]) % len(free); rem > bestRem && share[t] == k*len(groups[t])/len(free) {
				best, bestRem = t, rem
			}
		}
		share[best]++
	}
	var pos []int
	for _, t := range types {
		g, q := groups[t], share[t]
		for j := range q {
			// The middle of the j-th of q equal stretches, so the picks reach
			// both ends of the coach.
			pos = append(pos, g[(2*j+1)*len(g)/(2*q)])
		}
	}
	slices.Sort(pos)
	out := make([]berthRef, len(pos))
	for i, p := range pos {
		out[i] = free[p]
	}
	return out
}
