package payment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river"

	"tatkal/booking"
	"tatkal/booking/db"
	"tatkal/booking/funnel"
	"tatkal/booking/india"
	"tatkal/booking/instrument"
	"tatkal/booking/payment/pspapi"
)

// errAmountUnknown: an answer we asked for claims success but carries no
// amount or currency to check it by. It proves nothing (0 is "unknown",
// never a match), so the payment stays as it is and inquiry asks again.
var errAmountUnknown = errors.New("the gateway's success answer carries no amount or currency")

// apply moves a payment to what the gateway says (from a create answer, a
// webhook or an inquiry), idempotently, and does what follows from it:
// a success confirms the hold (or refunds a duplicate, or retakes the seats
// of a lapsed hold) or credits a top-up; a definitive failure releases the
// seats; the bank's acknowledgement extends the hold once.
//
// pulled says whether we asked the gateway (create answer, status inquiry)
// or it told us (a signed callback). A pushed success is acted on for
// tickets, to keep them fast, and confirmed by inquiry afterwards; a pushed
// success never credits a wallet by itself. A gateway that contradicts a
// success, or captures another amount, raises a payment review instead of
// being ignored.
func (s *Service) apply(ctx context.Context, id uuid.UUID, p pspapi.Payment, cause string, pulled bool) error {
	return s.applyAnd(ctx, id, p, cause, pulled, nil)
}

// applyAnd is apply with a callback's event, if not nil, recorded with the
// answer applied, or not at all.
func (s *Service) applyAnd(ctx context.Context, id uuid.UUID, p pspapi.Payment, cause string, pulled bool, hook *webhookEvent) error {
	var after []func()
	// paidBy is the UPI address of a capture this answer applies, counted
	// once the capture has committed (countCapture).
	var paidBy instrument.Use
	// ctx is the caller's without its cancellation when the body runs in a
	// confirmation group (group.go).
	body := func(ctx context.Context, tx pgx.Tx, c *confirmations) error {
		after, paidBy = after[:0], instrument.Use{}
		var state, purpose, gateway, pspRef, method, vpa string
		var amount, userID, shardID int64
		var hold uuid.NullUUID
		var confirmedAt *time.Time
		var seen bool
		b := &pgx.Batch{}
		// With the lock, what a callback is checked against: the payment's
		// gateway and reference, and whether its event was recorded.
		b.Queue(`SELECT p.state, p.purpose, p.amount_paise, p.user_id, p.hold_id, coalesce(h.shard_id, 0), p.gateway_confirmed_at,
				p.psp, coalesce(p.psp_ref, ''), EXISTS (SELECT 1 FROM webhook_events e WHERE e.gateway = $2 AND e.event_id = $3),
				p.method, p.vpa
			FROM payments p LEFT JOIN holds h ON h.id = p.hold_id WHERE p.id = $1 FOR UPDATE OF p`, id, hook.gatewayID(), hook.id()).
			QueryRow(func(row pgx.Row) error {
				err := row.Scan(&state, &purpose, &amount, &userID, &hold, &shardID, &confirmedAt, &gateway, &pspRef, &seen, &method, &vpa)
				if errors.Is(err, pgx.ErrNoRows) {
					return errNoSuchPayment(hook)
				}
				if err != nil {
					return fmt.Errorf("lock payment: %w", err)
				}
				return nil
			})
		// The callback's event and the instrument, under the payment's lock
		// in its round trip; an error later rolls them back with the rest,
		// as a refusal below does.
		var rec answers
		rec.recorded(id, hook, p)
		rec.queue(b)
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		if err := hook.check(gateway, pspRef, seen, p); err != nil {
			return err
		}
		holdID := hold.UUID
		topUp := purpose == PurposeTopUp
		detail := answerDetail(p)
		// set writes the change and its event, in one round trip.
		set := func(to string, extra string, args ...any) error {
			b := &pgx.Batch{}
			q := `UPDATE payments SET state = $2, psp_ref = coalesce(nullif($3, ''), psp_ref), bank_ref = coalesce(nullif($4, ''), bank_ref),
				updated_at = now()` + extra + ` WHERE id = $1`
			b.Queue(q, append([]any{id, to, p.PSPRef, p.BankRef}, args...)...).Exec(func(pgconn.CommandTag) error { return nil })
			queueEvent(b, id, state, to, cause, detail)
			if err := tx.SendBatch(ctx, b).Close(); err != nil {
				return fmt.Errorf("payment %s to %s: %w", id, to, err)
			}
			return nil
		}
		captured := state == Success || state == Refunded
		if p.Status == pspapi.StatusSuccess {
			mismatch := p.AmountPaise != amount || (p.Currency != "" && p.Currency != currency)
			switch {
			case !pulled && p.AmountPaise != amount:
				// A callback's word against ours: refuse it; HandleWebhook asks
				// the gateway directly, whose answer decides.
				return booking.Errorf(booking.EINVALID, "AMOUNT_MISMATCH", "The gateway reports ₹%s for a ₹%s payment.", india.Decimal(p.AmountPaise), india.Decimal(amount))
			case !pulled && mismatch:
				return booking.Errorf(booking.EINVALID, "CURRENCY_MISMATCH", "The gateway reports a payment in %q, not %s.", p.Currency, currency)
			case pulled && (p.AmountPaise <= 0 || p.Currency == ""):
				return errAmountUnknown
			case pulled && mismatch:
				if !captured {
					paidBy = upiUse(method, vpa, userID) // captured, at another amount
				}
				return s.amountMismatch(ctx, tx, c, id, state, holdID, userID, amount, p, cause, set, &after)
			}
		}
		switch p.Status {
		case pspapi.StatusCreated:
			if state != Initiated && state != Unknown {
				return nil
			}
			next, _ := json.Marshal(p.NextAction)
			return set(AwaitingUser, ", next_action = $5", next)
		case pspapi.StatusPending:
			if state != Initiated && state != Unknown && state != AwaitingUser {
				return nil
			}
			if err := set(PendingAtBank, ""); err != nil {
				return err
			}
			if topUp {
				return nil
			}
			// The bank has it: give the seats one extension so a slow bank
			// does not cost the passenger their berth.
			h, err := lockHold(ctx, tx, c, holdID)
			if err != nil {
				return err
			}
			base := h.ExpiresAt
			if now := time.Now(); base.Before(now) {
				base = now
			}
			_, err = booking.ExtendHoldTx(ctx, tx, holdID, base.Add(s.cfg.Extension), true)
			return err
		case pspapi.StatusFailed:
			if captured {
				// We took it as paid (a ticket may be issued, a wallet
				// credited) and the gateway now says it failed: a forged or
				// mistaken success, or a gateway error. Never ignored:
				// a person decides, reconciliation reads it.
				detail["reason"] = p.FailureReason
				detail["cause"] = cause
				detail["our_state"] = state
				if raised, err := s.raiseReview(ctx, tx, id, nil, ReviewFailedAfterSuccess, detail); err != nil || !raised {
					return err
				}
				return event(ctx, tx, id, state, state, "review: gateway says FAILED after "+state, detail)
			}
			if state == Failed {
				return nil
			}
			detail["reason"] = p.FailureReason
			if err := set(Failed, ", failure_reason = $5, resolved_at = now()", p.FailureReason); err != nil {
				return err
			}
			if topUp {
				return booking.NotifyT(ctx, tx, userID, "TOPUP_FAILED", id.String(), "msg.topupfailed", india.Decimal(amount))
			}
			after = append(after, func() { s.funnel.Add(shardID, funnel.PayFailed, 1) })
			h, err := lockHold(ctx, tx, c, holdID)
			if err != nil {
				return err
			}
			if released, err := s.booking.ReleaseTx(ctx, tx, h, booking.HoldReleased, "payment failed"); err != nil {
				return err
			} else if released {
				after = append(after, func() { s.booking.AfterRelease(ctx, h) })
			}
			return booking.NotifyT(ctx, tx, userID, "PAYMENT_FAILED", id.String(), "msg.payfailed", india.Decimal(amount))
		case pspapi.StatusSuccess:
			if captured {
				// A duplicate callback or a repeated inquiry; an inquiry's
				// answer confirms a success a callback brought.
				if pulled && confirmedAt == nil {
					_, err := tx.Exec(ctx, `UPDATE payments SET gateway_confirmed_at = now() WHERE id = $1`, id)
					return err
				}
				return nil
			}
			if topUp && !pulled {
				// Money goes into a wallet only on the gateway's own answer to
				// us: ask it now rather than trust the callback.
				_, err := s.jobs.InsertTx(ctx, tx, InquiryArgs{PaymentID: id}, nil)
				return err
			}
			if !pulled && resolved(state) {
				// A success callback after we had given up on the payment: the
				// inquiry job has finished, so one more confirms it.
				if _, err := s.jobs.InsertTx(ctx, tx, InquiryArgs{PaymentID: id}, &river.InsertOpts{ScheduledAt: time.Now().Add(5 * time.Second)}); err != nil {
					return err
				}
			}
			paidBy = upiUse(method, vpa, userID)
			// The change and its event: a group's common successes are
			// written by the same statements (answers).
			var success answers
			success.succeeded(id, state, p, pulled, cause)
			b := &pgx.Batch{}
			success.queue(b)
			if topUp {
				if err := tx.SendBatch(ctx, b).Close(); err != nil {
					return fmt.Errorf("payment %s to %s: %w", id, Success, err)
				}
				if _, err := walletPost(ctx, tx, userID, "TOPUP", id.String(), amount); err != nil {
					return err
				}
				return booking.NotifyT(ctx, tx, userID, "TOPUP_DONE", id.String(), "msg.topupdone", india.Decimal(amount))
			}
			after = append(after, func() { s.funnel.Add(shardID, funnel.PaySucceeded, 1) })
			// The change goes in the round trip that locks the hold.
			return s.settle(ctx, tx, c, b, id, holdID, userID, amount, &after)
		}
		return fmt.Errorf("unknown gateway status %q", p.Status)
	}
	// Grouped with other confirmations by the payment's row, which the body
	// locks first. A success is offered to the group as a common one, which
	// it may take set-based with others instead of running the body.
	var common *commonSuccess
	if p.Status == pspapi.StatusSuccess {
		common = &commonSuccess{id: id, p: p, cause: cause, pulled: pulled, hook: hook}
	}
	if err := s.group.runOrTake(ctx, s.pool, s.booking, id, body, common); err != nil {
		return err
	}
	if common != nil && common.taken {
		res, shardID := common.res, common.shardID
		paidBy = common.paidBy
		after = []func(){func() { s.funnel.Add(shardID, funnel.PaySucceeded, 1) }, func() { s.booking.AfterConfirm(ctx, *res) }}
	}
	for _, f := range after {
		f()
	}
	s.countCapture(ctx, paidBy)
	return nil
}

// upiUse is a captured payment's account and UPI address, if it was paid
// by UPI.
func upiUse(method, vpa string, userID int64) instrument.Use {
	if method != UPI {
		return instrument.Use{}
	}
	return instrument.Use{UserID: userID, Instrument: instrument.UPI(vpa)}
}

// countCapture counts a captured UPI payment's account against its address
// (package instrument), after the capture has committed: a Redis write in
// the transaction would stand though the transaction rolled back. Redis
// failing here fails nothing: the payment stands, the miss is logged, and
// the account is counted at its next capture with the address. One round
// trip, no PostgreSQL: the address came with the payment's lock.
func (s *Service) countCapture(ctx context.Context, u instrument.Use) {
	if u.Instrument == "" || s.cfg.Redis == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	if err := instrument.Record(ctx, s.cfg.Redis, s.cfg.Prefix, u); err != nil {
		s.log.Warn("captured payment's UPI address not counted", "user", u.UserID, "err", err)
	}
}

// answerDetail is what a payment's event keeps of the gateway's answer.
func answerDetail(p pspapi.Payment) map[string]any {
	return map[string]any{"psp_ref": p.PSPRef, "gateway_status": p.Status}
}

// lockHold locks a payment's hold in tx (booking.LockHoldTx), or sends
// the body to run alone should its group be confirming the hold
// (confirmations.check).
func lockHold(ctx context.Context, tx pgx.Tx, c *confirmations, holdID uuid.UUID) (booking.HoldInfo, error) {
	if err := c.check(holdID); err != nil {
		return booking.HoldInfo{}, err
	}
	return booking.LockHoldTx(ctx, tx, holdID)
}

// instrumentRef is the instrument a gateway's answer names, as
// payments.instrument_ref keeps it: a card's fingerprint or a net-banking
// account's reference, with its kind; "" when it names none.
func instrumentRef(p pspapi.Payment) string {
	switch {
	case p.CardFingerprint != "":
		return "card:" + p.CardFingerprint
	case p.AccountRef != "":
		return "nb:" + p.AccountRef
	}
	return ""
}

// amountMismatch handles a capture the gateway confirms for another amount
// or currency than ours: the payment is recorded as captured (the money
// was taken) but buys nothing, the seats go back, the captured amount is
// refunded, and a review is raised. Where a refund cannot be right (another
// currency), only the review is raised, for a person to settle.
func (s *Service) amountMismatch(ctx context.Context, tx pgx.Tx, c *confirmations, id uuid.UUID, state string, holdID uuid.UUID, userID, amount int64,
	p pspapi.Payment, cause string, set func(string, string, ...any) error, after *[]func()) error {
	detail := map[string]any{"ours_paise": amount, "gateway_paise": p.AmountPaise, "gateway_currency": p.Currency, "cause": cause, "our_state": state}
	if state == Success || state == Refunded {
		// Already acted on (a callback carried the right amount): the
		// gateway now says otherwise. A person compares the records.
		if raised, err := s.raiseReview(ctx, tx, id, nil, ReviewAmountMismatch, detail); err != nil || !raised {
			return err
		}
		return event(ctx, tx, id, state, state, "review: gateway reports another amount", detail)
	}
	if err := set(Success, ", resolved_at = now(), captured_paise = $5, gateway_confirmed_at = now(), failure_reason = 'AMOUNT_MISMATCH'",
		p.AmountPaise); err != nil {
		return err
	}
	if holdID != uuid.Nil {
		h, err := lockHold(ctx, tx, c, holdID)
		if err != nil {
			return err
		}
		if released, err := s.booking.ReleaseTx(ctx, tx, h, booking.HoldReleased, "payment amount mismatch"); err != nil {
			return err
		} else if released {
			*after = append(*after, func() { s.booking.AfterRelease(ctx, h) })
		}
	}
	refundable := p.Currency == currency
	detail["refunded"] = refundable
	if _, err := s.raiseReview(ctx, tx, id, nil, ReviewAmountMismatch, detail); err != nil {
		return err
	}
	if !refundable {
		return booking.NotifyT(ctx, tx, userID, "PAYMENT_REVIEW", id.String(), "msg.payreview")
	}
	if _, _, err := s.RequestRefundTx(ctx, tx, id, booking.RefundAmountMismatch, 0); err != nil {
		return err
	}
	return booking.NotifyT(ctx, tx, userID, "REFUND_STARTED", id.String(), "msg.refundmismatch", india.Decimal(p.AmountPaise), india.Decimal(amount))
}

// settle decides, in tx, what a captured payment becomes: the hold's
// ticket, a refund of a second charge, or (the hold having lapsed) a retake
// of its seats or a refund. b is what the caller has queued to go first,
// in the same round trip.
func (s *Service) settle(ctx context.Context, tx pgx.Tx, c *confirmations, b *pgx.Batch, id, holdID uuid.UUID, userID, amount int64, after *[]func()) error {
	// The hold's lock and the hold's other captures, in one round trip.
	var h booking.HoldInfo
	var others int
	booking.QueueLockHold(b, holdID, &h)
	b.Queue(`SELECT count(*) FROM payments WHERE hold_id = $1 AND id <> $2 AND state IN ('SUCCESS', 'REFUNDED')`,
		holdID, id).QueryRow(func(row pgx.Row) error {
		if err := row.Scan(&others); err != nil {
			return fmt.Errorf("other payments of hold %s: %w", holdID, err)
		}
		return nil
	})
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("settle payment %s: %w", id, err)
	}
	if err := c.check(holdID); err != nil {
		return err
	}
	refund := func(reason, msgKey string) error {
		if _, _, err := s.RequestRefundTx(ctx, tx, id, reason, 0); err != nil {
			return err
		}
		return booking.NotifyT(ctx, tx, userID, "REFUND_STARTED", id.String(), msgKey, india.Decimal(amount))
	}
	switch {
	case others > 0:
		return refund(booking.RefundDuplicateCharge, "msg.refunddup")
	case h.State == booking.HoldHeld && h.Unconfirmable() != "":
		// Charted meanwhile, or the account banned: no ticket can come of
		// it any more. The hold ends and the money goes back, as for a
		// cancelled hold.
		if _, err := s.booking.ReleaseTx(ctx, tx, h, booking.HoldCancelled, "the payment came when "+h.Unconfirmable()); err != nil {
			return err
		}
		*after = append(*after, func() { s.booking.AfterRelease(ctx, h) })
		if h.Banned && h.Chart == booking.ChartOpen {
			return refund(booking.RefundHoldCancelled, "msg.refundbanned")
		}
		return refund(booking.RefundHoldCancelled, "msg.refundcharted")
	case h.State == booking.HoldHeld:
		res, err := c.confirm(ctx, tx, holdID)
		if err != nil {
			return err
		}
		*after = append(*after, func() { s.booking.AfterConfirm(ctx, *res) })
		return nil
	case h.State == booking.HoldConfirmed:
		return refund(booking.RefundDuplicateCharge, "msg.refundpaid")
	case h.State == booking.HoldCancelled && booking.CancelledByReview(h.StateReason):
		// Ended by a fraud review's enforcement while this payment was in
		// flight: the decision stands, the money goes back in full.
		return refund(booking.RefundHoldCancelled, "msg.refundreview")
	case h.State == booking.HoldCancelled:
		return refund(booking.RefundHoldCancelled, "msg.refundcancelled")
	default: // EXPIRED or RELEASED: the money came after the seats went back
		_, err := s.jobs.InsertTx(ctx, tx, LateSuccessArgs{PaymentID: id}, &river.InsertOpts{})
		return err
	}
}

// ResolveLateSuccess handles a payment that succeeded after its hold had
// lapsed: the same journey is held again and confirmed at the original fare
// if seats are free within the grace period and the passenger has not held
// or booked the train again since; otherwise the money goes back in full
// (LATE_SUCCESS_NO_SEAT).
func (s *Service) ResolveLateSuccess(ctx context.Context, id uuid.UUID) error {
	// One at a time per payment: the late-success job and reconciliation's
	// resolution may both arrive, and the second must see what the first did.
	select {
	case s.lateSlots <- struct{}{}:
		defer func() { <-s.lateSlots }()
	case <-ctx.Done():
		return fmt.Errorf("late success %s: %w", id, ctx.Err())
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("late success %s: %w", id, err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(hashtextextended('payment.late|' || $1::text, 0))`, id); err != nil {
		return fmt.Errorf("late success %s: lock: %w", id, err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(hashtextextended('payment.late|' || $1::text, 0))`, id) //nolint:errcheck
	return s.resolveLateSuccess(ctx, id)
}

func (s *Service) resolveLateSuccess(ctx context.Context, id uuid.UUID) error {
	var holdID uuid.UUID
	var userID, amount int64
	var state string
	var released time.Time
	err := s.pool.QueryRow(ctx, `SELECT p.hold_id, p.user_id, p.amount_paise, p.state, h.updated_at
		FROM payments p JOIN holds h ON h.id = p.hold_id WHERE p.id = $1`, id).Scan(&holdID, &userID, &amount, &state, &released)
	if err != nil {
		return fmt.Errorf("late success %s: %w", id, err)
	}
	if state != Success {
		return nil
	}
	var handled bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM refunds WHERE payment_id = $1)
		OR EXISTS (SELECT 1 FROM bookings WHERE hold_id = $2)`, id, holdID).Scan(&handled); err != nil {
		return fmt.Errorf("late success %s: %w", id, err)
	}
	if handled {
		return nil
	}
	// A passenger who has since held or booked this train again gets the
	// money back rather than a second ticket they did not ask for: the
	// retake decides that under their account's lock (RetakeAndConfirm),
	// since a read here would be stale by the retake's commit.
	outcome := booking.RetakeNoSeat
	s.cfg.Pause.At(ctx, "late.before-retake")
	if time.Since(released) < s.cfg.LateGrace {
		var res booking.ConfirmResult
		var err error
		res, outcome, err = s.booking.RetakeAndConfirm(ctx, holdID, func(tx pgx.Tx, res booking.ConfirmResult) error {
			if err := event(ctx, tx, id, Success, Success, "late success: seats retaken", map[string]any{"pnr": res.PNR}); err != nil {
				return err
			}
			return booking.NotifyT(ctx, tx, userID, "LATE_SUCCESS", id.String(), "msg.latesuccess", res.PNR)
		})
		if err != nil {
			return fmt.Errorf("late success %s: %w", id, err)
		}
		if outcome == booking.RetakeConfirmed {
			s.log.Info("late success confirmed", "payment", id, "pnr", res.PNR)
			return nil
		}
	}
	return db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		// The payment's lock, and what the passenger is told why by.
		var hstate, reason string
		var banned bool
		if err := tx.QueryRow(ctx, `SELECT p.state, h.state, h.state_reason, u.banned_at IS NOT NULL
			FROM payments p JOIN holds h ON h.id = p.hold_id JOIN users u ON u.id = h.user_id
			WHERE p.id = $1 FOR UPDATE OF p`, id).Scan(&state, &hstate, &reason, &banned); err != nil {
			return err
		}
		if _, created, err := s.RequestRefundTx(ctx, tx, id, booking.RefundLateSuccessNoSeat, 0); err != nil || !created {
			return err
		}
		if err := event(ctx, tx, id, Success, Success, "late success: no seat, refunding", map[string]any{"retake": outcome}); err != nil {
			return err
		}
		return booking.NotifyT(ctx, tx, userID, "REFUND_STARTED", id.String(), lateRefundMessage(outcome, hstate, reason, banned), india.Decimal(amount))
	})
}

// lateRefundMessage is the catalogue key of the notice of a late success's
// refund: why no ticket came of it.
func lateRefundMessage(outcome, holdState, reason string, banned bool) string {
	switch {
	case holdState == booking.HoldCancelled && booking.CancelledByReview(reason):
		return "msg.refundreview"
	case banned:
		return "msg.refundbanned"
	case outcome == booking.RetakeRebooked:
		return "msg.refundrebooked"
	}
	return "msg.refundlate"
}
