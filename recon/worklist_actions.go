package recon

// What a clerk does from the exception list beyond one exception's page:
// hand it to its owning team, act on the money now (ask the gateway, or
// refund with a second person), and the same actions on many rows at once.
// Every action is the single one, run row by row, each in its own
// transaction: a refused row changes nothing of its own and blocks no
// other, and the same rules hold whether one row or fifty are selected.

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"tatkal/booking"
	"tatkal/booking/india"
	"tatkal/booking/payment"
)

// HandTo hands an unresolved exception to another team: it is theirs to
// assign, so it is unassigned and open again. A note says why.
func (s *Service) HandTo(ctx context.Context, id uuid.UUID, actor, team, note string) error {
	if err := checkActor(actor); err != nil {
		return err
	}
	if !slices.Contains(Teams(), team) {
		return booking.Errorf(booking.EINVALID, "UNKNOWN_TEAM", "Hand it to one of the teams %v, not %q.", Teams(), team)
	}
	if err := checkNote(note, false); err != nil {
		return err
	}
	return s.change(ctx, id, func(tx pgx.Tx, e Exception) error {
		if e.Owner == team {
			return booking.Errorf(booking.ECONFLICT, "SAME_TEAM", "It is %s's already.", team)
		}
		if _, err := tx.Exec(ctx, `UPDATE reconciliation_exceptions SET owner_team = $2, assignee = '', state = 'OPEN' WHERE id = $1`,
			id, team); err != nil {
			return fmt.Errorf("hand %s to %s: %w", id, team, err)
		}
		msg := "from " + e.Owner + " to " + team
		if note != "" {
			msg += ": " + note
		}
		return event(ctx, tx, id, actor, "HANDED_TO_TEAM", e.State, StateOpen, msg)
	})
}

// CanAskGateway says whether "ask the gateway now" applies to an
// exception: an unresolved one about a payment, on the automatic or the
// inquiry path.
func CanAskGateway(e Exception) bool {
	open := e.State == StateOpen || e.State == StateInvestigating
	return open && e.PaymentID != nil && (e.Path == PathAuto || e.Path == PathInquiry)
}

// AskGatewayNow asks the gateway, now, about the exception's payment and
// applies only the gateway's answer, as the jobs do: on the automatic path
// it is the automatic resolution run at once in actor's name (the same
// limit, the same wait for a second person's acceptance of an uploaded
// file); on the inquiry path it is the status inquiry job's step, the
// answer recorded in the exception's history. It returns what happened.
func (s *Service) AskGatewayNow(ctx context.Context, id uuid.UUID, actor string, pay Payments, bk Bookings) (string, error) {
	if err := checkActor(actor); err != nil {
		return "", err
	}
	if pay == nil {
		return "", booking.Errorf(booking.EUNAVAIL, "NO_GATEWAY", "This process cannot ask the gateway.")
	}
	var said string
	err := s.change(ctx, id, func(tx pgx.Tx, e Exception) error {
		if !CanAskGateway(e) {
			return booking.Errorf(booking.ECONFLICT, "NOTHING_TO_ASK", "Exception %s is on the %s path or names no payment: there is nothing to ask the gateway.", id, e.Path)
		}
		if e.Path == PathAuto {
			if e.NeedsApproval && e.ApprovedBy == "" {
				return booking.Errorf(booking.EFORBIDDEN, "NEEDS_APPROVAL", "It moves %s, above the limit for one person: a second person approves it first.",
					india.Rupees(e.StakePaise))
			}
			if file, err := unacceptedFile(ctx, tx, e); err != nil {
				return err
			} else if file != 0 {
				return booking.Errorf(booking.ECONFLICT, "FILE_NOT_ACCEPTED", "File #%d behind it was uploaded by a person: a second person accepts it first.", file)
			}
			if err := s.resolveLocked(ctx, tx, e, actor, pay, bk); err != nil {
				return err
			}
			var state, res string
			if err := tx.QueryRow(ctx, `SELECT state, resolution FROM reconciliation_exceptions WHERE id = $1`, id).Scan(&state, &res); err != nil {
				return fmt.Errorf("ask now %s: %w", id, err)
			}
			said = "Ran the automatic resolution: the exception is " + state
			if res != "" {
				said += " (" + res + ")"
			}
			return nil
		}
		a, err := pay.AskGateway(ctx, *e.PaymentID)
		if err != nil {
			return err
		}
		before, err := s.paymentState(ctx, tx, *e.PaymentID)
		if err != nil {
			return err
		}
		if !slices.Contains([]string{payment.Success, payment.Failed, payment.Refunded}, before) {
			// Our record is unresolved: the inquiry job's own step applies
			// the gateway's answer through the live path.
			if _, err := pay.Inquire(ctx, *e.PaymentID); err != nil {
				return err
			}
		}
		after, err := s.paymentState(ctx, s.pool, *e.PaymentID)
		if err != nil {
			return err
		}
		said = "Asked the gateway: " + a.String() + "; our payment is " + after
		if before != after {
			said += " (was " + before + ")"
		}
		return event(ctx, tx, id, actor, "ASKED_GATEWAY", e.State, e.State, said)
	})
	return said, err
}

// refundReasons are the refund reasons (refunds.reason) of a refund made
// from an exception, by kind: only kinds whose customer may be owed money.
var refundReasons = map[string]string{
	PaidNotBooked:   booking.RefundLateSuccessNoSeat,
	StatusMismatch:  booking.RefundLateSuccessNoSeat,
	DuplicateCharge: booking.RefundDuplicateCharge,
	AmountMismatch:  booking.RefundAmountMismatch,
}

// CanRefund says whether "refund now" applies to an exception: an
// unresolved one about a payment, of a kind where a customer may be owed.
func CanRefund(e Exception) bool {
	_, ok := refundReasons[e.Kind]
	return ok && e.PaymentID != nil && (e.State == StateOpen || e.State == StateInvestigating)
}

// RefundProposal is a proposed refund waiting for a second person.
type RefundProposal struct {
	By, Note string
}

// RefundProposalOf is the exception's refund proposal (ok false: none).
func (s *Service) RefundProposalOf(ctx context.Context, id uuid.UUID) (RefundProposal, bool, error) {
	var p RefundProposal
	err := s.pool.QueryRow(ctx, `SELECT proposed_by, note FROM recon_refund_proposals WHERE exception_id = $1`, id).Scan(&p.By, &p.Note)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, false, nil
	}
	if err != nil {
		return p, false, fmt.Errorf("refund proposal of %s: %w", id, err)
	}
	return p, true, nil
}

// ProposeRefund asks to refund the exception's payment now; a second
// person approves (ApproveRefund). Refused where the payment is refunded
// already.
func (s *Service) ProposeRefund(ctx context.Context, id uuid.UUID, actor, note string) error {
	if err := checkActor(actor); err != nil {
		return err
	}
	if err := checkNote(note, true); err != nil {
		return err
	}
	return s.change(ctx, id, func(tx pgx.Tx, e Exception) error {
		if !CanRefund(e) {
			return booking.Errorf(booking.ECONFLICT, "NOT_REFUNDABLE", "A %s exception is not refunded from here.", e.Kind)
		}
		if err := noRefundYet(ctx, tx, e); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `INSERT INTO recon_refund_proposals (exception_id, proposed_by, note) VALUES ($1, $2, $3)
			ON CONFLICT (exception_id) DO NOTHING`, id, actor, note)
		if err != nil {
			return fmt.Errorf("propose refund %s: %w", id, err)
		}
		if tag.RowsAffected() == 0 {
			return booking.Errorf(booking.ECONFLICT, "ALREADY_PROPOSED", "A refund is proposed already.")
		}
		return event(ctx, tx, id, actor, "REFUND_PROPOSED", e.State, e.State, note)
	})
}

func noRefundYet(ctx context.Context, tx pgx.Tx, e Exception) error {
	var refund string
	err := tx.QueryRow(ctx, `SELECT id::text FROM refunds WHERE payment_id = $1 AND state <> 'FAILED' LIMIT 1`, *e.PaymentID).Scan(&refund)
	switch {
	case err == nil:
		return booking.Errorf(booking.ECONFLICT, "ALREADY_REFUNDED", "Payment %s has refund %s already: resolve it as REFUNDED.", e.PaymentID, refund)
	case !errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("refunds of %s: %w", e.PaymentID, err)
	}
	return nil
}

// WithdrawRefund takes a refund proposal back: its proposer withdraws it
// or a second person refuses it.
func (s *Service) WithdrawRefund(ctx context.Context, id uuid.UUID, actor, note string) error {
	if err := checkActor(actor); err != nil {
		return err
	}
	return s.change(ctx, id, func(tx pgx.Tx, e Exception) error {
		tag, err := tx.Exec(ctx, `DELETE FROM recon_refund_proposals WHERE exception_id = $1`, id)
		if err != nil {
			return fmt.Errorf("withdraw refund %s: %w", id, err)
		}
		if tag.RowsAffected() == 0 {
			return booking.Errorf(booking.ECONFLICT, "NOT_PROPOSED", "Nobody proposed a refund.")
		}
		return event(ctx, tx, id, actor, "REFUND_WITHDRAWN", e.State, e.State, note)
	})
}

// ApproveRefund refunds the exception's payment through the payment's own
// refund path, once a second person approves what another proposed, and
// only while the gateway, asked now, holds the money: the refund is
// recorded and its job enqueued in the same transaction that resolves the
// exception as REFUNDED.
func (s *Service) ApproveRefund(ctx context.Context, id uuid.UUID, approver, note string, pay Payments) error {
	if err := checkActor(approver); err != nil {
		return err
	}
	if pay == nil {
		return booking.Errorf(booking.EUNAVAIL, "NO_GATEWAY", "This process cannot ask the gateway.")
	}
	return s.change(ctx, id, func(tx pgx.Tx, e Exception) error {
		var by string
		err := tx.QueryRow(ctx, `SELECT proposed_by FROM recon_refund_proposals WHERE exception_id = $1 FOR UPDATE`, id).Scan(&by)
		if errors.Is(err, pgx.ErrNoRows) {
			return booking.Errorf(booking.ECONFLICT, "NOT_PROPOSED", "Nobody proposed a refund.")
		}
		if err != nil {
			return fmt.Errorf("approve refund %s: %w", id, err)
		}
		if by == approver {
			return booking.Errorf(booking.EFORBIDDEN, "SAME_PERSON", "A refund needs a second person; %s proposed it.", approver)
		}
		behind, err := peopleBehind(ctx, tx, e)
		if err != nil {
			return err
		}
		if slices.Contains(behind, approver) {
			return booking.Errorf(booking.EFORBIDDEN, "SAME_PERSON", "%s uploaded a file behind it or ran the reconciliation that found it: a second person approves.", approver)
		}
		if !CanRefund(e) {
			return booking.Errorf(booking.ECONFLICT, "NOT_REFUNDABLE", "A %s exception is not refunded from here.", e.Kind)
		}
		if err := noRefundYet(ctx, tx, e); err != nil {
			return err
		}
		ours, err := s.paymentState(ctx, tx, *e.PaymentID)
		if err != nil {
			return err
		}
		a, err := pay.AskGateway(ctx, *e.PaymentID)
		if err != nil {
			return err
		}
		if !a.Captured() || a.RefundedPaise >= a.AmountPaise || ours != payment.Success {
			return booking.Errorf(booking.ECONFLICT, "GATEWAY_DISAGREES", "Asked the gateway: %s; our payment is %s. There is no captured money to refund: ask the gateway now instead.", a, ours)
		}
		if e.Kind == PaidNotBooked || e.Kind == StatusMismatch {
			// All of a payment back while its hold's booking stands (a late
			// success confirmed it since the day was run) would be a ticket
			// for nothing; another payment of the hold paid for it, this one
			// is a duplicate and may go back.
			var ticketed bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM payments p
				JOIN bookings b ON b.hold_id = p.hold_id AND b.status IN ('CONFIRMED', 'WAITLISTED')
				WHERE p.id = $1 AND NOT EXISTS (SELECT 1 FROM payments q WHERE q.hold_id = p.hold_id AND q.id <> p.id AND q.state = 'SUCCESS'))`,
				*e.PaymentID).Scan(&ticketed); err != nil {
				return fmt.Errorf("approve refund %s: booking: %w", id, err)
			}
			if ticketed {
				return booking.Errorf(booking.ECONFLICT, "TICKET_STANDS", "This payment paid for a booking that stands: cancel the booking (its refund follows) instead of refunding the payment.")
			}
		}
		var amount int64 // all of it
		if e.Kind == AmountMismatch {
			amount = e.StakePaise // what was taken beyond ours
		}
		refundID, _, err := pay.RequestRefundTx(ctx, tx, *e.PaymentID, refundReasons[e.Kind], amount)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM recon_refund_proposals WHERE exception_id = $1`, id); err != nil {
			return fmt.Errorf("approve refund %s: %w", id, err)
		}
		msg := fmt.Sprintf("refund %s proposed by %s, approved by %s; %s", refundID, by, approver, a)
		if note != "" {
			msg = note + " (" + msg + ")"
		}
		return s.closeTx(ctx, tx, id, approver, StateResolved, "REFUNDED", msg)
	})
}

// BulkLimit is the most rows one bulk action takes.
const BulkLimit = 200

// Outcome is what a bulk action did to one row: Err nil, done; else refused and unchanged.
type Outcome struct {
	ID  uuid.UUID
	Err error
}

// Bulk runs one action on each exception, in order, each on its own: a
// refusal is that row's outcome and the rest go on. Duplicates run once.
func Bulk(ctx context.Context, ids []uuid.UUID, action func(ctx context.Context, id uuid.UUID) error) ([]Outcome, error) {
	if len(ids) == 0 {
		return nil, booking.Errorf(booking.EINVALID, "NONE_SELECTED", "Select the exceptions to act on.")
	}
	if len(ids) > BulkLimit {
		return nil, booking.Errorf(booking.EINVALID, "TOO_MANY", "Act on at most %d exceptions at once.", BulkLimit)
	}
	var out []Outcome
	seen := map[uuid.UUID]bool{}
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		if err := ctx.Err(); err != nil {
			return out, err
		}
		out = append(out, Outcome{ID: id, Err: action(ctx, id)})
	}
	return out, nil
}
