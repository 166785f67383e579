package recon

// Read queries for the finance console and the reconciliation API: runs
// by day, an exception's legs side by side, the day's books and the
// ageing of what is still open. Each is a handful of indexed statements.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"tatkal/booking"
)

// RunRow is the newest run of one gateway's business date, with what is
// still open of it now.
type RunRow struct {
	RunSummary
	Runs            int   `json:"runs"` // how many times the day was run
	Unresolved      int   `json:"unresolved"`
	UnresolvedPaise int64 `json:"unresolved_paise"`
}

// Runs lists the newest run of every gateway and business date from from
// to to (inclusive), newest day first; gateway "" means all.
func (s *Service) Runs(ctx context.Context, gateway string, from, to time.Time) ([]RunRow, error) {
	if from.IsZero() || to.IsZero() || to.Before(from) {
		return nil, booking.Errorf(booking.EINVALID, "BAD_DATES", "Give a date range whose end is not before its start.")
	}
	if to.Sub(from) > 366*24*time.Hour {
		return nil, booking.Errorf(booking.EINVALID, "BAD_DATES", "Show at most a year of runs at once.")
	}
	rows, err := s.pool.Query(ctx, `SELECT r.id, n.runs,
			(SELECT count(*) FROM reconciliation_exceptions e WHERE e.gateway = r.gateway AND e.business_date = r.business_date
			 AND e.state IN ('OPEN', 'INVESTIGATING')),
			(SELECT coalesce(sum(e.stake_paise), 0)::bigint FROM reconciliation_exceptions e WHERE e.gateway = r.gateway
			 AND e.business_date = r.business_date AND e.state IN ('OPEN', 'INVESTIGATING'))
		FROM (SELECT DISTINCT ON (gateway, business_date) id, gateway, business_date FROM recon_runs
		      WHERE business_date BETWEEN $1 AND $2 AND ($3 = '' OR gateway = $3) ORDER BY gateway, business_date, id DESC) r
		JOIN (SELECT gateway, business_date, count(*) AS runs FROM recon_runs WHERE business_date BETWEEN $1 AND $2
		      GROUP BY gateway, business_date) n USING (gateway, business_date)
		ORDER BY r.business_date DESC, r.gateway`, pgDate(from), pgDate(to), gateway)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	type head struct {
		ID              int64
		Runs            int
		Unresolved      int
		UnresolvedPaise int64
	}
	heads, err := pgx.CollectRows(rows, pgx.RowToStructByPos[head])
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	out := make([]RunRow, 0, len(heads))
	for _, h := range heads {
		sum, err := s.RunByID(ctx, h.ID)
		if err != nil {
			return nil, err
		}
		out = append(out, RunRow{RunSummary: sum, Runs: h.Runs, Unresolved: h.Unresolved, UnresolvedPaise: h.UnresolvedPaise})
	}
	return out, nil
}

// RunHistory lists every run of a gateway's business date, newest first.
func (s *Service) RunHistory(ctx context.Context, gateway string, day time.Time) ([]RunSummary, error) {
	rows, err := s.pool.Query(ctx, `SELECT id FROM recon_runs WHERE gateway = $1 AND business_date = $2 ORDER BY id DESC LIMIT 50`,
		gateway, pgDate(day))
	if err != nil {
		return nil, fmt.Errorf("run history: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("run history: %w", err)
	}
	out := make([]RunSummary, 0, len(ids))
	for _, id := range ids {
		r, err := s.RunByID(ctx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// RunFiles lists the files a run read and, for each of their days and
// sources, the files they superseded or that superseded them: the lineage.
func (s *Service) RunFiles(ctx context.Context, run RunSummary) ([]FileInfo, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+fileCols+` FROM recon_files f
		WHERE EXISTS (SELECT 1 FROM recon_files u WHERE u.id = ANY($1) AND u.source = f.source AND u.gateway = f.gateway
		              AND u.business_date = f.business_date)
		   OR (f.source = 'SETTLEMENT' AND f.gateway = $2 AND f.business_date = $3)
		ORDER BY f.source DESC, f.business_date, f.superseded_by IS NOT NULL, f.id DESC`, run.Files, run.Gateway, pgDate(run.BusinessDate))
	if err != nil {
		return nil, fmt.Errorf("run files: %w", err)
	}
	defer rows.Close()
	var out []FileInfo
	for rows.Next() {
		f, err := scanFile(rows)
		if err != nil {
			return nil, fmt.Errorf("run files: %w", err)
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

// RecentFiles lists the newest ingested files of every source, current or not.
func (s *Service) RecentFiles(ctx context.Context, limit int) ([]FileInfo, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+fileCols+` FROM recon_files ORDER BY id DESC LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("recent files: %w", err)
	}
	defer rows.Close()
	var out []FileInfo
	for rows.Next() {
		f, err := scanFile(rows)
		if err != nil {
			return nil, fmt.Errorf("recent files: %w", err)
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

// Gateways lists every gateway that has a run or a file.
func (s *Service) Gateways(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT gateway FROM recon_runs UNION SELECT gateway FROM recon_files WHERE gateway <> '' ORDER BY 1`)
	if err != nil {
		return nil, fmt.Errorf("gateways: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// PaymentLeg is our payment as the exception page shows it.
type PaymentLeg struct {
	ID          uuid.UUID  `json:"id"`
	Purpose     string     `json:"purpose"`
	HoldID      *uuid.UUID `json:"hold_id,omitempty"`
	PSP         string     `json:"psp"`
	Method      string     `json:"method"`
	State       string     `json:"state"`
	AmountPaise int64      `json:"amount_paise"`
	PSPRef      string     `json:"psp_ref"`
	InitiatedAt time.Time  `json:"initiated_at"`
	ResolvedAt  *time.Time `json:"resolved_at,omitempty"`
	Login       string     `json:"login"`
}

// RefundLeg is a refund of our payment.
type RefundLeg struct {
	ID          uuid.UUID `json:"id"`
	Reason      string    `json:"reason"`
	AmountPaise int64     `json:"amount_paise"`
	State       string    `json:"state"`
	GatewayRef  string    `json:"gateway_ref"`
}

// BookingLeg is our booking.
type BookingLeg struct {
	ID         int64  `json:"id"`
	PNR        string `json:"pnr"`
	Status     string `json:"status"`
	FarePaise  int64  `json:"fare_paise"`
	Passengers int    `json:"passengers"`
	CoreState  string `json:"core_state"`
}

// ReviewLeg is a payment review (payment_reviews) raised on our payment.
type ReviewLeg struct {
	ID        int64     `json:"id"`
	Kind      string    `json:"kind"`
	CreatedAt time.Time `json:"created_at"`
	Open      bool      `json:"open"`
}

// LineLeg is an outside record: a line of a settlement file, the bank
// statement or the core's export, with its raw text as evidence.
type LineLeg struct {
	ID          int64     `json:"id"`
	FileID      int64     `json:"file_id"`
	LineNo      int       `json:"line_no"`
	Source      string    `json:"source"`
	Kind        string    `json:"kind"`
	FileDay     time.Time `json:"file_day"`
	ExtRef      string    `json:"ext_ref"`
	AmountPaise int64     `json:"amount_paise"`
	FeePaise    int64     `json:"fee_paise"`
	TaxPaise    int64     `json:"tax_paise"`
	NetPaise    int64     `json:"net_paise"`
	PayoutID    string    `json:"payout_id"`
	Current     bool      `json:"current"`
	Raw         string    `json:"raw"`
}

// Legs is every record an exception is about, side by side.
type Legs struct {
	Payment    *PaymentLeg `json:"payment,omitempty"`
	Refund     *RefundLeg  `json:"refund,omitempty"`
	Booking    *BookingLeg `json:"booking,omitempty"`
	Reviews    []ReviewLeg `json:"reviews"`
	Settlement []LineLeg   `json:"settlement"`
	Bank       []LineLeg   `json:"bank"`
	Core       []LineLeg   `json:"core"`
}

// Legs gathers an exception's legs: our payment, refund and booking, and
// the settlement, bank and core lines that name them (those the run cited
// as evidence even when their file was superseded since).
func (s *Service) Legs(ctx context.Context, e Exception) (Legs, error) {
	var l Legs
	var ev struct {
		Lines     []int64 `json:"lines"`
		BankLines []int64 `json:"bank_lines"`
		BookingID int64   `json:"booking_id"`
	}
	json.Unmarshal(e.Evidence, &ev) //nolint:errcheck // evidence of another shape cites no lines
	paymentID := e.PaymentID
	if paymentID == nil && e.HoldID != nil {
		var id uuid.UUID
		if err := s.pool.QueryRow(ctx, `SELECT id FROM payments WHERE hold_id = $1 ORDER BY state = 'SUCCESS' DESC, initiated_at LIMIT 1`,
			*e.HoldID).Scan(&id); err == nil {
			paymentID = &id
		}
	}
	holdID := e.HoldID
	if paymentID != nil {
		var p PaymentLeg
		err := s.pool.QueryRow(ctx, `SELECT p.id, p.purpose, p.hold_id, p.psp, p.method, p.state, p.amount_paise, coalesce(p.psp_ref, ''),
			p.initiated_at, p.resolved_at, u.login FROM payments p JOIN users u ON u.id = p.user_id WHERE p.id = $1`, *paymentID).Scan(
			&p.ID, &p.Purpose, &p.HoldID, &p.PSP, &p.Method, &p.State, &p.AmountPaise, &p.PSPRef, &p.InitiatedAt, &p.ResolvedAt, &p.Login)
		switch {
		case err == nil:
			l.Payment = &p
			if holdID == nil {
				holdID = p.HoldID
			}
		case err != pgx.ErrNoRows:
			return l, fmt.Errorf("legs: payment: %w", err)
		}
	}
	refundQ, refundArg := `WHERE r.payment_id = $1`, any(paymentID)
	if e.RefundID != nil {
		refundQ, refundArg = `WHERE r.id = $1`, any(*e.RefundID)
	}
	if refundArg != nil {
		var r RefundLeg
		err := s.pool.QueryRow(ctx, `SELECT r.id, r.reason, r.amount_paise, r.state, r.gateway_ref FROM refunds r `+refundQ, refundArg).
			Scan(&r.ID, &r.Reason, &r.AmountPaise, &r.State, &r.GatewayRef)
		switch {
		case err == nil:
			l.Refund = &r
		case err != pgx.ErrNoRows:
			return l, fmt.Errorf("legs: refund: %w", err)
		}
	}
	var b BookingLeg
	err := s.pool.QueryRow(ctx, `SELECT b.id, b.pnr, b.status, b.fare_paise, (SELECT count(*) FROM booking_passengers WHERE booking_id = b.id),
		b.prs_state FROM bookings b WHERE b.id = $1 OR b.hold_id = $2 OR ($3 <> '' AND b.pnr = $3) ORDER BY b.id = $1 DESC LIMIT 1`,
		ev.BookingID, holdID, e.PNR).Scan(&b.ID, &b.PNR, &b.Status, &b.FarePaise, &b.Passengers, &b.CoreState)
	switch {
	case err == nil:
		l.Booking = &b
	case err != pgx.ErrNoRows:
		return l, fmt.Errorf("legs: booking: %w", err)
	}
	if paymentID != nil {
		rows, err := s.pool.Query(ctx, `SELECT id, kind, created_at, resolved_at IS NULL FROM payment_reviews WHERE payment_id = $1 ORDER BY id`, *paymentID)
		if err != nil {
			return l, fmt.Errorf("legs: reviews: %w", err)
		}
		if l.Reviews, err = pgx.CollectRows(rows, pgx.RowToStructByPos[ReviewLeg]); err != nil {
			return l, fmt.Errorf("legs: reviews: %w", err)
		}
	}

	// The settlement lines: those cited, and the current ones carrying the
	// payment's, refund's or payout's reference (an indexed lookup).
	refs := []string{}
	for _, r := range []string{e.PSPRef, e.PayoutID} {
		if r != "" {
			refs = append(refs, r)
		}
	}
	if l.Payment != nil && l.Payment.PSPRef != "" {
		refs = append(refs, l.Payment.PSPRef)
	}
	if l.Refund != nil && l.Refund.GatewayRef != "" {
		refs = append(refs, l.Refund.GatewayRef)
	}
	if l.Settlement, err = s.lines(ctx, `(l.source = 'SETTLEMENT' AND l.gateway = $2 AND l.current AND l.ext_ref = ANY($3))
		OR (l.source = 'SETTLEMENT' AND l.id = ANY($1))`, ev.Lines, e.Gateway, refs); err != nil {
		return l, err
	}
	payouts := []string{}
	if e.PayoutID != "" {
		payouts = append(payouts, e.PayoutID)
	}
	for _, sl := range l.Settlement {
		if sl.PayoutID != "" {
			payouts = append(payouts, sl.PayoutID)
		}
	}
	if l.Bank, err = s.lines(ctx, `(l.source = 'BANK' AND l.gateway = $2 AND l.current AND l.ext_ref = ANY($3))
		OR (l.source = 'BANK' AND l.id = ANY($1))`, ev.BankLines, e.Gateway, payouts); err != nil {
		return l, err
	}
	pnrs := []string{}
	for _, p := range []string{e.PNR, b.PNR} {
		if p != "" {
			pnrs = append(pnrs, p)
		}
	}
	if l.Core, err = s.lines(ctx, `(l.source = 'CORE' AND l.gateway = $2 AND l.current AND l.ext_ref = ANY($3))
		OR (l.source = 'CORE' AND l.id = ANY($1))`, ev.Lines, "", pnrs); err != nil {
		return l, err
	}
	return l, nil
}

func (s *Service) lines(ctx context.Context, cond string, ids []int64, gateway string, refs []string) ([]LineLeg, error) {
	rows, err := s.pool.Query(ctx, `SELECT l.id, l.file_id, l.line_no, l.source, l.kind, l.business_date, l.ext_ref, l.amount_paise,
		l.fee_paise, l.tax_paise, l.net_paise, l.payout_id, l.current, l.raw FROM recon_lines l WHERE `+cond+` ORDER BY l.id LIMIT 200`,
		ids, gateway, refs)
	if err != nil {
		return nil, fmt.Errorf("legs: lines: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[LineLeg])
	if err != nil {
		return nil, fmt.Errorf("legs: lines: %w", err)
	}
	return out, nil
}

// Books terms: where every rupee a day's ticket payments collected went.
const (
	TermCollected = "collected" // captured by our ticket payments of the day
	TermTickets   = "tickets"   // kept for a booking (net of its refund)
	TermRefunds   = "refunds"   // refunded, or being refunded
	TermPending   = "pending"   // neither yet: a late success or a second charge still being resolved
)

// BookTerms lists the terms in the order the books show them.
var BookTerms = []string{TermCollected, TermTickets, TermRefunds, TermPending}

// booksCTE classifies each captured ticket payment of a day (IST) and
// gateway ($1 start, $2 end, $3 gateway or ” for all, $4 wallet's name):
// the hold's first capture pays its booking; a payment's refund (not
// failed) is refunded; what is left is pending. One place for both the
// totals and the lists.
const booksCTE = `WITH p AS (
		SELECT p.id, p.hold_id, p.psp, p.method, p.state, p.amount_paise AS amount, p.initiated_at, u.login,
		       b.pnr, b.status AS booking_status,
		       coalesce(r.amount_paise, 0) AS refunded, coalesce(r.state, '') AS refund_state,
		       b.id IS NOT NULL AND p.id = (SELECT q.id FROM payments q WHERE q.hold_id = p.hold_id AND q.state IN ('SUCCESS', 'REFUNDED')
		           ORDER BY coalesce(q.resolved_at, q.initiated_at), q.id LIMIT 1) AS pays_booking
		FROM payments p JOIN users u ON u.id = p.user_id
		LEFT JOIN bookings b ON b.hold_id = p.hold_id
		LEFT JOIN refunds r ON r.payment_id = p.id AND r.state <> 'FAILED'
		WHERE p.purpose = 'HOLD' AND p.state IN ('SUCCESS', 'REFUNDED') AND p.initiated_at >= $1 AND p.initiated_at < $2
		  AND ($3 = '' OR p.psp = CASE WHEN $3 = $4 THEN '' ELSE $3 END))
	, t AS (
		SELECT p.*, 'collected' AS term, amount AS part FROM p
		UNION ALL SELECT p.*, 'tickets', amount - refunded FROM p WHERE pays_booking
		UNION ALL SELECT p.*, 'refunds', refunded FROM p WHERE refunded > 0
		UNION ALL SELECT p.*, 'pending', amount - refunded FROM p WHERE NOT pays_booking AND amount > refunded)`

// Books is one day's books: collected = tickets + refunds + pending, to the paisa.
type Books struct {
	Day     time.Time        `json:"day"`
	Gateway string           `json:"gateway"`
	Paise   map[string]int64 `json:"paise"`
	Count   map[string]int   `json:"count"`
	// Difference is collected minus the other terms: zero when the books balance.
	Difference int64 `json:"difference_paise"`
}

func dayBounds(day time.Time) (time.Time, time.Time) {
	d := dateOnly(day)
	start := time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, booking.IST)
	return start, start.AddDate(0, 0, 1)
}

// Books computes a day's books for a gateway ("" for all, Wallet for wallet payments).
func (s *Service) Books(ctx context.Context, day time.Time, gateway string) (Books, error) {
	if gateway != "" && !gatewayID.MatchString(gateway) {
		return Books{}, booking.Errorf(booking.EINVALID, "NO_GATEWAY", "Unknown gateway %q.", gateway)
	}
	start, end := dayBounds(day)
	bk := Books{Day: dateOnly(day), Gateway: gateway, Paise: map[string]int64{}, Count: map[string]int{}}
	rows, err := s.pool.Query(ctx, booksCTE+` SELECT term, count(*), coalesce(sum(part), 0)::bigint FROM t GROUP BY term`,
		start, end, gateway, Wallet)
	if err != nil {
		return bk, fmt.Errorf("books: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var term string
		var n int
		var paise int64
		if err := rows.Scan(&term, &n, &paise); err != nil {
			return bk, fmt.Errorf("books: %w", err)
		}
		bk.Paise[term], bk.Count[term] = paise, n
	}
	if err := rows.Err(); err != nil {
		return bk, fmt.Errorf("books: %w", err)
	}
	bk.Difference = bk.Paise[TermCollected] - bk.Paise[TermTickets] - bk.Paise[TermRefunds] - bk.Paise[TermPending]
	return bk, nil
}

// BookLine is one payment behind a books term.
type BookLine struct {
	PaymentID     uuid.UUID `json:"payment_id"`
	PSP           string    `json:"psp"`
	Method        string    `json:"method"`
	State         string    `json:"state"`
	AmountPaise   int64     `json:"amount_paise"`
	PartPaise     int64     `json:"part_paise"` // what it adds to the term
	InitiatedAt   time.Time `json:"initiated_at"`
	Login         string    `json:"login"`
	PNR           string    `json:"pnr"`
	BookingStatus string    `json:"booking_status"`
	RefundedPaise int64     `json:"refunded_paise"`
	RefundState   string    `json:"refund_state"`
}

// BookLines lists the payments behind one term of a day's books, a page at a time.
func (s *Service) BookLines(ctx context.Context, day time.Time, gateway, term string, limit, offset int) ([]BookLine, error) {
	if !slices.Contains(BookTerms, term) {
		return nil, booking.Errorf(booking.EINVALID, "UNKNOWN_TERM", "Unknown books term %q.", term)
	}
	if gateway != "" && !gatewayID.MatchString(gateway) {
		return nil, booking.Errorf(booking.EINVALID, "NO_GATEWAY", "Unknown gateway %q.", gateway)
	}
	if limit <= 0 || limit > 1000 || offset < 0 {
		return nil, booking.Errorf(booking.EINVALID, "BAD_PAGE", "Pages hold at most 1000 lines and start at 0.")
	}
	start, end := dayBounds(day)
	rows, err := s.pool.Query(ctx, booksCTE+` SELECT id, psp, method, state, amount, part, initiated_at, login, coalesce(pnr, ''),
		coalesce(booking_status, ''), refunded, refund_state FROM t WHERE term = $5 ORDER BY initiated_at, id LIMIT $6 OFFSET $7`,
		start, end, gateway, Wallet, term, limit, offset)
	if err != nil {
		return nil, fmt.Errorf("books %s: %w", term, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[BookLine])
	if err != nil {
		return nil, fmt.Errorf("books %s: %w", term, err)
	}
	return out, nil
}

// AgeRow is one ageing bucket of the unresolved exceptions.
type AgeRow struct {
	Bucket    string `json:"bucket"`
	Count     int    `json:"count"`
	Paise     int64  `json:"amount_at_risk_paise"`
	Escalated int    `json:"escalated"`
}

// Ageing counts the unresolved exceptions by age bucket with the amount
// at risk (the sum of their stakes, not of the gross amounts they are
// about), for the funnel's money panel.
func (s *Service) Ageing(ctx context.Context) ([]AgeRow, error) {
	out := make([]AgeRow, len(AgeBuckets))
	var from []float64 // the buckets' lower bounds past the first, in seconds
	for i, b := range AgeBuckets {
		out[i].Bucket = b.Name
		if i > 0 {
			from = append(from, b.From.Seconds())
		}
	}
	// A row's bucket is how many of those bounds its age has passed.
	rows, err := s.pool.Query(ctx, `SELECT (SELECT count(*) FROM unnest($2::float8[]) f WHERE extract(epoch FROM $1 - e.detected_at) >= f),
			count(*), coalesce(sum(stake_paise), 0)::bigint, count(escalated_at)
		FROM reconciliation_exceptions e WHERE state IN ('OPEN', 'INVESTIGATING') GROUP BY 1`, s.cfg.Now(), from)
	if err != nil {
		return nil, fmt.Errorf("ageing: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var i, n, esc int
		var paise int64
		if err := rows.Scan(&i, &n, &paise, &esc); err != nil {
			return nil, fmt.Errorf("ageing: %w", err)
		}
		out[i].Count, out[i].Paise, out[i].Escalated = n, paise, esc
	}
	return out, rows.Err()
}

// ResolutionCodes are the codes the console offers for a manual
// resolution (any code of 3-40 capitals is accepted).
var ResolutionCodes = []string{"MATCHED_MANUALLY", "TIMING_DIFFERENCE", "GATEWAY_CORRECTED", "REFUNDED_MANUALLY", "BOOKED_MANUALLY",
	"CORE_CORRECTED", "CHARGEBACK_ACCEPTED", "CHARGEBACK_WON", "DUPLICATE_LINE_IGNORED", "NO_ACTION_NEEDED"}

// LatestDay is the newest business date with a run (ok false: none yet).
func (s *Service) LatestDay(ctx context.Context) (day time.Time, ok bool, err error) {
	var d *time.Time
	if err := s.pool.QueryRow(ctx, `SELECT max(business_date) FROM recon_runs`).Scan(&d); err != nil {
		return time.Time{}, false, fmt.Errorf("latest run day: %w", err)
	}
	if d == nil {
		return time.Time{}, false, nil
	}
	return *d, true, nil
}
