package booking

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// IST is the zone Tatkal windows and journey dates are stated in.
var IST = time.FixedZone("IST", 5*3600+1800)

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
type Catalog struct {
	pool *pgxpool.Pool
	ttl  time.Duration

	mu    sync.Mutex
	byKey map[string]cached
	byID  map[int64]cached
}

type cached struct {
	shard  *Shard
	loaded time.Time
}

// NewCatalog returns a catalog whose entries live for ttl.
func NewCatalog(pool *pgxpool.Pool, ttl time.Duration) *Catalog {
	return &Catalog{pool: pool, ttl: ttl, byKey: map[string]cached{}, byID: map[int64]cached{}}
}

func intentKey(train string, date time.Time, class, quota string) string {
	return train + "|" + date.Format(time.DateOnly) + "|" + class + "|" + quota
}

// Find returns the shard for an intent, or ENOTFOUND.
func (c *Catalog) Find(ctx context.Context, train string, date time.Time, class, quota string) (*Shard, error) {
	key := intentKey(train, date, class, quota)
	c.mu.Lock()
	e, ok := c.byKey[key]
	c.mu.Unlock()
	if ok && time.Since(e.loaded) < c.ttl {
		if e.shard == nil {
			return nil, notFoundShard(train, date, class, quota)
		}
		return e.shard, nil
	}
	var id int64
	err := c.pool.QueryRow(ctx, `SELECT id FROM inventory_shards
		WHERE train_number = $1 AND journey_date = $2 AND class = $3 AND quota = $4`,
		train, date, class, quota).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		c.mu.Lock()
		c.byKey[key] = cached{loaded: time.Now()}
		c.mu.Unlock()
		return nil, notFoundShard(train, date, class, quota)
	}
	if err != nil {
		return nil, fmt.Errorf("find shard %s: %w", key, err)
	}
	return c.ByID(ctx, id)
}

func notFoundShard(train string, date time.Time, class, quota string) error {
	return Errorf(ENOTFOUND, "NO_SUCH_SHARD", "Train %s has no %s %s quota on %s.", train, class, quota, date.Format(time.DateOnly))
}

// ByID returns a shard by id, or ENOTFOUND.
func (c *Catalog) ByID(ctx context.Context, id int64) (*Shard, error) {
	c.mu.Lock()
	e, ok := c.byID[id]
	c.mu.Unlock()
	if ok && time.Since(e.loaded) < c.ttl {
		return e.shard, nil
	}
	s, err := LoadShard(ctx, c.pool, id)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	c.mu.Lock()
	c.byID[id] = cached{shard: s, loaded: now}
	c.byKey[s.Key()] = cached{shard: s, loaded: now}
	c.mu.Unlock()
	return s, nil
}

// Forget drops cached entries so the next lookup reads PostgreSQL.
func (c *Catalog) Forget() {
	c.mu.Lock()
	c.byKey, c.byID = map[string]cached{}, map[int64]cached{}
	c.mu.Unlock()
}

// LoadShard reads a shard with its route, berths and fare rule.
func LoadShard(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, id int64) (*Shard, error) {
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
