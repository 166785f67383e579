package recon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"tatkal/booking"
	"tatkal/booking/audit"
	"tatkal/booking/db"
	"tatkal/booking/india"
)

// Exception states: OPEN → INVESTIGATING (assigned to a person) →
// RESOLVED (automatically, by a rerun that no longer finds it, or with a
// resolution code and note) or WRITTEN_OFF (proposed by one person,
// approved by another).
const (
	StateOpen          = "OPEN"
	StateInvestigating = "INVESTIGATING"
	StateResolved      = "RESOLVED"
	StateWrittenOff    = "WRITTEN_OFF"
)

// ClearedOnRerun is the resolution of an exception a later run no longer finds.
const ClearedOnRerun = "CLEARED_ON_RERUN"

// Exception is one difference between the legs.
type Exception struct {
	ID           uuid.UUID  `json:"id"`
	Kind         string     `json:"kind"`
	Ref          string     `json:"ref"`
	Gateway      string     `json:"gateway"`
	BusinessDate time.Time  `json:"business_date"`
	PaymentID    *uuid.UUID `json:"payment_id,omitempty"`
	HoldID       *uuid.UUID `json:"hold_id,omitempty"`
	RefundID     *uuid.UUID `json:"refund_id,omitempty"`
	PNR          string     `json:"pnr,omitempty"`
	PSPRef       string     `json:"psp_ref,omitempty"`
	PayoutID     string     `json:"payout_id,omitempty"`
	// AmountPaise is the gross amount the exception is about (the payment,
	// the payout, the fee), the context; DiffPaise the signed difference
	// where two legs disagree on an amount (theirs less ours); StakePaise
	// what is at stake: the difference for a mismatch, the whole amount
	// where the whole item is in question. Totals, ageing, filters, the
	// approval limit and write-offs use StakePaise.
	AmountPaise   int64           `json:"amount_paise"`
	DiffPaise     int64           `json:"diff_paise"`
	StakePaise    int64           `json:"stake_paise"`
	Owner         string          `json:"owner_team"`
	Path          string          `json:"path"`
	State         string          `json:"state"`
	Assignee      string          `json:"assignee,omitempty"`
	Resolution    string          `json:"resolution,omitempty"`
	DetectedAt    time.Time       `json:"detected_at"`
	DueAt         time.Time       `json:"due_at"`
	FirstRunID    int64           `json:"first_run_id"`
	LastRunID     int64           `json:"last_run_id"`
	Evidence      json.RawMessage `json:"evidence"`
	NeedsApproval bool            `json:"needs_approval"`
	ApprovedBy    string          `json:"approved_by,omitempty"`
	WriteOffBy    string          `json:"write_off_proposed_by,omitempty"`
	// WrittenOffPaise is what the write-off wrote off: the stake when it
	// was approved (nil unless written off).
	WrittenOffPaise *int64     `json:"written_off_paise,omitempty"`
	ResolvedAt      *time.Time `json:"resolved_at,omitempty"`
	ResolvedBy      string     `json:"resolved_by,omitempty"`
	EscalatedAt     *time.Time `json:"escalated_at,omitempty"`
}

// Age is how long the exception has been (or was) open.
func (e Exception) Age(now time.Time) time.Duration {
	if e.ResolvedAt != nil {
		return e.ResolvedAt.Sub(e.DetectedAt)
	}
	return now.Sub(e.DetectedAt)
}

// AgeBucket is the ageing bucket of an age: 0-1 d, 1-3 d, 3-7 d, over 7 d.
func AgeBucket(age time.Duration) string {
	for _, b := range AgeBuckets {
		if b.To == 0 || age < b.To {
			return b.Name
		}
	}
	return ""
}

const exceptionCols = `id, kind, ref, gateway, business_date, payment_id, hold_id, refund_id, pnr, psp_ref, payout_id,
	amount_paise, diff_paise, stake_paise, owner_team, path, state, assignee, resolution, detected_at, due_at, first_run_id,
	last_run_id, evidence, needs_approval, approved_by, writeoff_by, written_off_paise, resolved_at, resolved_by, escalated_at`

func scanException(row pgx.Row) (Exception, error) {
	var e Exception
	err := row.Scan(&e.ID, &e.Kind, &e.Ref, &e.Gateway, &e.BusinessDate, &e.PaymentID, &e.HoldID, &e.RefundID, &e.PNR, &e.PSPRef,
		&e.PayoutID, &e.AmountPaise, &e.DiffPaise, &e.StakePaise, &e.Owner, &e.Path, &e.State, &e.Assignee, &e.Resolution,
		&e.DetectedAt, &e.DueAt, &e.FirstRunID, &e.LastRunID, &e.Evidence, &e.NeedsApproval, &e.ApprovedBy, &e.WriteOffBy,
		&e.WrittenOffPaise, &e.ResolvedAt, &e.ResolvedBy, &e.EscalatedAt)
	return e, err
}

// Exception returns one exception.
func (s *Service) Exception(ctx context.Context, id uuid.UUID) (Exception, error) {
	e, err := scanException(s.pool.QueryRow(ctx, `SELECT `+exceptionCols+` FROM reconciliation_exceptions WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return e, booking.Errorf(booking.ENOTFOUND, "NO_SUCH_EXCEPTION", "No exception %s.", id)
	}
	if err != nil {
		return e, fmt.Errorf("read exception %s: %w", id, err)
	}
	return e, nil
}

// Filter selects exceptions; zero fields select everything.
type Filter struct {
	Gateway      string
	BusinessDate time.Time
	Kind         string
	State        string // a state, or "UNRESOLVED" for OPEN and INVESTIGATING
	Owner        string // the owning team
	// Teams, when not nil, narrows the selection to exceptions these
	// teams own: a team member's list is theirs whatever else it asks.
	Teams       []string
	IDs         []uuid.UUID // these exceptions only (nil: any)
	Assignee    string      // the person it is assigned to
	MinPaise    int64       // at stake at least
	MaxPaise    int64       // at stake at most (0: no bound)
	OlderThan   time.Duration
	YoungerThan time.Duration // detected less than this long ago (0: no bound)
	Overdue     bool          // unresolved and past its SLA
	Limit       int           // default 100, at most 1000
	Offset      int
}

// AgeBuckets are the ageing buckets, youngest first, with their bounds.
var AgeBuckets = []struct {
	Name     string
	From, To time.Duration // To 0: no upper bound
}{
	{"0-1 d", 0, 24 * time.Hour},
	{"1-3 d", 24 * time.Hour, 72 * time.Hour},
	{"3-7 d", 72 * time.Hour, 7 * 24 * time.Hour},
	{"over 7 d", 7 * 24 * time.Hour, 0},
}

// SetAgeBucket narrows the filter to exceptions detected within a bucket's bounds.
func (f *Filter) SetAgeBucket(name string) error {
	for _, b := range AgeBuckets {
		if b.Name == name {
			f.OlderThan, f.YoungerThan = b.From, b.To
			return nil
		}
	}
	return booking.Errorf(booking.EINVALID, "UNKNOWN_AGE", "Unknown age bucket %q.", name)
}

// where turns the filter into a WHERE clause and its arguments.
func (s *Service) where(f Filter) (string, []any, error) {
	var where []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if f.Gateway != "" {
		add("gateway = $%d", f.Gateway)
	}
	if !f.BusinessDate.IsZero() {
		add("business_date = $%d", pgDate(f.BusinessDate))
	}
	if f.Kind != "" {
		if _, ok := KindOf(f.Kind); !ok {
			return "", nil, booking.Errorf(booking.EINVALID, "UNKNOWN_KIND", "Unknown exception kind %q.", f.Kind)
		}
		add("kind = $%d", f.Kind)
	}
	switch f.State {
	case "":
	case "UNRESOLVED":
		where = append(where, "state IN ('OPEN', 'INVESTIGATING')")
	case StateOpen, StateInvestigating, StateResolved, StateWrittenOff:
		add("state = $%d", f.State)
	default:
		return "", nil, booking.Errorf(booking.EINVALID, "UNKNOWN_STATE", "Unknown exception state %q.", f.State)
	}
	if f.Owner != "" {
		add("owner_team = $%d", f.Owner)
	}
	if f.Teams != nil {
		add("owner_team = ANY($%d)", f.Teams)
	}
	if f.IDs != nil {
		add("id = ANY($%d)", f.IDs)
	}
	if f.Assignee != "" {
		add("assignee = $%d", f.Assignee)
	}
	if f.MinPaise < 0 || f.MaxPaise < 0 || (f.MaxPaise > 0 && f.MaxPaise < f.MinPaise) {
		return "", nil, booking.Errorf(booking.EINVALID, "BAD_AMOUNT_RANGE", "The amount range must be positive, its lower bound below its upper.")
	}
	if f.MinPaise > 0 {
		add("stake_paise >= $%d", f.MinPaise)
	}
	if f.MaxPaise > 0 {
		add("stake_paise <= $%d", f.MaxPaise)
	}
	now := s.cfg.Now()
	if f.OlderThan > 0 {
		add("detected_at <= $%d", now.Add(-f.OlderThan))
	}
	if f.YoungerThan > 0 {
		add("detected_at > $%d", now.Add(-f.YoungerThan))
	}
	if f.Overdue {
		add("state IN ('OPEN', 'INVESTIGATING') AND due_at < $%d", now)
	}
	if len(where) == 0 {
		return "", args, nil
	}
	return " WHERE " + strings.Join(where, " AND "), args, nil
}

// Exceptions lists exceptions, oldest first, a page at a time.
func (s *Service) Exceptions(ctx context.Context, f Filter) ([]Exception, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	if f.Limit > 1000 || f.Offset < 0 {
		return nil, booking.Errorf(booking.EINVALID, "BAD_PAGE", "Pages hold at most 1000 exceptions and start at 0.")
	}
	where, args, err := s.where(f)
	if err != nil {
		return nil, err
	}
	args = append(args, f.Limit, f.Offset)
	q := `SELECT ` + exceptionCols + ` FROM reconciliation_exceptions` + where +
		fmt.Sprintf(" ORDER BY detected_at, kind, ref LIMIT $%d OFFSET $%d", len(args)-1, len(args))
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list exceptions: %w", err)
	}
	defer rows.Close()
	out := []Exception{}
	for rows.Next() {
		e, err := scanException(rows)
		if err != nil {
			return nil, fmt.Errorf("list exceptions: %w", err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// CountExceptions counts what a filter selects (its page ignored) and
// sums what is at stake.
func (s *Service) CountExceptions(ctx context.Context, f Filter) (n int, paise int64, err error) {
	where, args, err := s.where(f)
	if err != nil {
		return 0, 0, err
	}
	if err := s.pool.QueryRow(ctx, `SELECT count(*), coalesce(sum(stake_paise), 0)::bigint FROM reconciliation_exceptions`+where,
		args...).Scan(&n, &paise); err != nil {
		return 0, 0, fmt.Errorf("count exceptions: %w", err)
	}
	return n, paise, nil
}

// Event is one entry of an exception's history.
type Event struct {
	At        time.Time `json:"at"`
	Actor     string    `json:"actor"`
	Action    string    `json:"action"`
	FromState string    `json:"from_state,omitempty"`
	ToState   string    `json:"to_state,omitempty"`
	Note      string    `json:"note,omitempty"`
	RunID     *int64    `json:"run_id,omitempty"`
}

// History is an exception's full history, oldest first.
func (s *Service) History(ctx context.Context, id uuid.UUID) ([]Event, error) {
	rows, err := s.pool.Query(ctx, `SELECT at, actor, action, from_state, to_state, note, run_id
		FROM reconciliation_exception_events WHERE exception_id = $1 ORDER BY id`, id)
	if err != nil {
		return nil, fmt.Errorf("history of %s: %w", id, err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[Event])
}

var (
	actorRE = regexp.MustCompile(`^[a-zA-Z0-9._:@-]{1,100}$`)
	codeRE  = regexp.MustCompile(`^[A-Z][A-Z_]{2,39}$`)
)

func checkActor(actor string) error {
	if !actorRE.MatchString(actor) {
		return booking.Errorf(booking.EINVALID, "NO_ACTOR", "Say who acts (a login of letters, digits and ._:@-).")
	}
	return nil
}

func checkNote(note string, required bool) error {
	if required && strings.TrimSpace(note) == "" {
		return booking.Errorf(booking.EINVALID, "NOTE_REQUIRED", "Write a note saying why.")
	}
	if len(note) > 4000 {
		return booking.Errorf(booking.EINVALID, "NOTE_TOO_LONG", "Notes are at most 4000 characters.")
	}
	return nil
}

type teamsKey struct{}

// ForTeams scopes what a person does to exceptions through ctx to those
// the teams own (a console team member's): every change to an exception
// (change) and every note checks the owning team under the exception's
// lock, so an exception handed to another team meanwhile is refused, not
// changed. No teams (finance, admin): every exception.
func ForTeams(ctx context.Context, teams []string) context.Context {
	if teams == nil {
		return ctx
	}
	return context.WithValue(ctx, teamsKey{}, teams)
}

// inScope refuses an exception outside the teams of ctx (ForTeams).
func inScope(ctx context.Context, e Exception) error {
	teams, ok := ctx.Value(teamsKey{}).([]string)
	if !ok || slices.Contains(teams, e.Owner) {
		return nil
	}
	return booking.Errorf(booking.EFORBIDDEN, "NOT_YOUR_TEAM",
		"This exception belongs to %s; you work the exceptions of %s only.", e.Owner, strings.Join(teams, ", "))
}

// change locks an unresolved exception and runs fn on it in one
// transaction; a closed exception is a conflict and changes nothing, and
// one outside the teams of ctx (ForTeams) is refused.
func (s *Service) change(ctx context.Context, id uuid.UUID, fn func(tx pgx.Tx, e Exception) error) error {
	return db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		e, err := scanException(tx.QueryRow(ctx, `SELECT `+exceptionCols+` FROM reconciliation_exceptions WHERE id = $1 FOR UPDATE`, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return booking.Errorf(booking.ENOTFOUND, "NO_SUCH_EXCEPTION", "No exception %s.", id)
		}
		if err != nil {
			return fmt.Errorf("lock exception %s: %w", id, err)
		}
		if err := inScope(ctx, e); err != nil {
			return err
		}
		if e.State != StateOpen && e.State != StateInvestigating {
			return booking.Errorf(booking.ECONFLICT, "EXCEPTION_CLOSED", "Exception %s is %s already.", id, e.State)
		}
		return fn(tx, e)
	})
}

func event(ctx context.Context, tx pgx.Tx, id uuid.UUID, actor, action, from, to, note string) error {
	if _, err := tx.Exec(ctx, `INSERT INTO reconciliation_exception_events (exception_id, actor, action, from_state, to_state, note)
		VALUES ($1, $2, $3, $4, $5, $6)`, id, actor, action, from, to, note); err != nil {
		return fmt.Errorf("exception %s history: %w", id, err)
	}
	return audit.Write(ctx, tx, actor, "recon."+strings.ToLower(action), "recon_exception:"+id.String(),
		map[string]any{"from": from, "to": to, "note": note})
}

// Assign gives an exception to a person to investigate.
func (s *Service) Assign(ctx context.Context, id uuid.UUID, actor, assignee string) error {
	if err := checkActor(actor); err != nil {
		return err
	}
	if err := checkActor(assignee); err != nil {
		return booking.Errorf(booking.EINVALID, "NO_ASSIGNEE", "Name the person to assign it to.")
	}
	return s.change(ctx, id, func(tx pgx.Tx, e Exception) error {
		if _, err := tx.Exec(ctx, `UPDATE reconciliation_exceptions SET state = 'INVESTIGATING', assignee = $2 WHERE id = $1`, id, assignee); err != nil {
			return fmt.Errorf("assign %s: %w", id, err)
		}
		return event(ctx, tx, id, actor, "ASSIGNED", e.State, StateInvestigating, "to "+assignee)
	})
}

// AddNote records a note on an exception, open or closed.
func (s *Service) AddNote(ctx context.Context, id uuid.UUID, actor, note string) error {
	if err := checkActor(actor); err != nil {
		return err
	}
	if err := checkNote(note, true); err != nil {
		return err
	}
	e, err := s.Exception(ctx, id)
	if err != nil {
		return err
	}
	// A note changes nothing but the history: the owner read before it
	// is scope enough.
	if err := inScope(ctx, e); err != nil {
		return err
	}
	return s.note(ctx, id, actor, "NOTE", note)
}

func (s *Service) note(ctx context.Context, id uuid.UUID, actor, action, note string) error {
	return db.Transact(ctx, s.pool, func(tx pgx.Tx) error { return event(ctx, tx, id, actor, action, "", "", note) })
}

// ResolveManually closes an exception with one of its kind's resolution
// codes (CodesFor) and a note, once the evidence the code needs holds (a
// refund recorded, a ticket, or the gateway's answer asked now through
// pay). Never while a write-off is proposed: that is decided by its
// second person, or withdrawn first.
func (s *Service) ResolveManually(ctx context.Context, id uuid.UUID, actor, code, note string, pay Payments) error {
	if err := checkActor(actor); err != nil {
		return err
	}
	if !codeRE.MatchString(code) {
		return booking.Errorf(booking.EINVALID, "BAD_CODE", "Choose a resolution code.")
	}
	if err := checkNote(note, true); err != nil {
		return err
	}
	return s.change(ctx, id, func(tx pgx.Tx, e Exception) error {
		if e.WriteOffBy != "" {
			return booking.Errorf(booking.ECONFLICT, "WRITE_OFF_PROPOSED", "%s proposed writing it off: a second person approves or refuses that first.", e.WriteOffBy)
		}
		evidence, err := checkResolution(ctx, tx, e, code, pay)
		if err != nil {
			return err
		}
		if evidence != "" {
			note += " (" + evidence + ")"
		}
		return s.closeTx(ctx, tx, id, actor, StateResolved, code, note)
	})
}

// closeTx moves a locked, unresolved exception to state.
func (s *Service) closeTx(ctx context.Context, tx pgx.Tx, id uuid.UUID, actor, state, code, note string) error {
	var from string
	if err := tx.QueryRow(ctx, `SELECT state FROM reconciliation_exceptions WHERE id = $1`, id).Scan(&from); err != nil {
		return fmt.Errorf("exception %s: %w", id, err)
	}
	final := state == StateResolved || state == StateWrittenOff
	if _, err := tx.Exec(ctx, `UPDATE reconciliation_exceptions SET state = $2, resolution = CASE WHEN $5 THEN $3 ELSE resolution END,
		resolved_at = CASE WHEN $5 THEN $6::timestamptz END, resolved_by = CASE WHEN $5 THEN $4 ELSE '' END WHERE id = $1`,
		id, state, code, actor, final, s.cfg.Now()); err != nil {
		return fmt.Errorf("close %s: %w", id, err)
	}
	action := state
	if code != "" {
		action += " " + code
	}
	return event(ctx, tx, id, actor, strings.ReplaceAll(action, " ", ":"), from, state, note)
}

// ProposeWriteOff asks to write an exception off; a second person approves.
func (s *Service) ProposeWriteOff(ctx context.Context, id uuid.UUID, actor, note string) error {
	if err := checkActor(actor); err != nil {
		return err
	}
	if err := checkNote(note, true); err != nil {
		return err
	}
	return s.change(ctx, id, func(tx pgx.Tx, e Exception) error {
		if e.WriteOffBy != "" {
			return booking.Errorf(booking.ECONFLICT, "ALREADY_PROPOSED", "%s already proposed writing it off.", e.WriteOffBy)
		}
		if _, err := tx.Exec(ctx, `UPDATE reconciliation_exceptions SET writeoff_by = $2 WHERE id = $1`, id, actor); err != nil {
			return fmt.Errorf("propose write-off %s: %w", id, err)
		}
		return event(ctx, tx, id, actor, "WRITE_OFF_PROPOSED", e.State, e.State, withStake(note, e))
	})
}

// withStake adds to a write-off's note what it writes off, and the gross
// amount it is part of, for the history and the audit log.
func withStake(note string, e Exception) string {
	amount := india.Rupees(e.StakePaise)
	if e.StakePaise != abs(e.AmountPaise) {
		amount += " of " + india.Rupees(abs(e.AmountPaise))
	}
	return strings.TrimSpace(note + " (writes off " + amount + ")")
}

// WithdrawWriteOff takes a write-off proposal back: its proposer withdraws
// it or a second person refuses it. The exception stays open.
func (s *Service) WithdrawWriteOff(ctx context.Context, id uuid.UUID, actor, note string) error {
	if err := checkActor(actor); err != nil {
		return err
	}
	if err := checkNote(note, false); err != nil {
		return err
	}
	return s.change(ctx, id, func(tx pgx.Tx, e Exception) error {
		if e.WriteOffBy == "" {
			return booking.Errorf(booking.ECONFLICT, "NOT_PROPOSED", "Nobody proposed writing it off.")
		}
		if _, err := tx.Exec(ctx, `UPDATE reconciliation_exceptions SET writeoff_by = '' WHERE id = $1`, id); err != nil {
			return fmt.Errorf("withdraw write-off %s: %w", id, err)
		}
		return event(ctx, tx, id, actor, "WRITE_OFF_WITHDRAWN", e.State, e.State, note)
	})
}

// ApproveWriteOff writes an exception off: a second person, never the proposer.
func (s *Service) ApproveWriteOff(ctx context.Context, id uuid.UUID, approver, note string) error {
	if err := checkActor(approver); err != nil {
		return err
	}
	if err := checkNote(note, false); err != nil {
		return err
	}
	return s.change(ctx, id, func(tx pgx.Tx, e Exception) error {
		switch {
		case e.WriteOffBy == "":
			return booking.Errorf(booking.ECONFLICT, "NOT_PROPOSED", "Nobody proposed writing it off.")
		case e.WriteOffBy == approver:
			return booking.Errorf(booking.EFORBIDDEN, "SAME_PERSON", "A write-off needs a second person; %s proposed it.", approver)
		}
		// What is written off is the stake, not the gross amount: a ₹5
		// short payout writes off ₹5.
		if _, err := tx.Exec(ctx, `UPDATE reconciliation_exceptions SET approved_by = $2, written_off_paise = stake_paise WHERE id = $1`,
			id, approver); err != nil {
			return fmt.Errorf("approve write-off %s: %w", id, err)
		}
		return s.closeTx(ctx, tx, id, approver, StateWrittenOff, "WRITTEN_OFF", withStake(note, e))
	})
}

// ApproveAutomatic lets an automatic money move above the limit go ahead:
// its job is enqueued with the approval. Whoever uploaded a line behind
// the exception, or ran a reconciliation that found it, is not the second
// person: they may not approve it.
func (s *Service) ApproveAutomatic(ctx context.Context, id uuid.UUID, approver string, jobs booking.JobInserter) error {
	if err := checkActor(approver); err != nil {
		return err
	}
	return s.change(ctx, id, func(tx pgx.Tx, e Exception) error {
		switch {
		case !e.NeedsApproval:
			return booking.Errorf(booking.ECONFLICT, "NO_APPROVAL_NEEDED", "Exception %s needs no approval.", id)
		case e.ApprovedBy != "":
			return booking.Errorf(booking.ECONFLICT, "ALREADY_APPROVED", "%s approved it already.", e.ApprovedBy)
		}
		behind, err := peopleBehind(ctx, tx, e)
		if err != nil {
			return err
		}
		if slices.Contains(behind, approver) {
			return booking.Errorf(booking.EFORBIDDEN, "SAME_PERSON", "%s uploaded a file behind it or ran the reconciliation that found it: a second person approves.", approver)
		}
		if _, err := tx.Exec(ctx, `UPDATE reconciliation_exceptions SET approved_by = $2 WHERE id = $1`, id, approver); err != nil {
			return fmt.Errorf("approve %s: %w", id, err)
		}
		if _, err := jobs.InsertTx(ctx, tx, ResolveArgs{ExceptionID: id}, nil); err != nil {
			return fmt.Errorf("approve %s: enqueue: %w", id, err)
		}
		return event(ctx, tx, id, approver, "APPROVED", e.State, e.State, "automatic resolution approved")
	})
}

// Escalate marks the unresolved exceptions past their SLA as escalated (to
// the finance lead and the console's home page) and returns how many were
// newly escalated. Run by a periodic job. Console users have no phone or
// e-mail: each active finance user gets one console message per
// escalation (the exceptions newly past their SLA together), in the same
// statement, so a rerun that escalates nothing new sends nothing.
func (s *Service) Escalate(ctx context.Context) (int, error) {
	var n int
	now := s.cfg.Now()
	err := s.pool.QueryRow(ctx, `WITH e AS (
			UPDATE reconciliation_exceptions SET escalated_at = $1
			WHERE state IN ('OPEN', 'INVESTIGATING') AND due_at < $1 AND escalated_at IS NULL
			RETURNING id, state, kind, stake_paise AS paise)
		, ev AS (INSERT INTO reconciliation_exception_events (exception_id, actor, action, from_state, to_state, note)
			SELECT id, 'job:recon_escalate', 'ESCALATED', state, state, 'past its SLA: raised to the finance lead' FROM e)
		, tot AS (SELECT count(*) AS n, coalesce(sum(paise), 0)::bigint AS paise,
				string_agg(DISTINCT kind, ', ' ORDER BY kind) AS kinds FROM e)
		, msg AS (INSERT INTO console_messages (user_id, kind, ref, body, link)
			SELECT u.id, $2, $3, format('%s reconciliation exception(s) passed their SLA (%s), ₹%s at stake.',
				tot.n, tot.kinds, to_char(tot.paise / 100.0, 'FM9999999999990.00')), $4
			FROM console_users u, tot WHERE tot.n > 0 AND u.role = 'finance' AND NOT u.disabled
			  AND (u.finance_lead OR NOT EXISTS (SELECT 1 FROM console_users l WHERE l.role = 'finance' AND l.finance_lead AND NOT l.disabled))
			ON CONFLICT (user_id, kind, ref) DO NOTHING)
		SELECT n FROM tot`, now, MessageEscalated, now.UTC().Format(time.RFC3339Nano), OverdueLink).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("escalate: %w", err)
	}
	return n, nil
}

// MessageEscalated is the kind of the console message Escalate sends.
const MessageEscalated = "RECON_ESCALATED"

// OverdueLink is the finance console's list of the overdue exceptions.
const OverdueLink = "/console/finance/exceptions?overdue=1&state=UNRESOLVED"

// Message is a console message to one console user.
type Message struct {
	ID                    int64
	Kind, Ref, Body, Link string
	At                    time.Time
	Read                  bool
}

// Messages are a console user's newest messages, newest first.
func (s *Service) Messages(ctx context.Context, userID int64, limit int) ([]Message, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, kind, ref, body, link, created_at, read_at IS NOT NULL FROM console_messages
		WHERE user_id = $1 ORDER BY id DESC LIMIT $2`, userID, limit)
	if err != nil {
		return nil, fmt.Errorf("console messages: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Message, error) {
		var m Message
		return m, r.Scan(&m.ID, &m.Kind, &m.Ref, &m.Body, &m.Link, &m.At, &m.Read)
	})
	if err != nil {
		return nil, fmt.Errorf("console messages: %w", err)
	}
	return out, nil
}

// UnreadMessages counts a console user's unread messages.
func (s *Service) UnreadMessages(ctx context.Context, userID int64) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM console_messages WHERE user_id = $1 AND read_at IS NULL`, userID).Scan(&n); err != nil {
		return 0, fmt.Errorf("unread console messages: %w", err)
	}
	return n, nil
}

// MarkMessagesRead marks a console user's messages read, up to and
// including upTo (the newest the user saw, so a message that arrived since
// stays unread), and says how many it marked.
func (s *Service) MarkMessagesRead(ctx context.Context, userID, upTo int64) (int, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE console_messages SET read_at = now() WHERE user_id = $1 AND id <= $2 AND read_at IS NULL`, userID, upTo)
	if err != nil {
		return 0, fmt.Errorf("mark console messages read: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// Overdue sums the unresolved exceptions past their SLA and finds the
// oldest of them (ok false when there is none).
type Overdue struct {
	Count  int
	Paise  int64
	Oldest Exception
}

// Overdue reads the unresolved exceptions past their SLA.
func (s *Service) Overdue(ctx context.Context) (Overdue, bool, error) {
	var o Overdue
	f := Filter{State: "UNRESOLVED", Overdue: true, Limit: 1}
	n, paise, err := s.CountExceptions(ctx, f)
	if err != nil || n == 0 {
		return o, false, err
	}
	rows, err := s.Exceptions(ctx, f)
	if err != nil {
		return o, false, err
	}
	o.Count, o.Paise = n, paise
	if len(rows) > 0 {
		o.Oldest = rows[0]
	}
	return o, true, nil
}

// EscalateArgs runs Escalate; a periodic job.
type EscalateArgs struct{}

func (EscalateArgs) Kind() string { return "recon_escalate" }
func (EscalateArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: booking.QueueMoney, MaxAttempts: 3}
}
