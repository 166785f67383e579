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
// webhook or an inquiry), idempotently, and does what follows from it
// (decide says what): a success settles the hold (booking.SettlePaymentTx:
// a ticket, or the money owed back, or a late-success retake) or credits a
// top-up; a definitive failure releases the seats; the bank's
// acknowledgement extends the hold once.
func (s *Service) apply(ctx context.Context, id uuid.UUID, p pspapi.Payment, cause string, pulled bool) error {
	return s.applyAnd(ctx, id, p, cause, pulled, nil)
}

// applyAnd is apply with a callback's event, if not nil, recorded with the
// answer applied, or not at all.
func (s *Service) applyAnd(ctx context.Context, id uuid.UUID, p pspapi.Payment, cause string, pulled bool, hook *webhookEvent) error {
	var owed booking.Owed
	var counted instrument.Use
	var shardID int64
	var stage string // the funnel's: a hold's payment failed or succeeded
	// ctx is the caller's without its cancellation when the body runs in a
	// confirmation group (group.go).
	body := func(ctx context.Context, tx pgx.Tx, c *confirmations) error {
		owed, counted, stage = booking.Owed{}, instrument.Use{}, ""
		a, err := lockAnswered(ctx, tx, id, hook, p)
		if err != nil {
			return err
		}
		shardID = a.shardID
		d := decide(a.facts(pulled), p)
		if d.err != nil {
			return d.err
		}
		if d.counts {
			counted = upiUse(a.method, a.vpa, a.userID)
		}
		x := answerTx{s: s, tx: tx, c: c, id: id, a: a, p: p, cause: cause, pulled: pulled}
		owed, stage, err = x.carry(ctx, d)
		return err
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
		shardID, counted, stage = common.shardID, common.paidBy, funnel.PaySucceeded
		owed = booking.Owed{Confirmed: common.res}
	}
	// Once committed: the seats in Redis, then the counters.
	s.booking.AfterSettle(ctx, owed)
	if stage != "" {
		s.funnel.Add(shardID, stage, 1)
	}
	s.countCapture(ctx, counted)
	return nil
}

// answered is a payment as an answer finds it, under its lock.
type answered struct {
	state, purpose, gateway, pspRef, method, vpa string
	amount, userID, shardID                      int64
	holdID                                       uuid.UUID
	confirmed                                    bool
}

func (a answered) facts(pulled bool) answerFacts {
	return answerFacts{state: a.state, purpose: a.purpose, amount: a.amount, confirmed: a.confirmed, pulled: pulled}
}

// lockAnswered locks a payment and records, in the same round trip, what
// the answer records before anything follows from it (a callback's event,
// the instrument that paid); a callback is checked against the payment
// (its gateway, its reference, its event not seen before). An error later
// rolls the records back with the rest.
func lockAnswered(ctx context.Context, tx pgx.Tx, id uuid.UUID, hook *webhookEvent, p pspapi.Payment) (answered, error) {
	var a answered
	var hold uuid.NullUUID
	var confirmedAt *time.Time
	var seen bool
	b := &pgx.Batch{}
	b.Queue(`SELECT p.state, p.purpose, p.amount_paise, p.user_id, p.hold_id, coalesce(h.shard_id, 0), p.gateway_confirmed_at,
			p.psp, coalesce(p.psp_ref, ''), EXISTS (SELECT 1 FROM webhook_events e WHERE e.gateway = $2 AND e.event_id = $3),
			p.method, p.vpa
		FROM payments p LEFT JOIN holds h ON h.id = p.hold_id WHERE p.id = $1 FOR UPDATE OF p`, id, hook.gatewayID(), hook.id()).
		QueryRow(func(row pgx.Row) error {
			err := row.Scan(&a.state, &a.purpose, &a.amount, &a.userID, &hold, &a.shardID, &confirmedAt, &a.gateway, &a.pspRef, &seen,
				&a.method, &a.vpa)
			if errors.Is(err, pgx.ErrNoRows) {
				return errNoSuchPayment(hook)
			}
			if err != nil {
				return fmt.Errorf("lock payment: %w", err)
			}
			return nil
		})
	var rec answers
	rec.recorded(id, hook, p)
	rec.queue(b)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return a, err
	}
	a.holdID, a.confirmed = hold.UUID, confirmedAt != nil
	return a, hook.check(a.gateway, a.pspRef, seen, p)
}

// answerTx carries a decision out in one payment's transaction.
type answerTx struct {
	s      *Service
	tx     pgx.Tx
	c      *confirmations
	id     uuid.UUID
	a      answered
	p      pspapi.Payment
	cause  string
	pulled bool
}

// carry does what d decides: the payment's change and event, the hold's
// settlement (booking.SettlePaymentTx, once), and what that leaves owed.
// stage is the funnel's stage a hold's payment reached now, if any.
func (x answerTx) carry(ctx context.Context, d decision) (owed booking.Owed, stage string, err error) {
	tx, id, a, p := x.tx, x.id, x.a, x.p
	topUp := a.purpose == PurposeTopUp
	b := &pgx.Batch{}
	switch d.move {
	case moveNone:
		return owed, "", nil
	case moveAwaitUser:
		next, _ := json.Marshal(p.NextAction)
		return owed, "", x.set(ctx, b, AwaitingUser, ", next_action = $5", next)
	case moveAtBank:
		if topUp {
			return owed, "", x.set(ctx, b, PendingAtBank, "")
		}
		x.queueSet(b, PendingAtBank, "")
		owed, err = x.settleHold(ctx, b, booking.PaidAtBank)
		return owed, "", err
	case moveReviewFailed:
		detail := answerDetail(p)
		detail["reason"], detail["cause"], detail["our_state"] = p.FailureReason, x.cause, a.state
		return owed, "", x.review(ctx, ReviewFailedAfterSuccess, "review: gateway says FAILED after "+a.state, detail)
	case moveReviewAmount:
		return owed, "", x.review(ctx, ReviewAmountMismatch, "review: gateway reports another amount", x.mismatchDetail())
	case moveConfirmCapture:
		_, err := tx.Exec(ctx, `UPDATE payments SET gateway_confirmed_at = now() WHERE id = $1`, id)
		return owed, "", err
	case moveInquire:
		_, err := x.s.jobs.InsertTx(ctx, tx, InquiryArgs{PaymentID: id}, nil)
		return owed, "", err
	case moveFail:
		x.queueSet(b, Failed, ", failure_reason = $5, resolved_at = now()", p.FailureReason)
		if topUp {
			if err := x.send(ctx, b, Failed); err != nil {
				return owed, "", err
			}
			return owed, "", x.notify(ctx, "TOPUP_FAILED", "msg.topupfailed", india.Decimal(a.amount))
		}
		owed, err = x.settleHold(ctx, b, booking.PaymentFailed)
		return owed, funnel.PayFailed, err
	case moveCaptureOther:
		x.queueSet(b, Success, ", resolved_at = now(), captured_paise = $5, gateway_confirmed_at = now(), failure_reason = 'AMOUNT_MISMATCH'",
			p.AmountPaise)
		if a.holdID != uuid.Nil {
			owed, err = x.settleHold(ctx, b, booking.PaidOtherAmount)
		} else {
			err = x.send(ctx, b, Success)
		}
		if err != nil {
			return owed, "", err
		}
		detail := x.mismatchDetail()
		detail["refunded"] = d.refund
		if _, err := x.s.raiseReview(ctx, tx, id, nil, ReviewAmountMismatch, detail); err != nil {
			return owed, "", err
		}
		if !d.refund {
			return owed, "", x.notify(ctx, "PAYMENT_REVIEW", "msg.payreview")
		}
		if _, _, err := x.s.RequestRefundTx(ctx, tx, id, booking.RefundAmountMismatch, 0); err != nil {
			return owed, "", err
		}
		return owed, "", x.notify(ctx, "REFUND_STARTED", "msg.refundmismatch", india.Decimal(p.AmountPaise), india.Decimal(a.amount))
	case moveCapture:
		if d.inquireLater {
			// The inquiry job has finished, so one more confirms it.
			if _, err := x.s.jobs.InsertTx(ctx, tx, InquiryArgs{PaymentID: id}, &river.InsertOpts{ScheduledAt: time.Now().Add(5 * time.Second)}); err != nil {
				return owed, "", err
			}
		}
		// The change and its event: a group's common successes are
		// written by the same statements (answers).
		var success answers
		success.succeeded(id, a.state, p, x.pulled, x.cause)
		success.queue(b)
		if topUp {
			if err := x.send(ctx, b, Success); err != nil {
				return owed, "", err
			}
			if _, err := walletPost(ctx, tx, a.userID, "TOPUP", id.String(), a.amount); err != nil {
				return owed, "", err
			}
			return owed, "", x.notify(ctx, "TOPUP_DONE", "msg.topupdone", india.Decimal(a.amount))
		}
		// The change goes in the round trip that locks the hold.
		if owed, err = x.settleHold(ctx, b, booking.Paid); err != nil {
			return owed, "", err
		}
		return owed, funnel.PaySucceeded, x.owe(ctx, owed)
	}
	return owed, "", fmt.Errorf("payment %s: no way to carry move %d", id, d.move)
}

// queueSet queues the payment's change to state to, with extra columns
// set from args ($5 on), and its event.
func (x answerTx) queueSet(b *pgx.Batch, to string, extra string, args ...any) {
	q := `UPDATE payments SET state = $2, psp_ref = coalesce(nullif($3, ''), psp_ref), bank_ref = coalesce(nullif($4, ''), bank_ref),
		updated_at = now()` + extra + ` WHERE id = $1`
	b.Queue(q, append([]any{x.id, to, x.p.PSPRef, x.p.BankRef}, args...)...).Exec(func(pgconn.CommandTag) error { return nil })
	detail := answerDetail(x.p)
	if to == Failed {
		detail["reason"] = x.p.FailureReason
	}
	queueEvent(b, x.id, x.a.state, to, x.cause, detail)
}

// set writes the change and its event, in one round trip.
func (x answerTx) set(ctx context.Context, b *pgx.Batch, to string, extra string, args ...any) error {
	x.queueSet(b, to, extra, args...)
	return x.send(ctx, b, to)
}

func (x answerTx) send(ctx context.Context, b *pgx.Batch, to string) error {
	if err := x.tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("payment %s to %s: %w", x.id, to, err)
	}
	return nil
}

// review raises a payment review of kind, and records its event, should
// it be new.
func (x answerTx) review(ctx context.Context, kind, what string, detail map[string]any) error {
	if raised, err := x.s.raiseReview(ctx, x.tx, x.id, nil, kind, detail); err != nil || !raised {
		return err
	}
	return event(ctx, x.tx, x.id, x.a.state, x.a.state, what, detail)
}

func (x answerTx) mismatchDetail() map[string]any {
	return map[string]any{"ours_paise": x.a.amount, "gateway_paise": x.p.AmountPaise, "gateway_currency": x.p.Currency,
		"cause": x.cause, "our_state": x.a.state}
}

func (x answerTx) notify(ctx context.Context, kind, key string, args ...any) error {
	return booking.NotifyT(ctx, x.tx, x.a.userID, kind, x.id.String(), key, args...)
}

// settleHold settles the payment's hold (booking.SettlePaymentTx), b
// going first in the round trip that locks it.
func (x answerTx) settleHold(ctx context.Context, b *pgx.Batch, outcome booking.PaymentOutcome) (booking.Owed, error) {
	return x.s.booking.SettlePaymentTx(ctx, x.tx, b, x.c, booking.PaymentSettlement{PaymentID: x.id, HoldID: x.a.holdID,
		Outcome: outcome, AmountPaise: x.a.amount, Extension: x.s.cfg.Extension})
}

// owe does what settling the hold left to the payment: a refund of all of
// it (the passenger has been told why), or the late-success job, which
// retakes the seats or refunds.
func (x answerTx) owe(ctx context.Context, o booking.Owed) error {
	switch {
	case o.Late:
		_, err := x.s.jobs.InsertTx(ctx, x.tx, LateSuccessArgs{PaymentID: x.id}, &river.InsertOpts{})
		return err
	case o.Refund != "":
		_, _, err := x.s.RequestRefundTx(ctx, x.tx, x.id, o.Refund, 0)
		return err
	}
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
