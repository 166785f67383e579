package api

import (
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"tatkal/booking"
	"tatkal/booking/api/reply"
	"tatkal/booking/auth"
	"tatkal/booking/httpx"
	"tatkal/booking/signup"
)

// signupRoutes mounts opening an account, verifying its identity and
// resetting a password (booking/signup), the site's /signup, /identity and
// /reset as JSON.
func (a *API) signupRoutes(r chi.Router) {
	r.Group(func(r chi.Router) {
		r.Use(a.limitAddress, a.requireSignup) // unauthenticated: limited per source address
		r.Post("/v1/signup/code", a.signupCode)
		r.Post("/v1/signup", a.signup)
		r.Post("/v1/auth/reset/code", a.resetCode)
		r.Post("/v1/auth/reset", a.reset)
	})
	r.Group(func(r chi.Router) {
		r.Use(a.requireSignup, a.requireSession)
		r.Post("/v1/account/identity", a.verifyIdentity)
	})
}

// requireSignup answers 503 where the process opens no accounts.
func (a *API) requireSignup(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.signupSvc == nil {
			reply.Error(w, r, a.log, booking.Errorf(booking.EUNAVAIL, "NO_SIGNUP", "Accounts cannot be opened on this server."))
			return
		}
		next.ServeHTTP(w, r)
	})
}

type codeRequest struct {
	Phone string `json:"phone"`
	Lang  string `json:"lang"` // en or hi: the SMS's language
}

// signupCode sends a sign-up code by SMS. The answer is the same whether
// the number already has an account (its owner is told instead).
func (a *API) signupCode(w http.ResponseWriter, r *http.Request) {
	a.sendCode(w, r, signup.PurposeSignup)
}

// resetCode sends a password reset code to an account's number. The answer
// is the same whether the number has an account.
func (a *API) resetCode(w http.ResponseWriter, r *http.Request) {
	a.sendCode(w, r, signup.PurposeReset)
}

func (a *API) sendCode(w http.ResponseWriter, r *http.Request, purpose string) {
	var req codeRequest
	if err := decode(w, r, &req); err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	sent, err := a.signupSvc.RequestCode(r.Context(), purpose, req.Phone, httpx.ClientIP(r), req.Lang)
	if err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	reply.JSON(w, http.StatusAccepted, sent)
}

type signupRequest struct {
	Phone    string `json:"phone"`
	Code     string `json:"code"`
	Email    string `json:"email"`
	Password string `json:"password"`
	Lang     string `json:"lang"`
}

// signup opens the account once the code is right and answers a session
// for it (not yet identity-verified: POST /v1/account/identity next).
func (a *API) signup(w http.ResponseWriter, r *http.Request) {
	var req signupRequest
	if err := decode(w, r, &req); err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	acct, err := a.signupSvc.Register(r.Context(), signup.Registration{Phone: req.Phone, Code: req.Code, Email: req.Email, Password: req.Password, Lang: req.Lang})
	if err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	s := auth.Session{UserID: acct.UserID, CreatedAt: acct.CreatedAt, ID: auth.NewSessionID(), ExpiresAt: a.now().Add(a.ttl).Truncate(time.Second)}
	reply.JSON(w, http.StatusCreated, loginResponse{Token: a.signer.Sign(s), UserID: acct.UserID, ExpiresAt: s.ExpiresAt})
}

type resetRequest struct {
	Phone    string `json:"phone"`
	Code     string `json:"code"`
	Password string `json:"password"`
}

// reset sets a new password with the code sent by SMS; every session of
// the account ends.
func (a *API) reset(w http.ResponseWriter, r *http.Request) {
	var req resetRequest
	if err := decode(w, r, &req); err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	if err := a.signupSvc.Reset(r.Context(), req.Phone, req.Code, req.Password); err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	reply.JSON(w, http.StatusOK, map[string]string{"message": "Your password is changed and every session signed out. Log in with the new password."})
}

type identityRequest struct {
	Number      string `json:"aadhaar"`
	Name        string `json:"name"`
	YearOfBirth int    `json:"year_of_birth"`
	Consent     bool   `json:"consent"`
}

// verifyIdentity checks the account's identity with the identity verifier
// and answers a fresh session that says the account is verified (same id
// and generation, so logging out still reaches it).
func (a *API) verifyIdentity(w http.ResponseWriter, r *http.Request) {
	var req identityRequest
	if err := decode(w, r, &req); err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	old := sessionFrom(r.Context())
	acct, err := a.signupSvc.VerifyIdentity(r.Context(), old.UserID, signup.Identity{Number: req.Number, Name: req.Name, YearOfBirth: req.YearOfBirth, Consent: req.Consent})
	if err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	s := auth.Session{UserID: acct.UserID, Verified: true, Agent: old.Agent, CreatedAt: acct.CreatedAt, ExpiresAt: a.now().Add(a.ttl).Truncate(time.Second),
		Generation: old.Generation, ID: old.ID}
	reply.JSON(w, http.StatusOK, loginResponse{Token: a.signer.Sign(s), UserID: acct.UserID, Verified: true, Agent: s.Agent, ExpiresAt: s.ExpiresAt})
}
