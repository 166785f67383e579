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

// GatewayAnswer is what a payment's gateway says of it when asked now.
type GatewayAnswer struct {
	Found         bool   // false: the gateway has no record of the payment
	Status        string // pspapi.Status*: CREATED, PENDING, SUCCESS or FAILED
	AmountPaise   int64  // what it captured (SUCCESS)
	RefundedPaise int64  // what it has refunded of it so far
	PSPRef        string
}

// Captured says whether the gateway holds the customer's money for it.
func (a GatewayAnswer) Captured() bool { return a.Found && a.Status == pspapi.StatusSuccess }

// String is the answer as a person reads it in a history or an audit.
func (a GatewayAnswer) String() string {
	if !a.Found {
		return "the gateway has no record of the payment"
	}
	s := "the gateway says " + a.Status
	if a.Status == pspapi.StatusSuccess {
		s += fmt.Sprintf(", captured %d paise", a.AmountPaise)
	}
	if a.RefundedPaise > 0 {
		s += fmt.Sprintf(", refunded %d paise", a.RefundedPaise)
	}
	return s
}

// AskGateway asks a payment's gateway, now, how the payment stands, and
// changes nothing: it is the fresh evidence a person's decision on the
// money rests on (closing an exception, crediting a wallet). A gateway
// that cannot be reached is an error (EUNAVAIL), never an answer.
func (s *Service) AskGateway(ctx context.Context, id uuid.UUID) (GatewayAnswer, error) {
	var gateway, pspRef, method string
	err := s.pool.QueryRow(ctx, `SELECT psp, coalesce(psp_ref, ''), method FROM payments WHERE id = $1`, id).Scan(&gateway, &pspRef, &method)
	if errors.Is(err, pgx.ErrNoRows) {
		return GatewayAnswer{}, booking.Errorf(booking.ENOTFOUND, "NO_SUCH_PAYMENT", "No payment %s.", id)
	}
	if err != nil {
		return GatewayAnswer{}, fmt.Errorf("ask the gateway about %s: %w", id, err)
	}
	g := s.gateways[gateway]
	if method == Wallet || g == nil {
		return GatewayAnswer{}, booking.Errorf(booking.ECONFLICT, "NO_GATEWAY", "Payment %s went through no gateway we can ask (%s).", id, method)
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
	s.observeCall(ctx, gateway, method, callErr, took)
	var ce *callError
	switch {
	case callErr == nil:
		return GatewayAnswer{Found: true, Status: p.Status, AmountPaise: p.AmountPaise, RefundedPaise: p.RefundedPaise, PSPRef: p.PSPRef}, nil
	case errors.As(callErr, &ce) && ce.NotFound:
		return GatewayAnswer{}, nil
	}
	s.log.Info("gateway not answering", "payment", id, "gateway", gateway, "err", callErr)
	return GatewayAnswer{}, booking.Errorf(booking.EUNAVAIL, "GATEWAY_UNAVAILABLE", "%s did not answer about payment %s; ask again in a moment.", gateway, id)
}

// ConfirmCapture is how reconciliation settles a payment a settlement line
// says was captured: the line only starts the question. The gateway is
// asked now and its answer, never the file's, is applied through the live
// path (a success confirms the hold, refunds a second charge or finds the
// hold lapsed; a failure releases it), then a success nothing came of goes
// through the late-success path: the seats retaken or the money refunded
// in full, once. It returns the gateway's answer.
func (s *Service) ConfirmCapture(ctx context.Context, id uuid.UUID) (GatewayAnswer, error) {
	var state string
	var initiated time.Time
	if err := s.pool.QueryRow(ctx, `SELECT state, initiated_at FROM payments WHERE id = $1`, id).Scan(&state, &initiated); err != nil {
		return GatewayAnswer{}, fmt.Errorf("confirm capture %s: %w", id, err)
	}
	if state == Failed || state == Refunded {
		return GatewayAnswer{}, booking.Errorf(booking.ECONFLICT, "PAYMENT_FINAL", "Payment %s is %s; a capture reported for it is for a person to judge.", id, state)
	}
	a, err := s.AskGateway(ctx, id)
	if err != nil {
		return a, err
	}
	switch {
	case a.Found:
		p := pspapi.Payment{PSPRef: a.PSPRef, Status: a.Status, AmountPaise: a.AmountPaise, Currency: currency}
		if err := s.apply(ctx, id, p, "reconciliation: status inquiry", true); err != nil {
			return a, fmt.Errorf("confirm capture %s: %w", id, err)
		}
	case time.Since(initiated) > s.cfg.NotCreatedAfter:
		if err := s.apply(ctx, id, pspapi.Payment{Status: pspapi.StatusFailed, FailureReason: "the gateway has no record of this payment"},
			"reconciliation: status inquiry: not found", true); err != nil {
			return a, fmt.Errorf("confirm capture %s: %w", id, err)
		}
	}
	if !a.Captured() {
		return a, nil
	}
	return a, s.ResolveLateSuccess(ctx, id)
}
