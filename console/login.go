package console

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"tatkal/booking/auth"
	"tatkal/booking/httpx"
	"tatkal/console/levers"
	"tatkal/views"
)

// loginPage shows the sign-in form with a fresh CSRF token in a cookie.
func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	p := views.ConsoleLoginPage{Next: safeNext(r.URL.Query().Get("next")), CSRF: randomToken()}
	if r.URL.Query().Get("expired") != "" {
		p.Notice = "Your session expired. Sign in again."
	}
	if r.URL.Query().Get("out") != "" {
		p.Notice = "You are signed out."
	}
	c.renderLogin(w, r, p, http.StatusOK)
}

func (c *Console) renderLogin(w http.ResponseWriter, r *http.Request, p views.ConsoleLoginPage, status int) {
	http.SetCookie(w, &http.Cookie{Name: loginCSRF, Value: p.CSRF, Path: "/console/login", HttpOnly: true, Secure: r.TLS != nil || c.cfg.SecureCookies,
		SameSite: http.SameSiteStrictMode, MaxAge: 3600})
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := views.ConsolePage("Sign in", views.ConsoleNav{}, views.ConsoleLogin(p)).Render(r.Context(), w); err != nil {
		c.log.Error("render login", "err", err)
	}
}

// login checks the form's CSRF token, then the password, and starts a session.
func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	ck, err := r.Cookie(loginCSRF)
	if err != nil || ck.Value == "" || subtle.ConstantTimeCompare([]byte(ck.Value), []byte(r.PostFormValue("csrf"))) != 1 {
		c.renderLogin(w, r, views.ConsoleLoginPage{CSRF: randomToken(), Next: safeNext(r.PostFormValue("next")),
			Error: "The sign-in form expired. Try again."}, http.StatusForbidden)
		return
	}
	login, ip := r.PostFormValue("login"), httpx.ClientIP(r)
	// What the form shows again: never the caller's text at its own size.
	shown := auth.Sanitise(login, maxLoginLen)
	var u User
	err = c.cfg.LoginGuard.Attempt(r.Context(), login, ip, auth.Proof{Challenge: r.PostFormValue("challenge"), Nonce: r.PostFormValue("nonce")},
		func(ctx context.Context) (bool, error) {
			var err error
			u, err = c.Authenticate(ctx, login, r.PostFormValue("password"))
			if err == errBadLogin {
				return false, nil
			}
			return err == nil, err
		})
	var throttled *auth.Throttled
	var busy *auth.Busy
	switch {
	case errors.As(err, &throttled):
		n := auth.RetrySeconds(throttled.RetryAfter)
		w.Header().Set("Retry-After", strconv.Itoa(n))
		p := views.ConsoleLoginPage{CSRF: randomToken(), Next: safeNext(r.PostFormValue("next")),
			Error: fmt.Sprintf("Too many failed sign-ins. Try again in %d seconds.", n)}
		if throttled.AccountOnly {
			// Only the account's own lock refuses: a solved challenge opens it.
			ch, cerr := c.cfg.LoginGuard.Challenge(r.Context(), login, ip)
			if cerr == nil && ch != nil {
				p.Login, p.Challenge, p.Bits, p.RetrySecs = shown, ch.Token, ch.Bits, n
				p.Error = "Too many failed sign-ins to this account."
				if throttled.BadProof {
					p.Error = "That puzzle answer was not accepted (each puzzle works once). Your browser is solving a new one."
				}
			}
		}
		c.renderLogin(w, r, p, http.StatusTooManyRequests)
		return
	case errors.As(err, &busy):
		w.Header().Set("Retry-After", strconv.Itoa(auth.RetrySeconds(busy.RetryAfter)))
		c.renderLogin(w, r, views.ConsoleLoginPage{CSRF: randomToken(), Next: safeNext(r.PostFormValue("next")),
			Error: "Too many sign-ins at once. Try again in a second."}, http.StatusServiceUnavailable)
		return
	}
	if errors.Is(err, auth.ErrWrongCredentials) {
		levers.Audit(r.Context(), c.pool, strings.ToLower(login), "console.login_failed", "", map[string]any{"ip": httpx.ClientIP(r)}) //nolint:errcheck
		c.renderLogin(w, r, views.ConsoleLoginPage{CSRF: randomToken(), Next: safeNext(r.PostFormValue("next")), Login: shown,
			Error: "Wrong login or password."}, http.StatusUnauthorized)
		return
	}
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	tok, expires, err := c.StartSession(r.Context(), u)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	levers.Audit(r.Context(), c.pool, u.Login, "console.login", u.Role, map[string]any{"ip": httpx.ClientIP(r)}) //nolint:errcheck
	c.setSessionCookie(w, r, tok, expires)
	next := safeNext(r.PostFormValue("next"))
	if next == "" || next == "/console/" || next == "/console" {
		next = firstPage(u.Role)
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// maxLoginLen bounds a login as the form shows it again (logins are at
// most 64 characters; the guard's records cut there too).
const maxLoginLen = 64

// safeNext keeps redirects inside the console; "" means the user's first
// page.
func safeNext(next string) string {
	p, _ := httpx.LocalPath(next, "/console/")
	return p
}

// logout ends the session.
func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	if ck, err := r.Cookie(sessionCookie); err == nil {
		c.pool.Exec(r.Context(), `DELETE FROM console_sessions WHERE token_hash = $1`, hashToken(ck.Value)) //nolint:errcheck
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true})
	http.Redirect(w, r, "/console/login?out=1", http.StatusSeeOther)
}

// home sends each role to its first section; finance's home is its runs
// page, headed by the exceptions past their SLA.
func (c *Console) home(w http.ResponseWriter, r *http.Request) {
	u, _ := userFrom(r.Context())
	if u.Role == Finance && c.cfg.Recon != nil {
		c.financeRuns(w, r)
		return
	}
	http.Redirect(w, r, firstPage(u.Role), http.StatusSeeOther)
}
