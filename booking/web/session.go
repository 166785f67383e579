package web

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
	"strconv"
	"strings"
	"time"

	"tatkal/booking"
	"tatkal/booking/auth"
	"tatkal/booking/httpx"
	"tatkal/views"
)

// Cookies of the passenger site. The session cookie holds the same signed
// token the JSON API takes as a bearer, so one signature check, one
// revocation list and one login guard serve both.
const (
	sessionCookie = "tk_session"
	csrfCookie    = "tk_csrf"
	deviceCookie  = "tk_device"  // the device's own random token, kept a year
	bindingCookie = "tk_binding" // the server's signed binding of that device to the account
	langCookie    = "tk_lang"
)

type ctxKey int

const sessionKey ctxKey = iota

// webSession is the signed-in passenger of a request (UserID 0: nobody).
type webSession struct {
	auth.Session
	token string
	login string
}

func sessionOf(r *http.Request) webSession {
	s, _ := r.Context().Value(sessionKey).(webSession)
	return s
}

func (s webSession) caller() booking.Caller {
	return booking.Caller{UserID: s.UserID, Verified: s.Verified, Agent: s.Agent, CreatedAt: s.CreatedAt}
}

// session reads the language and the session cookie: a token whose
// signature, expiry and revocation check out signs the passenger in.
func (p *Pages) session(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if c, err := r.Cookie(langCookie); err == nil {
			ctx = views.WithLang(ctx, c.Value)
		}
		if _, err := r.Cookie(csrfCookie); err != nil {
			// A fresh random value the forms are bound to (csrfToken).
			v := randomToken()
			p.setCookie(w, csrfCookie, v, 0)
			r.AddCookie(&http.Cookie{Name: csrfCookie, Value: v})
		}
		if c, err := r.Cookie(sessionCookie); err == nil && c.Value != "" {
			s, err := p.cfg.Signer.Verify(c.Value, p.cfg.Now())
			if err == nil {
				err = p.cfg.Revocations.Check(ctx, s)
			}
			switch {
			case err == nil:
				ws := webSession{Session: s, token: c.Value}
				if err := p.cfg.Pool.QueryRow(ctx, `SELECT login FROM users WHERE id = $1`, s.UserID).Scan(&ws.login); err != nil {
					p.fail(w, r.WithContext(ctx), "Sign in", fmt.Errorf("read login of %d: %w", s.UserID, err))
					return
				}
				ctx = context.WithValue(ctx, sessionKey, ws)
			case errors.Is(err, auth.ErrBadToken) || errors.Is(err, auth.ErrRevoked):
				p.setCookie(w, sessionCookie, "", -1)
			default: // the revocation list cannot be read: neither signed in nor out
				p.busy(w, r)
				return
			}
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// requireSignIn sends a signed-out passenger to the sign-in page, coming
// back here afterwards.
func (p *Pages) requireSignIn(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sessionOf(r).UserID == 0 {
			next := r.URL.RequestURI()
			if r.Method != http.MethodGet {
				next = "/"
			}
			http.Redirect(w, r, "/signin?next="+url.QueryEscape(next), http.StatusSeeOther)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// csrfToken is the form token of this browser and session: a hash of the
// random CSRF cookie and the session cookie, so a token is good for one
// session in one browser only. Cross-origin posts are refused before this
// too (http.CrossOriginProtection in httpx.App).
func (p *Pages) csrfToken(r *http.Request) string {
	c, err := r.Cookie(csrfCookie)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256([]byte("tatkal-site-csrf|" + c.Value + "|" + sessionOf(r).token))
	return base64.RawURLEncoding.EncodeToString(sum[:18])
}

// checkCSRF refuses an unsafe request whose form token is not this
// browser's and session's.
func (p *Pages) checkCSRF(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			next.ServeHTTP(w, r)
			return
		}
		want := p.csrfToken(r)
		got := r.PostFormValue("csrf")
		if want == "" || subtle.ConstantTimeCompare([]byte(want), []byte(got)) != 1 {
			p.render(w, r, http.StatusForbidden, "Form expired", views.SiteFrame{},
				views.SiteMessage("Form expired", "This form expired or came from another site. Nothing was changed; go back, reload the page and try again."))
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (p *Pages) setCookie(w http.ResponseWriter, name, value string, maxAge int) {
	// Lax, not Strict: the bank's page sends the passenger back here with
	// a top-level GET, which must arrive signed in.
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: "/", MaxAge: maxAge, HttpOnly: true,
		Secure: p.cfg.SecureCookies, SameSite: http.SameSiteLaxMode})
}

func randomToken() string { return rand.Text() }

func (p *Pages) signInPage(w http.ResponseWriter, r *http.Request) {
	if sessionOf(r).UserID != 0 {
		http.Redirect(w, r, safeNext(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	}
	var f views.SiteFrame
	page := views.SignInPage{Next: safeNext(r.URL.Query().Get("next"))}
	if r.URL.Query().Get("reset") == "1" { // back from a password reset (signup.go)
		f.Notice, page.Login = views.T(r.Context(), "reset.done"), auth.Sanitise(r.URL.Query().Get("login"), 64)
	}
	p.render(w, r, http.StatusOK, "Sign in", f, views.SiteSignIn(views.SiteFrame{CSRF: p.csrfToken(r)}, page))
}

// signIn checks the password through the API's login guard, then starts a
// cookie session and binds this browser as a device of the account.
func (p *Pages) signIn(w http.ResponseWriter, r *http.Request) {
	login, password, next := strings.TrimSpace(r.PostFormValue("login")), r.PostFormValue("password"), safeNext(r.PostFormValue("next"))
	again := func(status int, msg string, page views.SignInPage) {
		f := views.SiteFrame{Error: msg}
		page.Login, page.Next = auth.Sanitise(login, 64), next
		p.render(w, r, status, "Sign in", f, views.SiteSignIn(views.SiteFrame{CSRF: p.csrfToken(r)}, page))
	}
	if login == "" || password == "" || len(login) > 64 || len(password) > 256 {
		again(http.StatusBadRequest, "Enter your user ID (up to 64 characters) and password.", views.SignInPage{})
		return
	}
	ip := httpx.ClientIP(r)
	proof := auth.Proof{Challenge: r.PostFormValue("challenge"), Nonce: r.PostFormValue("nonce")}
	s, err := auth.PassengerLogin(r.Context(), p.cfg.Pool, p.cfg.Guard, login, password, ip, proof)
	var throttled *auth.Throttled
	var busy *auth.Busy
	switch {
	case errors.Is(err, auth.ErrWrongCredentials):
		again(http.StatusUnauthorized, "Wrong user ID or password.", views.SignInPage{})
		return
	case errors.As(err, &throttled):
		n := auth.RetrySeconds(throttled.RetryAfter)
		w.Header().Set("Retry-After", strconv.Itoa(n))
		page, msg := views.SignInPage{RetrySecs: n}, fmt.Sprintf("Too many failed sign-ins. Try again in %d seconds.", n)
		if throttled.AccountOnly {
			// Only the account's own lock refuses (someone elsewhere may be
			// guessing at it): a puzzle solved in this page opens it for one
			// sign-in, as on the console and POST /v1/auth/login/challenge.
			ch, cerr := p.cfg.Guard.Challenge(r.Context(), login, ip)
			if cerr == nil && ch != nil {
				page.Challenge, page.Bits, page.Worker = ch.Token, ch.Bits, views.StaticURL("pow-worker.js")
				msg = fmt.Sprintf("Too many failed sign-ins to this account. Your browser will solve a short puzzle to let you in now; or wait %d seconds.", n)
				if throttled.BadProof {
					msg = "That puzzle answer was not accepted (each puzzle works once). Your browser is solving a new one."
				}
			}
		}
		again(http.StatusTooManyRequests, msg, page)
		return
	case errors.As(err, &busy):
		w.Header().Set("Retry-After", strconv.Itoa(auth.RetrySeconds(busy.RetryAfter)))
		again(http.StatusServiceUnavailable, "Very many people are signing in right now; please retry in a second.", views.SignInPage{})
		return
	case err != nil:
		p.fail(w, r, "Sign in", err)
		return
	}
	s.ID, s.ExpiresAt = auth.NewSessionID(), p.cfg.Now().Add(p.cfg.SessionTTL).Truncate(time.Second)
	p.startSession(w, s)
	p.bindDevice(w, r, s.UserID)
	if c, err := r.Cookie(langCookie); err == nil {
		// The language chosen before signing in is the account's, for
		// the messages sent to it.
		p.rememberLang(r, s.UserID, c.Value)
	}
	if !s.Verified {
		next = "/verify?next=" + url.QueryEscape(next)
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (p *Pages) startSession(w http.ResponseWriter, s auth.Session) {
	p.setCookie(w, sessionCookie, p.cfg.Signer.Sign(s), int(time.Until(s.ExpiresAt).Seconds()))
	p.setCookie(w, csrfCookie, randomToken(), 0) // a new session, a new form token
}

// bindDevice binds this browser to the account: the page keeps a random
// device token a year and the server's signed binding a month, which the
// waiting room and the hold path check like the app's X-Device-Token. A
// refusal (too many accounts on this device) is not a reason to refuse
// the sign-in: the hold path will refuse what needs a binding.
func (p *Pages) bindDevice(w http.ResponseWriter, r *http.Request, userID int64) {
	if p.cfg.Admission == nil {
		return
	}
	dev := ""
	if c, err := r.Cookie(deviceCookie); err == nil && len(c.Value) >= 16 && len(c.Value) <= 256 {
		dev = c.Value
	} else {
		dev = randomToken()
		p.setCookie(w, deviceCookie, dev, 365*24*3600)
	}
	b, err := p.cfg.Admission.BindDevice(r.Context(), userID, dev, "")
	if err != nil {
		p.cfg.Log.Warn("bind device on sign-in", "user", userID, "err", err)
		p.setCookie(w, bindingCookie, "", -1)
		return
	}
	p.setCookie(w, bindingCookie, b.DeviceToken, int(time.Until(b.ExpiresAt).Seconds()))
}

func (p *Pages) deviceBinding(r *http.Request) string {
	if c, err := r.Cookie(bindingCookie); err == nil {
		return c.Value
	}
	return ""
}

// signOut revokes the session (everywhere its token is used) and clears
// the cookie.
func (p *Pages) signOut(w http.ResponseWriter, r *http.Request) {
	if err := p.cfg.Revocations.Logout(r.Context(), sessionOf(r).Session); err != nil {
		p.fail(w, r, "Sign out", err)
		return
	}
	p.setCookie(w, sessionCookie, "", -1)
	p.setCookie(w, csrfCookie, "", -1)
	http.Redirect(w, r, "/signin", http.StatusSeeOther)
}

// setLang remembers the passenger's language and goes back.
func (p *Pages) setLang(w http.ResponseWriter, r *http.Request) {
	lang := r.PostFormValue("lang")
	if lang != "hi" {
		lang = "en"
	}
	p.setCookie(w, langCookie, lang, 365*24*3600)
	if uid := sessionOf(r).UserID; uid != 0 {
		p.rememberLang(r, uid, lang)
	}
	http.Redirect(w, r, safeNext(r.PostFormValue("back")), http.StatusSeeOther)
}

// safeNext keeps redirects on this site's pages (not the JSON API);
// anything else goes home.
func safeNext(next string) string {
	if p, ok := httpx.LocalPath(next, "/", "/v1/"); ok {
		return p
	}
	return "/"
}

func (p *Pages) verifyPage(w http.ResponseWriter, r *http.Request) {
	if s := sessionOf(r); !s.Verified && p.cfg.Signup != nil {
		// An account opened here verifies its identity with the identity
		// service; its phone is proven already (signup.go).
		if kyc, err := p.cfg.Signup.KYCRequired(r.Context(), s.UserID); err == nil && kyc {
			http.Redirect(w, r, "/identity?next="+url.QueryEscape(safeNext(r.URL.Query().Get("next"))), http.StatusSeeOther)
			return
		}
	}
	p.render(w, r, http.StatusOK, "Verify", views.SiteFrame{Active: "passengers"}, views.SiteVerify(views.SiteFrame{CSRF: p.csrfToken(r)},
		views.VerifyPage{Verified: sessionOf(r).Verified, Next: safeNext(r.URL.Query().Get("next"))}))
}

// verifySend sends a one-time code by SMS to the mobile number the form
// names (through the notifications outbox); the right code makes the
// number the account's identity, which the per-person Tatkal cap counts
// across accounts. The number is required here: an identity without one
// would escape that cap.
func (p *Pages) verifySend(w http.ResponseWriter, r *http.Request) {
	next := safeNext(r.PostFormValue("next"))
	phone := strings.TrimSpace(r.PostFormValue("phone"))
	if len(phone) > 20 {
		phone = phone[:20]
	}
	f := views.SiteFrame{Active: "passengers"}
	page := views.VerifyPage{Next: next, Phone: phone}
	status := http.StatusOK
	switch {
	case p.cfg.Admission == nil:
		f.Error = "Identity verification is not available on this server."
	case phone == "":
		f.Error, status = "Give a 10-digit Indian mobile number.", http.StatusBadRequest
	default:
		sent, err := p.cfg.Admission.RequestOTPTo(r.Context(), sessionOf(r).UserID, phone)
		switch booking.ErrorCode(err) {
		case "":
			f.Notice = fmt.Sprintf("A code was sent by %s to %s. It works for %d minutes.", strings.Join(sent.Channels, " and "), phone, sent.ExpiresInS/60)
			page.Sent = true
		case booking.EINTERNAL:
			p.fail(w, r, "Verify", err)
			return
		case booking.ELIMIT: // too soon or too many: the code already sent still works
			f.Error, page.Sent = booking.ErrorMessage(err), true
		case booking.EINVALID:
			f.Error, status = booking.ErrorMessage(err), http.StatusBadRequest
		default:
			f.Error = booking.ErrorMessage(err)
		}
	}
	p.render(w, r, status, "Verify", f, views.SiteVerify(views.SiteFrame{CSRF: p.csrfToken(r)}, page))
}

// verify checks the code; the session is signed again as verified (same
// id and generation, so signing out still reaches it).
func (p *Pages) verify(w http.ResponseWriter, r *http.Request) {
	next := safeNext(r.PostFormValue("next"))
	if p.cfg.Admission == nil {
		p.fail(w, r, "Verify", booking.Errorf(booking.EUNAVAIL, "NO_VERIFICATION", "Identity verification is not available."))
		return
	}
	old := sessionOf(r)
	acct, err := p.cfg.Admission.VerifyOTP(r.Context(), old.UserID, strings.TrimSpace(r.PostFormValue("code")))
	if err != nil {
		if booking.ErrorCode(err) == booking.EINTERNAL {
			p.fail(w, r, "Verify", err)
			return
		}
		p.render(w, r, http.StatusBadRequest, "Verify", views.SiteFrame{Active: "passengers", Error: booking.ErrorMessage(err)},
			views.SiteVerify(views.SiteFrame{CSRF: p.csrfToken(r)}, views.VerifyPage{Sent: true, Next: next}))
		return
	}
	s := auth.Session{UserID: acct.UserID, Verified: true, Agent: acct.Agent, CreatedAt: acct.CreatedAt,
		ExpiresAt: p.cfg.Now().Add(p.cfg.SessionTTL).Truncate(time.Second), Generation: old.Generation, ID: old.ID}
	p.startSession(w, s)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// rememberLang records the passenger's language for the messages sent to
// them (booking.NotifyT). The page's own language is the cookie's, so a
// failure here is logged, not shown.
func (p *Pages) rememberLang(r *http.Request, userID int64, lang string) {
	if err := p.cfg.Booking.SetLanguage(r.Context(), userID, lang); err != nil {
		p.cfg.Log.Warn("language not stored", "user", userID, "err", err)
	}
}
