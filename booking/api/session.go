package api

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"tatkal/booking"
	"tatkal/booking/admission"
	"tatkal/booking/api/reply"
	"tatkal/booking/auth"
	"tatkal/booking/httpx"
)

type loginRequest struct {
	Login    string `json:"login"`
	Password string `json:"password"`
	// A solved sign-in challenge (POST /v1/auth/login/challenge), which
	// opens the account's lock after repeated failures.
	Challenge string `json:"challenge,omitempty"`
	Nonce     string `json:"nonce,omitempty"`
}

type loginResponse struct {
	Token     string    `json:"token"`
	UserID    int64     `json:"user_id"`
	Verified  bool      `json:"verified"`
	Agent     bool      `json:"agent"`
	ExpiresAt time.Time `json:"expires_at"`
}

// login checks a password and hands out a signed session token. Every
// attempt goes through the login guard (booking/auth.Guard): backoff per
// account and IP, a bounded number of password hashes at once, and an
// unknown login costs a hash like a wrong password. Once the account is
// locked, a solved challenge lets the attempt through the account's lock
// (never the address's).
func (a *API) login(w http.ResponseWriter, r *http.Request) {
	var req loginRequest
	if err := decode(w, r, &req); err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	if req.Login == "" || req.Password == "" || len(req.Login) > 64 || len(req.Password) > 256 ||
		!utf8.ValidString(req.Login) || strings.ContainsRune(req.Login, 0) {
		reply.Error(w, r, a.log, booking.Errorf(booking.EINVALID, "BAD_CREDENTIALS_FORMAT", "Send a login (up to 64 characters) and a password."))
		return
	}
	s, err := auth.PassengerLogin(r.Context(), a.pool, a.guard, req.Login, req.Password, httpx.ClientIP(r), auth.Proof{Challenge: req.Challenge, Nonce: req.Nonce})
	if err != nil {
		reply.Error(w, r, a.log, loginError(w, err))
		return
	}
	s.ID, s.ExpiresAt = auth.NewSessionID(), a.now().Add(a.ttl).Truncate(time.Second)
	reply.JSON(w, http.StatusOK, loginResponse{Token: a.signer.Sign(s), UserID: s.UserID, Verified: s.Verified, Agent: s.Agent, ExpiresAt: s.ExpiresAt})
}

type loginChallengeRequest struct {
	Login string `json:"login"`
}

// loginChallenge gives the proof-of-work challenge that opens a locked
// account's lock for one sign-in, in the form of the hold's challenge.
// An account that is not locked needs none (409 NO_CHALLENGE_NEEDED); an
// address past its own limits gets none (429).
func (a *API) loginChallenge(w http.ResponseWriter, r *http.Request) {
	var req loginChallengeRequest
	if err := decode(w, r, &req); err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	if req.Login == "" || len(req.Login) > 64 {
		reply.Error(w, r, a.log, booking.Errorf(booking.EINVALID, "BAD_CREDENTIALS_FORMAT", "Send the login (up to 64 characters) you want to sign in to."))
		return
	}
	c, err := a.guard.Challenge(r.Context(), req.Login, httpx.ClientIP(r))
	if err != nil {
		reply.Error(w, r, a.log, loginError(w, err))
		return
	}
	if c == nil {
		reply.Error(w, r, a.log, booking.Errorf(booking.ECONFLICT, "NO_CHALLENGE_NEEDED", "This account is not locked; sign in as usual."))
		return
	}
	reply.JSON(w, http.StatusOK, admission.ChallengeView{Challenge: c.Token, Type: "POW_SHA256", Bits: c.Bits,
		ExpiresInS: int(c.ExpiresAt.Sub(a.now()).Seconds()),
		How: "Find a nonce (up to 32 characters) such that SHA-256(challenge + \"|\" + nonce) starts with difficulty_bits zero bits; " +
			"send challenge and nonce with your sign-in. It works once."})
}

// loginError turns a guard refusal into the API's answer, with Retry-After.
func loginError(w http.ResponseWriter, err error) error {
	var throttled *auth.Throttled
	var busy *auth.Busy
	switch {
	case errors.Is(err, auth.ErrWrongCredentials):
		return booking.Errorf(booking.EUNAUTH, "WRONG_CREDENTIALS", "Wrong login or password.")
	case errors.As(err, &throttled):
		n := auth.RetrySeconds(throttled.RetryAfter)
		w.Header().Set("Retry-After", strconv.Itoa(n))
		switch {
		case throttled.BadProof:
			return booking.Errorf(booking.ELIMIT, "CHALLENGE_REFUSED", "The challenge is unknown, used, expired or not solved. "+
				"Get a new one (POST /v1/auth/login/challenge), solve it and sign in with it, or try again in %d seconds.", n)
		case throttled.AccountOnly:
			return booking.Errorf(booking.ELIMIT, "ACCOUNT_LOCKED", "Too many failed sign-ins to this account. Try again in %d seconds, "+
				"or get a challenge (POST /v1/auth/login/challenge), solve it and send challenge and nonce with your sign-in.", n)
		}
		return booking.Errorf(booking.ELIMIT, "TOO_MANY_ATTEMPTS", "Too many failed sign-ins. Try again in %d seconds.", n)
	case errors.As(err, &busy):
		w.Header().Set("Retry-After", strconv.Itoa(auth.RetrySeconds(busy.RetryAfter)))
		return booking.Errorf(booking.EOVERLOADED, "LOGIN_BUSY", "Very many people are signing in right now; please retry in a second.")
	}
	return err
}

// logout revokes the session that sent it.
func (a *API) logout(w http.ResponseWriter, r *http.Request) {
	if err := a.revocations.Logout(r.Context(), sessionFrom(r.Context())); err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// logoutEverywhere revokes every session of the account issued so far.
func (a *API) logoutEverywhere(w http.ResponseWriter, r *http.Request) {
	if err := a.revocations.LogoutEverywhere(r.Context(), sessionFrom(r.Context()).UserID); err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

type prepareRequest struct {
	DeviceToken       string `json:"device_token"`
	ClientAttestation string `json:"client_attestation"`
	// ClientTime lets the server tell the client how far its clock is off.
	ClientTime *time.Time `json:"client_time"`
	Intent     *intent    `json:"intent"`
}

type intent struct {
	TrainNo     string `json:"train_no"`
	JourneyDate string `json:"journey_date"`
	Class       string `json:"class"`
	Quota       string `json:"quota"`
}

type prepareResponse struct {
	ServerTime            time.Time  `json:"server_time"`
	ServerTimeOffsetMs    *int64     `json:"server_time_offset_ms"`
	WindowOpensAt         *time.Time `json:"window_opens_at,omitempty"`
	WindowClosesAt        *time.Time `json:"window_closes_at,omitempty"`
	Mode                  string     `json:"mode,omitempty"`
	PrefetchBundleVersion string     `json:"prefetch_bundle_version"`
}

// prepare tells a client, before the window, the server's time, its own
// clock offset and when its train's window opens.
func (a *API) prepare(w http.ResponseWriter, r *http.Request) {
	var req prepareRequest
	if err := decode(w, r, &req); err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	now := a.now()
	resp := prepareResponse{ServerTime: now, PrefetchBundleVersion: a.bundle}
	if req.ClientTime != nil {
		off := now.Sub(*req.ClientTime).Milliseconds()
		resp.ServerTimeOffsetMs = &off
	}
	if req.Intent != nil {
		date, err := parseDate(req.Intent.JourneyDate)
		if err != nil {
			reply.Error(w, r, a.log, err)
			return
		}
		quota := req.Intent.Quota
		if quota == "" {
			quota = "TQ"
		}
		shard, err := a.svc.Catalog().Find(r.Context(), req.Intent.TrainNo, date, req.Intent.Class, quota)
		if err != nil {
			reply.Error(w, r, a.log, err)
			return
		}
		opens, closes := shard.OpensAt.In(booking.IST), shard.ClosesAt.In(booking.IST)
		resp.WindowOpensAt, resp.WindowClosesAt, resp.Mode = &opens, &closes, shard.Mode
	}
	reply.JSON(w, http.StatusOK, resp)
}

func parseDate(s string) (time.Time, error) {
	d, err := time.ParseInLocation(time.DateOnly, s, booking.IST)
	if err != nil {
		if len(s) > len(time.DateOnly) {
			s = s[:len(time.DateOnly)] + "…" // never echo a large input back
		}
		return time.Time{}, booking.Errorf(booking.EINVALID, "BAD_DATE", "journey_date must be a date like 2026-12-01; got %q.", s)
	}
	return d, nil
}
