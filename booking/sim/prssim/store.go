package prssim

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"tatkal/booking/prs"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"tatkal/booking/db"
)

// Store errors the server maps to answers.
var (
	errNotFound    = errors.New("no such PNR")
	errPNRConflict = errors.New("PNR already synced with a different body")
)

// rejection is a definitive refusal of a booking.
type rejection struct{ reason, detail string }

func (r *rejection) Error() string { return r.reason + ": " + r.detail }

// store is the core's own storage: a schema of its own in the pool, so it
// shares nothing with our booking tables but the database server.
type store struct {
	pool   *pgxpool.Pool
	schema string // sanitised identifier
}

func newStore(pool *pgxpool.Pool, schema string) *store {
	return &store{pool: pool, schema: pgx.Identifier{schema}.Sanitize()}
}

// q puts the schema into a query: {s} stands for it.
func (s *store) q(sql string) string { return strings.ReplaceAll(sql, "{s}", s.schema) }

// migrate creates the schema idempotently. The advisory lock keeps two
// servers starting together from racing on the catalog.
func (s *store) migrate(ctx context.Context) error {
	err := db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('tatkal.prs.schema'))`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, s.q(`
CREATE EXTENSION IF NOT EXISTS btree_gist;
CREATE SCHEMA IF NOT EXISTS {s};
CREATE SEQUENCE IF NOT EXISTS {s}.core_ref_seq;
CREATE TABLE IF NOT EXISTS {s}.bookings (
    pnr          text PRIMARY KEY,
    core_ref     text NOT NULL UNIQUE,
    digest       text NOT NULL,
    train        text NOT NULL,
    journey_date date NOT NULL,
    class        text NOT NULL,
    quota        text NOT NULL,
    from_station text NOT NULL,
    to_station   text NOT NULL,
    from_seq     int NOT NULL,
    to_seq       int NOT NULL,
    status       text NOT NULL CHECK (status IN ('CONFIRMED', 'WAITLISTED')),
    waitlist_no  int NOT NULL DEFAULT 0,
    fare_paise   bigint NOT NULL,
    accepted_at  timestamptz NOT NULL DEFAULT now(),
    cancelled_at timestamptz,
    CHECK (from_seq < to_seq)
);
CREATE INDEX IF NOT EXISTS bookings_journey_date ON {s}.bookings (journey_date);
CREATE TABLE IF NOT EXISTS {s}.passengers (
    pnr          text NOT NULL REFERENCES {s}.bookings (pnr),
    seq          int NOT NULL,
    name         text NOT NULL,
    age          int NOT NULL,
    gender       text NOT NULL,
    coach        text,
    berth_no     int,
    berth_type   text,
    -- Copied from the booking so the exclusion constraint can see them.
    train        text NOT NULL,
    journey_date date NOT NULL,
    from_seq     int NOT NULL,
    to_seq       int NOT NULL,
    active       boolean NOT NULL, -- confirmed and not cancelled: holds its berth
    PRIMARY KEY (pnr, seq),
    CHECK (NOT active OR (coach IS NOT NULL AND berth_no IS NOT NULL)),
    -- The core can never double-book a berth, whatever its callers do.
    CONSTRAINT passengers_berth_once EXCLUDE USING gist (
        train WITH =, journey_date WITH =, coach WITH =, berth_no WITH =,
        int4range(from_seq, to_seq) WITH &&) WHERE (active)
);`))
		if err != nil {
			return err
		}
		return s.migrateCharts(ctx, tx)
	})
	if err != nil {
		return fmt.Errorf("create prs schema %s: %w", s.schema, err)
	}
	return nil
}

// ack reads a stored PNR's acknowledgement and request digest.
func (s *store) ack(ctx context.Context, pnr string) (prs.Ack, string, error) {
	a := prs.Ack{PNR: pnr}
	var digest string
	err := s.pool.QueryRow(ctx, s.q(`SELECT core_ref, accepted_at, digest FROM {s}.bookings WHERE pnr = $1`), pnr).
		Scan(&a.CoreRef, &a.AcceptedAt, &digest)
	if errors.Is(err, pgx.ErrNoRows) {
		return prs.Ack{}, "", errNotFound
	}
	if err != nil {
		return prs.Ack{}, "", fmt.Errorf("read ack of %s: %w", pnr, err)
	}
	a.AcceptedAt = a.AcceptedAt.UTC()
	return a, digest, nil
}

// put stores a validated booking once per PNR. created is false when the
// PNR was already stored with the same request (a replay, possibly a
// concurrent one). A different request under the PNR is errPNRConflict; a
// berth already held on an overlapping leg is a *rejection.
func (s *store) put(ctx context.Context, b prs.Booking) (ack prs.Ack, created bool, err error) {
	b = b.Request()
	digest := b.Digest()
	err = db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		created = false
		ack = prs.Ack{PNR: b.PNR}
		// ON CONFLICT waits for a concurrent insert of the same PNR to end,
		// so racing replays all see the one row that won.
		err := tx.QueryRow(ctx, s.q(`INSERT INTO {s}.bookings (pnr, core_ref, digest, train, journey_date, class, quota,
				from_station, to_station, from_seq, to_seq, status, waitlist_no, fare_paise)
			VALUES ($1, 'CR' || lpad(nextval('{s}.core_ref_seq')::text, 10, '0'), $2, $3, $4::date, $5, $6, $7, $8, $9, $10, $11, $12, $13)
			ON CONFLICT (pnr) DO NOTHING RETURNING core_ref, accepted_at`),
			b.PNR, digest, b.Train, b.JourneyDate, b.Class, b.Quota, b.From, b.To, b.FromSeq, b.ToSeq,
			b.Status, b.WaitlistNo, b.FarePaise).Scan(&ack.CoreRef, &ack.AcceptedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			var stored string
			if err := tx.QueryRow(ctx, s.q(`SELECT core_ref, accepted_at, digest FROM {s}.bookings WHERE pnr = $1`), b.PNR).
				Scan(&ack.CoreRef, &ack.AcceptedAt, &stored); err != nil {
				return fmt.Errorf("read existing %s: %w", b.PNR, err)
			}
			if stored != digest {
				return s.promote(ctx, tx, b, digest)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("insert booking: %w", err)
		}
		created = true
		batch := &pgx.Batch{}
		if b.Status == prs.StatusConfirmed {
			s.queueBerthLocks(batch, b)
		}
		for _, p := range b.Passengers {
			var coach, btype *string
			var berth *int
			if b.Status == prs.StatusConfirmed {
				coach, berth, btype = &p.Coach, &p.BerthNo, &p.BerthType
			}
			batch.Queue(s.q(`INSERT INTO {s}.passengers (pnr, seq, name, age, gender, coach, berth_no, berth_type,
					train, journey_date, from_seq, to_seq, active)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::date, $11, $12, $13)`),
				b.PNR, p.Seq, p.Name, p.Age, p.Gender, coach, berth, btype,
				b.Train, b.JourneyDate, b.FromSeq, b.ToSeq, b.Status == prs.StatusConfirmed)
		}
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return fmt.Errorf("insert passengers: %w", err)
		}
		return nil
	})
	if isExclusionViolation(err) {
		return prs.Ack{}, false, &rejection{reason: prs.ReasonBerthTaken, detail: s.takenDetail(ctx, b)}
	}
	if err != nil {
		if errors.Is(err, errPNRConflict) {
			return prs.Ack{}, false, err
		}
		return prs.Ack{}, false, fmt.Errorf("store %s: %w", b.PNR, err)
	}
	ack.AcceptedAt = ack.AcceptedAt.UTC()
	return ack, created, nil
}

// queueBerthLocks queues transaction locks on the booking's berths, in one
// global order. An exclusion constraint checks after inserting, so two
// bookings inserting the same berth at once each see the other's row, wait
// on each other and deadlock; PostgreSQL breaks that only after
// deadlock_timeout (1 s), and under a rush those seconds chain. With the
// berth locked first, the second booking waits for the first to end and
// then meets its committed row: a clean refusal at once.
func (s *store) queueBerthLocks(batch *pgx.Batch, b prs.Booking) {
	keys := make([]int64, 0, len(b.Passengers))
	for _, p := range b.Passengers {
		h := fnv.New64a()
		fmt.Fprintf(h, "prs berth\x00%s\x00%s\x00%s\x00%s\x00%d", s.schema, b.Train, b.JourneyDate, p.Coach, p.BerthNo)
		keys = append(keys, int64(h.Sum64()))
	}
	slices.Sort(keys)
	for _, k := range slices.Compact(keys) {
		batch.Queue(`SELECT pg_advisory_xact_lock($1)`, k)
	}
}

// promote takes a waitlisted PNR's confirmation (our waitlist promotion:
// the same journey, now with berths); any other change under a stored PNR
// is errPNRConflict.
func (s *store) promote(ctx context.Context, tx pgx.Tx, b prs.Booking, digest string) error {
	var status, train, class string
	var from, to int
	var cancelled bool
	err := tx.QueryRow(ctx, s.q(`SELECT status, train, class, from_seq, to_seq, cancelled_at IS NOT NULL FROM {s}.bookings
		WHERE pnr = $1 FOR UPDATE`), b.PNR).Scan(&status, &train, &class, &from, &to, &cancelled)
	if err != nil {
		return fmt.Errorf("read existing %s: %w", b.PNR, err)
	}
	if status != prs.StatusWaitlisted || cancelled || b.Status != prs.StatusConfirmed || train != b.Train || class != b.Class ||
		from != b.FromSeq || to != b.ToSeq {
		return errPNRConflict
	}
	if _, err := tx.Exec(ctx, s.q(`UPDATE {s}.bookings SET status = $2, waitlist_no = $3, digest = $4 WHERE pnr = $1`),
		b.PNR, b.Status, b.WaitlistNo, digest); err != nil {
		return err
	}
	locks := &pgx.Batch{}
	s.queueBerthLocks(locks, b)
	if err := tx.SendBatch(ctx, locks).Close(); err != nil {
		return fmt.Errorf("lock berths: %w", err)
	}
	for _, p := range b.Passengers {
		tag, err := tx.Exec(ctx, s.q(`UPDATE {s}.passengers SET coach = $3, berth_no = $4, berth_type = $5, active = true
			WHERE pnr = $1 AND seq = $2`), b.PNR, p.Seq, p.Coach, p.BerthNo, p.BerthType)
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return errPNRConflict
		}
	}
	return nil
}

// takenDetail names the berths that blocked a booking, for the people who
// will have to sort it out; it never names the other PNR.
func (s *store) takenDetail(ctx context.Context, b prs.Booking) string {
	keys := make([]string, 0, len(b.Passengers))
	for _, p := range b.Passengers {
		keys = append(keys, fmt.Sprintf("%s/%d", p.Coach, p.BerthNo))
	}
	rows, err := s.pool.Query(ctx, s.q(`SELECT DISTINCT coach || '/' || berth_no FROM {s}.passengers
		WHERE active AND train = $1 AND journey_date = $2::date AND int4range(from_seq, to_seq) && int4range($3, $4)
		AND coach || '/' || berth_no = ANY($5) ORDER BY 1`), b.Train, b.JourneyDate, b.FromSeq, b.ToSeq, keys)
	var taken []string
	if err == nil {
		taken, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil || len(taken) == 0 {
		return "a berth of this booking is already taken on an overlapping leg"
	}
	return fmt.Sprintf("berth %s of train %s on %s is already taken on an overlapping leg", strings.Join(taken, ", "), b.Train, b.JourneyDate)
}

func isExclusionViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23P01"
}

// cancel marks a PNR cancelled and frees its berths; cancelling again
// changes nothing.
func (s *store) cancel(ctx context.Context, pnr string) (prs.Booking, error) {
	err := db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, s.q(`UPDATE {s}.bookings SET cancelled_at = coalesce(cancelled_at, now()) WHERE pnr = $1`), pnr)
		if err != nil {
			return fmt.Errorf("cancel booking: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return errNotFound
		}
		if _, err := tx.Exec(ctx, s.q(`UPDATE {s}.passengers SET active = false WHERE pnr = $1 AND active`), pnr); err != nil {
			return fmt.Errorf("free berths: %w", err)
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, errNotFound) {
			return prs.Booking{}, err
		}
		return prs.Booking{}, fmt.Errorf("cancel %s: %w", pnr, err)
	}
	return s.get(ctx, pnr)
}

// get reads one stored booking with its state.
func (s *store) get(ctx context.Context, pnr string) (prs.Booking, error) {
	var out *prs.Booking
	err := s.scan(ctx, `b.pnr = $1`, pnr, func(b prs.Booking) error {
		out = &b
		return nil
	})
	if err != nil {
		return prs.Booking{}, fmt.Errorf("read %s: %w", pnr, err)
	}
	if out == nil {
		return prs.Booking{}, errNotFound
	}
	return *out, nil
}

// byDate streams every booking of a journey date, in PNR order.
func (s *store) byDate(ctx context.Context, date time.Time, fn func(prs.Booking) error) error {
	if err := s.scan(ctx, `b.journey_date = $1::date`, date.Format(prs.DateLayout), fn); err != nil {
		return fmt.Errorf("bookings of %s: %w", date.Format(prs.DateLayout), err)
	}
	return nil
}

// scan reads bookings matching where (one parameter, $1) with their
// passengers, handing each whole booking to fn.
func (s *store) scan(ctx context.Context, where string, arg any, fn func(prs.Booking) error) error {
	rows, err := s.pool.Query(ctx, s.q(`SELECT b.pnr, b.core_ref, b.train, b.journey_date, b.class, b.quota,
			b.from_station, b.to_station, b.from_seq, b.to_seq, b.status, b.waitlist_no, b.fare_paise,
			b.accepted_at, b.cancelled_at,
			p.seq, p.name, p.age, p.gender, coalesce(p.coach, ''), coalesce(p.berth_no, 0), coalesce(p.berth_type, '')
		FROM {s}.bookings b JOIN {s}.passengers p USING (pnr)
		WHERE `+where+` ORDER BY b.pnr, p.seq`), arg)
	if err != nil {
		return err
	}
	defer rows.Close()
	var cur prs.Booking
	flush := func() error {
		if cur.PNR == "" {
			return nil
		}
		b := cur
		cur = prs.Booking{}
		return fn(b)
	}
	for rows.Next() {
		var b prs.Booking
		var p prs.Passenger
		var date time.Time
		if err := rows.Scan(&b.PNR, &b.CoreRef, &b.Train, &date, &b.Class, &b.Quota, &b.From, &b.To,
			&b.FromSeq, &b.ToSeq, &b.Status, &b.WaitlistNo, &b.FarePaise, &b.AcceptedAt, &b.CancelledAt,
			&p.Seq, &p.Name, &p.Age, &p.Gender, &p.Coach, &p.BerthNo, &p.BerthType); err != nil {
			return err
		}
		if b.PNR != cur.PNR {
			if err := flush(); err != nil {
				return err
			}
			b.JourneyDate = date.Format(prs.DateLayout)
			b.AcceptedAt = b.AcceptedAt.UTC()
			b.State = b.Status
			if b.CancelledAt != nil {
				t := b.CancelledAt.UTC()
				b.CancelledAt, b.State = &t, prs.StateCancelled
			}
			cur = b
		}
		cur.Passengers = append(cur.Passengers, p)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return flush()
}
