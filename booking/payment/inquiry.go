package payment

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"tatkal/booking/db"
	"tatkal/booking/payment/pspapi"
)

// Inquire asks the gateway about an unresolved payment and applies the
// answer. It returns how long to wait before asking again (0: done).
// Past its deadline a payment is still asked about, every 30 s, and is
// flagged for operators by the console.
//
// A success that only a callback reported is asked about too, once: the
// gateway's answer to us confirms it, or contradicts it and raises a
// review. A payment in review is left to the person reviewing it.
func (s *Service) Inquire(ctx context.Context, id uuid.UUID) (time.Duration, error) {
	var state, gateway, pspRef, method string
	var inquiries int
	var initiated, deadline time.Time
	var confirmedAt *time.Time
	err := s.pool.QueryRow(ctx, `SELECT state, psp, coalesce(psp_ref, ''), method, inquiries, initiated_at, deadline, gateway_confirmed_at
		FROM payments WHERE id = $1`, id).Scan(&state, &gateway, &pspRef, &method, &inquiries, &initiated, &deadline, &confirmedAt)
	if err != nil {
		return 0, fmt.Errorf("inquire %s: %w", id, err)
	}
	if done, err := s.inquiryDone(ctx, id, state, method, confirmedAt); err != nil || done {
		return 0, err
	}
	g := s.gateways[gateway]
	if g == nil {
		return 0, fmt.Errorf("inquire %s: unknown gateway %q", id, gateway)
	}
	if _, err := s.pool.Exec(ctx, `UPDATE payments SET inquiries = inquiries + 1 WHERE id = $1`, id); err != nil {
		return 0, fmt.Errorf("inquire %s: %w", id, err)
	}
	var p pspapi.Payment
	took, callErr := timed(func() error {
		c, cancel := context.WithTimeout(ctx, s.cfg.CreateTimeout)
		defer cancel()
		var err error
		if pspRef != "" {
			p, err = g.get(c, pspRef)
		} else {
			p, err = g.find(c, id.String())
		}
		return err
	})
	var ce *callError
	s.observeCall(ctx, gateway, method, callErr, took)
	switch {
	case callErr == nil:
		if err := s.apply(ctx, id, p, "status inquiry", true); errors.Is(err, errAmountUnknown) {
			s.log.Warn("inquiry answer proves nothing; asking again", "payment", id, "err", err)
		} else if err != nil {
			return 0, fmt.Errorf("inquire %s: %w", id, err)
		}
	case errors.As(callErr, &ce) && ce.NotFound && time.Since(initiated) > s.cfg.NotCreatedAfter:
		if err := s.apply(ctx, id, pspapi.Payment{Status: pspapi.StatusFailed, FailureReason: "the gateway has no record of this payment"},
			"status inquiry: not found", true); err != nil {
			return 0, fmt.Errorf("inquire %s: %w", id, err)
		}
	default:
		s.log.Info("inquiry inconclusive", "payment", id, "err", callErr)
	}
	if err := s.pool.QueryRow(ctx, `SELECT state, gateway_confirmed_at FROM payments WHERE id = $1`, id).Scan(&state, &confirmedAt); err != nil {
		return 0, fmt.Errorf("inquire %s: %w", id, err)
	}
	if done, err := s.inquiryDone(ctx, id, state, method, confirmedAt); err != nil || done {
		return 0, err
	}
	wait := min(5*time.Second<<min(inquiries, 4), time.Minute)
	if until := time.Until(initiated.Add(s.cfg.NotCreatedAfter)); errors.As(callErr, &ce) && ce.NotFound && until > 0 {
		// Ask again as soon as "not found" will mean "never created": the
		// backoff alone could keep the seats (and the passenger) waiting
		// up to a minute past it.
		wait = min(wait, until+time.Second)
	}
	if time.Now().After(deadline) {
		if (state == Success || state == Refunded) && callErr == nil {
			// A callback's success the gateway, answering, would not
			// confirm to us by the deadline: a person compares the records.
			return 0, s.raise(ctx, id, ReviewSuccessUnconfirmed, map[string]any{"state": state, "deadline": deadline})
		}
		s.log.Warn("payment unresolved past its deadline", "payment", id, "state", state, "deadline", deadline)
		wait = 30 * time.Second
	}
	return wait, nil
}

// inquiryDone says whether there is nothing left to ask the gateway: the
// payment failed, or its success is confirmed by the gateway, or it is in
// review (a person owns it now).
func (s *Service) inquiryDone(ctx context.Context, id uuid.UUID, state, method string, confirmedAt *time.Time) (bool, error) {
	switch {
	case method == Wallet || state == Failed:
		return true, nil
	case (state == Success || state == Refunded) && confirmedAt != nil:
		return true, nil
	}
	return inReview(ctx, s.pool, id)
}

// raise records a review in a transaction of its own.
func (s *Service) raise(ctx context.Context, id uuid.UUID, kind string, detail map[string]any) error {
	return db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		_, err := s.raiseReview(ctx, tx, id, nil, kind, detail)
		return err
	})
}
