package payment

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"tatkal/booking/payment/pspapi"
)

// notCreatedAfter: a payment the gateway still has no record of this long
// after we asked to create it never will: it failed, nothing was charged.
const notCreatedAfter = 2 * time.Minute

// Inquire asks the gateway about an unresolved payment and applies the
// answer. It returns how long to wait before asking again (0: resolved).
// Past its deadline a payment is still asked about, every minute, and is
// flagged for operators by the console.
func (s *Service) Inquire(ctx context.Context, id uuid.UUID) (time.Duration, error) {
	var state, gateway, pspRef, method string
	var inquiries int
	var initiated, deadline time.Time
	err := s.pool.QueryRow(ctx, `SELECT state, psp, coalesce(psp_ref, ''), method, inquiries, initiated_at, deadline
		FROM payments WHERE id = $1`, id).Scan(&state, &gateway, &pspRef, &method, &inquiries, &initiated, &deadline)
	if err != nil {
		return 0, fmt.Errorf("inquire %s: %w", id, err)
	}
	if resolved(state) || method == Wallet {
		return 0, nil
	}
	g := s.gateways[gateway]
	if g == nil {
		return 0, fmt.Errorf("inquire %s: unknown gateway %q", id, gateway)
	}
	if _, err := s.pool.Exec(ctx, `UPDATE payments SET inquiries = inquiries + 1 WHERE id = $1`, id); err != nil {
		return 0, fmt.Errorf("inquire %s: %w", id, err)
	}
	var p pspapi.Payment
	took, err := timed(func() error {
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
	s.routes.observe(ctx, gateway, method, err == nil || (errors.As(err, &ce) && ce.Definitive), took)
	switch {
	case err == nil:
		if err := s.apply(ctx, id, p, "status inquiry"); err != nil {
			return 0, fmt.Errorf("inquire %s: %w", id, err)
		}
	case errors.As(err, &ce) && ce.NotFound && time.Since(initiated) > notCreatedAfter:
		if err := s.apply(ctx, id, pspapi.Payment{Status: pspapi.StatusFailed, FailureReason: "the gateway has no record of this payment"},
			"status inquiry: not found"); err != nil {
			return 0, fmt.Errorf("inquire %s: %w", id, err)
		}
	default:
		s.log.Info("inquiry inconclusive", "payment", id, "err", err)
	}
	if err := s.pool.QueryRow(ctx, `SELECT state FROM payments WHERE id = $1`, id).Scan(&state); err != nil {
		return 0, fmt.Errorf("inquire %s: %w", id, err)
	}
	if resolved(state) {
		return 0, nil
	}
	wait := min(5*time.Second<<min(inquiries, 4), time.Minute)
	if time.Now().After(deadline) {
		s.log.Warn("payment unresolved past its deadline", "payment", id, "state", state, "deadline", deadline)
		wait = 30 * time.Second
	}
	return wait, nil
}
