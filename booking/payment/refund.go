package payment

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"tatkal/booking"
	"tatkal/booking/db"
	"tatkal/booking/funnel"
	"tatkal/booking/india"
	"tatkal/booking/payment/pspapi"
)

// ExecuteRefund carries out a recorded refund: instantly into the wallet
// for wallet payments, through the gateway (idempotent by the refund id)
// otherwise. It returns how long to wait before checking a refund the
// gateway has not finished (0: done).
func (s *Service) ExecuteRefund(ctx context.Context, refundID uuid.UUID) (time.Duration, error) {
	var paymentID uuid.UUID
	var state, reason, method, gateway, pspRef, gatewayRef string
	var amount, captured, userID int64
	var attempts int
	err := s.pool.QueryRow(ctx, `SELECT r.payment_id, r.state, r.reason, r.amount_paise, r.gateway_ref, r.attempts,
		p.method, p.psp, coalesce(p.psp_ref, ''), coalesce(p.captured_paise, p.amount_paise), p.user_id
		FROM refunds r JOIN payments p ON p.id = r.payment_id WHERE r.id = $1`, refundID).
		Scan(&paymentID, &state, &reason, &amount, &gatewayRef, &attempts, &method, &gateway, &pspRef, &captured, &userID)
	if err != nil {
		return 0, fmt.Errorf("refund %s: %w", refundID, err)
	}
	if state == "PROCESSED" || state == "FAILED" {
		return 0, nil // done, or refused and waiting for a person (payment_reviews)
	}
	if _, err := s.pool.Exec(ctx, `UPDATE refunds SET attempts = attempts + 1 WHERE id = $1`, refundID); err != nil {
		return 0, fmt.Errorf("refund %s: %w", refundID, err)
	}
	if method == Wallet {
		return 0, s.finishRefund(ctx, refundID, paymentID, userID, amount, captured, "", time.Now(), func(tx pgx.Tx) error {
			_, err := walletPost(ctx, tx, userID, "REFUND", refundID.String(), amount)
			return err
		})
	}
	g := s.gateways[gateway]
	if g == nil {
		return 0, fmt.Errorf("refund %s: unknown gateway %q", refundID, gateway)
	}
	c, cancel := context.WithTimeout(ctx, s.cfg.CreateTimeout)
	defer cancel()
	var r pspapi.Refund
	if gatewayRef != "" {
		r, err = g.getRefund(c, gatewayRef)
	} else {
		r, err = g.refund(c, refundID.String(), pspapi.CreateRefund{PSPRef: pspRef, AmountPaise: amount, Reason: reason, MerchantRef: refundID.String()})
	}
	var ce *callError
	if errors.As(err, &ce) && ce.Definitive {
		// A 4xx is the gateway's final word on this key: asking again
		// under the same key gets the same answer.
		return 0, s.refundRefused(ctx, refundID, paymentID, userID, amount, err.Error())
	}
	if err != nil {
		s.pool.Exec(ctx, `UPDATE refunds SET last_error = $2 WHERE id = $1`, refundID, err.Error()) //nolint:errcheck
		return 0, fmt.Errorf("refund %s at %s: %w", refundID, gateway, err)
	}
	switch r.Status {
	case pspapi.RefundProcessed:
		return 0, s.finishRefund(ctx, refundID, paymentID, userID, amount, captured, r.RefundRef, r.ExpectedAt, nil)
	case pspapi.RefundPending:
		if _, err := s.pool.Exec(ctx, `UPDATE refunds SET gateway_ref = $2 WHERE id = $1`, refundID, r.RefundRef); err != nil {
			return 0, fmt.Errorf("refund %s: %w", refundID, err)
		}
		// Banks take a while: look again soon, then less and less often.
		return min(2*time.Second<<min(attempts, 5), time.Minute), nil
	case pspapi.RefundFailed:
		return 0, s.refundRefused(ctx, refundID, paymentID, userID, amount, "the gateway answered "+r.Status)
	default:
		// An answer we do not understand proves nothing: ask again.
		s.pool.Exec(ctx, `UPDATE refunds SET last_error = $2 WHERE id = $1`, refundID, "gateway status "+r.Status) //nolint:errcheck
		return 0, fmt.Errorf("refund %s: gateway answered %q", refundID, r.Status)
	}
}

func (s *Service) finishRefund(ctx context.Context, refundID, paymentID uuid.UUID, userID, amount, captured int64,
	gatewayRef string, expected time.Time, inTx func(pgx.Tx) error) error {
	return db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		var state string
		if err := tx.QueryRow(ctx, `SELECT state FROM refunds WHERE id = $1 FOR UPDATE`, refundID).Scan(&state); err != nil {
			return err
		}
		if state == "PROCESSED" {
			return nil
		}
		if inTx != nil {
			if err := inTx(tx); err != nil {
				return err
			}
		}
		defer s.funnel.Add(0, funnel.RefundDone, 1)
		if _, err := tx.Exec(ctx, `UPDATE refunds SET state = 'PROCESSED', gateway_ref = $2, expected_at = $3, completed_at = now(),
			last_error = '' WHERE id = $1`, refundID, gatewayRef, expected); err != nil {
			return err
		}
		if amount >= captured {
			var pstate string
			if err := tx.QueryRow(ctx, `SELECT state FROM payments WHERE id = $1 FOR UPDATE`, paymentID).Scan(&pstate); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE payments SET state = 'REFUNDED', updated_at = now() WHERE id = $1`, paymentID); err != nil {
				return err
			}
			if err := event(ctx, tx, paymentID, pstate, Refunded, "refund processed", map[string]any{"refund_id": refundID, "reference": gatewayRef}); err != nil {
				return err
			}
		}
		if gatewayRef != "" {
			return booking.NotifyT(ctx, tx, userID, "REFUND_DONE", refundID.String(), "msg.refundbank", india.Decimal(amount),
				expected.In(booking.IST).Format("2 Jan"), gatewayRef)
		}
		return booking.NotifyT(ctx, tx, userID, "REFUND_DONE", refundID.String(), "msg.refunddone", india.Decimal(amount))
	})
}
