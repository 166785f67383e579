// Package tdr is the ticket deposit receipt: a passenger's claim of a full
// refund of a confirmed Tatkal ticket when the train ran over 3 hours late
// at the boarding station, or did not run from it (DOMAIN.md,
// "Cancellation and refunds"). The passenger files it within the time
// limits of Rules; finance decides: two different people approve (money
// moves on the gateway's word or on two people's, and a TDR has no
// gateway's word), one refuses. An
// approval requests the refund through the payment refund path
// (payment.Refunds, reason booking's RefundTDR) in the same transaction,
// so the money goes back as every other refund does.
package tdr

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"tatkal/booking"
	"tatkal/booking/audit"
	"tatkal/booking/db"
	"tatkal/booking/india"
)

// Reasons a TDR may be filed for.
const (
	TrainLate   = "TRAIN_LATE"    // over LateThreshold late at the boarding station; the passenger did not travel
	TrainNotRun = "TRAIN_NOT_RUN" // cancelled, or did not run from (or was diverted away from) the boarding station
)

// Statuses.
const (
	Filed    = "FILED"
	Approved = "APPROVED" // the refund is requested (and then paid as every refund is)
	Refused  = "REFUSED"
)

// Rules are the time limits a TDR is filed within, as Indian Railways
// publishes them for e-tickets; the rules page prints them from here.
type Rules struct {
	// LateThreshold: a train later than this at the boarding station
	// (DOMAIN.md: over 3 hours) entitles a passenger who did not travel to
	// a full refund.
	LateThreshold time.Duration
	// OpensBefore: a claim is taken from this long before the scheduled
	// departure from the boarding station (a delay or a cancellation is
	// announced on the day).
	OpensBefore time.Duration
	// NotRunWithin: a train that did not run is claimed for within this
	// long after its scheduled departure from the boarding station.
	NotRunWithin time.Duration
	// A late train is claimed for before it actually leaves the boarding
	// station: by the scheduled departure plus the delay the passenger
	// states, which finance checks against the running record, and never
	// later than LateWithin after the scheduled departure.
	LateWithin time.Duration
}

// DefaultRules: 3 hours late; filed from 24 hours before departure;
// within 72 hours for a train that did not run; at most 72 hours either way.
func DefaultRules() Rules {
	return Rules{LateThreshold: 3 * time.Hour, OpensBefore: 24 * time.Hour, NotRunWithin: 72 * time.Hour, LateWithin: 72 * time.Hour}
}

// Refunds requests a refund of a payment in the caller's transaction
// (payment.Refunds).
type Refunds interface {
	RequestRefundTx(ctx context.Context, tx pgx.Tx, paymentID uuid.UUID, reason string, amount int64) (uuid.UUID, bool, error)
}

// Service files and decides TDRs.
type Service struct {
	Pool    *pgxpool.Pool
	Refunds Refunds          // needed to approve; filing and reading need none
	Rules   Rules            // zero: DefaultRules
	Now     func() time.Time // nil: time.Now
}

// TDR is one claim.
type TDR struct {
	ID          int64      `json:"id"`
	BookingID   int64      `json:"-"`
	UserID      int64      `json:"-"`
	HoldID      uuid.UUID  `json:"hold_id"`
	PNR         string     `json:"pnr"`
	Reason      string     `json:"reason"`
	LateMinutes int        `json:"late_minutes,omitempty"`
	Note        string     `json:"note,omitempty"`
	AmountPaise int64      `json:"amount_paise"`
	Status      string     `json:"status"`
	FiledAt     time.Time  `json:"filed_at"`
	DecidedAt   *time.Time `json:"decided_at,omitempty"`
	Answer      string     `json:"answer,omitempty"`
	// RefundState is the refund's own state once approved (PENDING,
	// PROCESSED, FAILED).
	RefundState string `json:"refund_state,omitempty"`
	// Finance's side, never the passenger's.
	FirstBy   string `json:"-"`
	DecidedBy string `json:"-"`
	Login     string `json:"-"`
	Journey   string `json:"-"`
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Service) rules() Rules {
	if s.Rules == (Rules{}) {
		return DefaultRules()
	}
	return s.Rules
}

// Claim is what a passenger files.
type Claim struct {
	Reason      string `json:"reason"`
	LateMinutes int    `json:"late_minutes,omitempty"`
	Note        string `json:"note,omitempty"`
}

const maxNote = 1000

// File records a passenger's TDR for the booking of their hold: a booking
// still confirmed, one claim per booking, within the rules' time limits
// counted from the scheduled departure at the passenger's boarding
// station. The amount claimed is the whole fare paid (fare and Tatkal
// charge; we charge no convenience fee).
func (s *Service) File(ctx context.Context, userID int64, holdID uuid.UUID, c Claim) (TDR, error) {
	c.Reason = strings.ToUpper(strings.TrimSpace(c.Reason))
	c.Note = strings.TrimSpace(audit.CleanText(c.Note, maxNote+1))
	r := s.rules()
	switch {
	case c.Reason != TrainLate && c.Reason != TrainNotRun:
		return TDR{}, booking.Errorf(booking.EINVALID, "BAD_TDR_REASON", "Choose why: the train ran over %d hours late (%s), or did not run (%s).",
			int(r.LateThreshold.Hours()), TrainLate, TrainNotRun)
	case c.Reason == TrainLate && (c.LateMinutes <= int(r.LateThreshold.Minutes()) || c.LateMinutes > int(r.LateWithin.Minutes())):
		return TDR{}, booking.Errorf(booking.EINVALID, "BAD_TDR_DELAY", "A TDR for a late train needs its delay at your boarding station: over %d minutes, at most %d.",
			int(r.LateThreshold.Minutes()), int(r.LateWithin.Minutes()))
	case c.Reason == TrainNotRun && c.LateMinutes != 0:
		return TDR{}, booking.Errorf(booking.EINVALID, "BAD_TDR_DELAY", "A train that did not run has no delay; leave late_minutes out.")
	case len(c.Note) > maxNote:
		return TDR{}, booking.Errorf(booking.EINVALID, "TDR_NOTE_TOO_LONG", "The note is at most %d bytes.", maxNote)
	}
	var t TDR
	err := db.Transact(ctx, s.Pool, func(tx pgx.Tx) error {
		var status string
		var departs time.Time
		err := tx.QueryRow(ctx, `SELECT b.id, b.pnr, b.status, b.fare_paise,
				((s.journey_date + tr.departs_at) AT TIME ZONE 'Asia/Kolkata') + make_interval(mins => coalesce(st.depart_min, st.arrive_min, 0))
			FROM holds h JOIN bookings b ON b.hold_id = h.id JOIN inventory_shards s ON s.id = b.shard_id
			JOIN trains tr ON tr.number = s.train_number JOIN train_stops st ON st.train_number = s.train_number AND st.seq = b.from_seq
			WHERE h.id = $1 AND h.user_id = $2 FOR UPDATE OF b`, holdID, userID).Scan(&t.BookingID, &t.PNR, &status, &t.AmountPaise, &departs)
		if errors.Is(err, pgx.ErrNoRows) {
			return booking.Errorf(booking.ENOTFOUND, "NO_SUCH_BOOKING", "You have no booking with that reference.")
		}
		if err != nil {
			return fmt.Errorf("booking of hold %s: %w", holdID, err)
		}
		now := s.now()
		closes := departs.Add(r.NotRunWithin)
		if c.Reason == TrainLate {
			closes = departs.Add(time.Duration(c.LateMinutes) * time.Minute)
		}
		switch {
		case status != booking.BookingConfirmed:
			return booking.Errorf(booking.ECONFLICT, "TDR_NOT_CONFIRMED", "A TDR is filed for a confirmed ticket; this booking is %s.", strings.ToLower(status))
		case now.Before(departs.Add(-r.OpensBefore)):
			return booking.Errorf(booking.ECONFLICT, "TDR_TOO_EARLY", "A TDR is taken from %s IST, %d hours before the train leaves your boarding station.",
				departs.Add(-r.OpensBefore).In(india.IST).Format("2 Jan 15:04"), int(r.OpensBefore.Hours()))
		case now.After(closes):
			return booking.Errorf(booking.ECONFLICT, "TDR_TOO_LATE", "The time to file this TDR ended at %s IST.", closes.In(india.IST).Format("2 Jan 15:04"))
		}
		var late *int
		if c.Reason == TrainLate {
			late = &c.LateMinutes
		}
		err = tx.QueryRow(ctx, `INSERT INTO tdrs (booking_id, user_id, reason, late_minutes, note, amount_paise)
			VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (booking_id) DO NOTHING RETURNING id, filed_at`,
			t.BookingID, userID, c.Reason, late, c.Note, t.AmountPaise).Scan(&t.ID, &t.FiledAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return booking.Errorf(booking.ECONFLICT, "TDR_EXISTS", "A TDR is already filed for PNR %s.", t.PNR)
		}
		if err != nil {
			return fmt.Errorf("file tdr for booking %d: %w", t.BookingID, err)
		}
		return audit.Write(ctx, tx, fmt.Sprintf("user:%d", userID), "tdr.file", fmt.Sprint(t.ID),
			map[string]any{"pnr": t.PNR, "reason": c.Reason, "late_minutes": c.LateMinutes, "amount_paise": t.AmountPaise})
	})
	if err != nil {
		return TDR{}, err
	}
	t.UserID, t.HoldID, t.Reason, t.LateMinutes, t.Note, t.Status = userID, holdID, c.Reason, c.LateMinutes, c.Note, Filed
	return t, nil
}

const selectTDR = `SELECT t.id, t.booking_id, t.user_id, b.hold_id, b.pnr, t.reason, coalesce(t.late_minutes, 0), t.note, t.amount_paise,
	t.status, t.filed_at, t.decided_at, t.answer, coalesce(r.state, ''), coalesce(t.first_by, ''), coalesce(t.decided_by, ''), u.login,
	s.train_number || ' ' || s.class || ' ' || to_char(s.journey_date, 'DD Mon YYYY')
	FROM tdrs t JOIN bookings b ON b.id = t.booking_id JOIN users u ON u.id = t.user_id JOIN inventory_shards s ON s.id = b.shard_id
	LEFT JOIN refunds r ON r.id = t.refund_id `

func scan(row pgx.Row) (TDR, error) {
	var t TDR
	err := row.Scan(&t.ID, &t.BookingID, &t.UserID, &t.HoldID, &t.PNR, &t.Reason, &t.LateMinutes, &t.Note, &t.AmountPaise,
		&t.Status, &t.FiledAt, &t.DecidedAt, &t.Answer, &t.RefundState, &t.FirstBy, &t.DecidedBy, &t.Login, &t.Journey)
	return t, err
}

// ForHold is the passenger's TDR for the booking of their hold; nil when
// none is filed.
func (s *Service) ForHold(ctx context.Context, userID int64, holdID uuid.UUID) (*TDR, error) {
	t, err := scan(s.Pool.QueryRow(ctx, selectTDR+`WHERE b.hold_id = $1 AND t.user_id = $2`, holdID, userID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tdr of hold %s: %w", holdID, err)
	}
	return &t, nil
}

// Get is one TDR, for finance.
func (s *Service) Get(ctx context.Context, id int64) (TDR, error) {
	t, err := scan(s.Pool.QueryRow(ctx, selectTDR+`WHERE t.id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return TDR{}, booking.Errorf(booking.ENOTFOUND, "NO_SUCH_TDR", "No TDR %d.", id)
	}
	if err != nil {
		return TDR{}, fmt.Errorf("tdr %d: %w", id, err)
	}
	return t, nil
}

// List is finance's worklist: the open claims, oldest first, then the
// latest decided ones; at most limit.
func (s *Service) List(ctx context.Context, limit int) ([]TDR, error) {
	rows, err := s.Pool.Query(ctx, selectTDR+`ORDER BY t.status <> 'FILED', CASE WHEN t.status = 'FILED' THEN t.filed_at END,
		t.decided_at DESC LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("tdrs: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (TDR, error) { return scan(r) })
	if err != nil {
		return nil, fmt.Errorf("tdrs: %w", err)
	}
	return out, nil
}

// Approve is one finance person's approval. The first is recorded; a
// second person, not the first, decides the claim: the refund of the
// whole amount is requested through the refund path in the same
// transaction. Done reports
// whether the refund was requested. Audited.
func (s *Service) Approve(ctx context.Context, id int64, by string) (done bool, err error) {
	if by == "" {
		return false, errors.New("approve tdr: no person")
	}
	if s.Refunds == nil {
		return false, errors.New("approve tdr: no refund desk")
	}
	err = db.Transact(ctx, s.Pool, func(tx pgx.Tx) error {
		var status, first string
		var amount int64
		var holdID uuid.UUID
		err := tx.QueryRow(ctx, `SELECT t.status, coalesce(t.first_by, ''), t.amount_paise, b.hold_id
			FROM tdrs t JOIN bookings b ON b.id = t.booking_id WHERE t.id = $1 FOR UPDATE OF t`, id).Scan(&status, &first, &amount, &holdID)
		if errors.Is(err, pgx.ErrNoRows) {
			return booking.Errorf(booking.ENOTFOUND, "NO_SUCH_TDR", "No TDR %d.", id)
		}
		if err != nil {
			return fmt.Errorf("lock tdr %d: %w", id, err)
		}
		switch {
		case status != Filed:
			return booking.Errorf(booking.ECONFLICT, "TDR_DECIDED", "TDR %d is already %s.", id, strings.ToLower(status))
		case first == by:
			return booking.Errorf(booking.EFORBIDDEN, "SAME_PERSON", "You gave TDR %d its first approval: a second person approves it.", id)
		case first == "":
			if _, err := tx.Exec(ctx, `UPDATE tdrs SET first_by = $2, first_at = now() WHERE id = $1`, id, by); err != nil {
				return fmt.Errorf("first approval of tdr %d: %w", id, err)
			}
			return audit.Write(ctx, tx, by, "tdr.approve.first", fmt.Sprint(id), map[string]any{"amount_paise": amount})
		}
		var paymentID uuid.UUID
		err = tx.QueryRow(ctx, `SELECT id FROM payments WHERE hold_id = $1 AND state = 'SUCCESS' ORDER BY resolved_at LIMIT 1`, holdID).Scan(&paymentID)
		if errors.Is(err, pgx.ErrNoRows) {
			return booking.Errorf(booking.ECONFLICT, "TDR_NO_PAYMENT", "TDR %d: the booking has no captured payment left to refund.", id)
		}
		if err != nil {
			return fmt.Errorf("payment of tdr %d: %w", id, err)
		}
		refundID, fresh, err := s.Refunds.RequestRefundTx(ctx, tx, paymentID, booking.RefundTDR, amount)
		if err != nil {
			return fmt.Errorf("refund of tdr %d: %w", id, err)
		}
		if !fresh {
			return booking.Errorf(booking.ECONFLICT, "TDR_REFUNDED_BEFORE", "TDR %d: the payment was refunded before, for another reason.", id)
		}
		if _, err := tx.Exec(ctx, `UPDATE tdrs SET status = 'APPROVED', decided_by = $2, decided_at = now(), refund_id = $3 WHERE id = $1`,
			id, by, refundID); err != nil {
			return fmt.Errorf("approve tdr %d: %w", id, err)
		}
		done = true
		detail := map[string]any{"amount_paise": amount, "refund": refundID.String()}
		if first != "" {
			detail["first_approval"] = first
		}
		return audit.Write(ctx, tx, by, "tdr.approve", fmt.Sprint(id), detail)
	})
	return done, err
}

// Refuse ends a claim with finance's answer to the passenger (required).
// One person may refuse; nothing moves. Audited.
func (s *Service) Refuse(ctx context.Context, id int64, by, answer string) error {
	answer = strings.TrimSpace(audit.CleanText(answer, maxNote+1))
	switch {
	case by == "":
		return errors.New("refuse tdr: no person")
	case answer == "":
		return booking.Errorf(booking.EINVALID, "ANSWER_REQUIRED", "Say why the claim is refused: the passenger reads it.")
	case len(answer) > maxNote:
		return booking.Errorf(booking.EINVALID, "ANSWER_TOO_LONG", "The answer is at most %d bytes.", maxNote)
	}
	return db.Transact(ctx, s.Pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE tdrs SET status = 'REFUSED', decided_by = $2, decided_at = now(), answer = $3
			WHERE id = $1 AND status = 'FILED'`, id, by, answer)
		if err != nil {
			return fmt.Errorf("refuse tdr %d: %w", id, err)
		}
		if tag.RowsAffected() == 0 {
			if _, err := s.Get(ctx, id); err != nil {
				return err
			}
			return booking.Errorf(booking.ECONFLICT, "TDR_DECIDED", "TDR %d is already decided.", id)
		}
		return audit.Write(ctx, tx, by, "tdr.refuse", fmt.Sprint(id), map[string]any{"answer": answer})
	})
}
