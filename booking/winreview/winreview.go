// Package winreview writes the post-window review: once a shard's Tatkal
// window has closed and Settle has passed (payments started in the window
// have mostly ended), one row of window_reviews with the window's funnel
// against what was expected (the berths on sale), its fairness figures
// (window_fairness, when computed), its money (payments, refunds and what
// is still UNKNOWN), its incidents (the invariant watch's alarms, payments
// still open, shed calls) and
// the levers changed while it was open. Figures are read from PostgreSQL,
// the system of record, never from Redis's short-lived counts, so a review
// written late says the same. The periodic job (Args, every minute) writes
// every review due; a review is written once (the shard is its key) and
// never changed: later events belong to reconciliation, not to the window.
package winreview

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
)

// Settle is how long after a window closes its review waits.
const Settle = 15 * time.Minute

// Args is the periodic job that writes the reviews due.
type Args struct{}

func (Args) Kind() string { return "window_review" }
func (Args) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: river.QueueDefault, MaxAttempts: 3}
}

// Review is one window's review, as stored in window_reviews.figures.
type Review struct {
	ShardID     int64     `json:"shard_id"`
	Label       string    `json:"label"`
	OpensAt     time.Time `json:"opens_at"`
	ClosesAt    time.Time `json:"closes_at"`
	WrittenAt   time.Time `json:"written_at"`
	Funnel      Funnel    `json:"funnel"`
	Fairness    *Fairness `json:"fairness"` // nil: not computed
	Money       Money     `json:"money"`
	Incidents   []string  `json:"incidents"`
	LeversPulls []Lever   `json:"levers"`
}

// Funnel is the window's funnel beside the expected figure: every berth
// on sale sold.
type Funnel struct {
	BerthsOnSale   int     `json:"berths_on_sale"` // the expected seats sold
	QueueEntrants  int64   `json:"queue_entrants"`
	Admitted       int64   `json:"admitted"`
	Holds          int64   `json:"holds"`
	SeatsHeld      int64   `json:"seats_held"`
	Bookings       int64   `json:"bookings_confirmed"`
	SeatsConfirmed int64   `json:"seats_confirmed"`
	Expired        int64   `json:"holds_expired"`
	SoldShare      float64 `json:"sold_share"` // seats confirmed / berths on sale
}

// Fairness is the window's published fairness figures in brief.
type Fairness struct {
	Entrants    int64    `json:"entrants"`
	SpearmanRho *float64 `json:"spearman_rho"`
	Verified    bool     `json:"verified"`
}

// Money is the window's payments and refunds.
type Money struct {
	Payments        []StateSum `json:"payments"`
	Refunds         []StateSum `json:"refunds"`
	CapturedPaise   int64      `json:"captured_paise"`
	RefundedPaise   int64      `json:"refunded_paise"`
	UnknownPayments int64      `json:"unknown_payments"`
	UnknownPaise    int64      `json:"unknown_paise"`
}

// StateSum is how many, and how much, in one state.
type StateSum struct {
	State string `json:"state"`
	Count int64  `json:"count"`
	Paise int64  `json:"paise"`
}

// Lever is a lever change proposed while the window was open, on this
// shard or for all.
type Lever struct {
	ID         int64     `json:"id"`
	Name       string    `json:"name"`
	Scope      string    `json:"scope"`
	Old        string    `json:"old"`
	New        string    `json:"new"`
	State      string    `json:"state"`
	ProposedBy string    `json:"proposed_by"`
	ApprovedBy string    `json:"approved_by,omitempty"`
	At         time.Time `json:"at"`
	Reason     string    `json:"reason"`
}

// Due lists the shards whose window closed at least settle before now
// and have no review, oldest first, at most n.
func Due(ctx context.Context, pool *pgxpool.Pool, now time.Time, settle time.Duration, n int) ([]int64, error) {
	rows, err := pool.Query(ctx, `SELECT s.id FROM inventory_shards s
		WHERE s.window_closes_at <= $1 AND NOT EXISTS (SELECT 1 FROM window_reviews r WHERE r.shard_id = s.id)
		ORDER BY s.window_closes_at, s.id LIMIT $2`, now.Add(-settle), n)
	if err != nil {
		return nil, fmt.Errorf("reviews due: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// WriteDue writes every review due now (at most 50 a run; the next run
// takes the rest) and says how many it wrote.
func WriteDue(ctx context.Context, pool *pgxpool.Pool, now time.Time, settle time.Duration) (int, error) {
	ids, err := Due(ctx, pool, now, settle, 50)
	if err != nil {
		return 0, err
	}
	// One window that cannot be reviewed does not hold up the others.
	var errs []error
	wrote := 0
	for _, id := range ids {
		if err := Write(ctx, pool, id, now); err != nil {
			errs = append(errs, err)
			continue
		}
		wrote++
	}
	return wrote, errors.Join(errs...)
}

// Write computes shard's review and keeps it (a review already written
// stays as it was).
func Write(ctx context.Context, pool *pgxpool.Pool, shardID int64, now time.Time) error {
	r, err := Compute(ctx, pool, shardID, now)
	if err != nil {
		return err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("review %d: %w", shardID, err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO window_reviews (shard_id, written_at, figures) VALUES ($1, $2, $3) ON CONFLICT (shard_id) DO NOTHING`,
		shardID, now, b); err != nil {
		return fmt.Errorf("keep review %d: %w", shardID, err)
	}
	return nil
}

// Compute reads shard's review from PostgreSQL.
func Compute(ctx context.Context, pool *pgxpool.Pool, shardID int64, now time.Time) (Review, error) {
	r := Review{ShardID: shardID, WrittenAt: now, Incidents: []string{}, LeversPulls: []Lever{}}
	wrap := func(what string, err error) error { return fmt.Errorf("review %d: %s: %w", shardID, what, err) }
	if err := pool.QueryRow(ctx, `SELECT train_number || ' ' || class || ' ' || journey_date::text || ' ' || quota, window_opens_at, window_closes_at, total_berths
		FROM inventory_shards WHERE id = $1`, shardID).Scan(&r.Label, &r.OpensAt, &r.ClosesAt, &r.Funnel.BerthsOnSale); err != nil {
		return r, wrap("shard", err)
	}
	f := &r.Funnel
	if err := pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM admission_entrants WHERE shard_id = $1),
		(SELECT count(*) FROM admission_log WHERE shard_id = $1),
		(SELECT count(*) FROM holds WHERE shard_id = $1),
		(SELECT coalesce(sum(seat_count), 0) FROM holds WHERE shard_id = $1),
		(SELECT count(*) FROM holds WHERE shard_id = $1 AND state = 'EXPIRED'),
		(SELECT count(*) FROM bookings WHERE shard_id = $1 AND status = 'CONFIRMED'),
		(SELECT coalesce(sum(h.seat_count), 0) FROM bookings b JOIN holds h ON h.id = b.hold_id WHERE b.shard_id = $1 AND b.status = 'CONFIRMED')`,
		shardID).Scan(&f.QueueEntrants, &f.Admitted, &f.Holds, &f.SeatsHeld, &f.Expired, &f.Bookings, &f.SeatsConfirmed); err != nil {
		return r, wrap("funnel", err)
	}
	if f.BerthsOnSale > 0 {
		f.SoldShare = float64(f.SeatsConfirmed) / float64(f.BerthsOnSale)
	}
	var fair Fairness
	err := pool.QueryRow(ctx, `SELECT entrants, spearman_rho, verified FROM window_fairness WHERE shard_id = $1 ORDER BY computed_at DESC LIMIT 1`,
		shardID).Scan(&fair.Entrants, &fair.SpearmanRho, &fair.Verified)
	switch {
	case err == nil:
		r.Fairness = &fair
	case !errors.Is(err, pgx.ErrNoRows):
		return r, wrap("fairness", err)
	}
	sums := func(sql string) ([]StateSum, error) {
		rows, err := pool.Query(ctx, sql, shardID)
		if err != nil {
			return nil, err
		}
		return pgx.CollectRows(rows, pgx.RowToStructByPos[StateSum])
	}
	m := &r.Money
	if m.Payments, err = sums(`SELECT p.state, count(*), coalesce(sum(p.amount_paise), 0)::bigint FROM payments p JOIN holds h ON h.id = p.hold_id
		WHERE h.shard_id = $1 GROUP BY p.state ORDER BY p.state`); err != nil {
		return r, wrap("payments", err)
	}
	if m.Refunds, err = sums(`SELECT f.state, count(*), coalesce(sum(f.amount_paise), 0)::bigint FROM refunds f JOIN payments p ON p.id = f.payment_id
		JOIN holds h ON h.id = p.hold_id WHERE h.shard_id = $1 GROUP BY f.state ORDER BY f.state`); err != nil {
		return r, wrap("refunds", err)
	}
	var open int64
	for _, p := range m.Payments {
		switch p.State {
		case "SUCCESS", "REFUNDED": // money that arrived, refunded or not
			m.CapturedPaise += p.Paise
		case "UNKNOWN":
			m.UnknownPayments, m.UnknownPaise = p.Count, p.Paise
		case "INITIATED", "AWAITING_USER", "PENDING_AT_BANK":
			open += p.Count
		}
	}
	for _, f := range m.Refunds {
		if f.State == "PROCESSED" {
			m.RefundedPaise += f.Paise
		}
	}
	if m.UnknownPayments > 0 {
		r.Incidents = append(r.Incidents, fmt.Sprintf("%d payment(s) still UNKNOWN (₹%d) when the review was written", m.UnknownPayments, m.UnknownPaise/100))
	}
	if open > 0 {
		r.Incidents = append(r.Incidents, fmt.Sprintf("%d payment(s) still open when the review was written", open))
	}
	if f.BerthsOnSale > 0 && f.SeatsConfirmed < int64(f.BerthsOnSale) && f.QueueEntrants+f.Holds > int64(f.BerthsOnSale) {
		r.Incidents = append(r.Incidents, fmt.Sprintf("demand outran the berths (%d entrants, %d holds) yet only %d of %d berths were sold",
			f.QueueEntrants, f.Holds, f.SeatsConfirmed, f.BerthsOnSale))
	}
	// The alarms the invariant watch raised while the window was open, on
	// this shard or on what every shard shares (routes, money).
	rows, err := pool.Query(ctx, `SELECT format('alarm %s%s: %s%s', kind, CASE WHEN scope = '' THEN '' ELSE ' (' || scope || ')' END, detail,
			CASE WHEN resolved_at IS NULL THEN ' (still open)' ELSE '' END) FROM alarms
		WHERE raised_at BETWEEN $2 AND $3 AND (scope = 'shard:' || $1::bigint OR scope NOT LIKE 'shard:%')
		ORDER BY raised_at, id`, shardID, r.OpensAt, r.ClosesAt)
	if err != nil {
		return r, wrap("alarms", err)
	}
	raised, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return r, wrap("alarms", err)
	}
	r.Incidents = append(r.Incidents, raised...)
	rows, err = pool.Query(ctx, `SELECT id, name, scope, old_value, new_value, state, proposed_by, coalesce(approved_by, ''), proposed_at, reason
		FROM lever_changes WHERE proposed_at BETWEEN $2 AND $3 AND (scope = 'shard:' || $1::bigint OR scope NOT LIKE 'shard:%')
		ORDER BY proposed_at, id`, shardID, r.OpensAt, r.ClosesAt)
	if err != nil {
		return r, wrap("levers", err)
	}
	if r.LeversPulls, err = pgx.CollectRows(rows, pgx.RowToStructByPos[Lever]); err != nil {
		return r, wrap("levers", err)
	}
	return r, nil
}

// Worker is the thin worker of Args.
type Worker struct {
	river.WorkerDefaults[Args]
	Pool   *pgxpool.Pool
	Settle time.Duration // 0: Settle
}

func (w *Worker) Work(ctx context.Context, _ *river.Job[Args]) error {
	settle := w.Settle
	if settle == 0 {
		settle = Settle
	}
	_, err := WriteDue(ctx, w.Pool, time.Now(), settle)
	return err
}
