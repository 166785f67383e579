package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"tatkal/booking/admission/token"
	"tatkal/booking/db"
)

// GuardConfig tunes a login guard. Zero values take the defaults shown.
type GuardConfig struct {
	Pool  *pgxpool.Pool
	Scope string // "passenger" or "console": separate counters and failure records
	// Slots bounds password checks in flight in this process (2×GOMAXPROCS):
	// argon2id takes 19 MiB each, so memory is bounded by Slots×19 MiB and
	// the excess is refused at once instead of queued.
	Slots int
	// Failures allowed before backoff starts: per account at one IP (5), per
	// account from anywhere (20: a distributed guess at one account), per IP
	// across accounts (50: spraying one password; generous for shared NATs).
	PerAccountIP, PerAccount, PerIP int
	// Backoff doubles from BaseDelay (1s) with every failure past the
	// allowance, up to MaxDelay (15m). Counters forget after Quiet (24h)
	// without a failure.
	BaseDelay, MaxDelay, Quiet time.Duration
	// Reservation bounds how long an attempt in flight counts against the
	// allowance (1m): one whose process died mid-check stops counting then.
	Reservation time.Duration
	// ChallengeBits is the proof of work that opens an account's lock
	// (18: about a second in a browser); ChallengeTTL how long it may be
	// answered (5m: a person types a password meanwhile).
	ChallengeBits int
	ChallengeTTL  time.Duration
	// DummyParams is the cost of the hash an unknown login is checked
	// against (DefaultParams): it must match the real hashes' cost.
	DummyParams Argon2Params
	Now         func() time.Time
	Log         *slog.Logger
	// Pause is called at "login.checking" while a slot is held: a
	// booking.PauseFunc (auth cannot import booking, which seeds with it).
	Pause func(ctx context.Context, point string)
}

// Guard is the one brute-force and overload guard in front of every
// password check (passenger API and operator console): failure counters in
// PostgreSQL shared by every process, exponential backoff per account, per
// account and IP, and per IP, and a bounded number of concurrent hashes.
//
// Past the allowance a sign-in is refused with Retry-After until the
// backoff passes, correct password or not: backoff, then a challenge. An
// attempt is reserved before its password is hashed, atomically across
// processes, and counts like a failure while in flight: parallel guesses
// get no more checks than sequential ones. When
// the account's own lock is all that refuses (not the address's, nor the
// account's at this address), a solved proof-of-work challenge (Challenge)
// lets the attempt through to the password check: else an attacker
// elsewhere, spending twenty guesses, would lock the owner out of their
// own account. The puzzle is admission's (token.LeadingZeroBits), bound to
// the account, issued by the server, single use and expiring. It never
// opens an address's lock: a guesser still gets the allowance per address
// and per account at each address, and pays a puzzle for every guess past
// the account's.
type Guard struct {
	cfg    GuardConfig
	slots  chan struct{}
	hashes atomic.Int64
	dummy  func() string
}

// NewGuard returns a guard; Pool may be nil only for a guard never used.
func NewGuard(cfg GuardConfig) *Guard {
	if cfg.Scope == "" {
		cfg.Scope = "passenger"
	}
	if cfg.Slots <= 0 {
		cfg.Slots = 2 * runtime.GOMAXPROCS(0)
	}
	if cfg.PerAccountIP <= 0 {
		cfg.PerAccountIP = 5
	}
	if cfg.PerAccount <= 0 {
		cfg.PerAccount = 20
	}
	if cfg.PerIP <= 0 {
		cfg.PerIP = 50
	}
	if cfg.BaseDelay <= 0 {
		cfg.BaseDelay = time.Second
	}
	if cfg.MaxDelay <= 0 {
		cfg.MaxDelay = 15 * time.Minute
	}
	if cfg.Quiet <= 0 {
		cfg.Quiet = 24 * time.Hour
	}
	if cfg.Reservation <= 0 {
		cfg.Reservation = time.Minute
	}
	if cfg.ChallengeBits <= 0 {
		cfg.ChallengeBits = 18
	}
	if cfg.ChallengeTTL <= 0 {
		cfg.ChallengeTTL = 5 * time.Minute
	}
	if cfg.DummyParams.MemoryKiB == 0 {
		cfg.DummyParams = DefaultParams
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	g := &Guard{cfg: cfg, slots: make(chan struct{}, cfg.Slots)}
	g.dummy = sync.OnceValue(func() string {
		h, _ := HashPassword("not-a-password-of-anyone", cfg.DummyParams)
		return h
	})
	return g
}

// ErrWrongCredentials is a checked sign-in whose login or password is wrong.
var ErrWrongCredentials = errors.New("wrong login or password")

// Throttled refuses a sign-in during backoff.
type Throttled struct {
	RetryAfter time.Duration
	// AccountOnly: only the account's own lock refuses, so a solved
	// challenge (Guard.Challenge) would let the attempt through.
	AccountOnly bool
	// BadProof: the attempt carried a challenge that is unknown, used,
	// expired, for another account, or not solved.
	BadProof bool
}

func (e *Throttled) Error() string {
	return fmt.Sprintf("too many failed sign-ins; retry after %s", e.RetryAfter)
}

// Busy refuses a sign-in because every password-check slot is taken.
type Busy struct{ RetryAfter time.Duration }

func (e *Busy) Error() string { return "too many sign-ins at once" }

// RetrySeconds rounds a delay up to whole seconds for a Retry-After header.
func RetrySeconds(d time.Duration) int {
	return max(int((d+time.Second-1)/time.Second), 1)
}

// Proof is a solved challenge sent with a sign-in: the challenge as
// Guard.Challenge gave it and a nonce such that SHA-256(challenge "|"
// nonce) starts with its number of zero bits.
type Proof struct{ Challenge, Nonce string }

// Attempt runs one sign-in: refused with *Throttled during backoff (no
// hashing at all) unless only the account's lock refuses and proof solves
// a challenge for it, with *Busy when every slot is taken, else check runs
// in a slot; check's false is recorded as a failure and answered
// ErrWrongCredentials, its true clears the account's counters.
func (g *Guard) Attempt(ctx context.Context, login, ip string, proof Proof, check func(context.Context) (bool, error)) error {
	login = NormaliseLogin(login)
	subj := g.subjects(login, ip)
	now := g.cfg.Now()
	attempt, err := g.reserve(ctx, subj, proof, now)
	if err != nil {
		return err
	}
	select {
	case g.slots <- struct{}{}:
	default:
		g.release(ctx, attempt, nil)
		return &Busy{RetryAfter: time.Second}
	}
	ok, err := func() (bool, error) {
		defer func() { <-g.slots }()
		if g.cfg.Pause != nil {
			g.cfg.Pause(ctx, "login.checking")
		}
		return check(ctx)
	}()
	if err != nil {
		g.release(ctx, attempt, nil)
		return err
	}
	if ok {
		// Not the IP's counter: a sprayer must not reset it by signing in
		// to an account of their own between guesses.
		g.release(ctx, attempt, []string{subj.account, subj.accountIP})
		return nil
	}
	if err := g.recordFailure(ctx, subj, attempt, login, ip, now); err != nil {
		return err
	}
	return ErrWrongCredentials
}

// guardLockClass namespaces the guard's advisory locks (the two-key form,
// apart from the one-key locks of migrations and River).
const guardLockClass = 0x6c6f67 // "log"

// reserve decides whether an attempt may go on to the password check and,
// if so, records it as in flight until Reservation from now; it answers
// the reservation's id or *Throttled. Deciders of attempts sharing a
// subject (the account, the address, the account at the address) take
// turns under advisory locks, taken in one order, so every process sees
// the attempts let through before it and none passes on counters that
// parallel attempts are about to raise.
func (g *Guard) reserve(ctx context.Context, subj subjects, proof Proof, now time.Time) (string, error) {
	id := make([]byte, 16)
	rand.Read(id) //nolint:errcheck // crypto/rand never fails
	attempt := hex.EncodeToString(id)
	var refused error
	err := db.Transact(ctx, g.cfg.Pool, func(tx pgx.Tx) error {
		refused = nil
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, k)
			FROM (SELECT DISTINCT hashtext(s) AS k FROM unnest($2::text[]) AS s ORDER BY 1) AS x`, guardLockClass, subj.all()); err != nil {
			return err
		}
		account, other, err := g.refusals(ctx, tx, subj, now)
		if err != nil {
			return err
		}
		switch {
		case now.Before(other):
			refused = &Throttled{RetryAfter: later(account, other).Sub(now)}
			return nil
		case now.Before(account) && (proof.Challenge == "" && proof.Nonce == ""):
			refused = &Throttled{RetryAfter: account.Sub(now), AccountOnly: true}
			return nil
		case now.Before(account):
			ok, err := g.useProof(ctx, tx, subj, proof, now)
			if err != nil {
				return err
			}
			if !ok { // committed all the same: the challenge is used up
				refused = &Throttled{RetryAfter: account.Sub(now), AccountOnly: true, BadProof: true}
				return nil
			}
		}
		if _, err := tx.Exec(ctx, `DELETE FROM login_reservations WHERE subject = ANY($1) AND expires_at <= $2`, subj.all(), now); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO login_reservations (attempt, subject, expires_at) SELECT $1, s, $2 FROM unnest($3::text[]) AS s`,
			attempt, now.Add(g.cfg.Reservation), subj.all())
		return err
	})
	if err != nil {
		return "", fmt.Errorf("login guard: reserve attempt: %w", err)
	}
	if refused != nil {
		return "", refused
	}
	return attempt, nil
}

// release drops an attempt's reservation (a success, a shed or failed
// check: not a wrong password) and clears the counters of clear with it.
// It runs even if the caller has gone: a reservation left behind would
// count against the allowance until it expires.
func (g *Guard) release(ctx context.Context, attempt string, clear []string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := g.cfg.Pool.Exec(ctx, `WITH r AS (DELETE FROM login_reservations WHERE attempt = $1)
		DELETE FROM login_throttle WHERE subject = ANY($2)`, attempt, clear); err != nil {
		g.cfg.Log.Warn("login guard: release attempt", "err", err)
	}
}

// refusals reads until when the account refuses a sign-in, and until when
// the latest of the address and the account at the address does (zero or
// past: not refused). A subject refuses while locked after failures, and
// while its attempts in flight, should they all fail, would reach its
// allowance: past the allowance that is one attempt at a time.
func (g *Guard) refusals(ctx context.Context, q db.Querier, subj subjects, now time.Time) (account, other time.Time, err error) {
	rows, err := q.Query(ctx, `
		SELECT s, coalesce(t.failures, 0), coalesce(t.last_failure, $2), coalesce(t.locked_until, $2),
			(SELECT count(*) FROM login_reservations r WHERE r.subject = s AND r.expires_at > $2)
		FROM unnest($1::text[]) AS s LEFT JOIN login_throttle t ON t.subject = s`, subj.all(), now)
	if err != nil {
		return account, other, fmt.Errorf("login guard: read throttle: %w", err)
	}
	allowance := subj.allowances(g.cfg)
	var s string
	var failures, inflight int
	var last, until time.Time
	_, err = pgx.ForEachRow(rows, []any{&s, &failures, &last, &until, &inflight}, func() error {
		if last.Before(now.Add(-g.cfg.Quiet)) {
			failures = 0 // the counter restarts at the next failure
		}
		if a := allowance[s]; inflight > 0 && failures+inflight >= a {
			until = later(until, now.Add(g.backoff(failures+inflight-a)))
		}
		if s == subj.account {
			account = until
		} else {
			other = later(other, until)
		}
		return nil
	})
	if err != nil {
		return account, other, fmt.Errorf("login guard: read throttle: %w", err)
	}
	return account, other, nil
}

// Challenge is a proof-of-work puzzle that opens an account's lock once.
type Challenge struct {
	Token     string
	Bits      int
	ExpiresAt time.Time
}

// Challenge returns the challenge that lets a sign-in to login from ip
// past the account's lock: nil when no lock refuses such a sign-in now,
// *Throttled when the address's limits refuse it (a challenge would not
// help). Asking again returns the same challenge until it expires or is
// used.
func (g *Guard) Challenge(ctx context.Context, login, ip string) (*Challenge, error) {
	subj := g.subjects(NormaliseLogin(login), ip)
	now := g.cfg.Now()
	account, other, err := g.refusals(ctx, g.cfg.Pool, subj, now)
	if err != nil {
		return nil, err
	}
	if now.Before(other) {
		return nil, &Throttled{RetryAfter: later(account, other).Sub(now)}
	}
	if !now.Before(account) {
		return nil, nil
	}
	id := make([]byte, 18)
	rand.Read(id) //nolint:errcheck // crypto/rand never fails
	c := Challenge{Token: challengePrefix + hex.EncodeToString(id), Bits: g.cfg.ChallengeBits, ExpiresAt: now.Add(g.cfg.ChallengeTTL)}
	// Keep the open one, so a client asking in a loop writes nothing.
	err = g.cfg.Pool.QueryRow(ctx, `
		INSERT INTO login_challenges AS c (subject, id, account, bits, expires_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (subject) DO UPDATE SET id = excluded.id, account = excluded.account, bits = excluded.bits, expires_at = excluded.expires_at
			WHERE c.expires_at <= $6::timestamptz + interval '30 seconds'
		RETURNING id, bits, expires_at`, subj.accountIP, c.Token, subj.account, c.Bits, c.ExpiresAt, now).Scan(&c.Token, &c.Bits, &c.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		err = g.cfg.Pool.QueryRow(ctx, `SELECT id, bits, expires_at FROM login_challenges WHERE subject = $1`, subj.accountIP).
			Scan(&c.Token, &c.Bits, &c.ExpiresAt)
	}
	if err != nil {
		return nil, fmt.Errorf("login guard: issue challenge: %w", err)
	}
	return &c, nil
}

const challengePrefix = "lc_"

// useProof uses up the challenge of proof if it is this account's, open
// and solved. Any use deletes it, solved or not, so it is tried once.
func (g *Guard) useProof(ctx context.Context, q db.Querier, subj subjects, p Proof, now time.Time) (bool, error) {
	if !strings.HasPrefix(p.Challenge, challengePrefix) || len(p.Challenge) > 64 || p.Nonce == "" || len(p.Nonce) > 32 {
		return false, nil
	}
	var bits int
	err := q.QueryRow(ctx, `DELETE FROM login_challenges WHERE id = $1 AND account = $2 AND expires_at > $3 RETURNING bits`,
		p.Challenge, subj.account, now).Scan(&bits)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("login guard: use challenge: %w", err)
	}
	return token.LeadingZeroBits(p.Challenge, p.Nonce) >= bits, nil
}

// VerifyPassword checks password against the stored hash, or against a
// dummy hash of the same cost when the account does not exist (hash ""),
// so an unknown login takes as long as a wrong password.
func (g *Guard) VerifyPassword(hash, password string) (bool, error) {
	g.hashes.Add(1)
	if hash == "" {
		CheckPassword(g.dummy(), password) //nolint:errcheck // only its cost matters
		return false, nil
	}
	return CheckPassword(hash, password)
}

// Hashes counts password hashes computed by VerifyPassword.
func (g *Guard) Hashes() int64 { return g.hashes.Load() }

// NormaliseLogin is how a login is compared: trimmed and lower-case.
func NormaliseLogin(login string) string { return strings.ToLower(strings.TrimSpace(login)) }

type subjects struct{ account, accountIP, ip string }

func (s subjects) all() []string { return []string{s.account, s.accountIP, s.ip} }

// allowances are the failures each subject is allowed before backoff.
func (s subjects) allowances(cfg GuardConfig) map[string]int {
	return map[string]int{s.account: cfg.PerAccount, s.accountIP: cfg.PerAccountIP, s.ip: cfg.PerIP}
}

func (g *Guard) subjects(login, ip string) subjects {
	h := func(parts ...string) string {
		sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
		return hex.EncodeToString(sum[:16])
	}
	where := ipNet(ip)
	return subjects{
		account:   g.cfg.Scope + "|a|" + h(login),
		accountIP: g.cfg.Scope + "|ai|" + h(login, where),
		ip:        g.cfg.Scope + "|i|" + h(where),
	}
}

// ClientNet is the unit one client controls: an IPv4 address or an IPv6
// /64 (what limits per address count).
func ClientNet(ip string) string { return ipNet(ip) }

// ipNet is the unit one client controls: an IPv4 address or an IPv6 /64.
func ipNet(ip string) string {
	if host, _, err := net.SplitHostPort(ip); err == nil {
		ip = host
	}
	p := net.ParseIP(ip)
	if p == nil {
		return ip
	}
	if p.To4() != nil {
		return p.String()
	}
	return p.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

// recordFailure counts a failure against every subject in place of the
// attempt's reservation, starts or extends their backoff, and writes the
// failure's record. It runs even if the caller has gone: the guess was
// checked.
func (g *Guard) recordFailure(ctx context.Context, subj subjects, attempt, login, ip string, now time.Time) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := db.Transact(ctx, g.cfg.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM login_reservations WHERE attempt = $1`, attempt); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `
			INSERT INTO login_throttle AS t (subject, allowance, failures, last_failure, locked_until)
			SELECT s, a, 1, $2, $2 FROM unnest($1::text[], $3::int[]) AS x(s, a)
			ON CONFLICT (subject) DO UPDATE SET
				failures = CASE WHEN t.last_failure < excluded.last_failure - $4::interval THEN 1 ELSE t.failures + 1 END,
				allowance = excluded.allowance, last_failure = greatest(t.last_failure, excluded.last_failure)
			RETURNING subject, failures, allowance`,
			subj.all(), now, []int32{int32(g.cfg.PerAccount), int32(g.cfg.PerAccountIP), int32(g.cfg.PerIP)},
			fmt.Sprintf("%d seconds", int64(g.cfg.Quiet.Seconds())))
		if err != nil {
			return err
		}
		var locked []string
		var until []time.Time
		var s string
		var failures, allowance int
		if _, err := pgx.ForEachRow(rows, []any{&s, &failures, &allowance}, func() error {
			if failures >= allowance {
				locked, until = append(locked, s), append(until, now.Add(g.backoff(failures-allowance)))
			}
			return nil
		}); err != nil {
			return err
		}
		if len(locked) > 0 {
			if _, err := tx.Exec(ctx, `UPDATE login_throttle t SET locked_until = greatest(t.locked_until, x.u)
				FROM unnest($1::text[], $2::timestamptz[]) AS x(s, u) WHERE t.subject = x.s`, locked, until); err != nil {
				return err
			}
		}
		var id int64
		if err := tx.QueryRow(ctx, `INSERT INTO login_failures (scope, login, ip, at) VALUES ($1, $2, $3, $4) RETURNING id`,
			g.cfg.Scope, Sanitise(login, 64), Sanitise(ip, 64), now).Scan(&id); err != nil {
			return err
		}
		// Keep both tables bounded in time: every 256th failure prunes
		// records past 30 days and counters long quiet.
		if id%256 == 0 {
			if _, err := tx.Exec(ctx, `DELETE FROM login_failures WHERE at < $1`, now.Add(-30*24*time.Hour)); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `DELETE FROM login_throttle WHERE last_failure < $1 AND locked_until < $2`,
				now.Add(-g.cfg.Quiet), now); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `DELETE FROM login_challenges WHERE expires_at < $1`, now); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `DELETE FROM login_reservations WHERE expires_at < $1`, now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("login guard: record failure: %w", err)
	}
	return nil
}

// backoff is BaseDelay doubled n times, at most MaxDelay.
func (g *Guard) backoff(n int) time.Duration {
	d := g.cfg.BaseDelay
	for range n {
		if d >= g.cfg.MaxDelay {
			break
		}
		d *= 2
	}
	return min(d, g.cfg.MaxDelay)
}

// Sanitise makes caller text safe to store: valid UTF-8, no control
// characters, at most max bytes (cut on a rune boundary).
func Sanitise(s string, max int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, s)
	for len(s) > max {
		_, n := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-n]
	}
	return s
}
