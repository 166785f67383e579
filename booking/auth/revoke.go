package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// RevocationConfig tunes Revocations. Zero values take the defaults shown.
type RevocationConfig struct {
	Pool *pgxpool.Pool
	// Refresh: the first request that finds the revocations older than this
	// (1s) reloads them. MaxStale (5s) is the promise: a revoked token
	// stops working on every process within it. Past it, requests wait for
	// a reload, and are refused (503) if PostgreSQL cannot answer.
	Refresh, MaxStale time.Duration
	// SessionTTL is the longest a session token lives (12h): how long a
	// "log out everywhere" must be remembered.
	SessionTTL time.Duration
	// PerUser single-session revocations are kept per account (8); one
	// more logout revokes every session of the account instead, so memory
	// grows with accounts, never with how often one of them logs out.
	PerUser int
	Now     func() time.Time
	Log     *slog.Logger
}

// Revocations answers, without a database call per request, whether a
// passenger session was revoked: each process keeps the live revocations
// in memory and reloads the recent ones from PostgreSQL about once a
// second. Revocations made by this process apply at once.
type Revocations struct {
	cfg RevocationConfig

	mu     sync.Mutex
	users  map[int64]*userRevocations
	loaded time.Time // when the last successful reload started (monotonic clock)
	cursor time.Time // newest created_at seen (the database's clock)
	pruned time.Time

	reload sync.Mutex // one reload at a time
}

type userRevocations struct {
	gen      int64
	until    time.Time            // when every token of an older generation has expired
	sessions map[string]time.Time // session id -> its token's expiry
}

// NewRevocations returns the revocation checker of one process.
func NewRevocations(cfg RevocationConfig) *Revocations {
	if cfg.Refresh <= 0 {
		cfg.Refresh = time.Second
	}
	if cfg.MaxStale <= 0 {
		cfg.MaxStale = 5 * time.Second
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 12 * time.Hour
	}
	if cfg.PerUser <= 0 {
		cfg.PerUser = 8
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Revocations{cfg: cfg, users: map[int64]*userRevocations{}}
}

// Errors of Check.
var (
	ErrRevoked            = errors.New("session revoked")
	ErrRevocationsUnknown = errors.New("session revocations could not be loaded")
)

// Check answers ErrRevoked for a revoked session, ErrRevocationsUnknown
// when the revocations are older than MaxStale and cannot be reloaded.
func (r *Revocations) Check(ctx context.Context, s Session) error {
	if err := r.fresh(ctx); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	u := r.users[s.UserID]
	if u == nil {
		return nil
	}
	if s.Generation < u.gen {
		return ErrRevoked
	}
	if _, ok := u.sessions[s.ID]; ok && s.ID != "" {
		return ErrRevoked
	}
	return nil
}

// fresh reloads the revocations when they are older than Refresh; only
// one request reloads, the others go on with what they have unless it is
// older than MaxStale.
func (r *Revocations) fresh(ctx context.Context) error {
	age := r.age()
	if age < r.cfg.Refresh {
		return nil
	}
	if !r.reload.TryLock() {
		if age < r.cfg.MaxStale {
			return nil
		}
		r.reload.Lock()
	}
	defer r.reload.Unlock()
	if age = r.age(); age < r.cfg.Refresh {
		return nil // reloaded while we waited
	}
	if err := r.load(ctx); err != nil {
		if r.age() >= r.cfg.MaxStale {
			r.cfg.Log.Error("session revocations are stale; refusing sessions", "err", err)
			return ErrRevocationsUnknown
		}
		r.cfg.Log.Warn("reload session revocations", "err", err)
	}
	return nil
}

func (r *Revocations) age() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.loaded.IsZero() {
		return time.Duration(1<<63 - 1)
	}
	return time.Since(r.loaded)
}

// load reads revocations made since the last load. It looks back 30s past
// the newest row it has seen, since rows commit out of created_at order;
// applying a row twice is harmless.
func (r *Revocations) load(ctx context.Context) error {
	started := time.Now()
	r.mu.Lock()
	since := r.cursor.Add(-30 * time.Second)
	r.mu.Unlock()
	if since.Before(time.Unix(0, 0)) {
		since = time.Unix(0, 0)
	}
	now := r.cfg.Now()
	rows, err := r.cfg.Pool.Query(ctx, `SELECT user_id, generation, coalesce(session_id, ''), expires_at, created_at
		FROM session_revocations WHERE created_at > $1 AND expires_at > $2`, since, now)
	if err != nil {
		return fmt.Errorf("load session revocations: %w", err)
	}
	type row struct {
		user, gen       int64
		sid             string
		expires, create time.Time
	}
	var got []row
	var x row
	if _, err := pgx.ForEachRow(rows, []any{&x.user, &x.gen, &x.sid, &x.expires, &x.create}, func() error {
		got = append(got, x)
		return nil
	}); err != nil {
		return fmt.Errorf("load session revocations: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, x := range got {
		r.apply(x.user, x.gen, x.sid, x.expires)
		if x.create.After(r.cursor) {
			r.cursor = x.create
		}
	}
	r.loaded = started
	if now.Sub(r.pruned) > time.Minute {
		r.prune(now)
	}
	return nil
}

// apply records one revocation; r.mu is held.
func (r *Revocations) apply(userID, gen int64, sid string, expires time.Time) {
	u := r.users[userID]
	if u == nil {
		u = &userRevocations{sessions: map[string]time.Time{}}
		r.users[userID] = u
	}
	if gen > u.gen {
		u.gen, u.sessions = gen, map[string]time.Time{} // older sessions are dead by generation
	}
	if gen < u.gen {
		return
	}
	if sid == "" {
		u.until = later(u.until, expires)
	} else {
		u.sessions[sid] = expires
	}
}

// prune forgets revocations whose tokens have expired anyway; r.mu is held.
func (r *Revocations) prune(now time.Time) {
	r.pruned = now
	for id, u := range r.users {
		for sid, exp := range u.sessions {
			if !now.Before(exp) {
				delete(u.sessions, sid)
			}
		}
		if len(u.sessions) == 0 && !now.Before(u.until) {
			delete(r.users, id)
		}
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Logout revokes one session. A token without an id (issued before
// revocation existed), or an account with PerUser sessions already
// revoked, revokes every session of the account instead.
func (r *Revocations) Logout(ctx context.Context, s Session) error {
	return r.revoke(ctx, s.UserID, s.ID)
}

// LogoutEverywhere revokes every session of the account issued so far.
func (r *Revocations) LogoutEverywhere(ctx context.Context, userID int64) error {
	return r.revoke(ctx, userID, "")
}

func (r *Revocations) revoke(ctx context.Context, userID int64, sid string) error {
	now := r.cfg.Now()
	// Remembered as long as any token of the session could live: a session
	// re-signed (after OTP verification) keeps its id with a later expiry.
	expires := now.Add(r.cfg.SessionTTL)
	var gen int64
	// Not db.Transact: fn rewrites sid, so it is not safe to run twice.
	err := pgx.BeginFunc(ctx, r.cfg.Pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT session_generation FROM users WHERE id = $1 FOR UPDATE`, userID).Scan(&gen); err != nil {
			return err
		}
		if sid != "" {
			var n int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM session_revocations
				WHERE user_id = $1 AND generation = $2 AND session_id IS NOT NULL AND expires_at > $3`, userID, gen, now).Scan(&n); err != nil {
				return err
			}
			if n >= r.cfg.PerUser {
				sid = ""
			}
		}
		if sid == "" {
			var err error
			gen, err = revokeAllTx(ctx, tx, userID, expires)
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO session_revocations (user_id, generation, session_id, expires_at) VALUES ($1, $2, $3, $4)`,
			userID, gen, sid, expires)
		return err
	})
	if err != nil {
		return fmt.Errorf("revoke sessions of user %d: %w", userID, err)
	}
	r.mu.Lock()
	r.apply(userID, gen, sid, expires)
	r.mu.Unlock()
	return nil
}

// RevokeAllTx revokes, in tx, every session of the account issued so far,
// for tokens living up to sessionTTL: a password reset does it in the
// transaction that changes the password, so no old session outlives the
// old password. Every process's list takes it at its next reload (within
// 5 s).
func RevokeAllTx(ctx context.Context, tx pgx.Tx, userID int64, now time.Time, sessionTTL time.Duration) error {
	_, err := revokeAllTx(ctx, tx, userID, now.Add(sessionTTL))
	if err != nil {
		return fmt.Errorf("revoke sessions of user %d: %w", userID, err)
	}
	return nil
}

// revokeAllTx raises the account's session generation and records it.
func revokeAllTx(ctx context.Context, tx pgx.Tx, userID int64, expires time.Time) (int64, error) {
	var gen int64
	if err := tx.QueryRow(ctx, `UPDATE users SET session_generation = session_generation + 1 WHERE id = $1
		RETURNING session_generation`, userID).Scan(&gen); err != nil {
		return 0, err
	}
	_, err := tx.Exec(ctx, `INSERT INTO session_revocations (user_id, generation, session_id, expires_at) VALUES ($1, $2, NULL, $3)`,
		userID, gen, expires)
	return gen, err
}
