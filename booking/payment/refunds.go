package payment

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"tatkal/booking"
)

// Refunds records refund requests inside the caller's transaction and
// enqueues their execution (RefundArgs, run by ExecuteRefund) in it. It
// needs only the job inserter, so the booking service can be given one
// before the payment service exists (booking.Refunds).
type Refunds struct {
	jobs booking.JobInserter
}

var _ booking.Refunds = Refunds{}

// NewRefunds returns the refund desk enqueueing with jobs.
func NewRefunds(jobs booking.JobInserter) Refunds { return Refunds{jobs: jobs} }

// RequestRefundTx records, in tx, a refund of amount paise (0: all of it,
// what the gateway captured where it told us, else what we asked) of one
// successful payment and enqueues its execution in the same transaction.
// A payment is refunded once: asking again returns the existing refund and
// false.
func (r Refunds) RequestRefundTx(ctx context.Context, tx pgx.Tx, paymentID uuid.UUID, reason string, amount int64) (uuid.UUID, bool, error) {
	var captured int64
	var state string
	if err := tx.QueryRow(ctx, `SELECT coalesce(captured_paise, amount_paise), state FROM payments WHERE id = $1`, paymentID).Scan(&captured, &state); err != nil {
		return uuid.Nil, false, fmt.Errorf("refund payment %s: %w", paymentID, err)
	}
	if state != Success && state != Refunded {
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
	if _, err := r.jobs.InsertTx(ctx, tx, RefundArgs{RefundID: got}, nil); err != nil {
		return uuid.Nil, false, fmt.Errorf("refund payment %s: enqueue: %w", paymentID, err)
	}
	return got, true, nil
}

// RefundHoldTx requests, in tx, a refund of amount paise (0: all) of the
// hold's captured payment, and reports whether the hold had one.
func (r Refunds) RefundHoldTx(ctx context.Context, tx pgx.Tx, holdID uuid.UUID, reason string, amount int64) (bool, error) {
	var paymentID uuid.UUID
	err := tx.QueryRow(ctx, `SELECT id FROM payments WHERE hold_id = $1 AND state IN ($2, $3)
		ORDER BY resolved_at LIMIT 1`, holdID, Success, Refunded).Scan(&paymentID)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("payment of hold %s: %w", holdID, err)
	}
	if _, _, err := r.RequestRefundTx(ctx, tx, paymentID, reason, amount); err != nil {
		return false, err
	}
	return true, nil
}

// RequestRefundTx is Refunds.RequestRefundTx with the service's job
// inserter (reconciliation's resolutions use it).
func (s *Service) RequestRefundTx(ctx context.Context, tx pgx.Tx, paymentID uuid.UUID, reason string, amount int64) (uuid.UUID, bool, error) {
	return NewRefunds(s.jobs).RequestRefundTx(ctx, tx, paymentID, reason, amount)
}
