package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"tatkal/booking"
	"tatkal/booking/api/reply"
	"tatkal/booking/auth"
	"tatkal/console/levers"
)

const (
	sessionCookie = "tatkal_console"
	loginCSRF     = "tatkal_console_login"
)

// User is the signed-in console user, or the user a personal API token
// acts as.
type User struct {
	ID    int64
	Login string
	Name  string
	Role  string
	// Teams are a team member's owning teams of reconciliation
	// exceptions (role team): the only exceptions they see and work.
	Teams []string
	CSRF  string
	Flash string // the session's pending notice, shown once by render

	session []byte // SHA-256 of the session cookie; nil for an API token
	// TokenID is the personal API token in use (0: a console session);
	// IssuerID the admin who created it.
	TokenID, IssuerID int64
}

// Actor is the user as a lever actor.
func (u User) Actor() levers.Actor {
	a := levers.Actor{UserID: u.ID, Login: u.Login, Role: u.Role, Via: "console"}
	if u.TokenID != 0 {
		a.IssuerID, a.Via = u.IssuerID, fmt.Sprintf("api-token %d", u.TokenID)
	}
	return a
}

type ctxKey struct{}

func userFrom(ctx context.Context) (User, bool) {
	u, ok := ctx.Value(ctxKey{}).(User)
	return u, ok
}

func randomToken() string {
	b := make([]byte, 32)
	rand.Read(b) //nolint:errcheck // crypto/rand never fails on Linux
	return base64.RawURLEncoding.EncodeToString(b)
}

func hashToken(t string) []byte {
	h := sha256.Sum256([]byte(t))
	return h[:]
}

// Authenticate checks a login and password; disabled and unknown users
// get the same answer as a wrong password.
func (c *Console) Authenticate(ctx context.Context, login, password string) (User, error) {
	var u User
	var hash string
	var disabled bool
	err := c.pool.QueryRow(ctx, `SELECT id, login, name, role, teams, password_hash, disabled FROM console_users WHERE login = $1`,
		strings.ToLower(strings.TrimSpace(login))).Scan(&u.ID, &u.Login, &u.Name, &u.Role, &u.Teams, &hash, &disabled)
	if errors.Is(err, pgx.ErrNoRows) {
		auth.CheckPassword(dummyHash(), password) //nolint:errcheck // same time as a real check
		return User{}, errBadLogin
	}
	if err != nil {
		return User{}, fmt.Errorf("console user: %w", err)
	}
	ok, err := auth.CheckPassword(hash, password)
	if err != nil || !ok || disabled {
		return User{}, errBadLogin
	}
	return u, nil
}

var errBadLogin = errors.New("wrong login or password")

var dummyHash = sync.OnceValue(func() string {
	h, _ := auth.HashPassword("dummy-password", auth.DefaultParams)
	return h
})

// StartSession stores a new session and returns its cookie value.
func (c *Console) StartSession(ctx context.Context, u User) (string, time.Time, error) {
	tok := randomToken()
	expires := time.Now().Add(c.cfg.SessionTTL)
	if _, err := c.pool.Exec(ctx, `INSERT INTO console_sessions (token_hash, user_id, csrf_token, expires_at) VALUES ($1, $2, $3, $4)`,
		hashToken(tok), u.ID, randomToken(), expires); err != nil {
		return "", time.Time{}, fmt.Errorf("start console session: %w", err)
	}
	return tok, expires, nil
}

func (c *Console) lookupSession(ctx context.Context, tok string) (User, bool, error) {
	u := User{session: hashToken(tok)}
	var expires time.Time
	err := c.pool.QueryRow(ctx, `SELECT u.id, u.login, u.name, u.role, u.teams, s.csrf_token, s.expires_at, coalesce(s.flash, '')
		FROM console_sessions s JOIN console_users u ON u.id = s.user_id WHERE s.token_hash = $1 AND NOT u.disabled`,
		u.session).Scan(&u.ID, &u.Login, &u.Name, &u.Role, &u.Teams, &u.CSRF, &expires, &u.Flash)
	if errors.Is(err, pgx.ErrNoRows) {
		return User{}, false, nil
	}
	if err != nil {
		return User{}, false, fmt.Errorf("console session: %w", err)
	}
	if !time.Now().Before(expires) {
		c.pool.Exec(ctx, `DELETE FROM console_sessions WHERE token_hash = $1`, hashToken(tok)) //nolint:errcheck
		return User{}, true, nil
	}
	return u, false, nil
}

// session requires a signed-in user; anonymous visitors go to the login page.
func (c *Console) session(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var u User
		expired := false
		if ck, err := r.Cookie(sessionCookie); err == nil && ck.Value != "" {
			var err error
			u, expired, err = c.lookupSession(r.Context(), ck.Value)
			if err != nil {
				c.serverError(w, r, err)
				return
			}
		}
		if u.ID == 0 {
			q := url.Values{"next": {r.URL.RequestURI()}}
			if expired {
				q.Set("expired", "1")
			}
			if r.Method != http.MethodGet || strings.HasSuffix(r.URL.Path, "/ws") || strings.HasSuffix(r.URL.Path, ".json") {
				http.Error(w, "Sign in to the console first.", http.StatusUnauthorized)
				return
			}
			http.Redirect(w, r, "/console/login?"+q.Encode(), http.StatusSeeOther)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, u)))
	})
}

var crossOrigin = http.NewCrossOriginProtection()

// csrf checks every state-changing request: the browser must say it is
// same-origin (Sec-Fetch-Site / Origin) and the form must carry the
// session's token. River's UI sends JSON and relies on the first check.
func (c *Console) csrf(next http.Handler) http.Handler {
	return crossOrigin.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodOptions ||
			strings.HasPrefix(r.URL.Path, "/console/river/") {
			next.ServeHTTP(w, r)
			return
		}
		u, _ := userFrom(r.Context())
		got := r.Header.Get("X-CSRF-Token")
		if got == "" {
			got = r.PostFormValue("csrf")
		}
		if u.CSRF == "" || subtle.ConstantTimeCompare([]byte(got), []byte(u.CSRF)) != 1 {
			http.Error(w, "This form has expired or did not come from the console. Go back, reload the page and try again.", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	}))
}

// roles lets only the given roles through; others get 403.
func (c *Console) roles(allowed ...string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			u, _ := userFrom(r.Context())
			if !slices.Contains(allowed, u.Role) {
				w.WriteHeader(http.StatusForbidden)
				c.render(w, r, "Not allowed", forbiddenView(u, allowed))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// Allowed reports whether role may open a console path (for the navigation).
func allowedNav(role string, roles ...string) bool { return slices.Contains(roles, role) }

func (c *Console) setSessionCookie(w http.ResponseWriter, r *http.Request, tok string, expires time.Time) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: tok, Path: "/", Expires: expires, HttpOnly: true,
		Secure: r.TLS != nil || c.cfg.SecureCookies, SameSite: http.SameSiteLaxMode})
}

// apiAuth accepts a console user's personal API token (acting as that
// user, with their role) or a console session (JSON calls then carry
// X-CSRF-Token). No shared token is an identity.
func (c *Console) apiAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			u, err := c.tokenUser(r.Context(), tok)
			if err != nil {
				c.serverError(w, r, err)
				return
			}
			if u.ID == 0 {
				reply.Error(w, r, c.log, booking.Errorf(booking.EUNAUTH, "BAD_TOKEN",
					"Unknown, expired or revoked API token. An admin creates personal API tokens under /console/tokens."))
				return
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, u)))
			return
		}
		ck, err := r.Cookie(sessionCookie)
		if err != nil {
			reply.Error(w, r, c.log, booking.Errorf(booking.EUNAUTH, "NO_CREDENTIALS", "Send a personal API token (Authorization: Bearer) or a console session."))
			return
		}
		u, _, err := c.lookupSession(r.Context(), ck.Value)
		if err != nil {
			c.serverError(w, r, err)
			return
		}
		if u.ID == 0 {
			reply.Error(w, r, c.log, booking.Errorf(booking.EUNAUTH, "SESSION_EXPIRED", "The console session has expired; sign in again."))
			return
		}
		if r.Method != http.MethodGet && subtle.ConstantTimeCompare([]byte(r.Header.Get("X-CSRF-Token")), []byte(u.CSRF)) != 1 {
			reply.Error(w, r, c.log, booking.Errorf(booking.EFORBIDDEN, "NO_CSRF", "Send the session's X-CSRF-Token header."))
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, u)))
	})
}

func (c *Console) apiRoles(allowed ...string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			u, _ := userFrom(r.Context())
			if !slices.Contains(allowed, u.Role) {
				reply.Error(w, r, c.log, booking.Errorf(booking.EFORBIDDEN, "ROLE", "Your role may not do this."))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// Team members work the reconciliation exceptions of their own teams
// only; finance and admin work every team's. These are the one place
// that says so: the exception list, its exports, an exception's page and
// every action on one (single or bulk) ask them, and recon checks the
// scope again under the exception's lock (recon.ForTeams).

// workTeams is the teams whose exceptions u works: nil for every team
// (finance, admin), else a team member's own teams.
func (u User) workTeams() []string {
	if u.Role == Team {
		return u.Teams
	}
	return nil
}

// mayWork says whether u may see and act on an exception owned by team owner.
func (u User) mayWork(owner string) bool {
	return u.workTeams() == nil || slices.Contains(u.Teams, owner)
}

// notYourTeam is the refusal of an exception outside a team member's teams.
func notYourTeam(u User, owner string) error {
	return booking.Errorf(booking.EFORBIDDEN, "NOT_YOUR_TEAM",
		"This exception belongs to %s; you work the exceptions of %s only. Finance can hand it to your team.", owner, strings.Join(u.Teams, ", "))
}
