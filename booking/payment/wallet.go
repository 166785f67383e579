package payment

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"tatkal/booking"
)

// Entry is one wallet ledger line.
type Entry struct {
	ID           int64     `json:"id"`
	Kind         string    `json:"kind"`
	Ref          string    `json:"ref"`
	AmountPaise  int64     `json:"amount_paise"`
	BalanceAfter int64     `json:"balance_after_paise"`
	At           time.Time `json:"at"`
}

// walletPost applies one ledger entry in tx. Money enters a wallet only as
// a top-up the gateway confirmed (apply) or a refund; seed data may fund
// wallets directly in the database.
//
// The entry: the balance moves by amount
// (negative for a debit) and may never go below zero. The same (kind, ref)
// is applied once; applying it again returns false and changes nothing.
func walletPost(ctx context.Context, tx pgx.Tx, userID int64, kind, ref string, amount int64) (bool, error) {
	var posted bool
	b := &pgx.Batch{}
	queueWalletPost(b, userID, kind, ref, amount, &posted)
	err := tx.SendBatch(ctx, b).Close() // runs the callback that sets posted
	return posted, err
}

// queueWalletPost is walletPost as statements of the caller's batch: the
// batch's Close returns its error (INSUFFICIENT_BALANCE among them), and
// posted says whether the entry was new.
func queueWalletPost(b *pgx.Batch, userID int64, kind, ref string, amount int64, posted *bool) {
	if amount >= 0 {
		// A debit needs no account: without one the balance is too low.
		b.Queue(`INSERT INTO wallet_accounts (user_id) VALUES ($1) ON CONFLICT DO NOTHING`, userID).Exec(func(pgconn.CommandTag) error { return nil })
	}
	// One statement: the look for an earlier (kind, ref), the guarded move
	// of the balance and the ledger line, which the unique (kind, ref)
	// still protects against a concurrent twin.
	b.Queue(`WITH seen AS (SELECT EXISTS (SELECT 1 FROM wallet_entries WHERE kind = $2 AND ref = $3) AS seen),
		moved AS (UPDATE wallet_accounts SET balance_paise = balance_paise + $4, updated_at = now()
			WHERE user_id = $1 AND balance_paise + $4 >= 0 AND NOT (SELECT seen FROM seen) RETURNING balance_paise),
		entry AS (INSERT INTO wallet_entries (user_id, kind, ref, amount_paise, balance_after)
			SELECT $1, $2, $3, $4, balance_paise FROM moved)
		SELECT (SELECT seen FROM seen), (SELECT balance_paise FROM moved)`, userID, kind, ref, amount).
		QueryRow(func(row pgx.Row) error {
			var seen bool
			var balance *int64
			if err := row.Scan(&seen, &balance); err != nil {
				return fmt.Errorf("wallet %s %s: %w", kind, ref, err)
			}
			switch {
			case seen:
				*posted = false
				return nil
			case balance == nil:
				return booking.Errorf(booking.ECONFLICT, "INSUFFICIENT_BALANCE", "Your wallet balance is too low for this payment; top up or choose another method.")
			}
			*posted = true
			return nil
		})
}

// Wallet returns the balance and the latest limit ledger entries.
func (s *Service) Wallet(ctx context.Context, userID int64, limit int) (int64, []Entry, error) {
	var balance int64
	err := s.pool.QueryRow(ctx, `SELECT coalesce((SELECT balance_paise FROM wallet_accounts WHERE user_id = $1), 0)`, userID).Scan(&balance)
	if err != nil {
		return 0, nil, fmt.Errorf("wallet %d: %w", userID, err)
	}
	if limit <= 0 {
		return balance, nil, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT id, kind, ref, amount_paise, balance_after, at FROM wallet_entries
		WHERE user_id = $1 ORDER BY id DESC LIMIT $2`, userID, limit)
	if err != nil {
		return 0, nil, fmt.Errorf("wallet %d: %w", userID, err)
	}
	entries, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Entry])
	return balance, entries, err
}

// CheckLedger verifies every wallet: the balance equals the sum of its
// entries, each entry's running balance is right, and none is negative.
// It returns the users whose wallets disagree.
func CheckLedger(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}) ([]int64, error) {
	rows, err := q.Query(ctx, `
		SELECT a.user_id FROM wallet_accounts a
		LEFT JOIN (SELECT user_id, sum(amount_paise) AS total FROM wallet_entries GROUP BY user_id) e ON e.user_id = a.user_id
		WHERE a.balance_paise <> coalesce(e.total, 0) OR a.balance_paise < 0
		UNION
		SELECT user_id FROM (
			SELECT user_id, balance_after, sum(amount_paise) OVER (PARTITION BY user_id ORDER BY id) AS running
			FROM wallet_entries) x
		WHERE balance_after <> running OR balance_after < 0`)
	if err != nil {
		return nil, fmt.Errorf("check ledger: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}
