package recon

// The exception list as a clerk works it: each row with the references
// the outside world uses (the gateway's transaction id, the PNR) and the
// transaction's own time, sorted by the column the clerk chose, one page
// at a time; the same rows feed the export of the filtered list.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"tatkal/booking"
)

// WorkRow is an exception as the list shows it.
type WorkRow struct {
	Exception
	// GatewayRef is the gateway's transaction id: the exception's own, else
	// its payment's, else its refund's ("" for a bank or core line).
	GatewayRef string
	// BookingPNR is the PNR: the exception's own, else its hold's booking.
	BookingPNR string
	// TxnAt is when the money moved: the payment or refund started, else
	// the earliest line the run cited, else the business date's start (IST).
	TxnAt time.Time
}

// TxnAge is how long ago the transaction was, or was when it was closed.
func (w WorkRow) TxnAge(now time.Time) time.Duration {
	if w.ResolvedAt != nil {
		return w.ResolvedAt.Sub(w.TxnAt)
	}
	return now.Sub(w.TxnAt)
}

// Sort keys of the list; "-" before one reverses it. Ages sort by the
// age, not the date: "age" is youngest first, "-age" oldest first.
var SortKeys = []string{"stake", "age", "txn_age", "kind", "state", "team", "due"}

// orderBy turns a sort key into an ORDER BY list over the worklist's columns.
func orderBy(sort string) (string, error) {
	key, desc := strings.CutPrefix(sort, "-")
	var expr string
	switch key {
	case "":
		return "detected_at, kind, ref", nil
	case "stake":
		expr = "stake_paise"
	case "age":
		expr, desc = "detected_at", !desc // the older, the larger its age
	case "txn_age":
		expr, desc = "txn_at", !desc
	case "kind":
		expr = "kind"
	case "state":
		expr = "state"
	case "team":
		expr = "owner_team"
	case "due":
		expr = "due_at"
	default:
		return "", booking.Errorf(booking.EINVALID, "BAD_SORT", "Sort by one of %s (a leading - reverses it), not %q.", strings.Join(SortKeys, ", "), sort)
	}
	dir := " ASC"
	if desc {
		dir = " DESC"
	}
	// The rest breaks ties the same way every time, so pages do not overlap.
	return expr + dir + ", detected_at, kind, ref", nil
}

// workCTE selects the filtered exceptions ($where) with their references
// and transaction time; the caller sorts and pages it.
const workCTE = `WITH e AS (SELECT * FROM reconciliation_exceptions %s)
	, x AS (SELECT e.*,
			coalesce(nullif(e.psp_ref, ''), nullif(p.psp_ref, ''), nullif(rf.gateway_ref, ''), '') AS gateway_ref,
			coalesce(nullif(e.pnr, ''), (SELECT b.pnr FROM bookings b WHERE b.hold_id = coalesce(e.hold_id, p.hold_id) LIMIT 1), '') AS booking_pnr,
			coalesce(p.initiated_at, rf.initiated_at,
				(SELECT min(l.event_at) FROM recon_lines l WHERE jsonb_typeof(e.evidence->'lines') = 'array'
				   AND l.id IN (SELECT v::bigint FROM jsonb_array_elements_text(e.evidence->'lines') v)),
				e.business_date::timestamp AT TIME ZONE 'Asia/Kolkata') AS txn_at
		FROM e LEFT JOIN payments p ON p.id = e.payment_id LEFT JOIN refunds rf ON rf.id = e.refund_id)`

// WorkRows lists a page of the exceptions a filter selects, sorted by
// sort (SortKeys; "" oldest detected first).
func (s *Service) WorkRows(ctx context.Context, f Filter, sort string) ([]WorkRow, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	if f.Limit > 1000 || f.Offset < 0 {
		return nil, booking.Errorf(booking.EINVALID, "BAD_PAGE", "Pages hold at most 1000 exceptions and start at 0.")
	}
	order, err := orderBy(sort)
	if err != nil {
		return nil, err
	}
	where, args, err := s.where(f)
	if err != nil {
		return nil, err
	}
	args = append(args, f.Limit, f.Offset)
	q := fmt.Sprintf(workCTE, where) + ` SELECT ` + exceptionCols + `, gateway_ref, booking_pnr, txn_at FROM x ORDER BY ` + order +
		fmt.Sprintf(" LIMIT $%d OFFSET $%d", len(args)-1, len(args))
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list exceptions: %w", err)
	}
	defer rows.Close()
	out := []WorkRow{}
	for rows.Next() {
		var w WorkRow
		e := &w.Exception
		if err := rows.Scan(&e.ID, &e.Kind, &e.Ref, &e.Gateway, &e.BusinessDate, &e.PaymentID, &e.HoldID, &e.RefundID, &e.PNR, &e.PSPRef,
			&e.PayoutID, &e.AmountPaise, &e.DiffPaise, &e.StakePaise, &e.Owner, &e.Path, &e.State, &e.Assignee, &e.Resolution,
			&e.DetectedAt, &e.DueAt, &e.FirstRunID, &e.LastRunID, &e.Evidence, &e.NeedsApproval, &e.ApprovedBy, &e.WriteOffBy,
			&e.WrittenOffPaise, &e.ResolvedAt, &e.ResolvedBy, &e.EscalatedAt, &w.GatewayRef, &w.BookingPNR, &w.TxnAt); err != nil {
			return nil, fmt.Errorf("list exceptions: %w", err)
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

// Teams are the teams an exception can be handed to: every kind's owner.
func Teams() []string {
	var out []string
	for _, k := range kinds {
		if !slices.Contains(out, k.Owner) {
			out = append(out, k.Owner)
		}
	}
	return out
}
