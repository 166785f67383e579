package console

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/riverqueue/river"

	"tatkal/booking"
	"tatkal/booking/admission"
	"tatkal/booking/auth"
	"tatkal/booking/banner"
	"tatkal/booking/funnel"
	"tatkal/booking/inventory"
	"tatkal/booking/payment"
	"tatkal/console/alarms"
	"tatkal/console/levers"
	"tatkal/jobs/schedule"
	"tatkal/recon"
)

// Roles.
const (
	Ops     = "ops"
	Finance = "finance"
	Fraud   = "fraud"
	Admin   = "admin"
	// Team is a member of one or more owning teams of reconciliation
	// exceptions (recon.Teams: reservations, disputes, treasury, ...):
	// they work their teams' exceptions and see nothing else.
	Team = "team"
)

// Roles lists every role.
var Roles = []string{Ops, Finance, Fraud, Admin, Team}

// Config wires the console.
type Config struct {
	Pool     *pgxpool.Pool
	Redis    redis.UniversalClient
	Store    *inventory.Store
	Booking  *booking.Service
	Payments *payment.Service
	Funnel   *funnel.Recorder
	River    *river.Client[pgx.Tx] // River's UI and the levers' scheduled reverts; nil: neither
	// Scripts call /v1/admin/... with a console user's personal API token
	// (created under /console/tokens); there is no shared admin token.
	HoldWindow time.Duration // for the invariant check's grace
	// SecureCookies marks the console's cookies Secure: browsers reach us over
	// https (TATKAL_PUBLIC_URL), even when a proxy ends TLS before us.
	SecureCookies bool
	// QueueDepth reports a shard's waiting and admitted counts (the waiting
	// room's Depth); nil shows zeros.
	QueueDepth func(ctx context.Context, shardID int64) (waiting, admitted int64, err error)
	// QueueRefusals lists what the waiting room refused a traveller (the
	// waiting room's Refusals), for the user trace; nil shows none.
	QueueRefusals func(ctx context.Context, userID int64) ([]admission.Refusal, error)

	SessionTTL time.Duration // default 8h
	Tick       time.Duration // funnel push interval, default 1s
	Log        *slog.Logger
	// Context bounds the background services of River's UI (nil: the
	// process's lifetime).
	Context context.Context
	// LoginGuard throttles sign-ins (nil: the defaults, scope "console",
	// two password checks at once).
	LoginGuard *auth.Guard
	// Recon is the reconciliation service behind the finance pages, the
	// reconciliation API and the funnel's money panel (nil: those answer 500).
	Recon *recon.Service
	// ReconGateways are the gateways finance may reconcile and upload for,
	// besides those already seen in runs and files.
	ReconGateways []string
	// Schedule is every periodic job and what it sets off
	// (jobs/schedule.List), listed on /console/schedules.
	Schedule []schedule.Entry
	// Alarms are the invariant watch's thresholds (zero: its defaults).
	Alarms alarms.Thresholds
	// Banners are the status banners passengers see (banners.go; nil: a
	// store of the console's own).
	Banners *banner.Store
}

// Console serves the console's routes.
type Console struct {
	lab    Lab
	cfg    Config
	pool   *pgxpool.Pool
	levers *levers.Service
	alarms *alarms.Service
	users  *Users
	hub    *Hub
	log    *slog.Logger
	checks checks

	riverOnce sync.Once
	riverUI   http.Handler
	riverErr  error
}

// New returns the console.
func New(cfg Config) *Console {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.SessionTTL == 0 {
		cfg.SessionTTL = 8 * time.Hour
	}
	if cfg.Tick == 0 {
		cfg.Tick = time.Second
	}
	if cfg.HoldWindow == 0 {
		cfg.HoldWindow = 3 * time.Minute
	}
	if cfg.LoginGuard == nil {
		cfg.LoginGuard = auth.NewGuard(auth.GuardConfig{Pool: cfg.Pool, Scope: "console", Slots: 2, Log: cfg.Log})
	}
	c := &Console{cfg: cfg, pool: cfg.Pool, log: cfg.Log}
	var routes levers.RouteSetter
	if cfg.Payments != nil {
		routes = cfg.Payments
	}
	var jobs booking.JobInserter // the levers' automatic reverts
	if cfg.River != nil {
		jobs = cfg.River
	}
	if cfg.Banners == nil {
		c.cfg.Banners = banner.New(cfg.Pool, cfg.Log)
	}
	c.levers = levers.NewService(cfg.Pool, routes, jobs, cfg.Log)
	c.alarms = c.newAlarms() // alarms_page.go
	c.users = NewUsers(cfg.Pool, auth.DefaultParams)
	c.hub = NewHub(cfg.Tick, c.snapshot, cfg.Log)
	return c
}

// Close stops the console's background work (the live funnel's ticker)
// and drops its watchers; the process calls it before closing the pool.
func (c *Console) Close() { c.hub.Close() }

// Levers is the lever service (for tests and the admin API).
func (c *Console) Levers() *levers.Service { return c.levers }

// Alarms is the invariant watch and its alarms (for the watch's job).
func (c *Console) Alarms() *alarms.Service { return c.alarms }

// Routes mounts the console, top to bottom: who may see what is in this list.
func (c *Console) Routes(r chi.Router) {
	r.Route("/v1/admin", func(r chi.Router) {
		r.Use(c.apiAuth)
		r.With(c.apiRoles(Ops, Admin)).Get("/funnel/live", c.apiFunnelLive) // funnel_api.go
		r.With(c.apiRoles(Ops, Admin)).Get("/levers", c.apiLevers)
		r.With(c.apiRoles(Ops, Admin)).Post("/levers/preview", c.apiPreview)
		r.With(c.apiRoles(Ops, Admin)).Post("/levers/changes", c.apiPropose)
		r.With(c.apiRoles(Admin)).Post("/levers/changes/{id}/approve", c.apiApprove)
		r.With(c.apiRoles(Ops, Admin)).Post("/levers/changes/{id}/reject", c.apiReject)
	})
	c.reconAPIRoutes(r)
	r.Route("/console", func(r chi.Router) {
		r.Use(noStore)
		r.Get("/login", c.loginPage)
		r.Post("/login", c.login)
		r.Group(func(r chi.Router) {
			r.Use(c.session, c.uploadLimit, c.csrf) // uploadLimit: finance.go
			r.Post("/logout", c.logout)
			r.Get("/", c.home)
			r.With(c.roles(Ops, Admin)).Get("/funnel", c.funnelPage)
			r.With(c.roles(Ops, Admin)).Get("/funnel.json", c.funnelJSON)
			r.With(c.roles(Ops, Admin)).Get("/funnel/ws", c.funnelWS)
			r.With(c.roles(Ops, Admin)).Get("/levers", c.leversPage)
			r.With(c.roles(Ops, Admin)).Post("/levers/preview", c.leverPreview)
			r.With(c.roles(Ops, Admin)).Post("/levers/propose", c.leverPropose)
			r.With(c.roles(Admin)).Post("/levers/{id}/approve", c.leverApprove)
			r.With(c.roles(Ops, Admin)).Post("/levers/{id}/reject", c.leverReject)
			r.With(c.roles(Ops, Admin)).Get("/shards", c.shardsPage)
			r.With(c.roles(Ops, Admin)).Get("/lab", c.labPage)
			r.With(c.roles(Ops, Admin)).Post("/lab", c.labStart)
			r.With(c.roles(Ops, Admin)).Get("/lab/{id}", c.labRun)
			r.With(c.roles(Ops, Admin)).Get("/windows", c.windowsPage)
			r.With(c.roles(Ops, Admin)).Get("/banners", c.bannersPage) // banners.go
			r.With(c.roles(Ops, Admin)).Post("/banners", c.bannerCreate)
			r.With(c.roles(Ops, Admin)).Post("/banners/{id}/approve", c.bannerApprove)
			r.With(c.roles(Ops, Admin)).Post("/banners/{id}/withdraw", c.bannerWithdraw)
			r.With(c.roles(Ops, Admin)).Get("/reviews", c.reviewsPage) // reviews.go
			r.With(c.roles(Ops, Admin)).Get("/reviews/{id}", c.reviewPage)
			r.With(c.roles(Ops, Finance, Admin)).Get("/schedules", c.schedulesPage)
			r.With(c.roles(Ops, Finance, Admin)).Get("/alarms", c.alarmsPage) // alarms_page.go
			r.With(c.roles(Ops, Finance, Admin)).Post("/alarms/{id}/acknowledge", c.alarmAcknowledge)
			r.With(c.roles(Ops, Admin)).Post("/shards/{id}/rebuild", c.shardRebuild)
			r.With(c.roles(Ops, Admin)).Post("/shards/{id}/chart/retry", c.chartRetry)
			r.With(c.roles(Ops, Admin)).Post("/shards/{id}/chart/prepare", c.chartPrepare)
			r.With(c.roles(Ops, Finance, Admin)).Get("/payments", c.paymentsPage)
			r.With(c.roles(Ops, Finance, Admin)).Post("/payments/{id}/inquire", c.paymentInquire)
			r.With(c.roles(Finance, Admin)).Post("/payments/reviews/{id}", c.paymentReview)
			r.With(c.roles(Ops, Fraud, Admin)).Get("/lookup", c.lookupPage)
			r.With(c.roles(Ops, Fraud, Admin)).Get("/trace", c.tracePage)
			r.With(c.roles(Ops, Finance, Fraud, Admin)).Get("/audit", c.auditPage)
			r.With(c.roles(Admin)).Get("/tokens", c.tokensPage)
			r.With(c.roles(Admin)).Post("/tokens", c.tokenCreate)
			r.With(c.roles(Admin)).Post("/tokens/{id}/revoke", c.tokenRevoke)
			r.With(c.roles(Admin)).Get("/users", c.usersPage) // users_page.go; the rules in users.go
			r.With(c.roles(Admin)).Post("/users", c.userAdd)
			r.With(c.roles(Admin)).Get("/users/{login}", c.userPage)
			r.With(c.roles(Admin)).Post("/users/{login}/role", c.userRole)
			r.With(c.roles(Admin)).Post("/users/{login}/disable", c.userDisable)
			r.With(c.roles(Admin)).Post("/users/{login}/enable", c.userEnable)
			r.With(c.roles(Admin)).Post("/users/{login}/password", c.userPassword)
			r.With(c.roles(Admin)).Post("/user-grants/{id}/approve", c.grantApprove)
			r.With(c.roles(Admin)).Post("/user-grants/{id}/reject", c.grantReject)
			c.financeRoutes(r) // finance.go
			c.fraudRoutes(r)   // fraud.go
			r.With(c.roles(Admin)).HandleFunc("/river", c.river)
			r.With(c.roles(Admin)).HandleFunc("/river/*", c.river)
		})
	})
}

// Metrics serves Prometheus text; main mounts it on its own listener,
// never the public one (it shows funnel counts and pending levers).

// Snapshot computes the live funnel now (for tests and the JSON fallback).
func (c *Console) Snapshot(ctx context.Context) (Snapshot, error) { return c.snapshot(ctx) }

func noStore(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Frame-Options", "DENY")
		next.ServeHTTP(w, r)
	})
}
