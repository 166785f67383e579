package api

import (
	"context"
	_ "embed"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"tatkal/booking"
	"tatkal/booking/admission"
	"tatkal/booking/api/reply"
	"tatkal/booking/auth"
	"tatkal/booking/funnel"
	"tatkal/booking/payment"
	"tatkal/booking/signup"
)

//go:embed openapi.json
var openAPI []byte

// Config wires the API.
type Config struct {
	Service  *booking.Service
	Payments *payment.Service
	Pool     *pgxpool.Pool
	Signer   *auth.Signer
	// MaxHoldsInFlight bounds concurrent hold requests; the excess is shed
	// at once with 503 and Retry-After rather than queued without bound.
	MaxHoldsInFlight int
	SessionTTL       time.Duration
	// BundleVersion names the static assets clients should prefetch.
	BundleVersion string
	Log           *slog.Logger
	Now           func() time.Time
	// Admission is the waiting room (booking/api/queue.go); nil: its routes answer 503.
	Admission *admission.Service
	// Guard is the login guard (nil: one with the defaults, on Pool).
	Guard *auth.Guard
	// Revocations says which sessions were logged out (nil: one with the
	// defaults, on Pool: revoked tokens stop working within 5 s everywhere).
	Revocations *auth.Revocations
	// Signup opens accounts (signup.go); nil: its routes answer 503.
	Signup *signup.Service
}

// API is the /v1 handler set.
type API struct {
	svc      *booking.Service
	payments *payment.Service
	pool     *pgxpool.Pool
	signer   *auth.Signer
	inflight chan struct{}
	ttl      time.Duration
	bundle   string
	log      *slog.Logger
	now      func() time.Time
	adm      *admission.Service

	guard       *auth.Guard
	revocations *auth.Revocations
	signupSvc   *signup.Service
}

// New returns the API.
func New(cfg Config) *API {
	if cfg.MaxHoldsInFlight <= 0 {
		cfg.MaxHoldsInFlight = 512
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 12 * time.Hour
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.BundleVersion == "" {
		cfg.BundleVersion = "pb_1"
	}
	if cfg.Guard == nil {
		cfg.Guard = auth.NewGuard(auth.GuardConfig{Pool: cfg.Pool, Scope: "passenger", Now: cfg.Now, Log: cfg.Log})
	}
	if cfg.Revocations == nil {
		cfg.Revocations = auth.NewRevocations(auth.RevocationConfig{Pool: cfg.Pool, SessionTTL: cfg.SessionTTL, Now: cfg.Now, Log: cfg.Log})
	}
	return &API{svc: cfg.Service, payments: cfg.Payments, pool: cfg.Pool, signer: cfg.Signer, inflight: make(chan struct{}, cfg.MaxHoldsInFlight),
		ttl: cfg.SessionTTL, bundle: cfg.BundleVersion, log: cfg.Log, now: cfg.Now, adm: cfg.Admission,
		guard: cfg.Guard, revocations: cfg.Revocations, signupSvc: cfg.Signup}
}

// Routes mounts every /v1 route, top to bottom.
func (a *API) Routes(r chi.Router) {
	r.Get("/v1/openapi.json", a.openAPI)
	r.Group(func(r chi.Router) {
		r.Use(a.limitAddress) // unauthenticated: limited per source address (queue.go)
		r.Post("/v1/auth/login", a.login)
		r.Post("/v1/auth/login/challenge", a.loginChallenge)
		r.Post("/v1/session/prepare", a.prepare)
		r.Get("/v1/availability", a.availability)
	})
	r.Post("/v1/internal/payments/callback", a.callback)
	a.queueRoutes(r)  // waiting room, OTP, devices, challenge: queue.go
	a.signupRoutes(r) // opening an account, identity, password reset: signup.go
	r.Group(func(r chi.Router) {
		r.Use(a.requireSession)
		r.Post("/v1/auth/logout", a.logout)
		r.Post("/v1/auth/logout-everywhere", a.logoutEverywhere)
		r.With(a.shed).Post("/v1/bookings/hold", a.hold)
		r.Get("/v1/bookings/{hold_id}/status", a.status)
		r.Get("/v1/bookings/{hold_id}/cancel", a.cancelPreview)
		r.Post("/v1/bookings/{hold_id}/cancel", a.cancel)
		r.Get("/v1/bookings/{hold_id}/tdr", a.getTDR) // tdr.go
		r.Post("/v1/bookings/{hold_id}/tdr", a.fileTDR)
		r.Post("/v1/payments/initiate", a.initiatePayment)
		r.Get("/v1/payments/{payment_id}", a.getPayment)
		r.Get("/v1/wallet", a.wallet)
		r.Post("/v1/wallet/topup", a.topUp)
		r.Get("/v1/fraud/appeals", a.myAppeals)
		r.Post("/v1/fraud/appeals", a.fileAppeal)
	})
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		reply.Error(w, r, a.log, booking.Errorf(booking.ENOTFOUND, "NO_SUCH_ROUTE", "There is no %s %s.", r.Method, r.URL.Path))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		reply.Error(w, r, a.log, &booking.Error{Code: booking.EINVALID, Reason: "METHOD_NOT_ALLOWED",
			Message: r.Method + " is not allowed on " + r.URL.Path + "."})
	})
}

func (a *API) openAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(openAPI) //nolint:errcheck
}

type ctxKey int

const (
	callerKey ctxKey = iota
	sessionKey
)

// requireSession checks the bearer token's signature, then that it was not
// revoked (an in-memory lookup, reloaded about once a second: no backend
// call per request).
func (a *API) requireSession(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := bearer(r)
		if !ok {
			reply.Error(w, r, a.log, booking.Errorf(booking.EUNAUTH, "NO_SESSION", "Log in first: send Authorization: Bearer <token>."))
			return
		}
		s, err := a.signer.Verify(tok, a.now())
		if err != nil {
			reply.Error(w, r, a.log, booking.Errorf(booking.EUNAUTH, "BAD_SESSION", "Your session is invalid or has expired; log in again."))
			return
		}
		switch err := a.revocations.Check(r.Context(), s); {
		case errors.Is(err, auth.ErrRevoked):
			reply.Error(w, r, a.log, booking.Errorf(booking.EUNAUTH, "SESSION_REVOKED", "You logged out of this session; log in again."))
			return
		case err != nil:
			reply.Error(w, r, a.log, booking.Errorf(booking.EUNAVAIL, "SESSIONS_UNCHECKED", "Sessions cannot be checked right now; please retry in a moment."))
			return
		}
		c := booking.Caller{UserID: s.UserID, Verified: s.Verified, Agent: s.Agent, CreatedAt: s.CreatedAt}
		ctx := context.WithValue(context.WithValue(r.Context(), callerKey, c), sessionKey, s)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// sessionFrom is the verified session of the request.
func sessionFrom(ctx context.Context) auth.Session {
	s, _ := ctx.Value(sessionKey).(auth.Session)
	return s
}

func callerFrom(ctx context.Context) booking.Caller {
	c, _ := ctx.Value(callerKey).(booking.Caller)
	return c
}

// shed admits a bounded number of hold requests at once and turns the rest
// away immediately, so overload never becomes an unbounded queue.
func (a *API) shed(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case a.inflight <- struct{}{}:
			defer func() { <-a.inflight }()
			next.ServeHTTP(w, r)
		default:
			a.svc.Funnel().Add(0, funnel.Shed, 1)
			reply.Error(w, r, a.log, booking.HighDemand())
		}
	})
}

func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	const p = "Bearer "
	if len(h) <= len(p) || h[:len(p)] != p {
		return "", false
	}
	return h[len(p):], true
}

// Guard is the login guard passengers sign in through (the pages share it).
func (a *API) Guard() *auth.Guard { return a.guard }

// Revocations is the logout list sessions are checked against (the pages share it).
func (a *API) Revocations() *auth.Revocations { return a.revocations }
