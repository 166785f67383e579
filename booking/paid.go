package booking

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"tatkal/booking/india"
)

// PaymentOutcome is what a payment came to, as its hold sees it.
type PaymentOutcome string

const (
	// PaidAtBank: the bank has the payment; the hold gets one extension so
	// that a slow bank does not cost the passenger their berth.
	PaidAtBank PaymentOutcome = "AT_BANK"
	// PaymentFailed: no money came; the seats go back.
	PaymentFailed PaymentOutcome = "FAILED"
	// PaidOtherAmount: money was taken at another amount or currency than
	// the fare's; it buys nothing, the seats go back.
	PaidOtherAmount PaymentOutcome = "OTHER_AMOUNT"
	// Paid: the fare was captured; a ticket, or the money owed back.
	Paid PaymentOutcome = "PAID"
)

// Confirmer confirms the holds payments pay for: alone, at once in the
// payment's transaction; in a payment confirmation group, together with the
// group's others before its COMMIT (package payment).
type Confirmer interface {
	// Check is called on a hold just locked: an error sends the payment's
	// work to run alone (a group already confirming the hold).
	Check(holdID uuid.UUID) error
	// Confirm confirms the HELD, locked hold; the result is filled in by
	// the time the transaction commits.
	Confirm(ctx context.Context, tx pgx.Tx, holdID uuid.UUID) (*ConfirmResult, error)
}

// PaymentSettlement is a payment's outcome for its hold.
type PaymentSettlement struct {
	PaymentID, HoldID uuid.UUID
	Outcome           PaymentOutcome
	// AmountPaise is what the passenger paid, as they are told of it.
	AmountPaise int64
	// Extension is PaidAtBank's.
	Extension time.Duration
}

// Owed is what settling a payment's hold leaves to the payment: money to
// give back and why (the passenger has been told), or a late success to
// resolve; and the Redis side of the hold's change once the transaction
// has committed (AfterSettle).
type Owed struct {
	Hold HoldInfo
	// Refund is the reason of a refund of the whole payment ("" none).
	Refund string
	// Late: the seats went back before the money came; a retake decides
	// (payment's late-success job).
	Late bool
	// Confirmed is the hold's ticket, filled in by the time the
	// transaction has committed.
	Confirmed *ConfirmResult
	// released: the hold's seats went back in the transaction.
	released bool
}

// AfterSettle gives Redis a settled hold's change (its seats back, or its
// booking), once the transaction that settled it has committed.
func (s Settlement) AfterSettle(ctx context.Context, o Owed) {
	switch {
	case o.Confirmed != nil:
		s.AfterConfirm(ctx, *o.Confirmed)
	case o.released:
		s.AfterRelease(ctx, o.Hold)
	}
}

// SettlePaymentTx settles, in tx and under the hold's lock, what a
// payment's outcome does to its hold, tells the passenger what came of
// their money, and answers what the payment owes. b holds the payment's own
// statements, sent first in the same round trip. The shard's lock, then the
// hold's, as on every path.
func (s Settlement) SettlePaymentTx(ctx context.Context, tx pgx.Tx, b *pgx.Batch, c Confirmer, p PaymentSettlement) (Owed, error) {
	var o Owed
	var others int
	holdID, paymentID, outcome := p.HoldID, p.PaymentID, p.Outcome
	QueueLockHold(b, holdID, &o.Hold)
	if outcome == Paid {
		// Under the hold's lock: a capture of the same hold committed
		// meanwhile is seen.
		b.Queue(`SELECT count(*) FROM payments WHERE hold_id = $1 AND id <> $2 AND state IN ('SUCCESS', 'REFUNDED')`,
			holdID, paymentID).QueryRow(func(row pgx.Row) error {
			if err := row.Scan(&others); err != nil {
				return fmt.Errorf("other payments of hold %s: %w", holdID, err)
			}
			return nil
		})
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return o, fmt.Errorf("settle payment %s: %w", paymentID, err)
	}
	if err := c.Check(holdID); err != nil {
		return o, err
	}
	h := o.Hold
	d := settleHold(h, outcome, others)
	switch d.act {
	case holdExtend:
		base := h.ExpiresAt
		if now := s.now(); base.Before(now) {
			base = now
		}
		if _, err := ExtendHoldTx(ctx, tx, holdID, base.Add(p.Extension), true); err != nil {
			return o, err
		}
	case holdRelease:
		released, err := s.ReleaseTx(ctx, tx, h, d.state, d.reason)
		if err != nil {
			return o, err
		}
		o.released = released
	case holdConfirm:
		res, err := c.Confirm(ctx, tx, holdID)
		if err != nil {
			return o, err
		}
		o.Confirmed = res
	case holdLate:
		o.Late = true
	}
	o.Refund = d.refund
	if d.notice == "" {
		return o, nil
	}
	return o, NotifyT(ctx, tx, h.UserID, d.kind, paymentID.String(), d.notice, india.Decimal(p.AmountPaise))
}

// What a payment's outcome does to its hold.
type holdAct int

const (
	holdKeep holdAct = iota
	holdExtend
	holdRelease
	holdConfirm
	holdLate
)

type holdSettlement struct {
	act           holdAct
	state, reason string // holdRelease: the hold's end and why
	// refund: the payment is refunded in full ("" not).
	refund string
	// kind and notice: what the passenger is told (notifications.kind, the
	// catalogue's key), if anything.
	kind, notice string
}

// settleHold decides what outcome does to hold h, locked, whose other
// payments captured others times. No I/O: the table of what each hold state
// makes of each outcome.
func settleHold(h HoldInfo, outcome PaymentOutcome, others int) holdSettlement {
	switch outcome {
	case PaidAtBank:
		return holdSettlement{act: holdExtend}
	case PaymentFailed:
		return holdSettlement{act: holdRelease, state: HoldReleased, reason: "payment failed", kind: "PAYMENT_FAILED", notice: "msg.payfailed"}
	case PaidOtherAmount:
		return holdSettlement{act: holdRelease, state: HoldReleased, reason: "payment amount mismatch"}
	}
	refund := func(reason, notice string) holdSettlement {
		return holdSettlement{refund: reason, kind: "REFUND_STARTED", notice: notice}
	}
	switch {
	case others > 0:
		return refund(RefundDuplicateCharge, "msg.refunddup")
	case h.State == HoldHeld && h.Unconfirmable() != "":
		// Charted meanwhile, or the account banned: no ticket can come of
		// it any more. The hold ends and the money goes back, as for a
		// cancelled hold.
		d := holdSettlement{act: holdRelease, state: HoldCancelled, reason: "the payment came when " + h.Unconfirmable(),
			refund: RefundHoldCancelled, kind: "REFUND_STARTED", notice: "msg.refundcharted"}
		if h.Banned && h.Chart == ChartOpen {
			d.notice = "msg.refundbanned"
		}
		return d
	case h.State == HoldHeld:
		return holdSettlement{act: holdConfirm}
	case h.State == HoldConfirmed:
		return refund(RefundDuplicateCharge, "msg.refundpaid")
	case h.State == HoldCancelled && CancelledByReview(h.StateReason):
		// Ended by a fraud review's enforcement while the payment was in
		// flight: the decision stands, the money goes back in full.
		return refund(RefundHoldCancelled, "msg.refundreview")
	case h.State == HoldCancelled:
		return refund(RefundHoldCancelled, "msg.refundcancelled")
	}
	// EXPIRED or RELEASED: the money came after the seats went back.
	return holdSettlement{act: holdLate}
}
