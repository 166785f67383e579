package web

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"tatkal/booking"
	"tatkal/booking/auth"
	"tatkal/booking/httpx"
	"tatkal/booking/signup"
	"tatkal/views"
)

// Opening an account (booking/signup), as the API's /v1/signup: the
// number and e-mail address, the code sent by SMS with a password, then
// the identity check; and a forgotten password reset by a code. Each
// field's error is shown under it; a refusal keeps what was typed (but
// never a password or a code).

// refused turns a domain refusal into the page's errors: under its field,
// or at the top. Internal errors and overload are the caller's to fail.
func refused(err error, f *views.SiteFrame) (map[string]string, int) {
	status := http.StatusBadRequest
	switch booking.ErrorCode(err) {
	case booking.ELIMIT:
		status = http.StatusTooManyRequests
	case booking.ECONFLICT:
		status = http.StatusConflict
	case booking.EUNAVAIL:
		status = http.StatusServiceUnavailable
	}
	errs := map[string]string{}
	if k := fieldOf[booking.ErrorReason(err)]; k != "" {
		errs[k] = booking.ErrorMessage(err)
	} else {
		f.Error = booking.ErrorMessage(err)
	}
	return errs, status
}

func internal(err error) bool {
	c := booking.ErrorCode(err)
	return c == booking.EINTERNAL || c == booking.EOVERLOADED
}

func formPhone(r *http.Request) string {
	p := strings.TrimSpace(r.PostFormValue("phone"))
	if len(p) > 20 {
		p = p[:20]
	}
	return p
}

func formEmail(r *http.Request) string {
	e := strings.TrimSpace(r.PostFormValue("email"))
	if len(e) > 254 {
		e = e[:254]
	}
	return e
}

func (p *Pages) signupPage(w http.ResponseWriter, r *http.Request) {
	if sessionOf(r).UserID != 0 {
		http.Redirect(w, r, "/identity", http.StatusSeeOther)
		return
	}
	p.renderSignup(w, r, http.StatusOK, views.SiteFrame{}, views.SignupPage{})
}

func (p *Pages) renderSignup(w http.ResponseWriter, r *http.Request, status int, f views.SiteFrame, page views.SignupPage) {
	p.render(w, r, status, views.T(r.Context(), "signup"), f, views.SiteSignup(views.SiteFrame{CSRF: p.csrfToken(r)}, page))
}

// signupCode checks the e-mail address and sends the code (the same words
// whether the number has an account), then asks for the code and a
// password.
func (p *Pages) signupCode(w http.ResponseWriter, r *http.Request) {
	page := views.SignupPage{Phone: formPhone(r), Email: formEmail(r)}
	var f views.SiteFrame
	if _, err := signup.CheckEmail(page.Email); err != nil {
		page.Errors, _ = refused(err, &f)
		p.renderSignup(w, r, http.StatusBadRequest, f, page)
		return
	}
	sent, err := p.cfg.Signup.RequestCode(r.Context(), signup.PurposeSignup, page.Phone, httpx.ClientIP(r), views.Lang(r.Context()))
	switch {
	case err == nil:
		f.Notice, page.Sent = sent.Message, true
	case internal(err):
		p.fail(w, r, "Sign up", err)
		return
	default:
		var status int
		page.Errors, status = refused(err, &f)
		// Too soon or too many: a code already sent still works.
		page.Sent = booking.ErrorCode(err) == booking.ELIMIT
		p.renderSignup(w, r, status, f, page)
		return
	}
	p.renderSignup(w, r, http.StatusOK, f, page)
}

// signupFinish opens the account and signs the passenger in, then asks
// for the identity check.
func (p *Pages) signupFinish(w http.ResponseWriter, r *http.Request) {
	page := views.SignupPage{Phone: formPhone(r), Email: formEmail(r), Sent: true}
	acct, err := p.cfg.Signup.Register(r.Context(), signup.Registration{Phone: page.Phone, Code: r.PostFormValue("code"), Email: page.Email,
		Password: r.PostFormValue("password"), Lang: views.Lang(r.Context())})
	if err != nil {
		if internal(err) {
			p.fail(w, r, "Sign up", err)
			return
		}
		var f views.SiteFrame
		var status int
		page.Errors, status = refused(err, &f)
		if k := fieldOf[booking.ErrorReason(err)]; k == "phone" || k == "email" {
			page.Sent = false
		}
		p.renderSignup(w, r, status, f, page)
		return
	}
	s := auth.Session{UserID: acct.UserID, CreatedAt: acct.CreatedAt, ID: auth.NewSessionID(), ExpiresAt: p.cfg.Now().Add(p.cfg.SessionTTL).Truncate(time.Second)}
	p.startSession(w, s)
	p.bindDevice(w, r, s.UserID)
	http.Redirect(w, r, "/identity?new=1", http.StatusSeeOther)
}

func (p *Pages) identityPage(w http.ResponseWriter, r *http.Request) {
	var f views.SiteFrame
	if r.URL.Query().Get("new") == "1" {
		f.Notice = views.T(r.Context(), "signup.done")
	}
	f.Active = "passengers"
	p.render(w, r, http.StatusOK, views.T(r.Context(), "kyc.title"), f, views.SiteIdentity(views.SiteFrame{CSRF: p.csrfToken(r)},
		views.IdentityPage{Verified: sessionOf(r).Verified, Next: safeNext(r.URL.Query().Get("next"))}))
}

// identity asks the identity verifier; verified, the session is signed
// again as verified (same id and generation, so signing out reaches it).
func (p *Pages) identity(w http.ResponseWriter, r *http.Request) {
	old := sessionOf(r)
	page := views.IdentityPage{Number: strings.TrimSpace(r.PostFormValue("aadhaar")), Name: strings.TrimSpace(r.PostFormValue("name")),
		Year: strings.TrimSpace(r.PostFormValue("year")), Next: safeNext(r.PostFormValue("next"))}
	if len(page.Number) > 20 || len(page.Name) > 100 || len(page.Year) > 4 {
		page.Number, page.Name, page.Year = "", "", ""
	}
	year, _ := strconv.Atoi(page.Year)
	acct, err := p.cfg.Signup.VerifyIdentity(r.Context(), old.UserID, signup.Identity{Number: page.Number, Name: page.Name, YearOfBirth: year,
		Consent: r.PostFormValue("consent") == "1"})
	if err != nil {
		if internal(err) {
			p.fail(w, r, "Verify", err)
			return
		}
		f := views.SiteFrame{Active: "passengers"}
		var status int
		page.Errors, status = refused(err, &f)
		p.render(w, r, status, views.T(r.Context(), "kyc.title"), f, views.SiteIdentity(views.SiteFrame{CSRF: p.csrfToken(r)}, page))
		return
	}
	s := auth.Session{UserID: acct.UserID, Verified: true, Agent: old.Agent, CreatedAt: acct.CreatedAt,
		ExpiresAt: p.cfg.Now().Add(p.cfg.SessionTTL).Truncate(time.Second), Generation: old.Generation, ID: old.ID}
	p.startSession(w, s)
	next := "/identity"
	if page.Next != "/" {
		next = page.Next
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (p *Pages) resetPage(w http.ResponseWriter, r *http.Request) {
	p.renderReset(w, r, http.StatusOK, views.SiteFrame{}, views.ResetPage{})
}

func (p *Pages) renderReset(w http.ResponseWriter, r *http.Request, status int, f views.SiteFrame, page views.ResetPage) {
	p.render(w, r, status, views.T(r.Context(), "reset.title"), f, views.SiteReset(views.SiteFrame{CSRF: p.csrfToken(r)}, page))
}

// resetCode sends a reset code to the number's account; the same words
// whether there is one.
func (p *Pages) resetCode(w http.ResponseWriter, r *http.Request) {
	page := views.ResetPage{Phone: formPhone(r)}
	var f views.SiteFrame
	sent, err := p.cfg.Signup.RequestCode(r.Context(), signup.PurposeReset, page.Phone, httpx.ClientIP(r), views.Lang(r.Context()))
	switch {
	case err == nil:
		f.Notice, page.Sent = sent.Message, true
	case internal(err):
		p.fail(w, r, "Reset", err)
		return
	default:
		var status int
		page.Errors, status = refused(err, &f)
		page.Sent = booking.ErrorCode(err) == booking.ELIMIT
		p.renderReset(w, r, status, f, page)
		return
	}
	p.renderReset(w, r, http.StatusOK, f, page)
}

// reset sets the new password; every session of the account ends, and the
// passenger signs in with it.
func (p *Pages) reset(w http.ResponseWriter, r *http.Request) {
	page := views.ResetPage{Phone: formPhone(r), Sent: true}
	if err := p.cfg.Signup.Reset(r.Context(), page.Phone, r.PostFormValue("code"), r.PostFormValue("password")); err != nil {
		if internal(err) {
			p.fail(w, r, "Reset", err)
			return
		}
		var f views.SiteFrame
		var status int
		page.Errors, status = refused(err, &f)
		p.renderReset(w, r, status, f, page)
		return
	}
	http.Redirect(w, r, "/signin?reset=1&login="+url.QueryEscape(page.Phone), http.StatusSeeOther)
}
