package pspsim

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"tatkal/booking/payment/pspapi"
)

// A payment's life at the gateway:
//
//	CREATED --customer approves--> bank answers: SUCCESS | FAILED(DECLINED) | PENDING
//	CREATED --customer declines / wrong OTP / ExpiresAt passes--> FAILED
//	PENDING --ResolveAt--> SUCCESS | FAILED(DECLINED)
//
// Every move is a compare-and-set on status (savePayment), so a payment
// is decided once: SUCCESS at most once, never both SUCCESS and FAILED.
// Each move sends a webhook in the same transaction.

// nextDue is when the background loop must next look at p.
func (p *payment) nextDue() *time.Time {
	switch p.Status {
	case pspapi.StatusCreated:
		due := p.ExpiresAt
		if p.ApproveAt != nil && p.ApproveAt.Before(due) {
			due = *p.ApproveAt
		}
		return &due
	case pspapi.StatusPending:
		return p.ResolveAt
	}
	return nil
}

func (p *payment) moved(now time.Time) {
	p.UpdatedAt = now
	p.DueAt = p.nextDue()
}

func (p *payment) fail(now time.Time, reason string) {
	p.Status, p.FailureReason = pspapi.StatusFailed, reason
	p.FailedAt = &now
	p.moved(now)
}

func (s *Server) succeed(p *payment, rc pspapi.RouteConfig, now time.Time) {
	p.Status, p.FailureReason = pspapi.StatusSuccess, ""
	p.CapturedAt = &now
	p.FeeBps = rc.FeeBps // the fee is fixed when the money is captured
	p.BankRef = s.bankRef()
	p.moved(now)
}

// pend records the bank's acknowledgement and the answer it will give at.
func (p *payment) pend(now, at time.Time, status, reason string) {
	p.Status = pspapi.StatusPending
	p.ResolveAt, p.ResolveStatus, p.ResolveReason = &at, status, reason
	p.moved(now)
}

// approve applies the customer's approval: the bank answers now or later.
// The draws are keyed by merchant_ref, so a given Seed decides the same.
func (s *Server) approve(p *payment, rc pspapi.RouteConfig, now time.Time) {
	declined := s.chance(rc.DeclineRate, p.Gateway, p.MerchantRef, "decline")
	late := !declined && s.chance(rc.LateSuccessRate, p.Gateway, p.MerchantRef, "late")
	pending := s.chance(rc.PendingRate, p.Gateway, p.MerchantRef, "pending")
	switch {
	case late:
		p.pend(now, now.Add(ms(rc.LateSuccessMs)), pspapi.StatusSuccess, "")
	case pending && declined:
		p.pend(now, now.Add(ms(rc.PendingResolveMs)), pspapi.StatusFailed, pspapi.ReasonDeclined)
	case pending:
		p.pend(now, now.Add(ms(rc.PendingResolveMs)), pspapi.StatusSuccess, "")
	case declined:
		p.fail(now, pspapi.ReasonDeclined)
	default:
		s.succeed(p, rc, now)
	}
}

// advance makes whatever move is due for p at now; false if none is.
func (s *Server) advance(p *payment, rc pspapi.RouteConfig, now time.Time) bool {
	switch p.Status {
	case pspapi.StatusCreated:
		if p.ApproveAt != nil && !p.ApproveAt.After(now) && p.ApproveAt.Before(p.ExpiresAt) {
			s.payWith(p, "", "")
			s.approve(p, rc, now)
			return true
		}
		if !p.ExpiresAt.After(now) {
			p.fail(now, pspapi.ReasonExpired)
			return true
		}
	case pspapi.StatusPending:
		if p.ResolveAt != nil && !p.ResolveAt.After(now) {
			if p.ResolveStatus == pspapi.StatusSuccess {
				s.succeed(p, rc, now)
			} else {
				p.fail(now, p.ResolveReason)
			}
			return true
		}
	}
	return false
}

// commitMove saves p (which had status from) and enqueues its webhook.
func (s *Server) commitMove(ctx context.Context, tx pgx.Tx, p *payment, from string, rc pspapi.RouteConfig, now time.Time) error {
	if err := s.savePayment(ctx, tx, p, from); err != nil {
		return err
	}
	if err := s.enqueueWebhook(ctx, tx, p, rc, now); err != nil {
		return err
	}
	s.log.DebugContext(ctx, "payment moved", "gateway", p.Gateway, "psp_ref", p.PSPRef, "merchant_ref", p.MerchantRef,
		"from", from, "to", p.Status, "reason", p.FailureReason)
	return nil
}

// advancePayments makes every due move: customers approving, requests
// expiring, pending answers arriving. Routes in outage are frozen.
func (s *Server) advancePayments(ctx context.Context) error {
	now := s.now()
	err := s.transact(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, s.q(`SELECT `+paymentCols+` FROM {s}.payments a
			WHERE due_at <= $1 AND `+outageFilter+` ORDER BY due_at LIMIT 200 FOR UPDATE OF a SKIP LOCKED`), now)
		if err != nil {
			return err
		}
		due, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByName[payment])
		if err != nil || len(due) == 0 {
			return err
		}
		routes, err := s.allRoutes(ctx, tx)
		if err != nil {
			return err
		}
		for _, p := range due {
			from := p.Status
			rc := routes[routeKey(p.Gateway, p.Method)]
			if !s.advance(p, rc, now) {
				// Not due after all (a clock step): look again when it is.
				p.DueAt = p.nextDue()
				if err := s.savePayment(ctx, tx, p, from); err != nil {
					return err
				}
				continue
			}
			if err := s.commitMove(ctx, tx, p, from, rc, now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("advance payments: %w", err)
	}
	return nil
}

// bankRef is a 12-digit bank reference (a UPI UTR, a card RRN).
func (s *Server) bankRef() string {
	s.rngMu.Lock()
	defer s.rngMu.Unlock()
	return fmt.Sprintf("%012d", s.rng.Int64N(1_000_000_000_000))
}
