package booking

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Refund reasons (refunds.reason).
const (
	RefundLateSuccessNoSeat = "LATE_SUCCESS_NO_SEAT"
	RefundDuplicateCharge   = "DUPLICATE_CHARGE"
	RefundHoldExpired       = "HOLD_EXPIRED"
	RefundHoldCancelled     = "HOLD_CANCELLED"
	RefundWaitlistCancelled = "WAITLIST_CANCELLED"
	RefundCoreRejected      = "CORE_REJECTED"
	// RefundAmountMismatch returns a capture the gateway made for another
	// amount than ours (migrations/006).
	RefundAmountMismatch = "AMOUNT_MISMATCH"
)

// RequestRefundTx records, in tx, a refund of amount paise (0: all of it,
// what the gateway captured where it told us, else what we asked) of one
// successful payment and enqueues its execution in the same transaction. A payment is refunded once: asking again returns the
// existing refund and false.
func (s *Service) RequestRefundTx(ctx context.Context, tx pgx.Tx, paymentID uuid.UUID, reason string, amount int64) (uuid.UUID, bool, error) {
	var captured int64
	var state string
	if err := tx.QueryRow(ctx, `SELECT coalesce(captured_paise, amount_paise), state FROM payments WHERE id = $1`, paymentID).Scan(&captured, &state); err != nil {
		return uuid.Nil, false, fmt.Errorf("refund payment %s: %w", paymentID, err)
	}
	if state != "SUCCESS" && state != "REFUNDED" {
		return uuid.Nil, false, fmt.Errorf("refund payment %s: it is %s, nothing was captured", paymentID, state)
	}
	if amount <= 0 || amount > captured {
		amount = captured
	}
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.Nil, false, err
	}
	var got uuid.UUID
	err = tx.QueryRow(ctx, `INSERT INTO refunds (id, payment_id, reason, amount_paise, state)
		VALUES ($1, $2, $3, $4, 'PENDING') ON CONFLICT (payment_id) DO NOTHING RETURNING id`, id, paymentID, reason, amount).Scan(&got)
	if errors.Is(err, pgx.ErrNoRows) {
		err = tx.QueryRow(ctx, `SELECT id FROM refunds WHERE payment_id = $1`, paymentID).Scan(&got)
		return got, false, err
	}
	if err != nil {
		return uuid.Nil, false, fmt.Errorf("refund payment %s: %w", paymentID, err)
	}
	if _, err := s.jobs.InsertTx(ctx, tx, RefundArgs{RefundID: got}, nil); err != nil {
		return uuid.Nil, false, fmt.Errorf("refund payment %s: enqueue: %w", paymentID, err)
	}
	return got, true, nil
}

// capturedPayment returns the hold's successful payment, if any.
func capturedPayment(ctx context.Context, tx pgx.Tx, holdID uuid.UUID) (uuid.UUID, bool, error) {
	var id uuid.UUID
	err := tx.QueryRow(ctx, `SELECT id FROM payments WHERE hold_id = $1 AND state IN ('SUCCESS', 'REFUNDED')
		ORDER BY resolved_at LIMIT 1`, holdID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return uuid.Nil, false, nil
	}
	if err != nil {
		return uuid.Nil, false, fmt.Errorf("payment of hold %s: %w", holdID, err)
	}
	return id, true, nil
}
