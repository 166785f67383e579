// Package alarms is the invariant watch and the console's alarms. A
// periodic River job (WatchArgs, every 30 s by default, once across all
// processes: jobs/schedule) runs the invariant check of every open shard
// (booking/inventory.CheckShards: Redis against PostgreSQL, no berth taken
// twice) and of the money (booking/payment.CheckMoney: every payment a
// ticket or a refund by its deadline, the wallet ledger balanced), and reads
// the thresholds (Thresholds): UNKNOWN payments too old, a refund backlog, a
// waiting room too deep, a payment route failing.
//
// Each condition found raises one alarm (a row of alarms), once while the
// condition lasts: the next passes only note they still see it, and the
// first pass that no longer does resolves it. Ops see the alarms on
// /console/alarms and acknowledge them; acknowledging is audited.
//
// A seat violation that may sell a berth twice (inventory.Report.Unsafe: a
// berth-leg PostgreSQL holds or sold that Redis has free, or a berth
// PostgreSQL gives twice; not berths only withheld or a stale record, which
// the seat sync and the sweep put right) also freezes
// the shard (the shard_frozen lever), in the transaction that raises the
// alarm, as the system (Actor) and audited: its new holds and payment
// starts are refused until a person thaws it through the lever flow. The
// watch freezes a shard once per alarm, so a person's thaw stands while the
// alarm lasts; thawing while it is open takes a second admin (levers).
//
// The same conditions are Prometheus alerting rules (console/prometheus),
// on the gauges /metrics exports (Figures, and the open alarms by kind), so
// an outside monitor sees them even when no process runs the watch.
package alarms

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"tatkal/booking"
	"tatkal/booking/audit"
	"tatkal/booking/db"
	"tatkal/booking/inventory"
	"tatkal/booking/payment"
	"tatkal/console/levers"
)

// Alarm kinds, with their scope.
const (
	KindSeats   = levers.SeatAlarm        // shard:N: the shard's seat invariants are broken
	KindMoney   = "payment_past_deadline" // payments neither a ticket nor a refund by their deadline
	KindLedger  = "wallet_ledger"         // wallets whose ledger does not add up
	KindUnknown = "payments_unknown"      // an UNKNOWN payment older than Thresholds.UnknownAfter
	KindRefunds = "refund_backlog"        // refunds pending too long, or too many
	KindQueue   = "queue_depth"           // shard:N: more travellers waiting than Thresholds.QueueDepth
	KindRoute   = "route_health"          // gateway/METHOD: a route failing or its breaker open
)

// Kinds lists every kind, in the order the console and /metrics show them.
var Kinds = []string{KindSeats, KindMoney, KindLedger, KindUnknown, KindRefunds, KindQueue, KindRoute}

// Actor is who the audit log says raised, resolved or froze: the system.
const Actor = levers.SystemPrefix + "invariant_check"

// WatchArgs is one pass of the invariant watch (Service.Watch).
type WatchArgs struct{}

func (WatchArgs) Kind() string { return "invariant_watch" }

// InsertOpts: one pass a time is enough; a pass that fails is the next
// interval's to repeat, not a retry's.
func (WatchArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 1, UniqueOpts: river.UniqueOpts{ByState: []rivertype.JobState{
		rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning, rivertype.JobStateScheduled}}}
}

// Thresholds are the limits past which a figure raises an alarm. The
// Prometheus rules (console/prometheus/alerts.yml) carry the defaults.
type Thresholds struct {
	UnknownAfter  time.Duration // an UNKNOWN payment older than this (TATKAL_ALARM_UNKNOWN_AFTER, default 5m)
	RefundAfter   time.Duration // a refund pending longer than this (TATKAL_ALARM_REFUND_AFTER, default 15m)
	RefundBacklog int           // or this many pending at once (TATKAL_ALARM_REFUND_BACKLOG, default 500)
	QueueDepth    int64         // travellers waiting for one shard (TATKAL_ALARM_QUEUE_DEPTH, default 200000)
	RouteErrorPct float64       // a route's failed calls in the last minute, percent (TATKAL_ALARM_ROUTE_ERROR_PCT, default 25)
	RouteMinCalls int           // over at least this many calls (TATKAL_ALARM_ROUTE_MIN_CALLS, default 20)
}

// DefaultThresholds are the thresholds of a deployment that sets none.
func DefaultThresholds() Thresholds {
	return Thresholds{UnknownAfter: 5 * time.Minute, RefundAfter: 15 * time.Minute, RefundBacklog: 500,
		QueueDepth: 200000, RouteErrorPct: 25, RouteMinCalls: 20}
}

// ThresholdsFromEnv reads the thresholds a deployment sets (getenv:
// os.Getenv); an unset variable keeps its default, a bad one is refused
// by name.
func ThresholdsFromEnv(getenv func(string) string) (Thresholds, error) {
	t := DefaultThresholds()
	dur := func(name string, dst *time.Duration) error {
		if v := getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d < 10*time.Second || d > 24*time.Hour {
				return fmt.Errorf("%s %q: want a duration between 10s and 24h, e.g. 5m", name, v)
			}
			*dst = d
		}
		return nil
	}
	num := func(name string, lo, hi int64, dst func(int64)) error {
		if v := getenv(name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < lo || n > hi {
				return fmt.Errorf("%s %q: want a whole number from %d to %d", name, v, lo, hi)
			}
			dst(n)
		}
		return nil
	}
	return t, errors.Join(
		dur("TATKAL_ALARM_UNKNOWN_AFTER", &t.UnknownAfter),
		dur("TATKAL_ALARM_REFUND_AFTER", &t.RefundAfter),
		num("TATKAL_ALARM_REFUND_BACKLOG", 1, 1e9, func(n int64) { t.RefundBacklog = int(n) }),
		num("TATKAL_ALARM_QUEUE_DEPTH", 1, 1e12, func(n int64) { t.QueueDepth = n }),
		num("TATKAL_ALARM_ROUTE_ERROR_PCT", 1, 100, func(n int64) { t.RouteErrorPct = float64(n) }),
		num("TATKAL_ALARM_ROUTE_MIN_CALLS", 1, 1e6, func(n int64) { t.RouteMinCalls = int(n) }))
}

// Config wires the watch.
type Config struct {
	Pool       *pgxpool.Pool
	Store      *inventory.Store
	Levers     *levers.Service
	HoldWindow time.Duration // for the seat check's grace
	Thresholds Thresholds    // zero: DefaultThresholds
	// QueueDepth is a shard's waiting and admitted travellers (the waiting
	// room's Depth); nil: the queue is not watched.
	QueueDepth func(ctx context.Context, shardID int64) (waiting, admitted int64, err error)
	// Routes is the payment routes' health (payment.Service.Healths); nil:
	// routes are not watched.
	Routes func(ctx context.Context) ([]payment.Health, error)
	Log    *slog.Logger
}

// Service runs the watch and keeps the alarms.
type Service struct{ cfg Config }

// New returns the alarms service.
func New(cfg Config) *Service {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Thresholds == (Thresholds{}) {
		cfg.Thresholds = DefaultThresholds()
	}
	return &Service{cfg: cfg}
}

// Thresholds are the thresholds in force.
func (s *Service) Thresholds() Thresholds { return s.cfg.Thresholds }

// Alarm is one alarm.
type Alarm struct {
	ID            int64
	Kind, Scope   string
	Detail        string
	RaisedAt      time.Time
	SeenAt        time.Time
	ResolvedAt    *time.Time
	AckBy         string
	AckAt         *time.Time
	LeverChangeID *int64 // the freeze the watch pulled for it
}

// condition is one thing wrong that a pass found.
type condition struct {
	kind, scope, detail string
	freeze              bool // pull the shard's freeze (seats that may sell twice)
}

// Pass is what one watch pass found and did.
type Pass struct {
	Shards   map[int64]inventory.Report
	Money    payment.MoneyReport
	Figures  Figures
	Raised   []Alarm // new alarms
	Frozen   []int64 // shards it froze
	Resolved int     // alarms it resolved
}

// watched is what a pass looked at, per kind: every scope of the kind
// (all), or only those scopes. An open alarm is resolved only where the
// pass looked and no longer saw it: a shard whose check failed to run
// keeps its alarm.
type watched map[string]scopes

// scopes are the scopes of a kind a pass looked at.
type scopes struct {
	all  bool
	some []string
}

func (w watched) all(kind string) { w[kind] = scopes{all: true} }

func (w watched) scope(kind, scope string) {
	e := w[kind]
	e.some = append(e.some, scope)
	w[kind] = e
}

// Watch runs one pass: every check and threshold, alarms raised and
// resolved, shards frozen. A check that cannot run is logged and joined
// into the error; what the others found is acted on all the same.
func (s *Service) Watch(ctx context.Context) (Pass, error) {
	var p Pass
	var errs []error
	var found []condition
	seen := watched{}

	ids, err := inventory.OpenShards(ctx, s.cfg.Pool)
	if err != nil {
		errs = append(errs, err)
	}
	p.Shards, err = inventory.CheckShards(ctx, s.cfg.Pool, s.cfg.Store, ids, s.cfg.HoldWindow)
	if err != nil {
		errs = append(errs, err)
	}
	for _, id := range ids {
		rep, ok := p.Shards[id]
		if !ok {
			continue
		}
		scope := shardScope(id)
		seen.scope(KindSeats, scope)
		if !rep.OK() {
			found = append(found, condition{kind: KindSeats, scope: scope, detail: strings.Join(rep.Violations, "; "), freeze: len(rep.Unsafe) > 0})
		}
	}

	if p.Money, err = payment.CheckMoney(ctx, s.cfg.Pool); err != nil {
		errs = append(errs, err)
	} else {
		seen.all(KindMoney)
		seen.all(KindLedger)
		if d := p.Money.PastDeadline(); d != "" {
			found = append(found, condition{kind: KindMoney, detail: d})
		}
		if n := len(p.Money.UnbalancedWallets); n > 0 {
			found = append(found, condition{kind: KindLedger, detail: fmt.Sprintf("%d wallet(s) whose ledger does not add up: users %v",
				n, p.Money.UnbalancedWallets[:min(n, 10)])})
		}
	}

	th := s.cfg.Thresholds
	if p.Figures, err = ReadFigures(ctx, s.cfg.Pool); err != nil {
		errs = append(errs, err)
	} else {
		seen.all(KindUnknown)
		seen.all(KindRefunds)
		f := p.Figures
		if f.UnknownOldest > th.UnknownAfter {
			found = append(found, condition{kind: KindUnknown, detail: fmt.Sprintf("%d UNKNOWN payment(s), the oldest %s old (threshold %s)",
				f.UnknownPayments, f.UnknownOldest.Round(time.Second), th.UnknownAfter)})
		}
		if f.RefundOldest > th.RefundAfter || f.PendingRefunds >= th.RefundBacklog {
			found = append(found, condition{kind: KindRefunds, detail: fmt.Sprintf("%d refund(s) pending, the oldest %s old (thresholds: %d pending, %s old)",
				f.PendingRefunds, f.RefundOldest.Round(time.Second), th.RefundBacklog, th.RefundAfter)})
		}
	}

	if s.cfg.QueueDepth != nil {
		for _, id := range ids {
			waiting, _, err := s.cfg.QueueDepth(ctx, id)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			seen.scope(KindQueue, shardScope(id))
			if waiting > th.QueueDepth {
				found = append(found, condition{kind: KindQueue, scope: shardScope(id),
					detail: fmt.Sprintf("%d travellers waiting (threshold %d)", waiting, th.QueueDepth)})
			}
		}
	}

	if s.cfg.Routes != nil {
		if hs, err := s.cfg.Routes(ctx); err != nil {
			errs = append(errs, fmt.Errorf("route health: %w", err))
		} else {
			seen.all(KindRoute)
			for _, h := range hs {
				if why := routeTrouble(h, th); why != "" {
					found = append(found, condition{kind: KindRoute, scope: h.Gateway + "/" + h.Method, detail: why})
				}
			}
		}
	}

	for _, c := range found {
		a, froze, err := s.raise(ctx, c)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if a.ID != 0 {
			p.Raised = append(p.Raised, a)
		}
		if froze != 0 {
			p.Frozen = append(p.Frozen, froze)
		}
	}
	n, err := s.resolve(ctx, seen, found)
	if err != nil {
		errs = append(errs, err)
	}
	p.Resolved = n
	return p, errors.Join(errs...)
}

func shardScope(id int64) string { return "shard:" + strconv.FormatInt(id, 10) }

// routeTrouble says what is wrong with a route ("" if nothing).
func routeTrouble(h payment.Health, th Thresholds) string {
	errPct := (1 - h.SuccessRate) * 100
	switch {
	case h.Open:
		return fmt.Sprintf("circuit breaker open; %.0f%% of %d calls failed in the last minute", errPct, h.Calls)
	case h.Calls >= th.RouteMinCalls && errPct >= th.RouteErrorPct:
		return fmt.Sprintf("%.0f%% of %d calls failed in the last minute (threshold %.0f%% over %d calls)", errPct, h.Calls, th.RouteErrorPct, th.RouteMinCalls)
	}
	return ""
}

// detailMax bounds an alarm's detail (the table's check).
const detailMax = 4000

// raise records c: a new alarm (audited, and the shard frozen if c says
// so), or, for one open already, that this pass still sees it. It returns
// the alarm if new and the shard it froze (0: none).
func (s *Service) raise(ctx context.Context, c condition) (Alarm, int64, error) {
	var a Alarm
	var froze int64
	detail := audit.CleanText(c.detail, detailMax)
	err := db.Transact(ctx, s.cfg.Pool, func(tx pgx.Tx) error {
		a, froze = Alarm{}, 0
		var inserted bool
		var changeID *int64
		var id int64
		if err := tx.QueryRow(ctx, `INSERT INTO alarms (kind, scope, detail) VALUES ($1, $2, $3)
			ON CONFLICT (kind, scope) WHERE resolved_at IS NULL DO UPDATE SET seen_at = now(), detail = excluded.detail
			RETURNING id, xmax = 0, lever_change_id`, c.kind, c.scope, detail).Scan(&id, &inserted, &changeID); err != nil {
			return fmt.Errorf("raise alarm %s %s: %w", c.kind, c.scope, err)
		}
		if inserted {
			if err := audit.Write(ctx, tx, Actor, "alarm.raise", c.kind+" "+c.scope, map[string]any{"alarm_id": id, "detail": detail}); err != nil {
				return err
			}
			a = Alarm{ID: id, Kind: c.kind, Scope: c.scope, Detail: detail}
		}
		// Once per alarm: a person who thawed the shard since decided so.
		if !c.freeze || changeID != nil || s.cfg.Levers == nil {
			return nil
		}
		change, changed, err := s.cfg.Levers.PullTx(ctx, tx, Actor, levers.Proposal{Name: levers.ShardFrozen, Scope: c.scope, Value: "on",
			Reason: fmt.Sprintf("alarm %d: the seat invariant check failed: %s", id, audit.CleanText(detail, 400))})
		if err != nil {
			return fmt.Errorf("freeze %s: %w", c.scope, err)
		}
		if changed {
			froze, _ = strconv.ParseInt(strings.TrimPrefix(c.scope, "shard:"), 10, 64)
			if _, err := tx.Exec(ctx, `UPDATE alarms SET lever_change_id = $2 WHERE id = $1`, id, change); err != nil {
				return fmt.Errorf("alarm %d: %w", id, err)
			}
		}
		return nil
	})
	if err != nil {
		return Alarm{}, 0, err
	}
	if a.ID != 0 {
		s.cfg.Log.Error("ALARM raised", "kind", a.Kind, "scope", a.Scope, "detail", a.Detail)
	}
	if froze != 0 {
		s.cfg.Log.Error("ALARM: shard frozen by the invariant check", "shard", froze)
	}
	return a, froze, nil
}

// resolve closes the open alarms the pass looked for and no longer saw.
func (s *Service) resolve(ctx context.Context, seen watched, found []condition) (int, error) {
	still := map[string][]string{}
	for _, c := range found {
		still[c.kind] = append(still[c.kind], c.scope)
	}
	n := 0
	err := db.Transact(ctx, s.cfg.Pool, func(tx pgx.Tx) error {
		n = 0
		for _, kind := range Kinds {
			w, ok := seen[kind]
			if !ok {
				continue
			}
			rows, err := tx.Query(ctx, `UPDATE alarms SET resolved_at = now()
				WHERE resolved_at IS NULL AND kind = $1 AND ($2 OR scope = ANY($3)) AND NOT (scope = ANY($4))
				RETURNING id, scope`, kind, w.all, nonNil(w.some), nonNil(still[kind]))
			if err != nil {
				return fmt.Errorf("resolve %s alarms: %w", kind, err)
			}
			type done struct {
				id    int64
				scope string
			}
			var closed []done
			var d done
			if _, err := pgx.ForEachRow(rows, []any{&d.id, &d.scope}, func() error { closed = append(closed, d); return nil }); err != nil {
				return fmt.Errorf("resolve %s alarms: %w", kind, err)
			}
			for _, d := range closed {
				if err := audit.Write(ctx, tx, Actor, "alarm.resolve", kind+" "+d.scope, map[string]any{"alarm_id": d.id,
					"why": "the watch no longer sees the condition"}); err != nil {
					return err
				}
				n++
			}
		}
		return nil
	})
	return n, err
}

func nonNil(xs []string) []string {
	if xs == nil {
		return []string{}
	}
	return xs
}

// Person is who acknowledges an alarm: a signed-in console user.
type Person struct {
	ID    int64
	Login string
}

// Acknowledge records that person has seen alarm id (open or resolved),
// audited in the same transaction. An alarm is acknowledged once.
func (s *Service) Acknowledge(ctx context.Context, id int64, by Person, note string) error {
	if by.ID == 0 {
		return booking.Errorf(booking.EFORBIDDEN, "NO_PERSON", "Alarms are acknowledged by a signed-in console user.")
	}
	note = strings.TrimSpace(note)
	if len(note) > 500 {
		return booking.Errorf(booking.EINVALID, "BAD_NOTE", "Keep the note under 500 characters.")
	}
	return db.Transact(ctx, s.cfg.Pool, func(tx pgx.Tx) error {
		var kind, scope string
		var ackAt *time.Time
		err := tx.QueryRow(ctx, `SELECT kind, scope, acknowledged_at FROM alarms WHERE id = $1 FOR UPDATE`, id).Scan(&kind, &scope, &ackAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return booking.Errorf(booking.ENOTFOUND, "NO_SUCH_ALARM", "No alarm %d.", id)
		}
		if err != nil {
			return fmt.Errorf("alarm %d: %w", id, err)
		}
		if ackAt != nil {
			return booking.Errorf(booking.ECONFLICT, "ACKNOWLEDGED", "Alarm %d is acknowledged already.", id)
		}
		if _, err := tx.Exec(ctx, `UPDATE alarms SET acknowledged_by = $2, acknowledged_by_id = $3, acknowledged_at = now() WHERE id = $1`,
			id, by.Login, by.ID); err != nil {
			return fmt.Errorf("acknowledge alarm %d: %w", id, err)
		}
		return audit.Write(ctx, tx, by.Login, "alarm.acknowledge", kind+" "+scope, map[string]any{"alarm_id": id, "note": note})
	})
}

// List returns the alarms nobody has acknowledged yet (open first, then
// those resolved since), and the latest acknowledged ones, up to limit.
func (s *Service) List(ctx context.Context, limit int) (unacked, acked []Alarm, err error) {
	rows, err := s.cfg.Pool.Query(ctx, `SELECT id, kind, scope, detail, raised_at, seen_at, resolved_at, coalesce(acknowledged_by, ''),
		acknowledged_at, lever_change_id FROM (
			(SELECT * FROM alarms WHERE acknowledged_at IS NULL ORDER BY (resolved_at IS NULL) DESC, raised_at DESC LIMIT $1)
			UNION ALL
			(SELECT * FROM alarms WHERE acknowledged_at IS NOT NULL ORDER BY acknowledged_at DESC LIMIT $1)) a
		ORDER BY (acknowledged_at IS NULL) DESC, (resolved_at IS NULL) DESC, raised_at DESC`, limit)
	if err != nil {
		return nil, nil, fmt.Errorf("list alarms: %w", err)
	}
	var a Alarm
	_, err = pgx.ForEachRow(rows, []any{&a.ID, &a.Kind, &a.Scope, &a.Detail, &a.RaisedAt, &a.SeenAt, &a.ResolvedAt, &a.AckBy, &a.AckAt, &a.LeverChangeID},
		func() error {
			if a.AckAt == nil {
				unacked = append(unacked, a)
			} else {
				acked = append(acked, a)
			}
			return nil
		})
	if err != nil {
		return nil, nil, fmt.Errorf("list alarms: %w", err)
	}
	return unacked, acked, nil
}

// OpenByKind counts the open (unresolved) alarms of every kind, for /metrics.
func (s *Service) OpenByKind(ctx context.Context) (map[string]int, error) {
	rows, err := s.cfg.Pool.Query(ctx, `SELECT kind, count(*) FROM alarms WHERE resolved_at IS NULL GROUP BY kind`)
	if err != nil {
		return nil, fmt.Errorf("open alarms: %w", err)
	}
	out := map[string]int{}
	for _, k := range Kinds {
		out[k] = 0
	}
	var kind string
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&kind, &n}, func() error { out[kind] = n; return nil }); err != nil {
		return nil, fmt.Errorf("open alarms: %w", err)
	}
	return out, nil
}

// Figures are the whole-stack figures the thresholds are read against,
// the same for the watch and for /metrics.
type Figures struct {
	UnknownPayments int           // payments UNKNOWN now
	UnknownOldest   time.Duration // how long the oldest of them has been (0: none)
	PendingRefunds  int           // refunds not yet processed
	RefundOldest    time.Duration // how long the oldest has waited (0: none)
	PastDeadline    int           // payments still open past their deadline
	LastWatch       *time.Time    // when the watch last completed a pass
}

// ReadFigures reads the Figures in one statement.
func ReadFigures(ctx context.Context, pool *pgxpool.Pool) (Figures, error) {
	var f Figures
	var unknown, refund float64
	err := pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM payments WHERE state = 'UNKNOWN'),
		coalesce((SELECT extract(epoch FROM now() - min(initiated_at)) FROM payments WHERE state = 'UNKNOWN'), 0)::float8,
		(SELECT count(*) FROM refunds WHERE state = 'PENDING'),
		coalesce((SELECT extract(epoch FROM now() - min(initiated_at)) FROM refunds WHERE state = 'PENDING'), 0)::float8,
		(SELECT count(*) FROM payments WHERE state IN ('INITIATED', 'AWAITING_USER', 'PENDING_AT_BANK', 'UNKNOWN') AND deadline < now()),
		(SELECT max(finalized_at) FROM river_job WHERE kind = $1 AND state = 'completed')`, WatchArgs{}.Kind()).
		Scan(&f.UnknownPayments, &unknown, &f.PendingRefunds, &refund, &f.PastDeadline, &f.LastWatch)
	if err != nil {
		return f, fmt.Errorf("alarm figures: %w", err)
	}
	f.UnknownOldest = time.Duration(unknown * float64(time.Second))
	f.RefundOldest = time.Duration(refund * float64(time.Second))
	return f, nil
}
