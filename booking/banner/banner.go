// Package banner keeps the status banners operators write for passengers:
// shown on the passenger site (booking/web) and named in /v1 answers
// (booking/api's Tatkal-Notice header), created and approved on the
// console (console/banners.go).
//
// Rules: every change is a console person's and audited (banner.create,
// banner.approve, banner.withdraw). Info and warning banners show from
// their start time once created; a critical banner waits for a second
// person, who is never its author (the table's CHECK says so too). A
// banner shows only between its start and end, and never longer than
// MaxSpan. What passengers see is read from a copy refreshed every
// Refresh, so a page or an answer costs no query; a failed refresh keeps
// the last copy.
package banner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"tatkal/booking"
	"tatkal/booking/audit"
)

// Severities and scopes.
const (
	Info     = "info"
	Warning  = "warning"
	Critical = "critical"

	Site = "site" // the passenger pages
	API  = "api"  // /v1 answers
	Both = "both"
)

// Refresh is how stale the passengers' copy may be; MaxSpan bounds a
// banner's life so that a forgotten one ends by itself.
const (
	Refresh = 2 * time.Second
	MaxSpan = 7 * 24 * time.Hour
)

// Banner is one status banner.
type Banner struct {
	ID               int64
	Text             string
	Severity, Scope  string
	StartsAt, EndsAt time.Time
	State            string // PENDING, ACTIVE, WITHDRAWN
	CreatedBy        string
	CreatedAt        time.Time
	ApprovedBy       string
	WithdrawnBy      string
	CreatedByID      int64
}

// Actor is the console person acting.
type Actor struct {
	ID    int64
	Login string
}

// Input is a banner as the form gives it.
type Input struct {
	Text             string
	Severity, Scope  string
	StartsAt, EndsAt time.Time
}

// Store reads and changes the banners.
type Store struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	now  func() time.Time

	copy    atomic.Pointer[shown]
	refresh sync.Mutex
}

type shown struct {
	at   time.Time
	live []Banner // ACTIVE and not ended when read
}

// New returns the store.
func New(pool *pgxpool.Pool, log *slog.Logger) *Store {
	if log == nil {
		log = slog.Default()
	}
	return &Store{pool: pool, log: log, now: time.Now}
}

func invalid(reason, format string, args ...any) error {
	return booking.Errorf(booking.EINVALID, reason, format, args...)
}

// Validate checks an input against the rules above.
func (in Input) Validate(now time.Time) error {
	t := strings.TrimSpace(in.Text)
	switch {
	case utf8.RuneCountInString(t) < 3 || utf8.RuneCountInString(t) > 300:
		return invalid("BAD_TEXT", "The banner's text is 3 to 300 characters.")
	case strings.IndexFunc(t, func(r rune) bool { return unicode.IsControl(r) }) >= 0:
		return invalid("BAD_TEXT", "The banner's text is one line of plain text.")
	case in.Severity != Info && in.Severity != Warning && in.Severity != Critical:
		return invalid("BAD_SEVERITY", "Severity is info, warning or critical.")
	case in.Scope != Site && in.Scope != API && in.Scope != Both:
		return invalid("BAD_SCOPE", "Show it on site, api or both.")
	case in.StartsAt.IsZero() || in.EndsAt.IsZero():
		return invalid("BAD_TIME", "Give the start and the end.")
	case !in.EndsAt.After(in.StartsAt):
		return invalid("BAD_TIME", "The end comes after the start.")
	case !in.EndsAt.After(now):
		return invalid("BAD_TIME", "The end is already past.")
	case in.EndsAt.Sub(in.StartsAt) > MaxSpan:
		return invalid("BAD_TIME", "A banner shows for at most %s; write a new one after.", MaxSpan)
	}
	return nil
}

// Create records a banner: shown from its start (info, warning) or
// waiting for a second person (critical).
func (s *Store) Create(ctx context.Context, by Actor, in Input) (Banner, error) {
	in.Text = strings.TrimSpace(in.Text)
	if err := in.Validate(s.now()); err != nil {
		return Banner{}, err
	}
	state := "ACTIVE"
	if in.Severity == Critical {
		state = "PENDING"
	}
	var b Banner
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `INSERT INTO status_banners (text, severity, scope, starts_at, ends_at, state, created_by)
			VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`, in.Text, in.Severity, in.Scope, in.StartsAt, in.EndsAt, state, by.ID).Scan(&b.ID); err != nil {
			return fmt.Errorf("create banner: %w", err)
		}
		return audit.Write(ctx, tx, by.Login, "banner.create", fmt.Sprintf("banner %d", b.ID), map[string]any{
			"text": in.Text, "severity": in.Severity, "scope": in.Scope, "starts_at": in.StartsAt, "ends_at": in.EndsAt, "state": state})
	})
	if err != nil {
		return Banner{}, err
	}
	s.copy.Store(nil) // the author sees it at once
	return s.Get(ctx, b.ID)
}

// Approve shows a critical banner waiting for a second person.
func (s *Store) Approve(ctx context.Context, by Actor, id int64) error {
	return s.change(ctx, by, id, "banner.approve", func(b Banner) error {
		if b.State != "PENDING" {
			return booking.Errorf(booking.ECONFLICT, "NOT_PENDING", "Banner %d is %s, not waiting for approval.", id, b.State)
		}
		if b.CreatedByID == by.ID {
			return booking.Errorf(booking.EFORBIDDEN, "OWN_BANNER", "Someone other than its author approves a critical banner.")
		}
		return nil
	}, `UPDATE status_banners SET state = 'ACTIVE', approved_by = $2, approved_at = now() WHERE id = $1 AND state = 'PENDING'`)
}

// Withdraw takes a banner down (or drops one waiting).
func (s *Store) Withdraw(ctx context.Context, by Actor, id int64) error {
	return s.change(ctx, by, id, "banner.withdraw", func(b Banner) error {
		if b.State == "WITHDRAWN" {
			return booking.Errorf(booking.ECONFLICT, "WITHDRAWN", "Banner %d is already withdrawn.", id)
		}
		return nil
	}, `UPDATE status_banners SET state = 'WITHDRAWN', withdrawn_by = $2, withdrawn_at = now() WHERE id = $1 AND state <> 'WITHDRAWN'`)
}

func (s *Store) change(ctx context.Context, by Actor, id int64, action string, check func(Banner) error, update string) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		b, err := get(ctx, tx, id, true)
		if err != nil {
			return err
		}
		if err := check(b); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, update, id, by.ID); err != nil {
			return fmt.Errorf("%s %d: %w", action, id, err)
		}
		return audit.Write(ctx, tx, by.Login, action, fmt.Sprintf("banner %d", id), map[string]any{"text": b.Text, "severity": b.Severity, "author": b.CreatedBy})
	})
	if err == nil {
		s.copy.Store(nil)
	}
	return err
}

const selectBanner = `SELECT b.id, b.text, b.severity, b.scope, b.starts_at, b.ends_at, b.state, b.created_at, b.created_by, c.login,
	coalesce(a.login, ''), coalesce(w.login, '')
	FROM status_banners b JOIN console_users c ON c.id = b.created_by
	LEFT JOIN console_users a ON a.id = b.approved_by LEFT JOIN console_users w ON w.id = b.withdrawn_by`

func scan(row pgx.Row) (Banner, error) {
	var b Banner
	err := row.Scan(&b.ID, &b.Text, &b.Severity, &b.Scope, &b.StartsAt, &b.EndsAt, &b.State, &b.CreatedAt, &b.CreatedByID, &b.CreatedBy, &b.ApprovedBy, &b.WithdrawnBy)
	return b, err
}

func get(ctx context.Context, q pgx.Tx, id int64, lock bool) (Banner, error) {
	sql := selectBanner + ` WHERE b.id = $1`
	if lock {
		sql += ` FOR UPDATE OF b`
	}
	b, err := scan(q.QueryRow(ctx, sql, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return b, booking.Errorf(booking.ENOTFOUND, "NO_SUCH_BANNER", "No banner %d.", id)
	}
	if err != nil {
		return b, fmt.Errorf("banner %d: %w", id, err)
	}
	return b, nil
}

// Get reads one banner.
func (s *Store) Get(ctx context.Context, id int64) (Banner, error) {
	b, err := scan(s.pool.QueryRow(ctx, selectBanner+` WHERE b.id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return b, booking.Errorf(booking.ENOTFOUND, "NO_SUCH_BANNER", "No banner %d.", id)
	}
	if err != nil {
		return b, fmt.Errorf("banner %d: %w", id, err)
	}
	return b, nil
}

// List returns the latest n banners, newest first.
func (s *Store) List(ctx context.Context, n int) ([]Banner, error) {
	rows, err := s.pool.Query(ctx, selectBanner+` ORDER BY b.id DESC LIMIT $1`, n)
	if err != nil {
		return nil, fmt.Errorf("list banners: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Banner, error) { return scan(r) })
}

// Live returns the banners shown now where scope (Site or API) is, most
// severe first. Never an error: at worst the last copy read.
func (s *Store) Live(ctx context.Context, scope string) []Banner {
	if s == nil {
		return nil
	}
	now := s.now()
	c := s.copy.Load()
	if c == nil || now.Sub(c.at) >= Refresh {
		c = s.reload(ctx, c, now)
	}
	if c == nil {
		return nil
	}
	var out []Banner
	for _, b := range c.live {
		if (b.Scope == scope || b.Scope == Both) && !now.Before(b.StartsAt) && now.Before(b.EndsAt) {
			out = append(out, b)
		}
	}
	return out
}

// reload reads the live banners; one caller reads while the others keep
// the copy they have.
func (s *Store) reload(ctx context.Context, old *shown, now time.Time) *shown {
	if !s.refresh.TryLock() {
		return old
	}
	defer s.refresh.Unlock()
	if c := s.copy.Load(); c != nil && now.Sub(c.at) < Refresh {
		return c
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	rows, err := s.pool.Query(ctx, selectBanner+` WHERE b.state = 'ACTIVE' AND b.ends_at > $1
		ORDER BY CASE b.severity WHEN 'critical' THEN 0 WHEN 'warning' THEN 1 ELSE 2 END, b.id DESC LIMIT 5`, now)
	var live []Banner
	if err == nil {
		live, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Banner, error) { return scan(r) })
	}
	if err != nil {
		s.log.Warn("read status banners; keeping the last copy", "err", err)
		if old != nil {
			return old
		}
		return nil
	}
	c := &shown{at: now, live: live}
	s.copy.Store(c)
	return c
}
