package payment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"tatkal/booking"
	"tatkal/booking/db"
)

// Review kinds (payment_reviews.kind): money a person must look at. See
// migrations/006_payment_reviews.up.sql for what each means.
const (
	ReviewFailedAfterSuccess = "FAILED_AFTER_SUCCESS"
	ReviewSuccessUnconfirmed = "SUCCESS_UNCONFIRMED"
	ReviewAmountMismatch     = "AMOUNT_MISMATCH"
	ReviewRefundRefused      = "REFUND_REFUSED"
)

// raiseReview records, in tx, that a payment needs a person. Raising a
// kind that is already open for the payment changes nothing (false). It
// is an alarm: logged at error level as well as stored.
func (s *Service) raiseReview(ctx context.Context, tx pgx.Tx, paymentID uuid.UUID, refundID *uuid.UUID, kind string, detail map[string]any) (bool, error) {
	d, err := json.Marshal(detail)
	if err != nil {
		return false, fmt.Errorf("review %s of %s: %w", kind, paymentID, err)
	}
	tag, err := tx.Exec(ctx, `INSERT INTO payment_reviews (payment_id, refund_id, kind, detail) VALUES ($1, $2, $3, $4)
		ON CONFLICT (payment_id, kind) WHERE resolved_at IS NULL DO NOTHING`, paymentID, refundID, kind, d)
	if err != nil {
		return false, fmt.Errorf("review %s of %s: %w", kind, paymentID, err)
	}
	if tag.RowsAffected() == 0 {
		return false, nil
	}
	s.log.Error("payment raised for review", "payment", paymentID, "kind", kind, "detail", string(d))
	return true, nil
}

// inReview reports whether the payment has an open review.
func inReview(ctx context.Context, q db.Querier, paymentID uuid.UUID) (bool, error) {
	var open bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM payment_reviews WHERE payment_id = $1 AND resolved_at IS NULL)`, paymentID).Scan(&open)
	if err != nil {
		return false, fmt.Errorf("reviews of %s: %w", paymentID, err)
	}
	return open, nil
}

// Review is an open payment review as the console lists it.
type Review struct {
	ID          int64
	PaymentID   uuid.UUID
	RefundID    *uuid.UUID
	Kind        string
	Detail      string
	CreatedAt   time.Time
	Login       string
	Purpose     string
	Method      string
	Gateway     string
	State       string
	AmountPaise int64
	PNR         string
}

// OpenReviews lists the open reviews, oldest first, with the booking (PNR)
// each payment bought, if any.
func (s *Service) OpenReviews(ctx context.Context, limit int) ([]Review, error) {
	rows, err := s.pool.Query(ctx, `SELECT r.id, r.payment_id, r.refund_id, r.kind, r.detail::text, r.created_at, u.login,
		p.purpose, p.method, p.psp, p.state, p.amount_paise, coalesce(b.pnr, '')
		FROM payment_reviews r JOIN payments p ON p.id = r.payment_id JOIN users u ON u.id = p.user_id
		LEFT JOIN bookings b ON b.hold_id = p.hold_id
		WHERE r.resolved_at IS NULL ORDER BY r.created_at, r.id LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("open payment reviews: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Review])
	if err != nil {
		return nil, fmt.Errorf("open payment reviews: %w", err)
	}
	return out, nil
}

// ResolveReview closes an open review with the operator's note. What was
// done about the money is the operator's to record in the note.
func (s *Service) ResolveReview(ctx context.Context, id int64, actor, note string) error {
	if actor == "" || note == "" || len(note) > 500 {
		return booking.Errorf(booking.EINVALID, "BAD_RESOLUTION", "Say in at most 500 characters what was done about this payment.")
	}
	tag, err := s.pool.Exec(ctx, `UPDATE payment_reviews SET resolved_at = now(), resolved_by = $2, resolution = $3
		WHERE id = $1 AND resolved_at IS NULL`, id, actor, note)
	if err != nil {
		return fmt.Errorf("resolve review %d: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return booking.Errorf(booking.ENOTFOUND, "NO_OPEN_REVIEW", "Review %d is not open.", id)
	}
	return nil
}

// RefundToWallet is the fallback for a refund the gateway refused: the
// refund's amount is credited to the passenger's wallet, once (the ledger
// entry is keyed by the refund id), the refund becomes PROCESSED and the
// review is resolved.
//
// It is an operator's action, never automatic: a refusal can mean the
// money is still ours to return (a closed bank account), but also that the
// gateway never captured it (NOT_CAPTURED: crediting would mint money) or
// already refunded it under another key (crediting would pay twice). Only a
// person who has looked at the gateway's records can tell which.
func (s *Service) RefundToWallet(ctx context.Context, reviewID int64, actor string) error {
	var refundID, paymentID uuid.UUID
	var amount, captured, userID int64
	err := s.pool.QueryRow(ctx, `SELECT r.refund_id, f.payment_id, f.amount_paise, coalesce(p.captured_paise, p.amount_paise), p.user_id
		FROM payment_reviews r JOIN refunds f ON f.id = r.refund_id JOIN payments p ON p.id = f.payment_id
		WHERE r.id = $1 AND r.kind = $2 AND r.resolved_at IS NULL`, reviewID, ReviewRefundRefused).
		Scan(&refundID, &paymentID, &amount, &captured, &userID)
	if errors.Is(err, pgx.ErrNoRows) {
		return booking.Errorf(booking.ENOTFOUND, "NO_REFUSED_REFUND", "Review %d is not an open refused refund.", reviewID)
	}
	if err != nil {
		return fmt.Errorf("refund to wallet, review %d: %w", reviewID, err)
	}
	return s.finishRefund(ctx, refundID, paymentID, userID, amount, captured, "", time.Now(), func(tx pgx.Tx) error {
		var state string
		if err := tx.QueryRow(ctx, `SELECT state FROM refunds WHERE id = $1`, refundID).Scan(&state); err != nil {
			return err
		}
		if state != "FAILED" {
			return booking.Errorf(booking.ECONFLICT, "REFUND_NOT_FAILED", "Refund %s is %s, not FAILED.", refundID, state)
		}
		if _, err := walletPost(ctx, tx, userID, "REFUND", refundID.String(), amount); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `UPDATE payment_reviews SET resolved_at = now(), resolved_by = $2,
			resolution = 'refund credited to the wallet' WHERE id = $1 AND resolved_at IS NULL`, reviewID, actor)
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return booking.Errorf(booking.ECONFLICT, "REVIEW_CLOSED", "Review %d was closed meanwhile.", reviewID)
		}
		return nil
	})
}

// refundRefused marks a refund the gateway refused FAILED and raises it
// for review, so it is not retried forever under a key the gateway will
// always answer the same way. The passenger is told the money is safe.
func (s *Service) refundRefused(ctx context.Context, refundID, paymentID uuid.UUID, userID, amount int64, why string) error {
	return db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		var state string
		if err := tx.QueryRow(ctx, `SELECT state FROM refunds WHERE id = $1 FOR UPDATE`, refundID).Scan(&state); err != nil {
			return err
		}
		if state != "PENDING" {
			return nil
		}
		if _, err := tx.Exec(ctx, `UPDATE refunds SET state = 'FAILED', last_error = $2 WHERE id = $1`, refundID, why); err != nil {
			return err
		}
		if _, err := s.raiseReview(ctx, tx, paymentID, &refundID, ReviewRefundRefused, map[string]any{"refund_id": refundID, "error": why}); err != nil {
			return err
		}
		return booking.NotifyT(ctx, tx, userID, "REFUND_DELAYED", refundID.String(), "msg.refunddelayed", booking.Rupees(amount))
	})
}
