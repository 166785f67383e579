package review

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"tatkal/booking"
	"tatkal/booking/audit"
	"tatkal/booking/db"
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
}

// FileAppeal records a member's appeal against the latest enforced
// decision that acted on their account (a cancellation, a ban, a harder
// challenge); one open appeal per decision. Nothing enforced, nothing to
// appeal: the member learns of a decision only once it acts on them.
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
			WHERE f.user_id = $1 AND f.action <> 'RESTORE' AND d.enforced_at IS NOT NULL
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
	rows, err := s.pool.Query(ctx, `SELECT a.id, a.user_id, u.login, a.decision_id, d.outcome, a.statement, a.status, a.created_at, a.note
		FROM fraud_appeals a JOIN fraud_decisions d ON d.id = a.decision_id JOIN users u ON u.id = a.user_id `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("appeals: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Appeal, error) {
		var a Appeal
		return a, r.Scan(&a.ID, &a.UserID, &a.Login, &a.DecisionID, &a.Outcome, &a.Statement, &a.Status, &a.CreatedAt, &a.Note)
	})
	if err != nil {
		return nil, fmt.Errorf("appeals: %w", err)
	}
	return out, nil
}

// AnswerAppeal is an analyst's answer. Upheld restores the account: the
// ban and the harder challenge lifted, at once (a restoration has nothing
// to hide). A cancelled ticket is not given back: its berths were resold.
func (s *Service) AnswerAppeal(ctx context.Context, analystID, appealID int64, uphold bool, note string) error {
	note = audit.CleanText(note, maxNote)
	err := db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		login, err := s.analyst(ctx, tx, analystID)
		if err != nil {
			return err
		}
		var userID, decisionID int64
		var status string
		err = tx.QueryRow(ctx, `SELECT user_id, decision_id, status FROM fraud_appeals WHERE id = $1 FOR UPDATE`, appealID).
			Scan(&userID, &decisionID, &status)
		if errors.Is(err, pgx.ErrNoRows) {
			return booking.Errorf(booking.ENOTFOUND, "NO_APPEAL", "No appeal %d.", appealID)
		}
		if err != nil {
			return fmt.Errorf("appeal %d: %w", appealID, err)
		}
		if status != "OPEN" {
			return booking.Errorf(booking.ECONFLICT, "ANSWERED", "Appeal %d has been answered.", appealID)
		}
		verdict, action := "REJECTED", "fraud.appeal_rejected"
		if uphold {
			verdict, action = "UPHELD", "fraud.appeal_upheld"
			if _, err := tx.Exec(ctx, `UPDATE users SET banned_at = NULL, risk_score = 0 WHERE id = $1`, userID); err != nil {
				return fmt.Errorf("restore user %d: %w", userID, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO fraud_enforcements (decision_id, user_id, hold_id, action)
				VALUES ($1, $2, '00000000-0000-0000-0000-000000000000', 'RESTORE') ON CONFLICT DO NOTHING`, decisionID, userID); err != nil {
				return fmt.Errorf("record restore: %w", err)
			}
		}
		if _, err := tx.Exec(ctx, `UPDATE fraud_appeals SET status = $2, decided_by = $3, decided_at = now(), note = $4 WHERE id = $1`,
			appealID, verdict, analystID, note); err != nil {
			return fmt.Errorf("answer appeal %d: %w", appealID, err)
		}
		return audit.Write(ctx, tx, login, action, fmt.Sprintf("appeal:%d", appealID),
			map[string]any{"user": userID, "decision": decisionID, "note": note})
	})
	if err != nil {
		return fmt.Errorf("answer appeal %d: %w", appealID, err)
	}
	return nil
}
