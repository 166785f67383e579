package booking

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"tatkal/booking/db"
	"tatkal/booking/india"
)

// IST is the zone Tatkal windows and journey dates are stated in
// (india.IST, named here for the domain's callers).
var IST = india.IST

// Stop is one station on a train's route.
type Stop struct {
	Seq  int
	Code string
	Km   int
}

// FareRule is one class's fare table row (DOMAIN.md, "Fares").
type FareRule struct {
	PaisePerKm, Reservation, Superfast int64
	TatkalPct                          int64
	TatkalMin, TatkalMax               int64
	TatkalMinKm                        int
	GSTBps                             int64
	AC                                 bool
	Clerkage                           int64
}

// Berth is one berth a shard sells.
type Berth struct {
	Coach string
	No    int
	Type  string
}

// Shard is one Tatkal inventory: train | journey date | class | quota.
type Shard struct {
	ID           int64
	Train        string
	TrainName    string
	Date         time.Time
	Class        string
	Quota        string
	Legs         int
	Total        int
	WaitlistCap  int
	OpensAt      time.Time
	ClosesAt     time.Time
	DepartsAt    time.Time // from the origin station
	Mode         string
	Superfast    bool
	OriginRegion int
	Stops        []Stop
	Berths       []Berth
	Fare         FareRule
}

// StopSeq returns the sequence number of station code on the route.
func (s *Shard) StopSeq(code string) (int, bool) {
	for _, st := range s.Stops {
		if st.Code == code {
			return st.Seq, true
		}
	}
	return 0, false
}

// Key names the shard the way logs and Redis do.
func (s *Shard) Key() string {
	return fmt.Sprintf("%s|%s|%s|%s", s.Train, s.Date.Format(time.DateOnly), s.Class, s.Quota)
}

// Catalog loads shards from PostgreSQL and caches them briefly: shard
// definitions change rarely, and the hot path must not read the database.
// Its caches are bounded in size and age, and intents are validated before
// any lookup, so caller input can neither grow memory nor stay in it.
type Catalog struct {
	pool *pgxpool.Pool
	ttl  time.Duration

	// byKey and byID keep entries catalogStale past ttl: a lapsed entry
	// is reloaded by one caller while the others are answered with it
	// (see cached).
	byKey   *boundedCache[string, *Shard]
	byID    *boundedCache[int64, *Shard]
	missing *boundedCache[string, struct{}] // intents with no shard, apart so misses never evict hits
	keyRead Flight[string, *Shard]
	idRead  Flight[int64, *Shard]
}

// Catalog cache bounds: far more shards than a day's windows sell, and a
// short memory of misses (enough to absorb a retry storm on a typo).
const (
	catalogMaxShards  = 4096
	catalogMaxMissing = 1024
	catalogMissingTTL = 5 * time.Second
	// catalogStale is how long past its ttl an entry still answers while
	// one caller reloads it, or when the reload fails.
	catalogStale = time.Minute
	// catalogRefreshWait bounds the wait of the one caller reloading a
	// lapsed entry for the pool: past it, it too goes on with the entry.
	catalogRefreshWait = time.Second
)

// NewCatalog returns a catalog whose entries live for ttl.
func NewCatalog(pool *pgxpool.Pool, ttl time.Duration) *Catalog {
	return &Catalog{pool: pool, ttl: ttl,
		byKey:   newBoundedCache[string, *Shard](catalogMaxShards, ttl+catalogStale),
		byID:    newBoundedCache[int64, *Shard](catalogMaxShards, ttl+catalogStale),
		missing: newBoundedCache[string, struct{}](catalogMaxMissing, min(ttl, catalogMissingTTL))}
}

func intentKey(train string, date time.Time, class, quota string) string {
	return train + "|" + date.Format(time.DateOnly) + "|" + class + "|" + quota
}

// Classes and quotas (DOMAIN.md, "Codes").
var (
	classCodes = []string{"1A", "2A", "3A", "3E", "SL", "2S", "CC", "EC"}
	quotaCodes = []string{"GN", "TQ", "PT", "LD", "SS", "HP"}
)

// ValidateIntent checks the shape of a train number (5 digits), a class
// and a quota code, and the journey date's range, before anything looks
// them up. Its messages never echo the input back.
func ValidateIntent(train string, date time.Time, class, quota string) error {
	if len(train) != 5 || strings.Trim(train, "0123456789") != "" {
		return Errorf(EINVALID, "BAD_TRAIN_NO", "The train number is 5 digits, like 12951.")
	}
	if !slices.Contains(classCodes, class) {
		return Errorf(EINVALID, "BAD_CLASS", "The class is one of %s.", strings.Join(classCodes, ", "))
	}
	if !slices.Contains(quotaCodes, quota) {
		return Errorf(EINVALID, "BAD_QUOTA", "The quota is one of %s.", strings.Join(quotaCodes, ", "))
	}
	if date.IsZero() || date.Year() < 2000 || date.Year() > 2200 {
		return Errorf(EINVALID, "BAD_DATE", "The journey date is out of range.")
	}
	return nil
}

// Find returns the shard for an intent, EINVALID for a malformed one, or ENOTFOUND.
func (c *Catalog) Find(ctx context.Context, train string, date time.Time, class, quota string) (*Shard, error) {
	if err := ValidateIntent(train, date, class, quota); err != nil {
		return nil, err
	}
	key := intentKey(train, date, class, quota)
	return cached(ctx, c.byKey, &c.keyRead, c.ttl, key, func(ctx context.Context) (*Shard, error) {
		now := time.Now()
		if _, _, ok := c.missing.get(key, now); ok {
			return nil, notFoundShard(train, date, class, quota)
		}
		var id int64
		err := c.pool.QueryRow(ctx, `SELECT id FROM inventory_shards
			WHERE train_number = $1 AND journey_date = $2 AND class = $3 AND quota = $4`,
			train, date, class, quota).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			c.missing.put(key, struct{}{}, now)
			return nil, notFoundShard(train, date, class, quota)
		}
		if err != nil {
			return nil, fmt.Errorf("find shard %s: %w", key, err)
		}
		s, err := c.ByID(ctx, id)
		if err != nil {
			return nil, err
		}
		c.byKey.put(key, s, now)
		return s, nil
	})
}

// cached answers k from cache, asking the pool at most once per key at a
// time: a fresh entry as it is; a lapsed one (older than ttl) is reloaded
// by one caller, bounded by catalogRefreshWait, while every other caller
// is answered with it, and that caller too goes on with it if the reload
// fails; a missing one is read once, concurrent callers waiting for that
// read. Without this, every request that found an entry lapsed asked the
// pool for it: in a rehearsal's rush, hundreds of queue-status polls a
// second queued for connections behind the confirmations and timed out.
func cached[K comparable](ctx context.Context, cache *boundedCache[K, *Shard], f *Flight[K, *Shard], ttl time.Duration, k K,
	read func(context.Context) (*Shard, error)) (*Shard, error) {
	now := time.Now()
	old, stored, ok := cache.get(k, now)
	if ok && now.Sub(stored) < ttl {
		return old, nil
	}
	if ok && f.Busy(k) {
		return old, nil
	}
	rctx := ctx
	if ok {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(ctx, catalogRefreshWait)
		defer cancel()
	}
	s, err := f.Do(rctx, k, func() (*Shard, error) { return read(rctx) })
	if err != nil && ok && ErrorCode(err) == EINTERNAL {
		return old, nil // the database is slow or away: the entry is at most catalogStale old
	}
	return s, err
}

func notFoundShard(train string, date time.Time, class, quota string) error {
	return Errorf(ENOTFOUND, "NO_SUCH_SHARD", "Train %s has no %s %s quota on %s.", train, class, quota, date.Format(time.DateOnly))
}

// ByID returns a shard by id, or ENOTFOUND.
func (c *Catalog) ByID(ctx context.Context, id int64) (*Shard, error) {
	return cached(ctx, c.byID, &c.idRead, c.ttl, id, func(ctx context.Context) (*Shard, error) {
		now := time.Now()
		s, err := LoadShard(ctx, c.pool, id)
		if err != nil {
			return nil, err
		}
		c.byID.put(id, s, now)
		c.byKey.put(s.Key(), s, now)
		return s, nil
	})
}

// ByIDTx is ByID for a caller holding a transaction: a cache miss is read
// on q (the transaction's own connection), never on the pool. Asking the
// pool from inside a transaction deadlocks once every connection is held
// by such a transaction (a rush of confirmations when the cache entry
// lapses) until their contexts run out.
func (c *Catalog) ByIDTx(ctx context.Context, q db.Querier, id int64) (*Shard, error) {
	now := time.Now()
	if s, stored, ok := c.byID.get(id, now); ok && now.Sub(stored) < c.ttl {
		return s, nil
	}
	s, err := LoadShard(ctx, q, id)
	if err != nil {
		return nil, err
	}
	c.byID.put(id, s, now)
	c.byKey.put(s.Key(), s, now)
	return s, nil
}

// Cached reports how many entries the catalog holds (found and missing).
func (c *Catalog) Cached() int { return c.byKey.len() + c.byID.len() + c.missing.len() }

// Forget drops cached entries so the next lookup reads PostgreSQL.
func (c *Catalog) Forget() {
	c.byKey.clear()
	c.byID.clear()
	c.missing.clear()
}

// LoadShard reads a shard with its route, berths and fare rule.
func LoadShard(ctx context.Context, q db.Querier, id int64) (*Shard, error) {
	s := &Shard{ID: id}
	var date time.Time
	var departs string
	err := q.QueryRow(ctx, `
		SELECT s.train_number, t.name, s.journey_date, s.class, s.quota, s.legs, s.total_berths, s.waitlist_cap,
		       s.window_opens_at, s.window_closes_at, s.mode, t.superfast, t.departs_at::text,
		       (SELECT st.region FROM train_stops ts JOIN stations st ON st.code = ts.station_code
		         WHERE ts.train_number = s.train_number ORDER BY ts.seq LIMIT 1),
		       f.paise_per_km, f.reservation_paise, f.superfast_paise, f.tatkal_pct, f.tatkal_min_paise,
		       f.tatkal_max_paise, f.tatkal_min_km, f.gst_bps, f.ac, f.clerkage_paise
		FROM inventory_shards s JOIN trains t ON t.number = s.train_number
		JOIN fare_rules f ON f.class = s.class
		WHERE s.id = $1`, id).Scan(&s.Train, &s.TrainName, &date, &s.Class, &s.Quota, &s.Legs, &s.Total, &s.WaitlistCap,
		&s.OpensAt, &s.ClosesAt, &s.Mode, &s.Superfast, &departs, &s.OriginRegion,
		&s.Fare.PaisePerKm, &s.Fare.Reservation, &s.Fare.Superfast, &s.Fare.TatkalPct, &s.Fare.TatkalMin,
		&s.Fare.TatkalMax, &s.Fare.TatkalMinKm, &s.Fare.GSTBps, &s.Fare.AC, &s.Fare.Clerkage)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, Errorf(ENOTFOUND, "NO_SUCH_SHARD", "No inventory shard %d.", id)
	}
	if err != nil {
		return nil, fmt.Errorf("load shard %d: %w", id, err)
	}
	s.Date = time.Date(date.Year(), date.Month(), date.Day(), 0, 0, 0, 0, IST)
	clock, err := time.Parse("15:04:05", departs)
	if err != nil {
		return nil, fmt.Errorf("load shard %d: departure time %q: %w", id, departs, err)
	}
	s.DepartsAt = s.Date.Add(time.Duration(clock.Hour())*time.Hour + time.Duration(clock.Minute())*time.Minute)
	rows, err := q.Query(ctx, `SELECT seq, station_code, km FROM train_stops WHERE train_number = $1 ORDER BY seq`, s.Train)
	if err != nil {
		return nil, fmt.Errorf("load shard %d stops: %w", id, err)
	}
	var st Stop
	if _, err := pgx.ForEachRow(rows, []any{&st.Seq, &st.Code, &st.Km}, func() error {
		s.Stops = append(s.Stops, st)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("load shard %d stops: %w", id, err)
	}
	rows, err = q.Query(ctx, `SELECT coach, berth_no, berth_type FROM shard_berths WHERE shard_id = $1 ORDER BY idx`, id)
	if err != nil {
		return nil, fmt.Errorf("load shard %d berths: %w", id, err)
	}
	var b Berth
	if _, err := pgx.ForEachRow(rows, []any{&b.Coach, &b.No, &b.Type}, func() error {
		s.Berths = append(s.Berths, b)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("load shard %d berths: %w", id, err)
	}
	return s, nil
}
