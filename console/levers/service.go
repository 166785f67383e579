package levers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"tatkal/booking"
	"tatkal/booking/audit"
	"tatkal/booking/db"
)

// Actor is the person who asks for a change: a console user, signed in
// or acting through one of their personal API tokens.
type Actor struct {
	UserID int64  // console_users.id; 0 is nobody and may change nothing
	Login  string // for display and the audit log; the id decides
	Role   string // ops, finance, fraud, admin
	// IssuerID is the admin who created the API token in use, when that is
	// someone other than the user: they have seen the token, so for
	// two-person approval they count as acting too.
	IssuerID int64
	Via      string // "console" or "api-token N", for the audit log
}

// people are the users who may be behind a's action.
func (a Actor) people() []int64 {
	if a.IssuerID != 0 && a.IssuerID != a.UserID {
		return []int64{a.UserID, a.IssuerID}
	}
	return []int64{a.UserID}
}

func nullID(id int64) *int64 {
	if id == 0 {
		return nil
	}
	return &id
}

func (a Actor) issuer() *int64 {
	if a.IssuerID == a.UserID {
		return nil
	}
	return nullID(a.IssuerID)
}

var errNobody = booking.Errorf(booking.EFORBIDDEN, "NO_PERSON", "Lever changes are made by a console user, signed in or with their own API token.")

// person checks that a is an active console user and takes their role
// from the database, so no caller can act as nobody or claim a role.
func (s *Service) person(ctx context.Context, a Actor) (Actor, error) {
	if a.UserID == 0 {
		return a, errNobody
	}
	err := s.pool.QueryRow(ctx, `SELECT login, role FROM console_users WHERE id = $1 AND NOT disabled`, a.UserID).Scan(&a.Login, &a.Role)
	if errors.Is(err, pgx.ErrNoRows) {
		return a, errNobody
	}
	if err != nil {
		return a, fmt.Errorf("console user %d: %w", a.UserID, err)
	}
	return a, nil
}

// CanPropose reports whether a role may propose lever changes.
func CanPropose(role string) bool { return role == "ops" || role == "admin" }

// RouteSetter is the payment orchestrator's route control (payment.Service).
type RouteSetter interface {
	SetRouteWeight(ctx context.Context, gw, method string, weight int, enabled bool) error
}

// Service proposes, approves, applies and reverts lever changes.
type Service struct {
	pool   *pgxpool.Pool
	routes RouteSetter
	jobs   booking.JobInserter
	log    *slog.Logger
}

// NewService returns the lever service. routes may be nil (route changes
// are then written to payment_routes and picked up by each process's
// one-second reload alone). jobs schedules automatic reverts (RevertArgs)
// in the transaction that applies a change.
func NewService(pool *pgxpool.Pool, routes RouteSetter, jobs booking.JobInserter, log *slog.Logger) *Service {
	if log == nil {
		log = slog.Default()
	}
	return &Service{pool: pool, routes: routes, jobs: jobs, log: log}
}

// RevertArgs puts back the old value of one applied change at its revert
// time: inserted, scheduled for that time, in the transaction that applies
// the change, and unique per change.
type RevertArgs struct {
	ChangeID int64 `json:"change_id"`
}

func (RevertArgs) Kind() string { return "lever_revert" }
func (RevertArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{MaxAttempts: 50, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// revertActor is who the audit log says reverted a change: the system, on
// behalf of the person whose change it was (named in the record).
const revertActor = "system:lever-revert"

// Change is one proposed change and what became of it.
type Change struct {
	ID          int64
	Name        string
	Scope       string
	Old, New    string
	Reason      string
	Dangerous   bool
	State       string
	ProposedBy  string
	ProposedAt  time.Time
	ApprovedBy  string
	ApprovedAt  *time.Time
	AppliedAt   *time.Time
	RevertAfter time.Duration
	RevertAt    *time.Time
	RevertedAt  *time.Time

	proposedByID, proposerIssuerID int64 // who decides two-person approval
}

// Current returns the value in force of a lever and whether it is the default.
func (s *Service) Current(ctx context.Context, name, scope string) (string, bool, error) {
	return current(ctx, s.pool, name, scope)
}

func current(ctx context.Context, q db.Querier, name, scope string) (string, bool, error) {
	switch name {
	case Route:
		gw, method, _ := strings.Cut(scope, "/")
		var w int
		var en bool
		err := q.QueryRow(ctx, `SELECT weight, enabled FROM payment_routes WHERE gateway = $1 AND method = $2`, gw, method).Scan(&w, &en)
		if err != nil {
			return "", false, fmt.Errorf("route %s: %w", scope, err)
		}
		return formatRoute(w, en), false, nil
	case WindowClosesAt:
		id, err := shardScope(scope, false)
		if err != nil {
			return "", false, err
		}
		var t time.Time
		if err := q.QueryRow(ctx, `SELECT window_closes_at FROM inventory_shards WHERE id = $1`, id).Scan(&t); err != nil {
			return "", false, fmt.Errorf("shard %d window: %w", id, err)
		}
		return t.UTC().Format(time.RFC3339), false, nil
	case ShardMode:
		id, err := shardScope(scope, false)
		if err != nil {
			return "", false, err
		}
		var mode string
		if err := q.QueryRow(ctx, `SELECT mode FROM inventory_shards WHERE id = $1`, id).Scan(&mode); err != nil {
			return "", false, fmt.Errorf("shard %d mode: %w", id, err)
		}
		return mode, false, nil
	}
	var v string
	err := q.QueryRow(ctx, `SELECT value FROM console_levers WHERE name = $1 AND scope = $2`, name, scope).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return defaultValue(name, scope), true, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("lever %s %s: %w", name, scope, err)
	}
	return v, false, nil
}

// Preview validates a proposal and says what it would do.
func (s *Service) Preview(ctx context.Context, p Proposal) (Preview, error) {
	return s.preview(ctx, s.pool, p)
}

func (s *Service) preview(ctx context.Context, q db.Querier, p Proposal) (Preview, error) {
	p.Name, p.Scope = strings.TrimSpace(p.Name), strings.TrimSpace(p.Scope)
	v, err := normalize(ctx, q, p)
	if err != nil {
		return Preview{}, err
	}
	if p.RevertAfter < 0 || p.RevertAfter > 24*time.Hour {
		return Preview{}, invalid("Automatic revert is between 0 (never) and 24 hours.")
	}
	old, isDef, err := current(ctx, q, p.Name, p.Scope)
	if err != nil {
		return Preview{}, err
	}
	pv := Preview{Name: p.Name, Scope: p.Scope, Old: old, New: v, OldIsDefault: isDef, ConfirmWord: ConfirmWord(p.Name, p.Scope), RevertAfter: p.RevertAfter}
	pv.Dangerous, pv.DangerousWhy, err = s.dangerous(ctx, q, p.Name, p.Scope, old, v)
	if err != nil {
		return Preview{}, err
	}
	pv.NeedsApproval = pv.Dangerous
	pv.Effect = effect(p.Name, p.Scope, old, v)
	if p.RevertAfter > 0 {
		pv.Effect += fmt.Sprintf(" It reverts to %s automatically %s after it takes effect.", display(old), p.RevertAfter)
	}
	return pv, nil
}

func display(v string) string {
	if v == "" {
		return "the default"
	}
	return v
}

func effect(name, scope, old, v string) string {
	switch name {
	case KillSwitch:
		if v == "on" {
			return fmt.Sprintf("%s is switched off on every process within a second.", scope)
		}
		return fmt.Sprintf("%s is switched back on on every process within a second.", scope)
	case HoldWindow:
		return fmt.Sprintf("Holds paid by %s stay held %s s from the hold (was %s).", scope, v, display(old))
	case AdmissionPaused:
		if v == "on" {
			return fmt.Sprintf("The waiting room stops admitting to %s.", scope)
		}
		return fmt.Sprintf("The waiting room resumes admitting to %s.", scope)
	case AdmissionRate:
		return fmt.Sprintf("Admission to %s runs at %s (was %s).", scope, v, display(old))
	case ShardThrottle:
		if v == "off" {
			return fmt.Sprintf("Holds and payments on %s are no longer paced (was %s); a global throttle still applies to a shard.", scope, display(old))
		}
		return fmt.Sprintf("At most %s hold calls a second, and %s payment initiations, reach the booking core for %s (was %s); the rest are told to retry in a second.",
			v, v, throttleWhere(scope), display(old))
	case ShardFrozen:
		if v == "on" {
			return fmt.Sprintf("%s is frozen within a second: its new holds and payment starts are refused with a clear reason and no one is admitted to it; "+
				"payments already made still end in a ticket or a refund.", scope)
		}
		return fmt.Sprintf("%s sells again within a second.", scope)
	case Route:
		return fmt.Sprintf("Route %s goes from %s to %s; every process routes by it within a second.", scope, old, v)
	case WindowClosesAt:
		t, _ := time.Parse(time.RFC3339, v)
		o, _ := time.Parse(time.RFC3339, old)
		verb := "extends"
		if t.Before(o) {
			verb = "holds (closes early)"
		}
		return fmt.Sprintf("This %s the window of %s: it closes at %s instead of %s.", verb, scope,
			t.In(booking.IST).Format("02 Jan 15:04:05 IST"), o.In(booking.IST).Format("02 Jan 15:04:05 IST"))
	case Rule:
		return ruleEffect(scope, old, v)
	}
	return degradeEffect(name, scope, old, v)
}

// dangerous says whether a change needs a second admin, and why.
func (s *Service) dangerous(ctx context.Context, q db.Querier, name, scope, old, v string) (bool, string, error) {
	switch name {
	case WindowClosesAt:
		return true, "changing when a Tatkal window closes", nil
	case Rule:
		loose, why := ruleLoosens(scope, old, v)
		return loose, why, nil
	case AdmissionRate:
		if n, err := parseInt(v); err == nil && n > AdmissionCeiling {
			return true, fmt.Sprintf("admission above the ceiling of %d per second", AdmissionCeiling), nil
		}
	case ShardThrottle:
		if n, err := parseInt(v); err == nil && n > ThrottleCeiling {
			return true, fmt.Sprintf("a throttle above the ceiling of %d per second", ThrottleCeiling), nil
		}
	case ShardFrozen:
		if v != "off" {
			return false, "", nil
		}
		var open bool
		if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM alarms WHERE kind = $1 AND scope = $2 AND resolved_at IS NULL)`,
			SeatAlarm, scope).Scan(&open); err != nil {
			return false, "", fmt.Errorf("open seat alarm: %w", err)
		}
		if open {
			return true, "the shard's seats still fail the invariant check (its alarm is open): selling may sell a berth twice", nil
		}
	case Route:
		w, en, _ := parseRoute(v)
		if en && w > 0 {
			return false, "", nil
		}
		gw, method, _ := strings.Cut(scope, "/")
		var others int
		if err := q.QueryRow(ctx, `SELECT count(*) FROM payment_routes WHERE method = $1 AND gateway <> $2 AND enabled AND weight > 0`,
			method, gw).Scan(&others); err != nil {
			return false, "", fmt.Errorf("other routes: %w", err)
		}
		if others == 0 {
			return true, "it disables the last payment route for " + method, nil
		}
	}
	return false, "", nil
}

// throttleWhere says which shards a throttle's scope paces.
func throttleWhere(scope string) string {
	if scope == "global" {
		return "each shard without its own throttle"
	}
	return scope
}

func parseInt(v string) (int64, error) {
	var n int64
	_, err := fmt.Sscan(v, &n)
	return n, err
}

// Propose records a change. A safe change is applied at once; a dangerous
// one waits for a second admin. The confirmation must be typed exactly.
func (s *Service) Propose(ctx context.Context, a Actor, p Proposal) (Change, error) {
	a, err := s.person(ctx, a)
	if err != nil {
		return Change{}, err
	}
	if !CanPropose(a.Role) {
		return Change{}, booking.Errorf(booking.EFORBIDDEN, "ROLE", "Only ops and admin may change levers.")
	}
	if n := len(strings.TrimSpace(p.Reason)); n < 3 || n > 500 {
		return Change{}, invalid("Give a reason (3 to 500 characters); it goes in the audit log.")
	}
	var ch Change
	err = db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		pv, err := s.preview(ctx, tx, p)
		if err != nil {
			return err
		}
		if strings.TrimSpace(p.Confirm) != pv.ConfirmWord {
			return invalid("Type %q to confirm.", pv.ConfirmWord)
		}
		if pv.Old == pv.New {
			return invalid("%s %s is already %s.", pv.Name, pv.Scope, display(pv.New))
		}
		var revert *time.Duration
		if p.RevertAfter > 0 {
			revert = &p.RevertAfter
		}
		err = tx.QueryRow(ctx, `INSERT INTO lever_changes (name, scope, old_value, new_value, reason, dangerous, state, proposed_by,
			revert_after, proposed_by_id, proposed_by_issuer_id)
			VALUES ($1, $2, $3, $4, $5, $6, 'PENDING', $7, $8, $9, $10) RETURNING id`,
			pv.Name, pv.Scope, pv.Old, pv.New, strings.TrimSpace(p.Reason), pv.Dangerous, a.Login, revert, a.UserID, a.issuer()).Scan(&ch.ID)
		if err != nil {
			return fmt.Errorf("insert lever change: %w", err)
		}
		if err := audit.Write(ctx, tx, a.Login, "lever.propose", pv.Name+" "+pv.Scope, map[string]any{
			"change_id": ch.ID, "lever": pv.Name, "scope": pv.Scope, "old": pv.Old, "new": pv.New, "reason": p.Reason,
			"dangerous": pv.Dangerous, "why": pv.DangerousWhy, "revert_after": p.RevertAfter.String(), "via": a.Via}); err != nil {
			return err
		}
		if !pv.Dangerous {
			return s.applyTx(ctx, tx, ch.ID, a.Login, Actor{})
		}
		return nil
	})
	if err != nil {
		return Change{}, err
	}
	ch, err = s.Get(ctx, ch.ID)
	if err == nil && ch.State == "APPLIED" {
		s.afterApply(ctx, ch.Name, ch.Scope, ch.New)
	}
	return ch, err
}

// Approve applies a pending dangerous change. The approver must be an admin
// and a different person from the proposer, by user id, whichever way each
// came (console or API token); the admin who issued either one's token
// counts as that person too.
func (s *Service) Approve(ctx context.Context, a Actor, id int64) (Change, error) {
	a, err := s.person(ctx, a)
	if err != nil {
		return Change{}, err
	}
	if a.Role != "admin" {
		return Change{}, booking.Errorf(booking.EFORBIDDEN, "ROLE", "Only an admin may approve a change.")
	}
	err = db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		ch, err := lockChange(ctx, tx, id)
		if err != nil {
			return err
		}
		if ch.State != "PENDING" {
			return booking.Errorf(booking.ECONFLICT, "NOT_PENDING", "Change %d is %s, not waiting for approval.", id, ch.State)
		}
		if ch.proposedByID == 0 {
			return booking.Errorf(booking.EFORBIDDEN, "NO_PROPOSER",
				"Change %d was proposed by no console user (the retired shared admin token): reject it and propose it again.", id)
		}
		for _, p := range a.people() {
			if p == ch.proposedByID || p == ch.proposerIssuerID {
				return booking.Errorf(booking.EFORBIDDEN, "SAME_PERSON",
					"A second admin must approve change %d: it was proposed by you, or through an API token you hold.", id)
			}
		}
		return s.applyTx(ctx, tx, id, a.Login, a)
	})
	if err != nil {
		return Change{}, err
	}
	ch, err := s.Get(ctx, id)
	if err == nil && ch.State == "APPLIED" {
		s.afterApply(ctx, ch.Name, ch.Scope, ch.New)
	}
	return ch, err
}

// Reject turns down a pending change (an admin, or its proposer withdrawing it).
func (s *Service) Reject(ctx context.Context, a Actor, id int64, reason string) (Change, error) {
	a, err := s.person(ctx, a)
	if err != nil {
		return Change{}, err
	}
	err = db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		ch, err := lockChange(ctx, tx, id)
		if err != nil {
			return err
		}
		if a.Role != "admin" && a.UserID != ch.proposedByID {
			return booking.Errorf(booking.EFORBIDDEN, "ROLE", "Only an admin or the proposer may reject change %d.", id)
		}
		if ch.State != "PENDING" {
			return booking.Errorf(booking.ECONFLICT, "NOT_PENDING", "Change %d is %s, not waiting for approval.", id, ch.State)
		}
		if _, err := tx.Exec(ctx, `UPDATE lever_changes SET state = 'REJECTED' WHERE id = $1`, id); err != nil {
			return fmt.Errorf("reject change: %w", err)
		}
		return audit.Write(ctx, tx, a.Login, "lever.reject", ch.Name+" "+ch.Scope, map[string]any{"change_id": id, "reason": reason,
			"old": ch.Old, "new": ch.New, "proposed_by": ch.ProposedBy, "via": a.Via})
	})
	if err != nil {
		return Change{}, err
	}
	return s.Get(ctx, id)
}

// applyTx puts change id in force, in tx, and audits it. approver is the
// zero Actor for a change applied without approval.
func (s *Service) applyTx(ctx context.Context, tx pgx.Tx, id int64, actor string, approver Actor) error {
	ch, err := lockChange(ctx, tx, id)
	if err != nil {
		return err
	}
	cur, _, err := current(ctx, tx, ch.Name, ch.Scope)
	if err != nil {
		return err
	}
	if cur != ch.Old {
		if _, err := tx.Exec(ctx, `UPDATE lever_changes SET state = 'SUPERSEDED' WHERE id = $1`, id); err != nil {
			return err
		}
		if err := audit.Write(ctx, tx, actor, "lever.superseded", ch.Name+" "+ch.Scope, map[string]any{"change_id": id, "old": ch.Old, "now": cur}); err != nil {
			return err
		}
		return nil
	}
	if err := write(ctx, tx, ch.Name, ch.Scope, ch.New, actor, id); err != nil {
		return err
	}
	// An earlier change's automatic revert would undo this one: cancel it.
	if _, err := tx.Exec(ctx, `UPDATE lever_changes SET revert_at = NULL WHERE name = $1 AND scope = $2 AND state = 'APPLIED' AND id <> $3`,
		ch.Name, ch.Scope, id); err != nil {
		return fmt.Errorf("cancel earlier reverts: %w", err)
	}
	var approvedBy *string
	if approver.UserID != 0 {
		approvedBy = &approver.Login
	}
	var revertAt *time.Time
	if err := tx.QueryRow(ctx, `UPDATE lever_changes SET state = 'APPLIED', applied_at = now(), approved_by = $2,
		approved_at = CASE WHEN $2::text IS NULL THEN NULL ELSE now() END, revert_at = now() + revert_after,
		approved_by_id = $3, approved_by_issuer_id = $4
		WHERE id = $1 RETURNING revert_at`, id, approvedBy, nullID(approver.UserID), approver.issuer()).Scan(&revertAt); err != nil {
		return fmt.Errorf("mark change applied: %w", err)
	}
	detail := map[string]any{"change_id": id, "lever": ch.Name, "scope": ch.Scope, "old": ch.Old, "new": ch.New,
		"reason": ch.Reason, "proposed_by": ch.ProposedBy, "approver": approver.Login}
	if approver.Via != "" {
		detail["approved_via"] = approver.Via
	}
	if revertAt != nil {
		detail["revert_at"] = revertAt.UTC().Format(time.RFC3339)
		if s.jobs == nil {
			return errors.New("levers: no job client to schedule the automatic revert")
		}
		if _, err := s.jobs.InsertTx(ctx, tx, RevertArgs{ChangeID: id}, &river.InsertOpts{ScheduledAt: *revertAt}); err != nil {
			return fmt.Errorf("schedule the revert of change %d: %w", id, err)
		}
	}
	return audit.Write(ctx, tx, ch.ProposedBy, "lever.change", ch.Name+" "+ch.Scope, detail)
}

// write stores a lever's value where it lives.
func write(ctx context.Context, tx pgx.Tx, name, scope, v, actor string, changeID int64) error {
	switch name {
	case Route:
		gw, method, _ := strings.Cut(scope, "/")
		w, en, err := parseRoute(v)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE payment_routes SET weight = $3, enabled = $4, updated_at = now() WHERE gateway = $1 AND method = $2`,
			gw, method, w, en); err != nil {
			return fmt.Errorf("set route %s: %w", scope, err)
		}
		return nil
	case WindowClosesAt:
		id, _ := shardScope(scope, false)
		if _, err := tx.Exec(ctx, `UPDATE inventory_shards SET window_closes_at = $2 WHERE id = $1`, id, v); err != nil {
			return fmt.Errorf("set window of shard %d: %w", id, err)
		}
		// Also a lever row, so every process's reader sees the new
		// window within a second, ahead of its shard catalog cache.
	case ShardMode:
		id, _ := shardScope(scope, false)
		if _, err := tx.Exec(ctx, `UPDATE inventory_shards SET mode = $2 WHERE id = $1`, id, v); err != nil {
			return fmt.Errorf("set mode of shard %d: %w", id, err)
		}
		// A lever row too, for the readers, as for the window.
	}
	var lo, hi *int64
	if d, ok := DefOf(name); ok {
		lo, hi = d.Min, d.Max
	}
	_, err := tx.Exec(ctx, `INSERT INTO console_levers (name, scope, value, min_value, max_value, change_id, updated_by)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (name, scope) DO UPDATE SET value = $3, min_value = $4, max_value = $5, change_id = $6, updated_by = $7, updated_at = now()`,
		name, scope, v, lo, hi, changeID, actor)
	if err != nil {
		return fmt.Errorf("set lever %s %s: %w", name, scope, err)
	}
	return nil
}

// afterApply nudges this process's caches; other processes reload on their own.
func (s *Service) afterApply(ctx context.Context, name, scope, v string) {
	if name == Route && s.routes != nil {
		gw, method, _ := strings.Cut(scope, "/")
		if w, en, err := parseRoute(v); err == nil {
			if err := s.routes.SetRouteWeight(ctx, gw, method, w, en); err != nil {
				s.log.Warn("refresh route cache", "route", scope, "err", err)
			}
		}
	}
}

// Revert puts back the old value of change id if it is still applied and
// its revert time has come (the RevertArgs job). Run twice, or after a
// later change of the same lever cancelled the revert, it does nothing; run
// early, it returns how long to wait.
func (s *Service) Revert(ctx context.Context, id int64) (time.Duration, error) {
	var wait time.Duration
	err := db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		wait = 0
		ch, err := lockChange(ctx, tx, id)
		if booking.ErrorCode(err) == booking.ENOTFOUND {
			s.log.Warn("lever revert: no such change", "change_id", id)
			return nil
		}
		if err != nil {
			return err
		}
		if ch.State != "APPLIED" || ch.RevertAt == nil {
			return nil // reverted already, or a later change of the lever cancelled the revert
		}
		var now time.Time
		if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
			return fmt.Errorf("now: %w", err)
		}
		if ch.RevertAt.After(now) {
			wait = ch.RevertAt.Sub(now)
			return nil
		}
		cur, _, err := current(ctx, tx, ch.Name, ch.Scope)
		if err != nil {
			return err
		}
		detail := map[string]any{"change_id": id, "lever": ch.Name, "scope": ch.Scope, "old": cur, "new": ch.Old,
			"reason": "automatic revert after " + ch.RevertAfter.String(), "on_behalf_of": ch.ProposedBy}
		if ch.ApprovedBy != "" {
			detail["approved_by"] = ch.ApprovedBy
		}
		if cur == ch.New {
			if err := write(ctx, tx, ch.Name, ch.Scope, ch.Old, revertActor, id); err != nil {
				return err
			}
		} else {
			detail["skipped"] = "the value changed since; left as it is"
			detail["new"] = cur
		}
		if _, err := tx.Exec(ctx, `UPDATE lever_changes SET state = 'REVERTED', reverted_at = now() WHERE id = $1`, id); err != nil {
			return fmt.Errorf("mark reverted: %w", err)
		}
		return audit.Write(ctx, tx, revertActor, "lever.revert", ch.Name+" "+ch.Scope, detail)
	})
	if err != nil {
		return 0, err
	}
	if wait == 0 {
		s.afterRevert(ctx, id)
	}
	return wait, nil
}

// afterRevert nudges this process's route cache after a reverted route.
func (s *Service) afterRevert(ctx context.Context, id int64) {
	ch, err := s.Get(ctx, id)
	if err == nil && ch.State == "REVERTED" && ch.Name == Route {
		s.afterApply(ctx, ch.Name, ch.Scope, ch.Old)
	}
}

const changeCols = `id, name, scope, old_value, new_value, reason, dangerous, state, proposed_by, proposed_at,
	coalesce(approved_by, ''), approved_at, applied_at, coalesce(extract(epoch FROM revert_after), 0)::float8, revert_at, reverted_at,
	coalesce(proposed_by_id, 0), coalesce(proposed_by_issuer_id, 0)`

func scanChange(row pgx.Row) (Change, error) {
	var c Change
	var secs float64
	err := row.Scan(&c.ID, &c.Name, &c.Scope, &c.Old, &c.New, &c.Reason, &c.Dangerous, &c.State, &c.ProposedBy, &c.ProposedAt,
		&c.ApprovedBy, &c.ApprovedAt, &c.AppliedAt, &secs, &c.RevertAt, &c.RevertedAt, &c.proposedByID, &c.proposerIssuerID)
	c.RevertAfter = time.Duration(secs * float64(time.Second))
	return c, err
}

func lockChange(ctx context.Context, tx pgx.Tx, id int64) (Change, error) {
	c, err := scanChange(tx.QueryRow(ctx, `SELECT `+changeCols+` FROM lever_changes WHERE id = $1 FOR UPDATE`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return c, booking.Errorf(booking.ENOTFOUND, "NO_SUCH_CHANGE", "No lever change %d.", id)
	}
	if err != nil {
		return c, fmt.Errorf("lever change %d: %w", id, err)
	}
	return c, nil
}

// Get returns one change.
func (s *Service) Get(ctx context.Context, id int64) (Change, error) {
	c, err := scanChange(s.pool.QueryRow(ctx, `SELECT `+changeCols+` FROM lever_changes WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return c, booking.Errorf(booking.ENOTFOUND, "NO_SUCH_CHANGE", "No lever change %d.", id)
	}
	if err != nil {
		return c, fmt.Errorf("lever change %d: %w", id, err)
	}
	return c, nil
}

// Changes lists recent changes, pending first.
func (s *Service) Changes(ctx context.Context, limit int) ([]Change, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+changeCols+` FROM lever_changes
		ORDER BY (state = 'PENDING') DESC, id DESC LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("lever changes: %w", err)
	}
	defer rows.Close()
	var out []Change
	for rows.Next() {
		c, err := scanChange(rows)
		if err != nil {
			return nil, fmt.Errorf("lever changes: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// Value is one lever in force.
type Value struct {
	Name, Scope, Value string
	UpdatedBy          string
	UpdatedAt          time.Time
}

// InForce lists the levers set away from their defaults, and the routes.
func (s *Service) InForce(ctx context.Context) ([]Value, error) {
	rows, err := s.pool.Query(ctx, `SELECT name, scope, value, updated_by, updated_at FROM console_levers
		UNION ALL SELECT 'route', gateway || '/' || method, weight::text || CASE WHEN enabled THEN ',on' ELSE ',off' END, '', updated_at FROM payment_routes
		ORDER BY 1, 2`)
	if err != nil {
		return nil, fmt.Errorf("levers in force: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[Value])
}

// SystemPrefix begins the actor of every change the system makes on its
// own authority (system:invariant_check); no console login has a colon.
const SystemPrefix = "system:"

// PullTx freezes a shard on the system's own authority, in the caller's
// transaction (the invariant watch, with the alarm that says why): no
// person and no approval, as it only makes the product refuse more, so
// it is the one change the system may make (p must set shard_frozen on).
// It is recorded as a change proposed and applied by actor, with the
// reason, and audited like a person's; a person thaws the shard through
// the normal flow. changed is false (and id 0) when the shard was frozen
// already.
func (s *Service) PullTx(ctx context.Context, tx pgx.Tx, actor string, p Proposal) (id int64, changed bool, err error) {
	if !strings.HasPrefix(actor, SystemPrefix) {
		return 0, false, booking.Errorf(booking.EFORBIDDEN, "NOT_SYSTEM", "Only the system pulls a lever without a person: %q is not system:NAME.", actor)
	}
	if n := len(strings.TrimSpace(p.Reason)); n < 3 || n > 500 {
		return 0, false, invalid("Give a reason (3 to 500 characters); it goes in the audit log.")
	}
	pv, err := s.preview(ctx, tx, p)
	if err != nil {
		return 0, false, err
	}
	if pv.Name != ShardFrozen || pv.New != "on" {
		return 0, false, booking.Errorf(booking.EFORBIDDEN, "NOT_SYSTEM_LEVER", "The system may only freeze a shard; %s %s = %s takes a person.", pv.Name, pv.Scope, pv.New)
	}
	if pv.Old == pv.New {
		return 0, false, nil
	}
	if err := tx.QueryRow(ctx, `INSERT INTO lever_changes (name, scope, old_value, new_value, reason, dangerous, state, proposed_by)
		VALUES ($1, $2, $3, $4, $5, false, 'PENDING', $6) RETURNING id`,
		pv.Name, pv.Scope, pv.Old, pv.New, strings.TrimSpace(p.Reason), actor).Scan(&id); err != nil {
		return 0, false, fmt.Errorf("insert lever change: %w", err)
	}
	if err := audit.Write(ctx, tx, actor, "lever.propose", pv.Name+" "+pv.Scope, map[string]any{
		"change_id": id, "lever": pv.Name, "scope": pv.Scope, "old": pv.Old, "new": pv.New, "reason": p.Reason, "via": "system"}); err != nil {
		return 0, false, err
	}
	if err := s.applyTx(ctx, tx, id, actor, Actor{}); err != nil {
		return 0, false, err
	}
	return id, true, nil
}
