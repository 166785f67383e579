package payment

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// MoneyReport is the money invariants of the whole stack at one moment:
// every payment a ticket or a refund by its deadline, and the wallet
// ledger balanced. A payment in review is a person's already and is not
// counted: it is not left unresolved silently.
type MoneyReport struct {
	// Unresolved are payments still open (INITIATED, AWAITING_USER,
	// PENDING_AT_BANK, UNKNOWN) past their deadline; a few of their ids.
	Unresolved    int
	UnresolvedIDs []string
	// Stranded are payments for a hold captured (SUCCESS) past their
	// deadline with neither a booking on the hold nor a refund: money
	// taken, no ticket, no refund.
	Stranded    int
	StrandedIDs []string
	// UnbalancedWallets are the wallets whose ledger does not add up
	// (CheckLedger).
	UnbalancedWallets []int64
}

// OK says whether every money invariant holds.
func (r MoneyReport) OK() bool {
	return r.Unresolved == 0 && r.Stranded == 0 && len(r.UnbalancedWallets) == 0
}

// PastDeadline says, for a person, what is owed past its deadline ("" if nothing).
func (r MoneyReport) PastDeadline() string {
	var parts []string
	if r.Unresolved > 0 {
		parts = append(parts, fmt.Sprintf("%d payment(s) still unresolved past their deadline (%s)", r.Unresolved, strings.Join(r.UnresolvedIDs, ", ")))
	}
	if r.Stranded > 0 {
		parts = append(parts, fmt.Sprintf("%d payment(s) captured past their deadline with neither a ticket nor a refund (%s)",
			r.Stranded, strings.Join(r.StrandedIDs, ", ")))
	}
	return strings.Join(parts, "; ")
}

// moneyExamples is how many payment ids a report names of each kind.
const moneyExamples = 5

// CheckMoney reads the money invariants (MoneyReport).
func CheckMoney(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
	QueryRow(context.Context, string, ...any) pgx.Row
}) (MoneyReport, error) {
	var r MoneyReport
	err := q.QueryRow(ctx, `
		WITH open AS (
			SELECT p.id FROM payments p
			WHERE p.state IN ('INITIATED', 'AWAITING_USER', 'PENDING_AT_BANK', 'UNKNOWN') AND p.deadline < now()
			  AND NOT EXISTS (SELECT 1 FROM payment_reviews v WHERE v.payment_id = p.id AND v.resolved_at IS NULL)),
		stranded AS (
			SELECT p.id FROM payments p
			WHERE p.purpose = 'HOLD' AND p.state = 'SUCCESS' AND p.deadline < now()
			  AND NOT EXISTS (SELECT 1 FROM bookings b WHERE b.hold_id = p.hold_id)
			  AND NOT EXISTS (SELECT 1 FROM refunds r WHERE r.payment_id = p.id)
			  AND NOT EXISTS (SELECT 1 FROM payment_reviews v WHERE v.payment_id = p.id AND v.resolved_at IS NULL))
		SELECT (SELECT count(*) FROM open),
		       coalesce((SELECT array_agg(id::text) FROM (SELECT id FROM open ORDER BY id LIMIT $1) x), '{}'),
		       (SELECT count(*) FROM stranded),
		       coalesce((SELECT array_agg(id::text) FROM (SELECT id FROM stranded ORDER BY id LIMIT $1) x), '{}')`,
		moneyExamples).Scan(&r.Unresolved, &r.UnresolvedIDs, &r.Stranded, &r.StrandedIDs)
	if err != nil {
		return r, fmt.Errorf("check money: %w", err)
	}
	if r.UnbalancedWallets, err = CheckLedger(ctx, q); err != nil {
		return r, err
	}
	return r, nil
}
