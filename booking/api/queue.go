package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"tatkal/booking"
	"tatkal/booking/admission"
	"tatkal/booking/api/reply"
	"tatkal/booking/auth"
	"tatkal/booking/httpx"
	"tatkal/booking/metrics"
)

// queueRoutes mounts the waiting room, identity verification, device
// binding and the booking-time challenge.
func (a *API) queueRoutes(r chi.Router) {
	r.With(a.queueGate, a.limitAddress).Get("/v1/windows/{id}/fairness", a.fairness)
	r.Group(func(r chi.Router) {
		r.Use(a.queueGate, a.requireSession)
		r.Post("/v1/queue/enter", a.queueEnter)
		r.Get("/v1/queue/status", a.queueStatus)
		r.Post("/v1/auth/otp/request", a.otpRequest)
		r.Post("/v1/auth/otp/verify", a.otpVerify)
		r.Post("/v1/devices/bind", a.bindDevice)
		r.Post("/v1/challenge", a.challenge)
		r.Post("/v1/challenge/otp", a.challengeOTP)
	})
}

// queueGate bounds the queue tier's work in flight; beyond it, the static
// high-demand answer, never load passed on.
func (a *API) queueGate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.adm == nil {
			reply.Error(w, r, a.log, booking.Errorf(booking.EUNAVAIL, "NO_WAITING_ROOM", "The waiting room is not running on this server."))
			return
		}
		release, ok := a.adm.Acquire()
		if !ok {
			reply.Error(w, r, a.log, booking.HighDemand())
			return
		}
		defer release()
		next.ServeHTTP(w, r)
	})
}

// limitAddress limits unauthenticated requests per source address, at a
// threshold a carrier NAT of thousands of honest users does not reach
// (admission.DefaultLimitIP). Signed-in queue calls never pass here: they
// are limited per account and device, so neighbours behind one address
// never share a budget.
func (a *API) limitAddress(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.adm != nil && a.adm.LimitAddress(r.Context(), httpx.ClientIP(r)) != nil {
			reply.Error(w, r, a.log, booking.HighDemand())
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (a *API) admCaller(r *http.Request) admission.Caller {
	c := callerFrom(r.Context())
	tok, _ := bearer(r)
	return admission.Caller{UserID: c.UserID, Verified: c.Verified, Agent: c.Agent, CreatedAt: c.CreatedAt,
		SessionToken: tok, DeviceToken: r.Header.Get("X-Device-Token"), IP: httpx.ClientIP(r), Attestation: r.Header.Get("X-Client-Attestation")}
}

type queueEnterRequest struct {
	SessionID string `json:"session_id"` // accepted for compatibility; the bearer token is the session
	Intent    intent `json:"intent"`
}

func (a *API) writeView(w http.ResponseWriter, v admission.View) {
	if v.Status == admission.SoldOut && !a.svc.NonEssentialEnabled() {
		v.Alternatives = nil // a non-essential suggestion, off during the peak
		v.AlternativesOff = booking.ErrorMessage(booking.SwitchedOff("Suggesting other trains"))
	}
	w.Header().Set("Retry-After", strconv.Itoa(max(v.RetryAfterS, 1)))
	w.Header().Set("Cache-Control", "no-store")
	reply.JSON(w, http.StatusOK, v)
}

// observeQueue records how long a waiting-room request took.
func observeQueue(op string, start time.Time) {
	metrics.Queue.WithLabelValues(op).Observe(time.Since(start).Seconds())
}

// queueEnter joins the waiting room of one train, date and class, once per
// account: entering again returns the same ticket.
func (a *API) queueEnter(w http.ResponseWriter, r *http.Request) {
	defer observeQueue("enter", time.Now())
	var req queueEnterRequest
	if err := decode(w, r, &req); err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	date, err := parseDate(req.Intent.JourneyDate)
	if err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	if req.Intent.TrainNo == "" || req.Intent.Class == "" {
		reply.Error(w, r, a.log, booking.Errorf(booking.EINVALID, "BAD_INTENT", "Say which train_no, journey_date and class you want to book."))
		return
	}
	v, err := a.adm.Enter(r.Context(), a.admCaller(r), admission.Intent{TrainNo: req.Intent.TrainNo, JourneyDate: date, Class: req.Intent.Class, Quota: req.Intent.Quota})
	if err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	a.writeView(w, v)
}

// queueStatus tells a ticket holder where they stand and when to ask again.
func (a *API) queueStatus(w http.ResponseWriter, r *http.Request) {
	defer observeQueue("status", time.Now())
	ticket := r.URL.Query().Get("ticket")
	if ticket == "" || len(ticket) > 64 {
		reply.Error(w, r, a.log, booking.Errorf(booking.EINVALID, "NO_TICKET", "Send ?ticket= with the queue_ticket you were given."))
		return
	}
	v, err := a.adm.Status(r.Context(), a.admCaller(r), ticket)
	if err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	a.writeView(w, v)
}

// fairness publishes a window's seed commitment, and after the draw the
// seed and, with ?entrants=1, the cohort to recompute the order from.
func (a *API) fairness(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil || id <= 0 {
		reply.Error(w, r, a.log, booking.Errorf(booking.EINVALID, "BAD_WINDOW", "The window id is a positive number."))
		return
	}
	f, err := a.adm.Fairness(r.Context(), id, r.URL.Query().Get("entrants") == "1")
	if err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	reply.JSON(w, http.StatusOK, f)
}

type otpRequestBody struct {
	// Phone, when given, is the mobile number to verify: the code goes
	// there by SMS, and the right code makes it the account's identity for
	// the per-person cap.
	Phone string `json:"phone"`
}

// otpRequest sends a one-time code to verify the account's identity. The
// body is optional ({"phone": "98765 43210"}).
func (a *API) otpRequest(w http.ResponseWriter, r *http.Request) {
	var req otpRequestBody
	if r.ContentLength != 0 {
		if err := decode(w, r, &req); err != nil {
			reply.Error(w, r, a.log, err)
			return
		}
	}
	sent, err := a.adm.RequestVerification(r.Context(), callerFrom(r.Context()).UserID, req.Phone)
	if err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	reply.JSON(w, http.StatusOK, sent)
}

type otpVerifyRequest struct {
	Code string `json:"code"`
}

// otpVerify checks the code and answers a fresh session that says the
// account is verified.
func (a *API) otpVerify(w http.ResponseWriter, r *http.Request) {
	var req otpVerifyRequest
	if err := decode(w, r, &req); err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	acct, err := a.adm.VerifyOTP(r.Context(), callerFrom(r.Context()).UserID, req.Code)
	if err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	// The same session, now verified: it keeps its id and generation, so
	// logging out still reaches it.
	old := sessionFrom(r.Context())
	s := auth.Session{UserID: acct.UserID, Verified: true, Agent: acct.Agent, CreatedAt: acct.CreatedAt, ExpiresAt: a.now().Add(a.ttl).Truncate(time.Second),
		Generation: old.Generation, ID: old.ID}
	reply.JSON(w, http.StatusOK, loginResponse{Token: a.signer.Sign(s), UserID: acct.UserID, Verified: true, Agent: acct.Agent, ExpiresAt: s.ExpiresAt})
}

type bindDeviceRequest struct {
	DeviceToken       string `json:"device_token"`
	ClientAttestation string `json:"client_attestation"`
}

// bindDevice binds the app's device token to the account and returns the
// signed binding to send as X-Device-Token.
func (a *API) bindDevice(w http.ResponseWriter, r *http.Request) {
	var req bindDeviceRequest
	if err := decode(w, r, &req); err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	b, err := a.adm.BindDevice(r.Context(), callerFrom(r.Context()).UserID, req.DeviceToken, req.ClientAttestation)
	if err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	reply.JSON(w, http.StatusOK, b)
}

type challengeRequest struct {
	Attempt string `json:"attempt"`
}

// challenge issues the booking-time proof of work for one hold attempt.
func (a *API) challenge(w http.ResponseWriter, r *http.Request) {
	var req challengeRequest
	if err := decode(w, r, &req); err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	v, err := a.adm.Challenge(r.Context(), a.admCaller(r), req.Attempt)
	if err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	reply.JSON(w, http.StatusOK, v)
}

// challengeOTP sends a code by SMS that a hold carries in place of a
// solved challenge ({"type":"OTP","code":...}), for a client that cannot
// run the proof of work; rate-limited like identity codes. The asking
// session becomes the account's booking session.
func (a *API) challengeOTP(w http.ResponseWriter, r *http.Request) {
	sent, err := a.adm.RequestChallengeOTPFor(r.Context(), a.admCaller(r))
	if err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	reply.JSON(w, http.StatusOK, sent)
}
