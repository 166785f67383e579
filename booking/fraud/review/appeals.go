package review

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"tatkal/booking"
	"tatkal/booking/audit"
	"tatkal/booking/db"
	"tatkal/booking/india"
)

const maxStatement = 2000

// Appeal is a member's appeal against an enforced decision.
type Appeal struct {
	ID         int64     `json:"id"`
	UserID     int64     `json:"-"`
	Login      string    `json:"-"`
	DecisionID int64     `json:"decision_id"`
	Outcome    string    `json:"outcome"` // what the decision did: CANCEL_BOOKINGS, BAN, EXTRA_CHALLENGE
	Statement  string    `json:"statement"`
	Status     string    `json:"status"`
	CreatedAt  time.Time `json:"created_at"`
	Note       string    `json:"answer,omitempty"`
	// The analysts' side, never the member's: who decided the decision
	// (and approved it, if it took two), and who proposed upholding the
	// appeal (0: nobody yet).
	DecidedBy  int64      `json:"-"`
	ApprovedBy int64      `json:"-"`
	TwoPerson  bool       `json:"-"`
	ProposedBy int64      `json:"-"`
	ProposedAt *time.Time `json:"-"`
	// The case the decision was made in, and who works the appeal (0:
	// nobody, or the claim lapsed).
	ClusterID    int64     `json:"-"`
	ClaimedBy    int64     `json:"-"`
	ClaimedUntil time.Time `json:"-"`
}

// TookPart reports whether analystID decided or approved the decision
// appealed against: they answer no appeal against it.
func (a Appeal) TookPart(analystID int64) bool {
	return analystID == a.DecidedBy || analystID == a.ApprovedBy
}

// FileAppeal records a member's appeal against the latest enforced
// decision that acted on their account (a cancellation, a ban, a harder
// challenge) and that an upheld appeal has not lifted; one open appeal per
// decision. Nothing enforced, nothing to appeal: the member learns of a
// decision only once it acts on them.
func (s *Service) FileAppeal(ctx context.Context, userID int64, statement string) (Appeal, error) {
	statement = strings.TrimSpace(audit.CleanText(statement, maxStatement+1))
	switch {
	case statement == "":
		return Appeal{}, booking.Errorf(booking.EINVALID, "STATEMENT_REQUIRED", "Say in a few words why the decision is wrong.")
	case len(statement) > maxStatement:
		return Appeal{}, booking.Errorf(booking.EINVALID, "STATEMENT_TOO_LONG", "An appeal is at most %d bytes.", maxStatement)
	}
	a := Appeal{UserID: userID, Statement: statement, Status: "OPEN"}
	err := db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `SELECT d.id, d.outcome FROM fraud_enforcements f JOIN fraud_decisions d ON d.id = f.decision_id
			WHERE f.user_id = $1 AND f.action NOT IN ('RESTORE', 'WATCH') AND d.enforced_at IS NOT NULL
			  AND NOT EXISTS (SELECT 1 FROM fraud_enforcements r WHERE r.decision_id = f.decision_id AND r.user_id = f.user_id
			                  AND r.action = 'RESTORE')
			ORDER BY d.enforced_at DESC, d.id DESC LIMIT 1`, userID).Scan(&a.DecisionID, &a.Outcome)
		if errors.Is(err, pgx.ErrNoRows) {
			return booking.Errorf(booking.ENOTFOUND, "NOTHING_TO_APPEAL", "No review decision has acted on this account.")
		}
		if err != nil {
			return fmt.Errorf("decision to appeal: %w", err)
		}
		err = tx.QueryRow(ctx, `INSERT INTO fraud_appeals (user_id, decision_id, statement) VALUES ($1, $2, $3)
			ON CONFLICT (user_id, decision_id) WHERE status = 'OPEN' DO NOTHING RETURNING id, created_at`,
			userID, a.DecisionID, statement).Scan(&a.ID, &a.CreatedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return booking.Errorf(booking.ECONFLICT, "APPEAL_OPEN", "Your appeal is already with the reviewers.")
		}
		if err != nil {
			return fmt.Errorf("insert appeal: %w", err)
		}
		return audit.Write(ctx, tx, fmt.Sprintf("user:%d", userID), "fraud.appeal", fmt.Sprintf("decision:%d", a.DecisionID),
			map[string]any{"appeal": a.ID})
	})
	if err != nil {
		return Appeal{}, fmt.Errorf("appeal of user %d: %w", userID, err)
	}
	return a, nil
}

// MyAppeals lists a member's appeals, newest first.
func (s *Service) MyAppeals(ctx context.Context, userID int64) ([]Appeal, error) {
	return s.appeals(ctx, `WHERE a.user_id = $1 ORDER BY a.id DESC LIMIT 50`, userID)
}

// Appeals lists the open appeals, oldest first: the analysts' queue.
func (s *Service) Appeals(ctx context.Context) ([]Appeal, error) {
	return s.appeals(ctx, `WHERE a.status = 'OPEN' ORDER BY a.created_at, a.id LIMIT 500`)
}

func (s *Service) appeals(ctx context.Context, where string, args ...any) ([]Appeal, error) {
	rows, err := s.pool.Query(ctx, `SELECT a.id, a.user_id, u.login, a.decision_id, d.outcome, a.statement, a.status, a.created_at, a.note,
			d.analyst_id, coalesce(d.approved_by, 0), d.needs_approval, coalesce(a.proposed_by, 0), a.proposed_at, d.cluster_id,
			CASE WHEN a.claimed_until > now() THEN a.claimed_by ELSE 0 END, coalesce(a.claimed_until, 'epoch')
		FROM fraud_appeals a JOIN fraud_decisions d ON d.id = a.decision_id JOIN users u ON u.id = a.user_id `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("appeals: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Appeal, error) {
		var a Appeal
		err := r.Scan(&a.ID, &a.UserID, &a.Login, &a.DecisionID, &a.Outcome, &a.Statement, &a.Status, &a.CreatedAt, &a.Note,
			&a.DecidedBy, &a.ApprovedBy, &a.TwoPerson, &a.ProposedBy, &a.ProposedAt, &a.ClusterID, &a.ClaimedBy, &a.ClaimedUntil)
		if a.ClaimedBy == 0 {
			a.ClaimedUntil = time.Time{}
		}
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("appeals: %w", err)
	}
	return out, nil
}

// Appeal is one appeal, open or answered.
func (s *Service) Appeal(ctx context.Context, id int64) (Appeal, error) {
	out, err := s.appeals(ctx, `WHERE a.id = $1`, id)
	if err != nil {
		return Appeal{}, err
	}
	if len(out) == 0 {
		return Appeal{}, booking.Errorf(booking.ENOTFOUND, "NO_APPEAL", "No appeal %d.", id)
	}
	return out[0], nil
}

// ClaimAppeal gives the analyst an open appeal for the claim period, so
// that two analysts do not work one; claiming again extends one's own. An
// analyst who took part in the decision cannot claim an appeal against it.
func (s *Service) ClaimAppeal(ctx context.Context, analystID, appealID int64) (time.Time, error) {
	var until time.Time
	err := db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		login, err := s.analyst(ctx, tx, analystID)
		if err != nil {
			return err
		}
		var a Appeal
		var holder *int64
		var holderUntil *time.Time
		err = tx.QueryRow(ctx, `SELECT a.status, a.claimed_by, a.claimed_until, d.analyst_id, coalesce(d.approved_by, 0)
			FROM fraud_appeals a JOIN fraud_decisions d ON d.id = a.decision_id WHERE a.id = $1 FOR UPDATE OF a`, appealID).
			Scan(&a.Status, &holder, &holderUntil, &a.DecidedBy, &a.ApprovedBy)
		if errors.Is(err, pgx.ErrNoRows) {
			return booking.Errorf(booking.ENOTFOUND, "NO_APPEAL", "No appeal %d.", appealID)
		}
		if err != nil {
			return fmt.Errorf("appeal %d: %w", appealID, err)
		}
		now := s.now()
		switch {
		case a.Status != "OPEN":
			return booking.Errorf(booking.ECONFLICT, "ANSWERED", "Appeal %d has been answered.", appealID)
		case a.TookPart(analystID):
			return booking.Errorf(booking.EFORBIDDEN, "OWN_DECISION", "You took part in the decision appealed against; another analyst works appeal %d.", appealID)
		case holder != nil && *holder != analystID && holderUntil.After(now):
			return booking.Errorf(booking.ECONFLICT, "CLAIMED", "Appeal %d is claimed by another analyst until %s.",
				appealID, holderUntil.In(booking.IST).Format("15:04:05 IST"))
		}
		until = now.Add(defaultClaim)
		if _, err := tx.Exec(ctx, `UPDATE fraud_appeals SET claimed_by = $2, claimed_until = $3 WHERE id = $1`, appealID, analystID, until); err != nil {
			return fmt.Errorf("claim appeal %d: %w", appealID, err)
		}
		return audit.Write(ctx, tx, login, "fraud.appeal_claim", fmt.Sprintf("appeal:%d", appealID),
			map[string]any{"until": until.UTC().Format(time.RFC3339)})
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("claim appeal %d: %w", appealID, err)
	}
	return until, nil
}

// idLike is what may be an ID document's number (PAN, Aadhaar, passport,
// voter ID, licence) or a phone number as a member would type it: a word
// of six or more letters and digits, or digit groups split by spaces or
// dashes (an Aadhaar's 1234 5678 9012).
var idLike = regexp.MustCompile(`\b[0-9]{2,}(?:[ -][0-9]{2,}){1,5}\b|\b[A-Za-z0-9]{6,}\b`)

// MaskIDs hides ID numbers in what a member wrote (their appeal) from the
// analysts who read it: each such run with four digits or more keeps only
// its last two characters; words stay as they were.
func MaskIDs(text string) string {
	return idLike.ReplaceAllStringFunc(text, func(m string) string {
		digits := 0
		for _, r := range m {
			if r >= '0' && r <= '9' {
				digits++
			}
		}
		if digits < 4 {
			return m
		}
		compact := strings.NewReplacer(" ", "", "-", "").Replace(m)
		return strings.Repeat("•", len(compact)-2) + compact[len(compact)-2:]
	})
}

// Verdicts of an answer to an appeal.
const (
	Upheld   = "UPHELD"
	Rejected = "REJECTED"
	// Proposed: an uphold of an appeal against a two-person decision,
	// awaiting a second analyst's; the appeal is still open.
	Proposed = "PROPOSED"
)

// Answer is what an analyst's answer did.
type Answer struct {
	Verdict string
	// RefundedPaise: what an upheld appeal against a cancellation refunds.
	RefundedPaise int64
}

// Refunder records, in the caller's transaction, a refund of a captured
// payment and enqueues its execution (payment.Service.RequestRefundTx): 0
// paise is all of it; a payment refunded before is answered with its
// refund and false.
type Refunder interface {
	RequestRefundTx(ctx context.Context, tx pgx.Tx, paymentID uuid.UUID, reason string, amount int64) (uuid.UUID, bool, error)
}

// AnswerAppeal is an analyst's answer to an appeal. Nobody answers an
// appeal against a decision they decided or approved. A refusal is one
// analyst's. An uphold lifts what the decision did to the member, and only
// that: their ban unless another decision still bans them, their harder
// challenge unless another still applies, and for each booking it
// cancelled, a refund of the full fare (nothing kept as clerkage), in this
// transaction, once. Against a decision that took two analysts, the uphold
// takes two as well: the first proposes it (Proposed, nothing lifted), a
// second who took no part in the decision nor the proposal upholds it.
// Every step is audited with the analyst's login.
func (s *Service) AnswerAppeal(ctx context.Context, analystID, appealID int64, uphold bool, note string) (Answer, error) {
	note = audit.CleanText(note, maxNote)
	var out Answer
	err := db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		out = Answer{}
		login, err := s.analyst(ctx, tx, analystID)
		if err != nil {
			return err
		}
		var a Appeal
		var holder *int64
		var holderUntil *time.Time
		err = tx.QueryRow(ctx, `SELECT a.user_id, a.decision_id, a.status, coalesce(a.proposed_by, 0), d.outcome, d.analyst_id,
				coalesce(d.approved_by, 0), d.needs_approval, a.claimed_by, a.claimed_until
			FROM fraud_appeals a JOIN fraud_decisions d ON d.id = a.decision_id WHERE a.id = $1 FOR UPDATE OF a`, appealID).
			Scan(&a.UserID, &a.DecisionID, &a.Status, &a.ProposedBy, &a.Outcome, &a.DecidedBy, &a.ApprovedBy, &a.TwoPerson, &holder, &holderUntil)
		if errors.Is(err, pgx.ErrNoRows) {
			return booking.Errorf(booking.ENOTFOUND, "NO_APPEAL", "No appeal %d.", appealID)
		}
		if err != nil {
			return fmt.Errorf("appeal %d: %w", appealID, err)
		}
		target := fmt.Sprintf("appeal:%d", appealID)
		detail := map[string]any{"user": a.UserID, "decision": a.DecisionID, "outcome": a.Outcome, "note": note}
		switch {
		case a.Status != "OPEN":
			return booking.Errorf(booking.ECONFLICT, "ANSWERED", "Appeal %d has been answered.", appealID)
		case a.TookPart(analystID):
			return booking.Errorf(booking.EFORBIDDEN, "OWN_DECISION",
				"You took part in decision %d; an analyst who did not answers appeals against it.", a.DecisionID)
		case holder != nil && *holder != analystID && holderUntil.After(s.now()):
			return booking.Errorf(booking.ECONFLICT, "CLAIMED", "Appeal %d is claimed by another analyst until %s.",
				appealID, holderUntil.In(booking.IST).Format("15:04:05 IST"))
		case !uphold:
			out.Verdict = Rejected
		case a.TwoPerson && a.ProposedBy == 0:
			if _, err := tx.Exec(ctx, `UPDATE fraud_appeals SET proposed_by = $2, proposed_at = now() WHERE id = $1`, appealID, analystID); err != nil {
				return fmt.Errorf("propose upholding appeal %d: %w", appealID, err)
			}
			out.Verdict = Proposed
			return audit.Write(ctx, tx, login, "fraud.appeal_uphold_proposed", target, detail)
		case a.TwoPerson && a.ProposedBy == analystID:
			return booking.Errorf(booking.EFORBIDDEN, "SAME_ANALYST",
				"You proposed upholding appeal %d; a second analyst must approve it.", appealID)
		default:
			out.Verdict = Upheld
		}
		if a.ProposedBy != 0 {
			proposer, err := s.loginOf(ctx, tx, a.ProposedBy)
			if err != nil {
				return err
			}
			detail["proposed_by"] = proposer
		}
		if out.Verdict == Upheld {
			if out.RefundedPaise, err = s.restore(ctx, tx, login, a, detail); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE fraud_appeals SET status = $2, decided_by = $3, decided_at = now(), note = $4,
			claimed_by = NULL, claimed_until = NULL WHERE id = $1`,
			appealID, out.Verdict, analystID, note); err != nil {
			return fmt.Errorf("answer appeal %d: %w", appealID, err)
		}
		// The member is told the outcome, with the analyst's answer.
		key := "msg.appealrejected"
		if out.Verdict == Upheld {
			key = "msg.appealupheld"
		}
		if err := booking.NotifyT(ctx, tx, a.UserID, "APPEAL_ANSWERED", fmt.Sprintf("appeal:%d", appealID), key, appealID, note); err != nil {
			return err
		}
		return audit.Write(ctx, tx, login, "fraud.appeal_"+strings.ToLower(out.Verdict), target, detail)
	})
	if err != nil {
		return Answer{}, fmt.Errorf("answer appeal %d: %w", appealID, err)
	}
	return out, nil
}

func (s *Service) loginOf(ctx context.Context, tx pgx.Tx, id int64) (string, error) {
	var login string
	if err := tx.QueryRow(ctx, `SELECT login FROM console_users WHERE id = $1`, id).Scan(&login); err != nil {
		return "", fmt.Errorf("console user %d: %w", id, err)
	}
	return login, nil
}

// restore lifts, in tx, what decision a.DecisionID did to member
// a.UserID, recording it (RESTORE) beside what the decision did, and says
// in detail what it lifted; it returns what it refunded.
func (s *Service) restore(ctx context.Context, tx pgx.Tx, login string, a Appeal, detail map[string]any) (int64, error) {
	// The member's row first: an enforcement banning them meanwhile waits
	// for this transaction, or is seen by the checks below.
	if _, err := tx.Exec(ctx, `SELECT 1 FROM users WHERE id = $1 FOR UPDATE`, a.UserID); err != nil {
		return 0, fmt.Errorf("lock user %d: %w", a.UserID, err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO fraud_enforcements (decision_id, user_id, hold_id, action)
		VALUES ($1, $2, '00000000-0000-0000-0000-000000000000', 'RESTORE') ON CONFLICT DO NOTHING`, a.DecisionID, a.UserID); err != nil {
		return 0, fmt.Errorf("record restore: %w", err)
	}
	switch a.Outcome {
	case Ban, ExtraChallenge:
		action, set := "BAN", `banned_at = NULL`
		if a.Outcome == ExtraChallenge {
			action, set = "EXTRA_CHALLENGE", `risk_score = 0`
		}
		// Lifted only if no other decision's act of the kind still holds
		// for the member (one not restored in turn).
		var others []int64
		if err := tx.QueryRow(ctx, `SELECT coalesce(array_agg(DISTINCT f.decision_id ORDER BY f.decision_id), '{}') FROM fraud_enforcements f
			WHERE f.user_id = $1 AND f.action = $2 AND NOT EXISTS (SELECT 1 FROM fraud_enforcements r
				WHERE r.decision_id = f.decision_id AND r.user_id = f.user_id AND r.action = 'RESTORE')`, a.UserID, action).Scan(&others); err != nil {
			return 0, fmt.Errorf("other decisions on user %d: %w", a.UserID, err)
		}
		detail["lifted"] = len(others) == 0
		if len(others) > 0 {
			detail["still_by_decisions"] = others
			return 0, nil
		}
		if _, err := tx.Exec(ctx, `UPDATE users SET `+set+` WHERE id = $1`, a.UserID); err != nil {
			return 0, fmt.Errorf("restore user %d: %w", a.UserID, err)
		}
		return 0, nil
	case CancelBookings:
		return s.refundCancelled(ctx, tx, login, a, detail)
	case Watch:
		_, err := tx.Exec(ctx, `DELETE FROM fraud_watch WHERE user_id = $1 AND decision_id = $2`, a.UserID, a.DecisionID)
		if err != nil {
			return 0, fmt.Errorf("lift watch on user %d: %w", a.UserID, err)
		}
	}
	return 0, nil
}

// refundCancelled refunds, in tx, the full fare of each booking of the
// member that decision a.DecisionID cancelled, once each (its RESTORE
// record), tells the member, and marks the booking with why.
func (s *Service) refundCancelled(ctx context.Context, tx pgx.Tx, login string, a Appeal, detail map[string]any) (int64, error) {
	rows, err := tx.Query(ctx, `SELECT b.id, b.hold_id, b.pnr FROM fraud_enforcements f JOIN bookings b ON b.hold_id = f.hold_id
		WHERE f.decision_id = $1 AND f.user_id = $2 AND f.action = 'CANCEL' AND b.status = 'CANCELLED' AND b.cancel_reason = $3
		ORDER BY b.id FOR UPDATE OF b`, a.DecisionID, a.UserID, cancelReason(a.DecisionID))
	if err != nil {
		return 0, fmt.Errorf("bookings decision %d cancelled: %w", a.DecisionID, err)
	}
	type cancelled struct {
		id   int64
		hold uuid.UUID
		pnr  string
	}
	bookings, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (cancelled, error) {
		var c cancelled
		return c, r.Scan(&c.id, &c.hold, &c.pnr)
	})
	if err != nil {
		return 0, fmt.Errorf("bookings decision %d cancelled: %w", a.DecisionID, err)
	}
	var total int64
	var refunded []string
	for _, b := range bookings {
		tag, err := tx.Exec(ctx, `INSERT INTO fraud_enforcements (decision_id, user_id, hold_id, action)
			VALUES ($1, $2, $3, 'RESTORE') ON CONFLICT DO NOTHING`, a.DecisionID, a.UserID, b.hold)
		if err != nil {
			return 0, fmt.Errorf("record restore of %s: %w", b.hold, err)
		}
		if tag.RowsAffected() == 0 {
			continue // refunded by an earlier uphold
		}
		// The ticket's captured payment, and what its cancellation refunded.
		var paymentID uuid.UUID
		var captured int64
		var before *int64
		err = tx.QueryRow(ctx, `SELECT p.id, coalesce(p.captured_paise, p.amount_paise), r.amount_paise
			FROM payments p LEFT JOIN refunds r ON r.payment_id = p.id
			WHERE p.hold_id = $1 AND p.state IN ('SUCCESS', 'REFUNDED') ORDER BY p.resolved_at LIMIT 1`, b.hold).Scan(&paymentID, &captured, &before)
		if errors.Is(err, pgx.ErrNoRows) {
			continue // nothing was paid
		}
		if err != nil {
			return 0, fmt.Errorf("payment of %s: %w", b.hold, err)
		}
		act := map[string]any{"appeal_decision": a.DecisionID, "user": a.UserID, "payment": paymentID, "proposed_by": detail["proposed_by"]}
		if before != nil {
			// A payment is refunded once (refunds_one_per_payment): what the
			// cancellation kept (a waitlisted ticket's clerkage) is left to
			// finance, named here.
			act["already_refunded_paise"], act["owed_paise"] = *before, captured-*before
			if err := audit.Write(ctx, tx, login, "fraud.appeal_refund_owed", "hold:"+b.hold.String(), act); err != nil {
				return 0, err
			}
			continue
		}
		if s.Refunds == nil {
			return 0, booking.Errorf(booking.EUNAVAIL, "REFUNDS_UNAVAILABLE", "Refunds cannot be recorded here; nothing was changed.")
		}
		if _, _, err := s.Refunds.RequestRefundTx(ctx, tx, paymentID, booking.RefundAppealUpheld, 0); err != nil {
			return 0, err
		}
		if _, err := tx.Exec(ctx, `UPDATE bookings SET refund_due_paise = $2, cancel_reason = cancel_reason || $3 WHERE id = $1`,
			b.id, captured, "; appeal upheld, full fare refunded"); err != nil {
			return 0, fmt.Errorf("mark booking %d refunded: %w", b.id, err)
		}
		if _, err := tx.Exec(ctx, `UPDATE fraud_enforcements SET refund_paise = $4
			WHERE decision_id = $1 AND user_id = $2 AND hold_id = $3 AND action = 'RESTORE'`, a.DecisionID, a.UserID, b.hold, captured); err != nil {
			return 0, fmt.Errorf("record refund of %s: %w", b.hold, err)
		}
		if err := booking.NotifyT(ctx, tx, a.UserID, "REFUND_STARTED", paymentID.String(), "msg.refundappeal", india.Decimal(captured), b.pnr); err != nil {
			return 0, err
		}
		act["refund_paise"] = captured
		if err := audit.Write(ctx, tx, login, "fraud.appeal_refund", "hold:"+b.hold.String(), act); err != nil {
			return 0, err
		}
		total += captured
		refunded = append(refunded, b.pnr)
	}
	detail["refunded_paise"], detail["refunded_pnrs"] = total, refunded
	return total, nil
}
