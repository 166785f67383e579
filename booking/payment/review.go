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
	"tatkal/booking/india"
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
	// The proposal waiting for a second person, if any.
	Proposal, ProposedBy, ProposalNote string
}

// OpenReviews lists the open reviews, oldest first, with the booking (PNR)
// each payment bought, if any.
func (s *Service) OpenReviews(ctx context.Context, limit int) ([]Review, error) {
	rows, err := s.pool.Query(ctx, `SELECT r.id, r.payment_id, r.refund_id, r.kind, r.detail::text, r.created_at, u.login,
		p.purpose, p.method, p.psp, p.state, p.amount_paise, coalesce(b.pnr, ''),
		coalesce(r.proposal, ''), coalesce(r.proposed_by, ''), r.proposal_note
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

// Proposals on a review: one person proposes, a second carries it out.
const (
	// ProposeWallet credits a refused refund's amount to the passenger's
	// wallet (REFUND_REFUSED reviews only).
	ProposeWallet = "WALLET"
	// ProposeResolve closes the alarm; the note says what was done about
	// the money.
	ProposeResolve = "RESOLVE"
)

// ProposeReview records one person's proposal on an open review. Nothing
// moves until a second person approves it (ApproveReview). A wallet credit
// is proposed only for a refused refund; every proposal says why.
func (s *Service) ProposeReview(ctx context.Context, id int64, actor, action, note string) error {
	switch {
	case actor == "":
		return booking.Errorf(booking.EINVALID, "NO_ACTOR", "Say who proposes it.")
	case action != ProposeWallet && action != ProposeResolve:
		return booking.Errorf(booking.EINVALID, "BAD_ACTION", "Propose a wallet credit or closing the review.")
	case note == "" || len(note) > 500:
		return booking.Errorf(booking.EINVALID, "BAD_RESOLUTION", "Say in at most 500 characters what was done about this payment and why.")
	}
	return db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		r, err := lockReview(ctx, tx, id)
		if err != nil {
			return err
		}
		switch {
		case r.proposal != "":
			return booking.Errorf(booking.ECONFLICT, "ALREADY_PROPOSED", "%s already proposed %s; approve or reject that first.", r.proposedBy, proposalText(r.proposal))
		case action == ProposeWallet && r.kind != ReviewRefundRefused:
			return booking.Errorf(booking.EINVALID, "NOT_A_REFUSED_REFUND", "Only a refund the gateway refused can be credited to the wallet.")
		}
		_, err = tx.Exec(ctx, `UPDATE payment_reviews SET proposal = $2, proposed_by = $3, proposal_note = $4, proposed_at = now() WHERE id = $1`,
			id, action, actor, note)
		if err != nil {
			return fmt.Errorf("propose on review %d: %w", id, err)
		}
		return nil
	})
}

// RejectReview clears a review's proposal: its proposer withdraws it, or a
// second person refuses it. The review stays open.
func (s *Service) RejectReview(ctx context.Context, id int64, actor string) error {
	return db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		r, err := lockReview(ctx, tx, id)
		if err != nil {
			return err
		}
		if r.proposal == "" {
			return booking.Errorf(booking.ECONFLICT, "NOT_PROPOSED", "Nothing is proposed on review %d.", id)
		}
		_, err = tx.Exec(ctx, `UPDATE payment_reviews SET proposal = NULL, proposed_by = NULL, proposal_note = '', proposed_at = NULL WHERE id = $1`, id)
		if err != nil {
			return fmt.Errorf("reject the proposal on review %d: %w", id, err)
		}
		return nil
	})
}

// Approver is the second person of a review's proposal.
type Approver struct {
	Login string
	Lead  bool // a finance lead: may approve above Config.LeadApprovalPaise
}

// ApproveReview carries out a review's proposal: by a person who did not
// propose it, after a fresh answer from the gateway, and above the lead's
// limit only by a finance lead. A wallet credit goes ahead only when the
// gateway says it holds the money and has not refunded it: a refused
// refund can mean the money is still ours to return (a closed bank
// account), but also that the gateway never captured it (crediting would
// mint money) or already refunded it under another key (crediting would pay
// twice). It returns the gateway's answer, which the review's resolution
// records with both names.
func (s *Service) ApproveReview(ctx context.Context, id int64, by Approver) (GatewayAnswer, error) {
	if by.Login == "" {
		return GatewayAnswer{}, booking.Errorf(booking.EINVALID, "NO_ACTOR", "Say who approves it.")
	}
	r, err := s.review(ctx, id)
	if err != nil {
		return GatewayAnswer{}, err
	}
	if err := r.approvable(by, s.cfg.LeadApprovalPaise); err != nil {
		return GatewayAnswer{}, err
	}
	a, err := s.AskGateway(ctx, r.paymentID)
	noGateway := booking.ErrorReason(err) == "NO_GATEWAY"
	switch {
	case noGateway && r.proposal == ProposeResolve:
		// Nothing to ask (a wallet payment): the two people decide alone.
	case err != nil:
		return a, err
	case r.proposal == ProposeWallet && !a.Captured():
		return a, booking.Errorf(booking.ECONFLICT, "GATEWAY_DISAGREES", "Not credited: %s, so there is no money of the passenger's to return.", a)
	case r.proposal == ProposeWallet && a.AmountPaise-a.RefundedPaise < r.amount:
		return a, booking.Errorf(booking.ECONFLICT, "GATEWAY_DISAGREES", "Not credited: %s; crediting %d paise more would pay the passenger twice.", a, r.amount)
	}
	answer := a.String()
	if noGateway {
		answer = "no gateway to ask"
	}
	resolution := func(tx pgx.Tx) error {
		now, err := lockReview(ctx, tx, id)
		if err != nil {
			return err
		}
		if now.proposal != r.proposal || now.proposedBy != r.proposedBy {
			return booking.Errorf(booking.ECONFLICT, "PROPOSAL_CHANGED", "The proposal on review %d changed meanwhile; look again.", id)
		}
		text := fmt.Sprintf("%s (proposed by %s: %s; approved by %s; %s)", proposalText(r.proposal), r.proposedBy, r.note, by.Login, answer)
		_, err = tx.Exec(ctx, `UPDATE payment_reviews SET resolved_at = now(), resolved_by = $2, approved_by = $2, resolution = $3
			WHERE id = $1`, id, by.Login, text)
		return err
	}
	if r.proposal == ProposeResolve {
		return a, db.Transact(ctx, s.pool, resolution)
	}
	return a, s.finishRefund(ctx, *r.refundID, r.paymentID, r.userID, r.amount, r.captured, "", time.Now(), func(tx pgx.Tx) error {
		var state string
		if err := tx.QueryRow(ctx, `SELECT state FROM refunds WHERE id = $1`, *r.refundID).Scan(&state); err != nil {
			return err
		}
		if state != "FAILED" {
			return booking.Errorf(booking.ECONFLICT, "REFUND_NOT_FAILED", "Refund %s is %s, not FAILED.", *r.refundID, state)
		}
		if _, err := walletPost(ctx, tx, r.userID, "REFUND", r.refundID.String(), r.amount); err != nil {
			return err
		}
		return resolution(tx)
	})
}

// openReview is an open review with its proposal and the money at stake.
type openReview struct {
	kind                 string
	paymentID            uuid.UUID
	refundID             *uuid.UUID
	userID               int64
	amount               int64 // the refund's (a refused refund) or the payment's
	captured             int64
	proposal, proposedBy string
	note                 string
}

// approvable says whether by may carry out the review's proposal.
func (r openReview) approvable(by Approver, leadLimit int64) error {
	switch {
	case r.proposal == "":
		return booking.Errorf(booking.ECONFLICT, "NOT_PROPOSED", "Nobody proposed anything on this review; propose first, then a second person approves.")
	case r.proposedBy == by.Login:
		return booking.Errorf(booking.EFORBIDDEN, "SAME_PERSON", "%s proposed it: a second person approves.", by.Login)
	case r.amount > leadLimit && !by.Lead:
		return booking.Errorf(booking.EFORBIDDEN, "LEAD_REQUIRED", "%s is above ₹%s: a finance lead approves it.", india.Decimal(r.amount), india.Decimal(leadLimit))
	case r.proposal == ProposeWallet && r.refundID == nil:
		return booking.Errorf(booking.ECONFLICT, "NOT_A_REFUSED_REFUND", "This review has no refused refund to credit.")
	}
	return nil
}

const reviewCols = `r.kind, r.payment_id, r.refund_id, p.user_id, coalesce(f.amount_paise, p.amount_paise),
	coalesce(p.captured_paise, p.amount_paise), coalesce(r.proposal, ''), coalesce(r.proposed_by, ''), r.proposal_note
	FROM payment_reviews r JOIN payments p ON p.id = r.payment_id LEFT JOIN refunds f ON f.id = r.refund_id`

func scanReview(row pgx.Row, id int64) (openReview, error) {
	var r openReview
	err := row.Scan(&r.kind, &r.paymentID, &r.refundID, &r.userID, &r.amount, &r.captured, &r.proposal, &r.proposedBy, &r.note)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, booking.Errorf(booking.ENOTFOUND, "NO_OPEN_REVIEW", "Review %d is not open.", id)
	}
	if err != nil {
		return r, fmt.Errorf("review %d: %w", id, err)
	}
	return r, nil
}

// review reads an open review.
func (s *Service) review(ctx context.Context, id int64) (openReview, error) {
	return scanReview(s.pool.QueryRow(ctx, `SELECT `+reviewCols+` WHERE r.id = $1 AND r.resolved_at IS NULL`, id), id)
}

// lockReview locks an open review in tx.
func lockReview(ctx context.Context, tx pgx.Tx, id int64) (openReview, error) {
	return scanReview(tx.QueryRow(ctx, `SELECT `+reviewCols+` WHERE r.id = $1 AND r.resolved_at IS NULL FOR UPDATE OF r`, id), id)
}

func proposalText(p string) string {
	if p == ProposeWallet {
		return "refund credited to the wallet"
	}
	return "review closed"
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
		return booking.NotifyT(ctx, tx, userID, "REFUND_DELAYED", refundID.String(), "msg.refunddelayed", india.Decimal(amount))
	})
}
