package recon

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"tatkal/booking"
	"tatkal/booking/db"
)

// RunRequest names one reconciliation: a gateway's business date.
type RunRequest struct {
	Gateway string
	Date    time.Time // the business date (its calendar day)
	// AsOf is the moment the ageing rules are judged at ("no file by T+3");
	// default now.
	AsOf time.Time
	By   string // a person, or job:<name>
}

// RunSummary is what a run found.
type RunSummary struct {
	ID              int64     `json:"id"`
	Gateway         string    `json:"gateway"`
	BusinessDate    time.Time `json:"business_date"`
	AsOf            time.Time `json:"as_of"`
	RunBy           string    `json:"run_by"`
	StartedAt       time.Time `json:"started_at"`
	FinishedAt      time.Time `json:"finished_at"`
	OurItems        int       `json:"our_items"`
	Lines           int       `json:"lines"`
	Matched         int       `json:"matched"`
	AmountMatched   int64     `json:"amount_matched_paise"`
	AmountUnmatched int64     `json:"amount_unmatched_paise"`
	Fees            int64     `json:"fees_paise"`
	Tax             int64     `json:"tax_paise"`
	Net             int64     `json:"net_paise"`
	Payouts         int64     `json:"payouts_paise"`
	Exceptions      int       `json:"exceptions"`
	NewExceptions   int       `json:"new_exceptions"`
	Cleared         int       `json:"cleared"`
	Files           []int64   `json:"files"`
}

// MatchRate is the share of our items and their lines that matched.
func (r RunSummary) MatchRate() float64 {
	if r.Matched+r.Exceptions == 0 {
		return 1
	}
	return float64(r.Matched) / float64(r.Matched+r.Exceptions)
}

// Run reconciles one gateway's business date against every current file
// in PostgreSQL, set-wise: a handful of statements over temporary tables,
// whatever the day's volume. It is idempotent: a rerun finds the same
// exceptions (never a second copy), closes those that no longer reproduce
// as CLEARED_ON_RERUN, and enqueues each automatic resolution once.
func (s *Service) Run(ctx context.Context, req RunRequest) (RunSummary, error) {
	if !gatewayID.MatchString(req.Gateway) {
		return RunSummary{}, booking.Errorf(booking.EINVALID, "NO_GATEWAY", "Name the gateway to reconcile (lower-case id), not %q.", req.Gateway)
	}
	if req.Date.IsZero() {
		return RunSummary{}, booking.Errorf(booking.EINVALID, "NO_DATE", "Name the business date to reconcile.")
	}
	if req.By == "" {
		return RunSummary{}, booking.Errorf(booking.EINVALID, "NO_ACTOR", "Say who (or which job) runs the reconciliation.")
	}
	now := s.cfg.Now()
	if req.AsOf.IsZero() {
		req.AsOf = now
	}
	day := dateOnly(req.Date)
	start := time.Date(day.Year(), day.Month(), day.Day(), 0, 0, 0, 0, booking.IST)
	conn, release, err := s.runConn(ctx)
	if err != nil {
		return RunSummary{}, fmt.Errorf("reconcile %s %s: %w", req.Gateway, day.Format(time.DateOnly), err)
	}
	defer release()
	var runID int64
	var attempts []int64 // a retried transaction's earlier runs left core-leg rows
	err = db.Transact(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('recon.run|' || $1 || '|' || $2, 0))`,
			req.Gateway, day.Format(time.DateOnly)); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `INSERT INTO recon_runs (gateway, business_date, as_of, run_by) VALUES ($1, $2, $3, $4) RETURNING id`,
			req.Gateway, pgDate(day), req.AsOf, req.By).Scan(&runID); err != nil {
			return fmt.Errorf("record run: %w", err)
		}
		attempts = append(attempts, runID)
		return s.match(ctx, tx, runID, req, day, start, now)
	})
	for _, id := range attempts {
		if err != nil || id != runID {
			s.dropCoreLeg(ctx, id)
		}
	}
	if err != nil {
		return RunSummary{}, fmt.Errorf("reconcile %s %s: %w", req.Gateway, day.Format(time.DateOnly), err)
	}
	sum, err := s.RunByID(ctx, runID)
	if err != nil {
		return sum, err
	}
	s.log.InfoContext(ctx, "recon run", "id", runID, "gateway", req.Gateway, "date", day.Format(time.DateOnly),
		"lines", sum.Lines, "matched", sum.Matched, "exceptions", sum.Exceptions, "new", sum.NewExceptions, "cleared", sum.Cleared)
	return sum, nil
}

// runTempBuffers is the memory a run's connection keeps its temporary
// tables in. PostgreSQL's default (8 MB) holds a sliver of a day of a
// million payments: every page of the run's temporary tables went out to
// a file and was read back, pass after pass.
const runTempBuffers = "512MB"

// runConn is the connection a run uses: one of the pool's, given a larger
// temp_buffers when PostgreSQL still allows it (only before the session's
// first temporary table). Such a connection is closed afterwards instead of
// going back to the pool, so the local buffers it grew go with it and no
// other work keeps them.
func (s *Service) runConn(ctx context.Context) (*pgxpool.Conn, func(), error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("connection: %w", err)
	}
	if _, err := conn.Exec(ctx, `SET temp_buffers = '`+runTempBuffers+`'`); err != nil {
		// This session has used temporary tables already: the default stays.
		s.log.DebugContext(ctx, "recon run keeps temp_buffers", "err", err)
		return conn, conn.Release, nil
	}
	return conn, func() {
		c := conn.Hijack()
		closeCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c.Close(closeCtx) //nolint:errcheck // the backend ends either way
	}, nil
}

// step is one set-based statement of a run, named for errors.
type step struct {
	name string
	sql  string
}

// reviewEvidence is an exception's evidence of its payment's open review
// (p is a row of rc_pc), '{}' when there is none: looked up only then.
const reviewEvidence = `CASE WHEN p.in_review THEN jsonb_build_object('payment_review', (SELECT min(r.id) FROM payment_reviews r
		WHERE r.payment_id = p.id AND r.resolved_at IS NULL)) ELSE '{}' END`

// foundTable holds what a run found, before it becomes exceptions.
const foundTable = `CREATE TEMP TABLE rc_found (
		kind text NOT NULL, ref text NOT NULL, payment_id uuid, hold_id uuid, refund_id uuid, pnr text NOT NULL DEFAULT '',
		psp_ref text NOT NULL DEFAULT '', payout_id text NOT NULL DEFAULT '', amount bigint NOT NULL, diff bigint NOT NULL DEFAULT 0,
		stake bigint NOT NULL, path text NOT NULL, evidence jsonb NOT NULL DEFAULT '{}', PRIMARY KEY (kind, ref)) ON COMMIT DROP`

// The statements of a run, in order. Parameters: $1 gateway, $2 business
// date, $3 start of the day (IST), $4 end of the day, $5 as-of, $6 the
// moment after which a missing line counts (end of T+3), $7 the same for
// booked-not-paid (end of T+2), $8 contracted methods, $9 their bps, $10
// the run, $11 our payments' psp column for the gateway (empty for the wallet).
// Every statement is SQL over sets; nothing loops over rows in Go.
var matchSteps = []step{
	{"our payments", `CREATE TEMP TABLE rc_pay ON COMMIT DROP AS
		SELECT p.id, p.hold_id, p.method, p.state, p.amount_paise AS amount, coalesce(p.psp_ref, '') AS psp_ref,
		       coalesce(p.resolved_at, p.initiated_at) AS resolved_at,
		       -- A payment a person is reviewing (payment_reviews: the gateway
		       -- contradicted itself or us) gets no automatic resolution: its
		       -- exception goes to a person, who sees the review beside it.
		       p.id IN (SELECT r.payment_id FROM payment_reviews r WHERE r.resolved_at IS NULL) AS in_review
		FROM payments p WHERE p.psp = $11 AND p.initiated_at >= $3 AND p.initiated_at < $4`},
	{"our refunds", `CREATE TEMP TABLE rc_ref ON COMMIT DROP AS
		SELECT r.id, r.payment_id, r.amount_paise AS amount, r.state, p.hold_id, coalesce(p.psp_ref, '') AS psp_ref
		FROM refunds r JOIN payments p ON p.id = r.payment_id
		WHERE p.psp = $11 AND r.initiated_at >= $3 AND r.initiated_at < $4`},
	// Exact keys: our payment id = merchant reference, else psp_ref; our
	// refund id = the refund's merchant reference, else the gateway's
	// refund ref. Lines from T-3 to T+3 take part (the T+0..T+3 tolerance).
	{"settlement lines", `CREATE TEMP TABLE rc_line ON COMMIT DROP AS
		SELECT l.id, l.business_date AS file_day, l.kind, l.ext_ref, l.merchant_ref, l.amount_paise AS amount,
		       l.fee_paise AS fee, l.tax_paise AS tax, l.net_paise AS net, l.event_at, l.value_date, l.payout_id,
		       coalesce(pm.id, pp.id, rf.payment_id) AS pay_id, rf.id AS refund_id
		FROM recon_lines l
		LEFT JOIN payments pm ON l.kind <> 'REFUND' AND pm.id = l.merchant_uuid AND pm.psp = $11
		-- The psp_ref fallback is probed only for a line its merchant
		-- reference did not match (psp_ref is unique); OFFSET 0 keeps the
		-- planner from flattening it into a join that probes every line.
		LEFT JOIN LATERAL (SELECT pp.id FROM payments pp WHERE pm.id IS NULL AND pp.psp = $11
		      AND pp.psp_ref = CASE WHEN l.kind = 'REFUND' THEN l.parent_ref ELSE l.ext_ref END OFFSET 0) pp ON true
		LEFT JOIN LATERAL (SELECT r.id, r.payment_id FROM refunds r
		      WHERE l.kind = 'REFUND' AND (r.id = l.merchant_uuid OR (l.ext_ref <> '' AND r.gateway_ref = l.ext_ref))
		      ORDER BY r.id = l.merchant_uuid DESC LIMIT 1) rf ON true
		-- A day's current lines are its current file's lines, found by file.
		WHERE l.file_id IN (SELECT f.id FROM recon_files f WHERE f.source = 'SETTLEMENT' AND f.gateway = $1
		                    AND f.business_date BETWEEN $2::date - 3 AND $2::date + 3 AND f.superseded_by IS NULL)
		  AND l.current AND l.source = 'SETTLEMENT' AND l.gateway = $1`},
	// One hashed grouping of the lines by payment feeds every figure; only
	// a payment with several capture lines (rare) gathers its line ids, in
	// order. (A window over lines sorted by payment and id cost twice as
	// much; ordered aggregates sorted each of a million groups apart.) The
	// dates are the earliest of the payment's lines.
	{"captures", `CREATE TEMP TABLE rc_cap ON COMMIT DROP AS
		WITH g AS (SELECT pay_id, count(*) AS n, min(amount) AS amount, max(amount) AS amount_max, min(fee) AS fee, min(tax) AS tax,
		                  min(ext_ref) AS ext_ref, min(file_day) AS file_day, min(id) AS first_id, min(event_at) AS event_at,
		                  min(value_date) AS value_date
		           FROM rc_line WHERE kind = 'CAPTURE' AND pay_id IS NOT NULL GROUP BY pay_id)
		SELECT g.pay_id, g.n, g.amount, g.amount_max, g.fee, g.tax, g.ext_ref, g.file_day,
		       coalesce(m.line_ids, ARRAY[g.first_id]) AS line_ids, g.event_at, g.value_date
		FROM g LEFT JOIN (SELECT l.pay_id, array_agg(l.id ORDER BY l.id) AS line_ids FROM rc_line l
		                  WHERE l.kind = 'CAPTURE' AND l.pay_id IN (SELECT pay_id FROM g WHERE n > 1) GROUP BY l.pay_id) m
		       ON m.pay_id = g.pay_id`},
	// Without statistics the planner guessed rc_cap's size and merged the
	// two sorted, wide tables instead of hashing one.
	{"analyze captures", `ANALYZE rc_pay (id, hold_id, state), rc_cap (pay_id)`},
	// Our payments joined once to their captures, bookings and refunds:
	// the rules below filter this one table instead of each joining again.
	{"payments with captures", `CREATE TEMP TABLE rc_pc ON COMMIT DROP AS
		-- refunded: one hashed set of refunded payments, not a probe per payment.
		SELECT p.*, b.id IS NOT NULL AS booked, p.id IN (SELECT r.payment_id FROM refunds r) AS refunded,
		       c.n, c.amount AS c_amount, c.amount_max AS c_amount_max, c.fee AS c_fee, c.tax AS c_tax, c.ext_ref AS c_ext_ref,
		       c.file_day AS c_file_day, c.line_ids AS c_line_ids, c.event_at AS c_event_at, c.value_date AS c_value_date
		FROM rc_pay p LEFT JOIN rc_cap c ON c.pay_id = p.id LEFT JOIN bookings b ON b.hold_id = p.hold_id`},
	// Only the columns the rules join and filter on: statistics of the
	// arrays, amounts and times cost more than the row counts they come with.
	// rc_cap is read whole, once more, by a hash join.
	{"analyze", `ANALYZE rc_ref, rc_line (id, kind, ext_ref, pay_id, refund_id, file_day, payout_id),
		rc_pc (id, hold_id, state, method, n, booked, refunded)`},
	{"found", foundTable},

	{PaidNotBooked, `INSERT INTO rc_found (kind, ref, payment_id, hold_id, psp_ref, amount, stake, path, evidence)
		SELECT 'PAID_NOT_BOOKED', p.id::text, p.id, p.hold_id, p.c_ext_ref, p.c_amount, p.c_amount, CASE WHEN p.in_review THEN 'MANUAL' ELSE 'AUTO' END,
		       jsonb_build_object('our_state', p.state, 'lines', p.c_line_ids) || ` + reviewEvidence + `
		FROM rc_pc p
		WHERE p.n IS NOT NULL AND p.state NOT IN ('FAILED', 'REFUNDED') AND p.hold_id IS NOT NULL -- a wallet top-up books nothing
		  AND NOT p.booked AND NOT p.refunded
		ON CONFLICT DO NOTHING`},
	{StatusMismatch, `INSERT INTO rc_found (kind, ref, payment_id, hold_id, psp_ref, amount, stake, path, evidence)
		SELECT 'STATUS_MISMATCH', p.id::text, p.id, p.hold_id, p.c_ext_ref, p.c_amount, p.c_amount,
		       CASE WHEN p.state = 'FAILED' OR p.in_review THEN 'MANUAL' ELSE 'AUTO' END,
		       jsonb_build_object('our_state', p.state, 'file_state', 'CAPTURED', 'lines', p.c_line_ids) || ` + reviewEvidence + `
		FROM rc_pc p
		WHERE p.n IS NOT NULL
		  AND (p.state = 'FAILED' OR (p.state IN ('INITIATED', 'AWAITING_USER', 'PENDING_AT_BANK', 'UNKNOWN') AND p.booked))
		ON CONFLICT DO NOTHING`},
	// The charge kept is the hold's first unrefunded success; a later one
	// with a capture line and no refund is the duplicate.
	{DuplicateCharge, `INSERT INTO rc_found (kind, ref, payment_id, hold_id, psp_ref, amount, stake, path, evidence)
		SELECT 'DUPLICATE_CHARGE', p.id::text, p.id, p.hold_id, p.c_ext_ref, p.amount, p.amount, CASE WHEN p.in_review THEN 'MANUAL' ELSE 'AUTO' END,
		       jsonb_build_object('kept', (SELECT q.id FROM payments q WHERE q.hold_id = p.hold_id AND q.state = 'SUCCESS'
		           ORDER BY coalesce(q.resolved_at, q.initiated_at), q.id LIMIT 1), 'lines', p.c_line_ids) || ` + reviewEvidence + `
		FROM rc_pc p
		WHERE p.n IS NOT NULL AND p.state = 'SUCCESS' AND NOT p.refunded
		  AND EXISTS (SELECT 1 FROM payments q WHERE q.hold_id = p.hold_id AND q.id <> p.id AND q.state = 'SUCCESS'
		      AND NOT EXISTS (SELECT 1 FROM refunds r WHERE r.payment_id = q.id)
		      AND (coalesce(q.resolved_at, q.initiated_at), q.id) < (p.resolved_at, p.id))
		ON CONFLICT DO NOTHING`},
	// Tolerance: a paisa of rounding per line. At stake is the difference,
	// not the payment: the rest of it settled as it should.
	{AmountMismatch, `INSERT INTO rc_found (kind, ref, payment_id, hold_id, psp_ref, amount, diff, stake, path, evidence)
		SELECT 'AMOUNT_MISMATCH', p.id::text, p.id, p.hold_id, p.c_ext_ref, p.amount, d.diff, abs(d.diff), 'MANUAL',
		       jsonb_build_object('ours', p.amount, 'file', p.c_amount, 'lines', p.c_line_ids)
		FROM rc_pc p
		CROSS JOIN LATERAL (SELECT CASE WHEN abs(p.c_amount - p.amount) > 1 THEN p.c_amount - p.amount
		                                ELSE p.c_amount_max - p.amount END AS diff) d
		WHERE abs(p.c_amount - p.amount) > 1 OR abs(p.c_amount_max - p.amount) > 1
		ON CONFLICT DO NOTHING`},
	// The fee is judged on the line's own amount, so a changed amount is an
	// amount mismatch and not also a fee one. At stake is what the fee and
	// its GST are each off by (a fee over and a GST under do not cancel).
	{FeeMismatch, `INSERT INTO rc_found (kind, ref, payment_id, hold_id, psp_ref, amount, diff, stake, path, evidence)
		SELECT 'FEE_MISMATCH', p.id::text, p.id, p.hold_id, p.c_ext_ref, p.c_fee + p.c_tax,
		       (p.c_fee + p.c_tax) - (e.fee + e.gst), abs(p.c_fee - e.fee) + abs(p.c_tax - e.gst), 'MANUAL',
		       jsonb_build_object('fee', p.c_fee, 'gst', p.c_tax, 'contract_bps', k.bps, 'expected_fee', e.fee,
		           'expected_gst', e.gst, 'lines', p.c_line_ids)
		FROM rc_pc p
		JOIN unnest($8::text[], $9::int[]) AS k(method, bps) ON k.method = p.method
		CROSS JOIN LATERAL (SELECT (p.c_amount * k.bps + 5000) / 10000 AS fee) f
		CROSS JOIN LATERAL (SELECT f.fee, (f.fee * 1800 + 5000) / 10000 AS gst) e
		WHERE abs(p.c_fee - e.fee) > 1 OR abs(p.c_tax - (p.c_fee * 1800 + 5000) / 10000) > 1
		ON CONFLICT DO NOTHING`},
	{MissingInSettlement, `INSERT INTO rc_found (kind, ref, payment_id, hold_id, psp_ref, amount, stake, path, evidence)
		SELECT 'MISSING_IN_SETTLEMENT', p.id::text, p.id, p.hold_id, p.psp_ref, p.amount, p.amount, 'INQUIRY',
		       jsonb_build_object('our_state', p.state)
		FROM rc_pc p
		WHERE p.state IN ('SUCCESS', 'REFUNDED') AND p.method <> 'WALLET' AND $5::timestamptz >= $6::timestamptz
		  AND p.n IS NULL
		ON CONFLICT DO NOTHING`},
	// At stake are the copies beyond the first.
	{DuplicateLine, `INSERT INTO rc_found (kind, ref, payment_id, psp_ref, amount, stake, path, evidence)
		SELECT 'DUPLICATE_LINE', $1 || '|' || kind || '|' || ref, (array_agg(pay_id))[1], ref,
		       sum(amount) - min(amount), sum(amount) - min(amount), 'MANUAL', jsonb_build_object('lines', array_agg(id ORDER BY id), 'copies', count(*))
		-- Grouped under the C collation: the same equality, a far cheaper sort.
		-- The duplicated keys first (hashed, no arrays), then only their
		-- lines gathered in order.
		FROM (SELECT l.kind, l.ext_ref COLLATE "C" AS ref, l.pay_id, l.amount, l.id, l.file_day FROM rc_line l
		      JOIN (SELECT kind, ext_ref COLLATE "C" AS ref FROM rc_line GROUP BY 1, 2 HAVING count(*) > 1 AND min(file_day) = $2::date) d
		        ON d.kind = l.kind AND d.ref = l.ext_ref COLLATE "C") l
		GROUP BY kind, ref
		ON CONFLICT DO NOTHING`},
	{OrphanLine, `INSERT INTO rc_found (kind, ref, psp_ref, amount, stake, path, evidence)
		SELECT DISTINCT ON (kind, ext_ref) 'ORPHAN_LINE', $1 || '|' || kind || '|' || ext_ref, ext_ref, amount, amount, 'MANUAL',
		       jsonb_build_object('merchant_ref', merchant_ref, 'lines', jsonb_build_array(id))
		FROM rc_line
		WHERE file_day = $2::date AND ((kind IN ('CAPTURE', 'CHARGEBACK') AND pay_id IS NULL) OR (kind = 'REFUND' AND refund_id IS NULL))
		ORDER BY kind, ext_ref, id
		ON CONFLICT DO NOTHING`},
	{Chargeback, `INSERT INTO rc_found (kind, ref, payment_id, hold_id, psp_ref, amount, stake, path, evidence)
		SELECT 'CHARGEBACK', $1 || '|' || l.ext_ref, l.pay_id, p.hold_id, l.ext_ref, l.amount, l.amount, 'MANUAL',
		       jsonb_build_object('lines', jsonb_build_array(l.id))
		FROM rc_line l JOIN payments p ON p.id = l.pay_id
		WHERE l.file_day = $2::date AND l.kind = 'CHARGEBACK'
		ON CONFLICT DO NOTHING`},
	{RefundNotSettled, `INSERT INTO rc_found (kind, ref, payment_id, hold_id, refund_id, psp_ref, amount, stake, path)
		SELECT 'REFUND_NOT_SETTLED', r.id::text, r.payment_id, r.hold_id, r.id, r.psp_ref, r.amount, r.amount, 'INQUIRY'
		FROM rc_ref r
		-- A wallet payment's refund goes back to the wallet, in no gateway's file.
		WHERE r.state = 'PROCESSED' AND $5::timestamptz >= $6::timestamptz AND $11 <> ''
		  AND NOT EXISTS (SELECT 1 FROM rc_line l WHERE l.kind = 'REFUND' AND l.refund_id = r.id)
		ON CONFLICT DO NOTHING`},
	{RefundMismatch, `INSERT INTO rc_found (kind, ref, payment_id, hold_id, refund_id, psp_ref, amount, diff, stake, path, evidence)
		SELECT 'REFUND_MISMATCH', r.id::text, r.payment_id, r.hold_id, r.id, r.psp_ref, r.amount, d.diff, abs(d.diff), 'INQUIRY',
		       jsonb_build_object('ours', r.amount, 'file', l.amount, 'lines', l.ids)
		FROM rc_ref r JOIN (SELECT refund_id, min(amount) AS amount, max(amount) AS amax, array_agg(id) AS ids FROM rc_line
		                    WHERE kind = 'REFUND' AND refund_id IS NOT NULL GROUP BY refund_id) l ON l.refund_id = r.id
		CROSS JOIN LATERAL (SELECT CASE WHEN abs(l.amount - r.amount) > 1 THEN l.amount - r.amount ELSE l.amax - r.amount END AS diff) d
		WHERE abs(l.amount - r.amount) > 1 OR abs(l.amax - r.amount) > 1
		ON CONFLICT DO NOTHING`},
	// Grouping: a capture's partial refunds together never exceed it.
	{"over-refund", `INSERT INTO rc_found (kind, ref, payment_id, hold_id, psp_ref, amount, diff, stake, path, evidence)
		SELECT 'REFUND_MISMATCH', 'OVER|' || p.id, p.id, p.hold_id, p.c_ext_ref, p.c_amount, s.refunded - p.c_amount,
		       s.refunded - p.c_amount, 'INQUIRY',
		       jsonb_build_object('captured', p.c_amount, 'refunded', s.refunded)
		FROM rc_pc p
		JOIN (SELECT pay_id, sum(amount) AS refunded FROM (SELECT DISTINCT ON (ext_ref) pay_id, amount FROM rc_line
		      WHERE kind = 'REFUND' ORDER BY ext_ref, id) x GROUP BY pay_id) s ON s.pay_id = p.id
		WHERE s.refunded > p.c_amount + 1
		ON CONFLICT DO NOTHING`},
	// Grouping: one payout against the net of all its lines.
	{"payouts", `CREATE TEMP TABLE rc_po ON COMMIT DROP AS
		SELECT po.payout_id, po.net, po.value_date, b.credit, b.ids AS bank_ids, b.utr
		FROM (SELECT payout_id, sum(net) AS net, max(value_date) AS value_date FROM rc_line
		      WHERE payout_id IN (SELECT DISTINCT payout_id FROM rc_line WHERE file_day = $2::date AND payout_id <> '')
		      GROUP BY payout_id) po
		LEFT JOIN LATERAL (SELECT sum(net_paise) AS credit, array_agg(id) AS ids, min(merchant_ref) AS utr FROM recon_lines
		      WHERE current AND source = 'BANK' AND gateway = $1 AND ext_ref = po.payout_id AND kind = 'PAYOUT'
		      HAVING count(*) > 0) b ON true`},
	// At stake is what the bank paid short or over (the whole payout when
	// no credit came), not the payout.
	{PayoutMismatch, `INSERT INTO rc_found (kind, ref, payout_id, amount, diff, stake, path, evidence)
		SELECT 'PAYOUT_MISMATCH', payout_id, payout_id, net, coalesce(credit, 0) - net, abs(coalesce(credit, 0) - net), 'MANUAL',
		       jsonb_build_object('net_of_lines', net, 'bank_credit', credit, 'bank_lines', bank_ids)
		FROM rc_po
		WHERE (credit IS NULL AND net <> 0
		       AND ($5::timestamptz >= (value_date + 3)::timestamp AT TIME ZONE 'Asia/Kolkata'
		            OR EXISTS (SELECT 1 FROM recon_files f WHERE f.source = 'BANK' AND f.business_date = value_date AND f.superseded_by IS NULL)))
		   OR credit <> net
		ON CONFLICT DO NOTHING`},
	{BookedNotPaid, `INSERT INTO rc_found (kind, ref, payment_id, hold_id, pnr, amount, stake, path, evidence)
		SELECT 'BOOKED_NOT_PAID', b.pnr, (SELECT p.id FROM rc_pay p WHERE p.hold_id = b.hold_id ORDER BY p.resolved_at DESC, p.id LIMIT 1),
		       b.hold_id, b.pnr, b.fare_paise, b.fare_paise, 'INQUIRY', '{}'
		FROM bookings b
		WHERE b.status = 'CONFIRMED' AND $5::timestamptz >= $7::timestamptz
		  AND b.hold_id IN (SELECT hold_id FROM rc_pay)
		  AND NOT EXISTS (SELECT 1 FROM payments q WHERE q.hold_id = b.hold_id AND q.state IN ('SUCCESS', 'REFUNDED'))
		  AND NOT EXISTS (SELECT 1 FROM payments q JOIN rc_cap c ON c.pay_id = q.id WHERE q.hold_id = b.hold_id)
		  AND NOT EXISTS (SELECT 1 FROM payments q JOIN wallet_entries w ON w.kind = 'DEBIT' AND w.ref = q.id::text
		                  WHERE q.hold_id = b.hold_id)
		ON CONFLICT DO NOTHING`},
	// A PNR in the core we never booked is found by the journey date's
	// own run (coreSteps), not here: no gateway paid for it.

	// What matched, rule by rule.
	{"capture matches", `INSERT INTO recon_matches (run_id, rule, our_ref, ext_ref, amount_paise, fee_paise, tax_paise, event_at, value_date)
		SELECT $10, CASE WHEN p.c_file_day > $2::date THEN 'KEY, T+' || (p.c_file_day - $2::date)
		                 WHEN p.c_amount <> p.amount THEN 'KEY, ROUNDING' ELSE 'EXACT KEY' END,
		       p.id::text, p.c_ext_ref, p.c_amount, p.c_fee, p.c_tax, p.c_event_at, p.c_value_date
		FROM rc_pc p
		WHERE p.n IS NOT NULL AND NOT EXISTS (SELECT 1 FROM rc_found f WHERE f.payment_id = p.id)`},
	{"refund matches", `INSERT INTO recon_matches (run_id, rule, our_ref, ext_ref, amount_paise, event_at, value_date)
		SELECT $10, CASE WHEN r.amount < p.amount_paise THEN 'PARTIAL REFUND TO CAPTURE' ELSE 'EXACT KEY (REFUND)' END,
		       r.id::text, l.ext_ref, -l.amount, l.event_at, l.value_date
		FROM rc_ref r JOIN payments p ON p.id = r.payment_id
		JOIN LATERAL (SELECT * FROM rc_line l WHERE l.kind = 'REFUND' AND l.refund_id = r.id ORDER BY l.id LIMIT 1) l ON true
		WHERE NOT EXISTS (SELECT 1 FROM rc_found f WHERE f.refund_id = r.id)`},
	{"payout matches", `INSERT INTO recon_matches (run_id, rule, our_ref, ext_ref, amount_paise, value_date)
		SELECT $10, 'PAYOUT = SUM OF NET LINES', payout_id, coalesce(utr, ''), credit, value_date
		FROM rc_po WHERE credit = net`},
}

// coreLegSteps compare the bookings a gateway's day paid for with the
// core's export of their journey dates. They need nothing of the settlement
// leg, so a run does them on a second connection at the same time (a run is
// CPU-bound in one PostgreSQL backend; this puts the second core to work);
// what they find is handed over through recon_run_found. The parameters are
// matchSteps'.
var coreLegSteps = []step{
	{"found", foundTable},
	{"our bookings", `CREATE TEMP TABLE rc_book ON COMMIT DROP AS
		SELECT b.id, b.pnr, b.hold_id, b.status, b.fare_paise AS fare, s.journey_date,
		       (SELECT count(*) FROM booking_passengers bp WHERE bp.booking_id = b.id) AS pax
		FROM bookings b JOIN inventory_shards s ON s.id = b.shard_id
		WHERE b.hold_id IN (SELECT p.hold_id FROM payments p WHERE p.psp = $11 AND p.initiated_at >= $3 AND p.initiated_at < $4
		                   AND p.state IN ('SUCCESS', 'REFUNDED'))`},
	{"core lines", `CREATE TEMP TABLE rc_core ON COMMIT DROP AS
		SELECT l.id, l.ext_ref AS pnr, l.amount_paise AS fare, l.status, l.passengers AS pax, l.business_date
		FROM recon_lines l
		WHERE l.file_id IN (SELECT f.id FROM recon_files f WHERE f.source = 'CORE' AND f.superseded_by IS NULL
		                    AND f.business_date IN (SELECT journey_date FROM rc_book))
		  AND l.current AND l.source = 'CORE'`},
	{"analyze bookings", `ANALYZE rc_book, rc_core`},
	{CoreMissing, `INSERT INTO rc_found (kind, ref, hold_id, pnr, amount, stake, path, evidence)
		SELECT 'CORE_MISSING', b.pnr, b.hold_id, b.pnr, b.fare, b.fare, 'RESYNC', jsonb_build_object('booking_id', b.id, 'journey_date', b.journey_date)
		FROM rc_book b
		WHERE b.status <> 'CANCELLED' AND NOT EXISTS (SELECT 1 FROM rc_core c WHERE c.pnr = b.pnr)
		  AND EXISTS (SELECT 1 FROM recon_files f WHERE f.source = 'CORE' AND f.business_date = b.journey_date AND f.superseded_by IS NULL)
		ON CONFLICT DO NOTHING`},
	// At stake is the fare's difference; where the fares agree and the
	// passengers or the status do not, the ticket itself.
	{CoreMismatch, `INSERT INTO rc_found (kind, ref, hold_id, pnr, amount, diff, stake, path, evidence)
		SELECT 'CORE_MISMATCH', b.pnr, b.hold_id, b.pnr, b.fare, c.fare - b.fare,
		       CASE WHEN c.fare <> b.fare THEN abs(c.fare - b.fare) ELSE b.fare END, 'RESYNC',
		       jsonb_build_object('booking_id', b.id, 'ours', jsonb_build_object('fare', b.fare, 'passengers', b.pax, 'status', b.status),
		           'core', jsonb_build_object('fare', c.fare, 'passengers', c.pax, 'status', c.status), 'lines', jsonb_build_array(c.id))
		FROM rc_book b JOIN rc_core c ON c.pnr = b.pnr
		WHERE c.fare <> b.fare OR c.pax <> b.pax OR (b.status = 'CANCELLED') <> (c.status = 'CANCELLED')
		   OR (b.status <> 'CANCELLED' AND c.status <> b.status)
		ON CONFLICT DO NOTHING`},
	{"core matches", `INSERT INTO recon_matches (run_id, rule, our_ref, ext_ref, amount_paise, value_date)
		SELECT $10, 'EXACT PNR', b.pnr, b.pnr, b.fare, b.journey_date
		FROM rc_book b JOIN rc_core c ON c.pnr = b.pnr
		WHERE NOT EXISTS (SELECT 1 FROM rc_found f WHERE f.kind LIKE 'CORE_%' AND f.pnr = b.pnr)`},
	{"hand over", `INSERT INTO recon_run_found (run_id, kind, ref, hold_id, pnr, amount, diff, stake, path, evidence)
		SELECT $10, kind, ref, hold_id, pnr, amount, diff, stake, path, evidence FROM rc_found`},
}

// finishSteps take the core leg's findings into the run's own and total
// it; $12 is the core leg's journey dates.
var finishSteps = []step{
	{"core findings", `WITH h AS (DELETE FROM recon_run_found WHERE run_id = $10 RETURNING *)
		INSERT INTO rc_found (kind, ref, hold_id, pnr, amount, diff, stake, path, evidence)
		SELECT kind, ref, hold_id, pnr, amount, diff, stake, path, evidence FROM h`},
	{"run totals", `UPDATE recon_runs SET
		-- The wallet run's items are its wallet payments (a gateway's
		-- never are: a wallet payment has no gateway).
		our_items = (SELECT count(*) FROM rc_pay WHERE state IN ('SUCCESS', 'REFUNDED') AND (method <> 'WALLET' OR $11 = ''))
		          + (SELECT count(*) FROM rc_ref WHERE state = 'PROCESSED'),
		(lines, fees_paise, tax_paise, net_paise) = (SELECT count(*), coalesce(sum(fee), 0), coalesce(sum(tax), 0), coalesce(sum(net), 0)
		          FROM rc_line WHERE file_day = $2::date),
		(matched, amount_matched) = (SELECT count(*), coalesce(sum(abs(amount_paise)) FILTER (WHERE rule NOT IN ('PAYOUT = SUM OF NET LINES', 'EXACT PNR')), 0)
		          FROM recon_matches WHERE run_id = $10),
		(exceptions, amount_unmatched) = (SELECT count(*), coalesce(sum(stake), 0) FROM rc_found),
		payouts_paise = (SELECT coalesce(sum(credit), 0) FROM rc_po),
		files = ARRAY(SELECT id FROM recon_files WHERE superseded_by IS NULL AND (
		            (source = 'SETTLEMENT' AND gateway = $1 AND business_date BETWEEN $2::date - 3 AND $2::date + 3)
		            OR (source = 'BANK' AND business_date IN (SELECT value_date FROM rc_po))
		            OR (source = 'CORE' AND business_date = ANY($12::date[]))) ORDER BY id)
		WHERE id = $10`},
}

// Core is the pseudo-gateway of the reservation core's export: its run
// reconciles one journey date's export as a whole. A PNR in the export we
// never booked belongs to the journey date, not to a gateway (none paid for
// it), so only this run finds it: once, whichever gateways paid for that
// date's other bookings. The gateway runs still compare the bookings each
// paid for against the export (missing, mismatched).
const Core = "core"

// coreSteps are the statements of a Core run; $2 is the journey date.
var coreSteps = []step{
	{"core lines", `CREATE TEMP TABLE rc_core ON COMMIT DROP AS
		SELECT l.id, l.ext_ref AS pnr, l.amount_paise AS fare, l.business_date, EXISTS (SELECT 1 FROM bookings b WHERE b.pnr = l.ext_ref) AS ours
		FROM recon_lines l
		WHERE l.file_id IN (SELECT f.id FROM recon_files f WHERE f.source = 'CORE' AND f.business_date = $2::date AND f.superseded_by IS NULL)
		  AND l.current AND l.source = 'CORE'`},
	{"found", foundTable},
	{CoreOrphan, `INSERT INTO rc_found (kind, ref, pnr, amount, stake, path, evidence)
		SELECT 'CORE_ORPHAN', c.pnr, c.pnr, c.fare, c.fare, 'MANUAL', jsonb_build_object('journey_date', c.business_date, 'lines', jsonb_build_array(c.id))
		FROM rc_core c WHERE NOT c.ours
		ON CONFLICT DO NOTHING`},
	// Matched: the export's lines we booked (their fares and states are
	// the gateway runs' to compare).
	{"run totals", `UPDATE recon_runs SET
		lines = (SELECT count(*) FROM rc_core),
		matched = (SELECT count(*) FROM rc_core WHERE ours),
		(exceptions, amount_unmatched) = (SELECT count(*), coalesce(sum(stake), 0) FROM rc_found),
		files = ARRAY(SELECT id FROM recon_files WHERE superseded_by IS NULL AND source = 'CORE' AND business_date = $2::date ORDER BY id)
		WHERE id = $10`},
}

// Bank is the pseudo-gateway of the bank's statement: its run reconciles
// one statement date line by line against the payouts the gateways'
// settlement files announce. A credit or a debit that none announces
// belongs to its statement date, not to a gateway (its narration may name
// none), so only this run finds it, once: tatkal recon run --gateway bank
// --date STATEMENT_DATE. Whether an announced payout's credit is its
// lines' net is the gateway runs' question (PAYOUT_MISMATCH), not this one.
const Bank = "bank"

// bankSteps are the statements of a Bank run; $2 is the statement date.
var bankSteps = []step{
	// A payout is announced by a current line of its gateway's settlement
	// files of the ten days before the statement (a payout lands T+1, T+3
	// over a weekend, later over holidays): probed per bank line (a
	// statement has a few per gateway), through the files' lines, stopping
	// at the first that carries it.
	{"bank lines", `CREATE TEMP TABLE rc_bank ON COMMIT DROP AS
		SELECT l.id, l.line_no, l.gateway, l.payout_id, l.merchant_ref AS utr, l.net_paise AS net, l.value_date,
		       l.payout_id <> '' AND EXISTS (SELECT 1 FROM recon_lines s
		           WHERE s.file_id IN (SELECT f.id FROM recon_files f WHERE f.source = 'SETTLEMENT' AND f.gateway = l.gateway
		                               AND f.business_date BETWEEN $2::date - 10 AND $2::date AND f.superseded_by IS NULL)
		             AND s.current AND s.source = 'SETTLEMENT' AND s.payout_id = l.payout_id) AS announced
		FROM recon_lines l
		WHERE l.file_id IN (SELECT f.id FROM recon_files f WHERE f.source = 'BANK' AND f.business_date = $2::date AND f.superseded_by IS NULL)
		  AND l.current AND l.source = 'BANK'`},
	{"found", foundTable},
	// One exception per bank reference (UTR) and direction: the same
	// reference listed twice is one movement with its copies in evidence.
	// Keyed by the statement date too, so each statement's run owns its own.
	{UnexplainedCredit + ", " + UnexplainedDebit, `INSERT INTO rc_found (kind, ref, payout_id, amount, diff, stake, path, evidence)
		SELECT kind, ref, min(payout_id), abs(sum(net)), sum(net), abs(sum(net)), 'MANUAL',
		       jsonb_build_object('statement_date', $2::date, 'utr', min(utr), 'gateway', min(gateway),
		           'bank_lines', array_agg(id ORDER BY id), 'copies', count(*))
		FROM (SELECT CASE WHEN net > 0 THEN 'UNEXPLAINED_CREDIT' ELSE 'UNEXPLAINED_DEBIT' END AS kind,
		             to_char($2::date, 'YYYY-MM-DD') || '|' || CASE WHEN utr <> '' THEN utr ELSE 'line ' || line_no END AS ref,
		             payout_id, utr, gateway, net, id
		      FROM rc_bank WHERE NOT announced AND net <> 0) b
		GROUP BY kind, ref
		ON CONFLICT DO NOTHING`},
	{"bank matches", `INSERT INTO recon_matches (run_id, rule, our_ref, ext_ref, amount_paise, value_date)
		SELECT $10, 'BANK LINE = ANNOUNCED PAYOUT', payout_id, utr, net, value_date FROM rc_bank WHERE announced`},
	{"run totals", `UPDATE recon_runs SET
		our_items = (SELECT count(DISTINCT (gateway, payout_id)) FROM rc_bank WHERE announced),
		(lines, matched, amount_matched, net_paise, payouts_paise) = (SELECT count(*), count(*) FILTER (WHERE announced),
		          coalesce(sum(abs(net)) FILTER (WHERE announced), 0), coalesce(sum(net), 0), coalesce(sum(net) FILTER (WHERE announced), 0)
		          FROM rc_bank),
		(exceptions, amount_unmatched) = (SELECT count(*), coalesce(sum(stake), 0) FROM rc_found),
		files = ARRAY(SELECT id FROM recon_files WHERE superseded_by IS NULL AND source = 'BANK' AND business_date = $2::date ORDER BY id)
		WHERE id = $10`},
}

// scopeSteps are the runs of a scope that is not a gateway's day: a
// journey date's core export, a statement date's bank lines.
var scopeSteps = map[string][]step{Core: coreSteps, Bank: bankSteps}

// match runs the steps and turns what they found into exceptions.
func (s *Service) match(ctx context.Context, tx pgx.Tx, runID int64, req RunRequest, day, start, now time.Time) error {
	contract := s.cfg.Contracts[req.Gateway]
	methods := make([]string, 0, len(contract))
	for m := range contract {
		methods = append(methods, m)
	}
	slices.Sort(methods)
	bps := make([]int32, len(methods))
	for i, m := range methods {
		bps[i] = int32(contract[m])
	}
	args := []any{req.Gateway, pgDate(day), start, start.AddDate(0, 0, 1), req.AsOf, start.AddDate(0, 0, 4), start.AddDate(0, 0, 3), methods, bps, runID, pspOf(req.Gateway)}
	if _, err := tx.Exec(ctx, runSettings); err != nil {
		return fmt.Errorf("run settings: %w", err)
	}
	if steps, ok := scopeSteps[req.Gateway]; ok {
		if err := s.runSteps(ctx, tx, runID, steps, args); err != nil {
			return err
		}
		return s.record(ctx, tx, runID, req, day, now)
	}
	legCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	leg := make(chan coreLegResult, 1)
	go func() { leg <- s.coreLeg(legCtx, runID, args) }()
	err := s.runSteps(ctx, tx, runID, matchSteps, args)
	if err != nil {
		cancel()
	}
	core := <-leg
	if err == nil && core.err != nil {
		err = fmt.Errorf("core leg: %w", core.err)
	}
	if err != nil {
		return err
	}
	s.cfg.Pause.At(ctx, "recon.run.core-leg-committed")
	if err := s.runSteps(ctx, tx, runID, finishSteps, append(args, core.journeyDates)); err != nil {
		return err
	}
	return s.record(ctx, tx, runID, req, day, now)
}

// runSettings are a run's: a few large statements, for which compiling
// each (JIT) costs more than it saves, and a day of a million payments
// wants its hashes in memory (with 64 MB, grouping and joining captures by
// payment sorted a million rows on disk instead).
const runSettings = `SET LOCAL jit = off; SET LOCAL work_mem = '256MB'`

// runSteps executes steps in order, each bound to the parameters it uses.
func (s *Service) runSteps(ctx context.Context, tx pgx.Tx, runID int64, steps []step, args []any) error {
	var pid int
	if s.stepCPU != nil {
		if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			return err
		}
	}
	for _, st := range steps {
		var cpu0 time.Duration
		if s.stepCPU != nil {
			cpu0 = s.stepCPU(pid)
		}
		sql, used := bind(st.sql, args)
		t0 := time.Now()
		if s.explain && !strings.HasPrefix(sql, "ANALYZE") && !strings.HasSuffix(sql, "ON COMMIT DROP") {
			if err := s.explainStep(ctx, tx, runID, st.name, sql, used); err != nil {
				return fmt.Errorf("%s: %w", st.name, err)
			}
			continue
		}
		if _, err := tx.Exec(ctx, sql, used...); err != nil {
			return fmt.Errorf("%s: %w", st.name, err)
		}
		if s.stepCPU != nil {
			s.log.InfoContext(ctx, "recon step", "run", runID, "step", st.name, "took", time.Since(t0), "backend_cpu", s.stepCPU(pid)-cpu0)
			continue
		}
		s.log.DebugContext(ctx, "recon step", "run", runID, "step", st.name, "took", time.Since(t0))
	}
	return nil
}

// coreLegResult is what the core leg hands back besides its findings.
type coreLegResult struct {
	journeyDates []time.Time // of the bookings the day paid for: their core files are the run's too
	err          error
}

// coreLeg runs coreLegSteps in a transaction of its own, on a second
// connection, and commits its matches and findings under the run's id. If
// the run then fails, dropCoreLeg removes them (the run's row never
// commits, so nothing refers to them meanwhile).
func (s *Service) coreLeg(ctx context.Context, runID int64, args []any) coreLegResult {
	conn, release, err := s.runConn(ctx)
	if err != nil {
		return coreLegResult{err: err}
	}
	defer release()
	var dates []time.Time
	err = db.Transact(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, runSettings); err != nil {
			return fmt.Errorf("run settings: %w", err)
		}
		if err := s.runSteps(ctx, tx, runID, coreLegSteps, args); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT coalesce(array_agg(DISTINCT journey_date), '{}') FROM rc_book`).Scan(&dates)
	})
	return coreLegResult{journeyDates: dates, err: err}
}

// dropCoreLeg removes what the core leg of a run that did not commit left.
func (s *Service) dropCoreLeg(ctx context.Context, runID int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	for _, q := range []string{`DELETE FROM recon_matches WHERE run_id = $1`, `DELETE FROM recon_run_found WHERE run_id = $1`} {
		if _, err := s.pool.Exec(ctx, q, runID); err != nil {
			s.log.ErrorContext(ctx, "recon run: left its core leg's rows", "run", runID, "err", err)
			return
		}
	}
}

// explainStep runs a step under EXPLAIN (ANALYZE, BUFFERS) and logs its
// plan: the benchmark's way to see where a run's time goes.
func (s *Service) explainStep(ctx context.Context, tx pgx.Tx, runID int64, name, sql string, args []any) error {
	t0 := time.Now()
	rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+sql, args...)
	if err != nil {
		return err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	s.log.InfoContext(ctx, "recon step plan", "run", runID, "step", name, "took", time.Since(t0), "plan", "\n"+strings.Join(lines, "\n"))
	return nil
}

// Wallet is the pseudo-gateway of wallet payments: its run has no
// settlement file, only our side and the core's export (a wallet payment
// has no gateway, so its psp is empty).
const Wallet = "wallet"

func pspOf(gateway string) string {
	if gateway == Wallet {
		return ""
	}
	return gateway
}

// bind renumbers the parameters a statement uses ($2, $5 → $1, $2) and
// picks their values: PostgreSQL cannot type a parameter nobody uses.
func bind(sql string, args []any) (string, []any) {
	renum := map[string]string{}
	var used []any
	out := paramRE.ReplaceAllStringFunc(sql, func(m string) string {
		if r, ok := renum[m]; ok {
			return r
		}
		i, _ := strconv.Atoi(m[1:])
		used = append(used, args[i-1])
		renum[m] = "$" + strconv.Itoa(len(used))
		return renum[m]
	})
	return out, used
}

var paramRE = regexp.MustCompile(`\$[0-9]+`)

// record merges what the run found into the exceptions: new ones are
// opened with their owner and due time (and their automatic resolution
// enqueued), known ones are touched, ones cleared earlier that reproduce
// are reopened, and the run's open ones that no longer reproduce are closed
// as CLEARED_ON_RERUN. Never a second row for the same kind and reference.
func (s *Service) record(ctx context.Context, tx pgx.Tx, runID int64, req RunRequest, day, now time.Time) error {
	actor := fmt.Sprintf("run:%d", runID)
	var kindNames, owners []string
	var slas []int64
	for _, k := range kinds {
		kindNames, owners, slas = append(kindNames, k.Kind), append(owners, k.Owner), append(slas, int64(k.SLA/time.Second))
	}
	t0 := time.Now()
	rows, err := tx.Query(ctx, `WITH re AS (
			UPDATE reconciliation_exceptions e SET state = 'OPEN', resolution = '', resolved_at = NULL, resolved_by = '', last_run_id = $1
			FROM rc_found f WHERE e.kind = f.kind AND e.ref = f.ref AND e.resolution = 'CLEARED_ON_RERUN'
			RETURNING e.id, e.path, e.needs_approval)
		, ev AS (INSERT INTO reconciliation_exception_events (exception_id, actor, action, from_state, to_state, run_id, note)
			SELECT id, $2, 'REOPENED', 'RESOLVED', 'OPEN', $1, 'reproduces again' FROM re)
		SELECT id, path, needs_approval FROM re`, runID, actor)
	if err != nil {
		return fmt.Errorf("reopen: %w", err)
	}
	reopened, err := pgx.CollectRows(rows, pgx.RowToStructByPos[autoRow])
	if err != nil {
		return fmt.Errorf("reopen: %w", err)
	}
	s.log.DebugContext(ctx, "recon step", "run", runID, "step", "reopen", "took", time.Since(t0))
	t0 = time.Now()
	rows, err = tx.Query(ctx, `WITH k AS (SELECT * FROM unnest($5::text[], $6::text[], $7::bigint[]) AS k(kind, owner, sla_s))
		, up AS (
			INSERT INTO reconciliation_exceptions (id, kind, ref, gateway, business_date, payment_id, hold_id, refund_id, pnr, psp_ref,
				payout_id, amount_paise, diff_paise, stake_paise, owner_team, path, detected_at, due_at, first_run_id, last_run_id, evidence,
				needs_approval)
			SELECT gen_random_uuid(), f.kind, f.ref, $1, $2, f.payment_id, f.hold_id, f.refund_id, f.pnr, f.psp_ref, f.payout_id,
				f.amount, f.diff, f.stake, k.owner, f.path, $3::timestamptz, $3::timestamptz + make_interval(secs => k.sla_s), $4, $4,
				f.evidence, f.path = 'AUTO' AND f.stake > $8
			FROM rc_found f JOIN k USING (kind)
			ON CONFLICT (kind, ref) DO UPDATE SET last_run_id = excluded.last_run_id, amount_paise = excluded.amount_paise,
				diff_paise = excluded.diff_paise, stake_paise = excluded.stake_paise, evidence = excluded.evidence,
				-- A payment put in review since: a person, not the job, decides.
				path = CASE WHEN reconciliation_exceptions.path = 'AUTO' AND excluded.path = 'MANUAL'
				                 AND reconciliation_exceptions.state IN ('OPEN', 'INVESTIGATING') THEN 'MANUAL'
				            ELSE reconciliation_exceptions.path END
			RETURNING id, path, needs_approval, (xmax = 0) AS inserted)
		, ev AS (INSERT INTO reconciliation_exception_events (exception_id, actor, action, to_state, run_id)
			SELECT id, $9, 'DETECTED', 'OPEN', $4 FROM up WHERE inserted)
		SELECT id, path, needs_approval FROM up WHERE inserted`,
		req.Gateway, pgDate(day), now, runID, kindNames, owners, slas, s.cfg.ApprovalLimitPaise, actor)
	if err != nil {
		return fmt.Errorf("open exceptions: %w", err)
	}
	inserted, err := pgx.CollectRows(rows, pgx.RowToStructByPos[autoRow])
	if err != nil {
		return fmt.Errorf("open exceptions: %w", err)
	}
	s.log.DebugContext(ctx, "recon step", "run", runID, "step", "open exceptions", "took", time.Since(t0))
	t0 = time.Now()
	var cleared int
	err = tx.QueryRow(ctx, `WITH c AS (
			UPDATE reconciliation_exceptions e SET state = 'RESOLVED', resolution = 'CLEARED_ON_RERUN', resolved_at = $4,
				resolved_by = $5, last_run_id = $3
			FROM (SELECT id, state FROM reconciliation_exceptions WHERE gateway = $1 AND business_date = $2
			      AND state IN ('OPEN', 'INVESTIGATING') FOR UPDATE) o
			WHERE e.id = o.id AND NOT EXISTS (SELECT 1 FROM rc_found f WHERE f.kind = e.kind AND f.ref = e.ref)
			RETURNING e.id, o.state)
		, ev AS (INSERT INTO reconciliation_exception_events (exception_id, actor, action, from_state, to_state, run_id, note)
			SELECT id, $5, 'CLEARED_ON_RERUN', state, 'RESOLVED', $3, 'no longer reproduces' FROM c)
		SELECT count(*) FROM c`, req.Gateway, pgDate(day), runID, now, actor).Scan(&cleared)
	if err != nil {
		return fmt.Errorf("clear exceptions: %w", err)
	}
	s.log.DebugContext(ctx, "recon step", "run", runID, "step", "clear exceptions", "took", time.Since(t0))
	if _, err := tx.Exec(ctx, `UPDATE recon_runs SET new_exceptions = $2, cleared = $3, finished_at = clock_timestamp() WHERE id = $1`,
		runID, len(inserted), cleared); err != nil {
		return fmt.Errorf("finish run: %w", err)
	}
	return s.enqueue(ctx, tx, append(inserted, reopened...))
}

// autoRow is an exception that may need its automatic resolution enqueued.
type autoRow struct {
	ID            uuid.UUID
	Path          string
	NeedsApproval bool
}

// enqueue inserts the resolution jobs of new automatic exceptions, in the
// run's transaction: one batch, whatever the count.
func (s *Service) enqueue(ctx context.Context, tx pgx.Tx, rows []autoRow) error {
	var params []river.InsertManyParams
	for _, r := range rows {
		if resolvable(r.Path) && !r.NeedsApproval {
			params = append(params, river.InsertManyParams{Args: ResolveArgs{ExceptionID: r.ID}})
		}
	}
	if len(params) == 0 {
		return nil
	}
	if s.cfg.Jobs == nil {
		return errors.New("automatic resolutions found but no job inserter configured")
	}
	// Not COPY: a reopened exception may still have its job waiting (a
	// retry for a gateway that did not answer), which the insert skips.
	if _, err := s.cfg.Jobs.InsertManyTx(ctx, tx, params); err != nil {
		return fmt.Errorf("enqueue resolutions: %w", err)
	}
	return nil
}

// resolvable says whether a path has a job to run.
func resolvable(path string) bool { return path == PathAuto || path == PathResync }

// RunByID returns a run's summary.
func (s *Service) RunByID(ctx context.Context, id int64) (RunSummary, error) {
	var r RunSummary
	var finished *time.Time
	err := s.pool.QueryRow(ctx, `SELECT id, gateway, business_date, as_of, run_by, started_at, finished_at, our_items, lines, matched,
		amount_matched, amount_unmatched, fees_paise, tax_paise, net_paise, payouts_paise, exceptions, new_exceptions, cleared, files
		FROM recon_runs WHERE id = $1`, id).Scan(&r.ID, &r.Gateway, &r.BusinessDate, &r.AsOf, &r.RunBy, &r.StartedAt, &finished,
		&r.OurItems, &r.Lines, &r.Matched, &r.AmountMatched, &r.AmountUnmatched, &r.Fees, &r.Tax, &r.Net, &r.Payouts,
		&r.Exceptions, &r.NewExceptions, &r.Cleared, &r.Files)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, booking.Errorf(booking.ENOTFOUND, "NO_SUCH_RUN", "No reconciliation run %d.", id)
	}
	if err != nil {
		return r, fmt.Errorf("read run %d: %w", id, err)
	}
	if finished != nil {
		r.FinishedAt = *finished
	}
	return r, nil
}

// LatestRun returns the newest run of a gateway's business date.
func (s *Service) LatestRun(ctx context.Context, gateway string, day time.Time) (RunSummary, error) {
	var id int64
	err := s.pool.QueryRow(ctx, `SELECT id FROM recon_runs WHERE gateway = $1 AND business_date = $2 ORDER BY id DESC LIMIT 1`,
		gateway, pgDate(day)).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return RunSummary{}, booking.Errorf(booking.ENOTFOUND, "NO_SUCH_RUN", "%s has not been reconciled for %s.", gateway, dateOnly(day).Format(time.DateOnly))
	}
	if err != nil {
		return RunSummary{}, fmt.Errorf("latest run: %w", err)
	}
	return s.RunByID(ctx, id)
}
