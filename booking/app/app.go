// Package app builds one tatkal process: its configuration, its
// connections, every service and the HTTP servers, wired once. The binary
// (main.go) and the tests (booking/teststack) both build the process here,
// so tests run the graph production runs.
package app

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"sync/atomic"
	"tatkal/booking/banner"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/riverqueue/river"
	"golang.org/x/sync/errgroup"

	"tatkal/booking"
	"tatkal/booking/admission"
	"tatkal/booking/api"
	"tatkal/booking/auth"
	"tatkal/booking/db"
	"tatkal/booking/fraud"
	"tatkal/booking/fraud/review"
	"tatkal/booking/funnel"
	"tatkal/booking/httpx"
	"tatkal/booking/inventory"
	"tatkal/booking/kyc"
	"tatkal/booking/notify"
	"tatkal/booking/payment"
	"tatkal/booking/payment/pspapi"
	"tatkal/booking/pii"
	"tatkal/booking/prs"
	"tatkal/booking/secrets"
	"tatkal/booking/signup"
	"tatkal/booking/sim/kycsim"
	"tatkal/booking/sim/msgsim"
	"tatkal/booking/sim/prssim"
	"tatkal/booking/sim/pspsim"
	"tatkal/booking/web"
	"tatkal/console"
	"tatkal/console/levers"
	"tatkal/jobs"
	"tatkal/jobs/schedule"
	"tatkal/recon"
)

// Options say which parts of the process run here. The zero value is an
// insert-only process that serves nothing (for commands that only need the
// services). Fields under "tests" are tuning for the test stacks; the
// binary leaves them zero.
type Options struct {
	// BenchSignalsOff, while set, records no fraud signals
	// (fraud.Recorder.BenchDiscard): tatkal bench only, the hold path's
	// figure without them. Nil everywhere else.
	BenchSignalsOff *atomic.Bool
	Work            bool // run the River workers and the waiting room's controller
	Serve           bool // serve the web pages and /v1 on cfg.Addr, /metrics on cfg.MetricsAddr
	// Simulators runs the gateways, the reservation core and the messaging
	// gateway in this process, each on a free loopback port (cfg.PSPURL,
	// PRSURL and MsgURL are set to them; tatkal dev, rehearse, tests).
	Simulators bool
	Log        *slog.Logger // nil: slog.Default()
	// BackOffice adds reconciliation's and fraud review's jobs
	// (jobs/backoffice.New()); nil leaves them out. It is handed in rather
	// than imported: the back office's workers are not every process's
	// (their services are: New builds them all).
	BackOffice BackOffice
	// Pool and Redis, when set, are used instead of opening connections
	// from cfg, and stay open at Close (tests share their env's).
	Pool  *pgxpool.Pool
	Redis redis.UniversalClient

	// Tests.
	Rules          *booking.Rules    // nil: booking.DefaultRules() with cfg.HoldWindow
	Pause          booking.PauseFunc // forced interleavings (booking/pause.go)
	SweepGrace     time.Duration
	CatalogTTL     time.Duration // zero: the booking package's default
	FunnelInterval time.Duration // zero: 500ms
	// NoController leaves the waiting room's controller off where Work is
	// set: tests admit by stepping a controller themselves.
	NoController bool
	// ChallengeBits and RiskyExtraBits set the booking-time proof of work
	// (0: the waiting room's defaults); browser tests lower them.
	ChallengeBits, RiskyExtraBits int
	Jobs                          JobTuning
	Payment                       PaymentTuning
	SimRoutes                     []pspapi.RouteConfig // the gateway simulator's initial routes
	SimSeed                       int64                // the gateway simulator's fault dice (0: random)
	MsgFaults                     *notify.Faults       // the messaging simulator's initial faults (nil: its defaults)
	KYCFaults                     *kyc.Faults          // the identity verifier simulator's initial faults (nil: its defaults)
	// RelayInterval: how often the outbox is relayed into send jobs (zero: a second).
	RelayInterval time.Duration
	// ReceiptPoll: how often a sent message's receipt is asked for;
	// MsgRetryBase: the unit of a failed send's backoff (zero: a second each).
	ReceiptPoll, MsgRetryBase time.Duration
	// Lab builds the console's rehearsal lab once the process is built
	// (booking/lab/rehearse.NewLab; nil: no lab). Close closes it.
	Lab func(*App) LabCloser
	// FairnessAfter: how long after a window's seal its fairness figures
	// are computed (0: the waiting room's default, 10m).
	FairnessAfter time.Duration
}

// BackOffice is what the back office adds to a process: workers and
// periodic jobs, registered before the services exist, over the services
// the process fills in once they do (before Run).
type BackOffice interface {
	// Jobs registers the back office's workers and returns its periodic
	// jobs of the process's schedule.
	Jobs(*jobs.Services, *river.Workers, []schedule.Entry) []*river.PeriodicJob
}

// JobTuning adjusts the River client (zero: the jobs package's defaults).
type JobTuning struct {
	Workers              int
	RescueStuckJobsAfter time.Duration
	JobTimeout           time.Duration
}

// PaymentTuning adjusts the payment orchestrator (zero: its defaults).
type PaymentTuning struct {
	HoldWindows        map[string]time.Duration
	Extension          time.Duration
	ResolutionDeadline time.Duration
	LateGrace          time.Duration
	CreateTimeout      time.Duration
	NotCreatedAfter    time.Duration
	InquiryAfter       time.Duration
}

// App is one tatkal process: its connections, services, River client and
// HTTP servers. Build it with New, run it with Run, release it with Close.
type App struct {
	Config    Config
	Options   Options
	Log       *slog.Logger
	Pool      *pgxpool.Pool
	Redis     redis.UniversalClient
	Store     *inventory.Store
	Booking   *booking.Service
	Payments  *payment.Service
	Admission *admission.Service
	Funnel    *funnel.Recorder
	Levers    *levers.Reader
	River     *river.Client[pgx.Tx]
	Console   *console.Console
	Recon     *recon.Service
	// ReconSources is where reconciliation fetches the outside legs: each
	// gateway's settlement file, the bank statement, the core's export.
	ReconSources recon.Sources
	// Fraud clusters each closed window's accounts; FraudEnforcer carries
	// out review decisions in batches. Both are the back office's.
	Fraud         *fraud.Service
	FraudEnforcer *review.Enforcer
	// Schedule is every periodic job and when it runs (jobs/schedule),
	// registered by the River client where the process works and listed
	// on the console.
	Schedule []schedule.Entry
	Signer   *auth.Signer
	Handler  http.Handler // the public routes, wrapped as served
	// PSP, PRS and Msg are the simulators when Options.Simulators is set.
	// They are the outside world: simPool is theirs alone, so a gateway
	// never answers late because our own workers hold every connection.
	simPool *pgxpool.Pool
	PSP     *pspsim.Server
	PRS     *prssim.Server
	Msg     *msgsim.Server
	KYC     *kycsim.Server // the identity verifier
	// Signup opens accounts and verifies their identity.
	Signup *signup.Service
	// Notify sends the notifications outbox to the messaging gateway.
	Notify *notify.Service

	servers []*server // in start order: simulators, app, metrics

	// bg bounds what outlives a request but not the process (River's UI,
	// the console's live funnel); Close cancels it.
	bg     context.Context
	cancel context.CancelFunc
	ready  chan struct{} // closed once Run has started everything

	ownPool, ownRedis bool // opened by New, closed by Close
	lab               LabCloser
	// throttle paces holds and payment initiations by the shard_throttle
	// lever: one per process, shared by every service it paces.
	throttle *booking.Throttle
}

// LabCloser is the console's rehearsal lab, closed with the process.
type LabCloser interface {
	console.Lab
	Close()
}

// Ready is closed once Run has started every component.
func (a *App) Ready() <-chan struct{} { return a.ready }

// server is one HTTP listener of the process.
type server struct {
	name string
	ln   net.Listener
	srv  *http.Server
}

func (s *server) url() string {
	return fmt.Sprintf("http://127.0.0.1:%d", s.ln.Addr().(*net.TCPAddr).Port)
}

// New connects to PostgreSQL and Redis, refuses a schema that is not
// current, and builds every service. Listeners are opened here, so a port
// 0 in cfg resolves before anything needs the URL (cfg.PublicURL empty:
// the app's own listener). A service that cannot be reached is named, with
// how to start it.
func New(ctx context.Context, cfg Config, opts Options) (a *App, err error) {
	log := opts.Log
	if log == nil {
		log = slog.Default()
	}
	a = &App{Config: cfg, Options: opts, Log: log, ready: make(chan struct{})}
	a.bg, a.cancel = context.WithCancel(context.WithoutCancel(ctx))
	defer func() {
		if err != nil {
			a.Close()
			a = nil
		}
	}()
	a.Pool, a.Redis = opts.Pool, opts.Redis
	if a.Pool == nil {
		if a.Pool, err = openDB(ctx, cfg, cfg.Pool(40)); err != nil {
			return a, err
		}
		a.ownPool = true
	}
	if a.Redis == nil {
		rdb, err := openRedis(ctx, cfg)
		if err != nil {
			return a, err
		}
		a.Redis, a.ownRedis = rdb, true
	}
	if pending, err := db.Pending(ctx, a.Pool); err != nil {
		return a, fmt.Errorf("%w (run: tatkal migrate)", err)
	} else if len(pending) > 0 {
		return a, fmt.Errorf("migrations pending: %s (run: tatkal migrate)", strings.Join(pending, ", "))
	}
	if len(cfg.SessionKey) == 0 {
		return a, fmt.Errorf("%s is not set (hex, 32+ bytes); %s", EnvSessionKey, secrets.Hint)
	}
	if err := a.listen(); err != nil {
		return a, err
	}
	if opts.Simulators {
		if err := a.buildSimulators(ctx); err != nil {
			return a, err
		}
	}
	if err := a.build(); err != nil {
		return a, err
	}
	// ID numbers an older version wrote in clear are sealed before this
	// process serves (none left: one index probe per table).
	if n, err := a.Booking.SealClearIDs(ctx); err != nil {
		return a, fmt.Errorf("seal passengers' ID numbers: %w", err)
	} else if n > 0 {
		a.Log.Info("sealed passengers' ID numbers found in clear", "rows", n)
	}
	return a, nil
}

// listen opens the process's listeners and settles the URLs that depend
// on them.
func (a *App) listen() error {
	add := func(name, addr, hint string) (*server, error) {
		ln, err := listenURL(addr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w%s", name, err, hint)
		}
		s := &server{name: name, ln: ln}
		a.servers = append(a.servers, s)
		return s, nil
	}
	if a.Options.Simulators {
		// In-process simulators listen on free loopback ports, chosen here
		// so that no caller picks (and races for) one; the process's own
		// clients are pointed at them.
		const free = "127.0.0.1:0"
		psp, err := add("psp", free, "")
		if err != nil {
			return err
		}
		core, err := add("prs", free, "")
		if err != nil {
			return err
		}
		msg, err := add("msg", free, "")
		if err != nil {
			return err
		}
		kycSrv, err := add("kyc", free, "")
		if err != nil {
			return err
		}
		a.Config.PSPURL, a.Config.PRSURL, a.Config.MsgURL, a.Config.KYCURL = psp.url(), core.url(), msg.url(), kycSrv.url()
		if a.Config.KYCKey == "" {
			a.Config.KYCKey = secrets.Random() // the simulator and its caller are both here
		}
	}
	if !a.Options.Serve {
		return nil
	}
	s, err := add("app", a.Config.Addr, "")
	if err != nil {
		return err
	}
	if a.Config.PublicURL == "" {
		a.Config.PublicURL = s.url()
	}
	if a.Config.MetricsAddr != "off" {
		if err := a.Config.CheckMetrics(); err != nil {
			return err
		}
		if _, err := add("metrics", a.Config.MetricsAddr, ` (TATKAL_METRICS_ADDR; "off" turns metrics off)`); err != nil {
			return err
		}
	}
	return nil
}

// find returns the listener called name, nil if this process has none.
func (a *App) find(name string) *server {
	for _, s := range a.servers {
		if s.name == name {
			return s
		}
	}
	return nil
}

// simPoolSize is the simulators' connections: their statements are short
// single rows, and PostgreSQL's 100 connections are shared with tests.
const simPoolSize = 4

// buildSimulators builds the stand-ins for the gateways and the core on
// their listeners.
func (a *App) buildSimulators(ctx context.Context) (err error) {
	cfg := a.Config
	pc := a.Pool.Config()
	pc.MaxConns = simPoolSize
	if a.simPool, err = pgxpool.NewWithConfig(ctx, pc); err != nil {
		return fmt.Errorf("simulators' database pool: %w", err)
	}
	a.PSP, err = pspsim.New(ctx, pspsim.Config{Pool: a.simPool, AdminToken: cfg.SimAdminToken, BankToken: cfg.BankToken, Gateways: cfg.SimGateways(), PublicURL: cfg.PSPURL,
		Log: a.Log, Routes: a.Options.SimRoutes, Seed: a.Options.SimSeed})
	if err != nil {
		return fmt.Errorf("psp simulator: %w", err)
	}
	a.find("psp").srv = httpx.NewServer(a.PSP.Handler())
	a.PRS, err = prssim.NewServer(ctx, prssim.ServerConfig{Pool: a.simPool, APIKey: cfg.PRSKey, AdminToken: cfg.SimAdminToken, Log: a.Log})
	if err != nil {
		return fmt.Errorf("core simulator: %w", err)
	}
	a.find("prs").srv = httpx.NewServer(a.PRS.Handler())
	a.Msg, err = msgsim.New(ctx, msgsim.Config{Pool: a.simPool, APIKey: cfg.MsgKey, AdminToken: cfg.SimAdminToken, Log: a.Log,
		Seed: a.Options.SimSeed, Faults: a.Options.MsgFaults})
	if err != nil {
		return fmt.Errorf("messaging simulator: %w", err)
	}
	a.find("msg").srv = httpx.NewServer(a.Msg.Handler())
	a.KYC, err = kycsim.New(ctx, kycsim.Config{Pool: a.simPool, APIKey: cfg.KYCKey, AdminToken: cfg.SimAdminToken, Log: a.Log,
		Seed: a.Options.SimSeed, Faults: a.Options.KYCFaults})
	if err != nil {
		return fmt.Errorf("identity verifier simulator: %w", err)
	}
	a.find("kyc").srv = httpx.NewServer(a.KYC.Handler())
	return nil
}

// build creates the services and the routes.
func (a *App) build() error {
	cfg, opts, log := a.Config, a.Options, a.Log
	a.Store = inventory.New(a.Redis, cfg.RedisPrefix)
	rules := booking.DefaultRules()
	rules.HoldWindow = cfg.HoldWindow
	if opts.Rules != nil {
		rules = *opts.Rules
	}
	svcs := &jobs.Services{}
	var more func(*river.Workers, []schedule.Entry) []*river.PeriodicJob
	if opts.BackOffice != nil {
		more = func(w *river.Workers, sched []schedule.Entry) []*river.PeriodicJob {
			return opts.BackOffice.Jobs(svcs, w, sched)
		}
	}
	a.Schedule = schedule.List(schedule.Config{Sweep: cfg.SweepInterval, Relay: opts.RelayInterval, ReconAt: cfg.ReconAt,
		ReconRerunDays: cfg.ReconRerunDays, Watch: cfg.WatchInterval})
	// The service needs a River client to enqueue in its transactions and
	// the workers need the service: build the client with the (not yet
	// filled) services, then fill them.
	client, err := jobs.NewClient(a.Pool, svcs, jobs.Config{Work: opts.Work, Schedule: a.Schedule, Logger: log,
		Workers: opts.Jobs.Workers, RescueStuckJobsAfter: opts.Jobs.RescueStuckJobsAfter, JobTimeout: opts.Jobs.JobTimeout,
		More: more})
	if err != nil {
		return err
	}
	a.River = client
	// The waiting room and the hold path share one shard catalog.
	catalog := booking.NewCatalog(a.Pool, 5*time.Second)
	if opts.CatalogTTL > 0 {
		catalog = booking.NewCatalog(a.Pool, opts.CatalogTTL)
	}
	core := prs.NewClient(cfg.PRSURL, cfg.PRSKey, &http.Client{Timeout: 10 * time.Second})
	a.Funnel = funnel.New(a.Redis, cfg.RedisPrefix, log)
	a.Levers = levers.NewReader(a.Pool, log)
	if err := secrets.Check(EnvFraudKey, cfg.FraudKey); err != nil {
		return err
	}
	a.Admission, err = admission.New(admission.Config{Pool: a.Pool, Redis: a.Redis, Prefix: cfg.RedisPrefix, Store: a.Store,
		Catalog: catalog, Funnel: a.Funnel, Levers: a.Levers, Rules: rules, Secret: cfg.SessionKey, Log: log,
		ChallengeBits: cmp.Or(opts.ChallengeBits, cfg.ChallengeBits), RiskyExtraBits: opts.RiskyExtraBits, IdentityKey: []byte(cfg.FraudKey),
		Jobs: client, FairnessAfter: opts.FairnessAfter})
	if err != nil {
		return err
	}
	// One throttle paces holds and payment initiations by the shard_throttle lever.
	a.throttle = booking.NewThrottle(a.Levers, a.Store, log)
	ids, err := pii.Parse(cfg.IDKeys)
	if err != nil {
		return err
	}
	a.Booking = booking.NewService(booking.ServiceConfig{IDs: ids, Pool: a.Pool, Store: a.Store, Jobs: client, Rules: rules, Core: core, Funnel: a.Funnel,
		Levers: a.Levers, Throttle: a.throttle, Log: log, Catalog: catalog, SweepGrace: opts.SweepGrace, Pause: opts.Pause,
		Admission: a.Admission, Refunds: payment.NewRefunds(client), Fraud: &fraud.Recorder{Key: []byte(cfg.FraudKey), BenchDiscard: opts.BenchSignalsOff}})
	a.Payments = a.NewPayments(cfg.Gateways(), cfg.RedisPrefix)
	if err := secrets.Check(EnvMsgKey, cfg.MsgKey); err != nil {
		return err
	}
	a.Notify = notify.New(notify.Config{Pool: a.Pool, Client: notify.NewClient(cfg.MsgURL, cfg.MsgKey, nil), Jobs: client,
		Booking: a.Booking, Log: log, Pause: opts.Pause, ReceiptPoll: opts.ReceiptPoll, RetryBase: opts.MsgRetryBase})
	svcs.Booking, svcs.Payments, svcs.Notify, svcs.Admission = a.Booking, a.Payments, a.Notify, a.Admission
	var verifier kyc.Verifier
	if cfg.KYCURL != "" && cfg.KYCKey != "" {
		verifier = kyc.NewClient(cfg.KYCURL, cfg.KYCKey, nil)
	} else if opts.Serve {
		log.Warn("identity verification is off: TATKAL_KYC_URL or TATKAL_KYC_KEY is not set; accounts opened here cannot be verified")
	}
	if a.Signup, err = signup.New(signup.Config{Pool: a.Pool, Secret: cfg.SessionKey, IdentityKey: []byte(cfg.FraudKey), Verifier: verifier, Log: log}); err != nil {
		return err
	}
	a.Recon = newRecon(cfg, a.Pool, client, log, opts.Pause)
	a.ReconSources = reconSources(cfg)
	a.Fraud = &fraud.Service{Pool: a.Pool, Clusterer: fraud.Clusterer{Config: fraud.DefaultConfig(), Tune: a.Levers.FraudConfig}, EarlyPasses: cfg.FraudEarlyPasses}
	a.FraudEnforcer = &review.Enforcer{Review: review.New(a.Pool), Booking: a.Booking, Log: log}
	svcs.Recon, svcs.ReconSources, svcs.Fraud, svcs.FraudEnforcer = a.Recon, a.ReconSources, a.Fraud, a.FraudEnforcer
	if a.Signer, err = auth.NewSigner(cfg.SessionKey); err != nil {
		return err
	}
	defer func() {
		if opts.Lab != nil && a.Console != nil {
			a.lab = opts.Lab(a)
			a.Console.SetLab(a.lab)
		}
	}()
	banners := banner.New(a.Pool, log) // status banners: console, pages, /v1 answers
	a.Console = console.New(console.Config{Pool: a.Pool, Redis: a.Redis, Store: a.Store, Booking: a.Booking, Payments: a.Payments,
		Funnel: a.Funnel, River: client, HoldWindow: rules.HoldWindow, QueueDepth: a.Admission.Depth, QueueRefusals: a.Admission.Refusals,
		SecureCookies: cfg.SecureCookies(), Log: log, Context: a.bg, Recon: a.Recon, ReconGateways: gatewayIDs(cfg.Gateways()),
		Schedule: a.Schedule, Alarms: cfg.Alarms, Banners: banners})
	svcs.Levers, svcs.Alarms = a.Console.Levers(), a.Console.Alarms()
	r := chi.NewRouter()
	r.Use(middleware.Recoverer, api.Notices(banners))
	r.Get("/healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) }) //nolint:errcheck
	r.Get("/readyz", a.readyz)
	v1 := api.New(api.Config{Service: a.Booking, Payments: a.Payments, Pool: a.Pool, Signer: a.Signer, MaxHoldsInFlight: cfg.MaxHoldsInFlight,
		Admission: a.Admission, Signup: a.Signup, Log: log})
	// The pages share the API's login guard and revocation list.
	web.New(web.Config{Booking: a.Booking, Payments: a.Payments, Admission: a.Admission, Pool: a.Pool, Signer: a.Signer, Guard: v1.Guard(),
		Revocations: v1.Revocations(), SecureCookies: cfg.SecureCookies(), Log: log, Banners: banners, Signup: a.Signup}).Routes(r)
	v1.Routes(r)
	a.Console.Routes(r)
	a.Handler = httpx.App(r, httpx.AppOptions{HTTPS: cfg.SecureCookies(), APIReject: api.RejectInput, TrustedProxies: cfg.TrustedProxies,
		CSP: map[string]string{"/console/river/": httpx.InlineStyleCSP}, Uploads: console.Uploads()})
	if s := a.find("app"); s != nil {
		s.srv = httpx.NewServer(a.Handler)
	}
	if s := a.find("metrics"); s != nil {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", a.Console.Metrics())
		// The heap profile, for finding where a rush's memory goes (the
		// serve benchmark); like /metrics, never on the public listener.
		mux.Handle("GET /debug/pprof/heap", pprof.Handler("heap"))
		s.srv = httpx.NewServer(metricsAuth(cfg.MetricsToken, mux))
	}
	return nil
}

// NewPayments builds a payment orchestrator of this process (its pool,
// Redis, booking service, River client, funnel, levers, throttle and
// tuning) that pays at gws, its Redis keys (those gateways' route health)
// under prefix. New builds the process's own with cfg.Gateways() and
// cfg.RedisPrefix. tatkal bench builds a second (bench.Options.NewPayments):
// its callback phase needs payments left AWAITING_USER at a gateway
// simulator of its own, in a scratch schema with a customer who never
// answers, which the process's own gateways are not; and that simulator's
// route health, under the same gateway ids, must not mix with theirs.
func (a *App) NewPayments(gws []payment.GatewayConfig, prefix string) *payment.Service {
	cfg, opts, pt := a.Config, a.Options, a.Options.Payment
	return payment.New(payment.Config{Pool: a.Pool, Redis: a.Redis, Prefix: prefix, Booking: a.Booking, Jobs: a.River,
		Funnel: a.Funnel, Levers: a.Levers, Throttle: a.throttle, Gateways: gws, Log: a.Log, Pause: opts.Pause,
		CallbackURL: cfg.PublicURL + "/v1/internal/payments/callback", ReturnURL: cfg.PublicURL + "/payments/return",
		HoldWindows: pt.HoldWindows, Extension: pt.Extension, ResolutionDeadline: pt.ResolutionDeadline, LateGrace: pt.LateGrace,
		CreateTimeout: pt.CreateTimeout, NotCreatedAfter: pt.NotCreatedAfter, InquiryAfter: pt.InquiryAfter, ConfirmWriters: cfg.ConfirmWriters,
		LeadApprovalPaise: cfg.ReconApprovalLimitPaise})
}

// ready answers whether this process can serve: PostgreSQL, Redis and the
// schema all current.
func (a *App) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	checks := map[string]string{"postgres": "ok", "redis": "ok", "migrations": "ok"}
	ok := true
	if err := a.Pool.Ping(ctx); err != nil {
		checks["postgres"], ok = err.Error(), false
	}
	if err := a.Redis.Ping(ctx).Err(); err != nil {
		checks["redis"], ok = err.Error(), false
	}
	if pending, err := db.Pending(ctx, a.Pool); err != nil {
		checks["migrations"], ok = err.Error(), false
	} else if len(pending) > 0 {
		checks["migrations"], ok = "pending: "+strings.Join(pending, ", "), false
	}
	w.Header().Set("Content-Type", "application/json")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	json.NewEncoder(w).Encode(checks) //nolint:errcheck
}

// URL is the base URL of the app's listener ("" when it does not serve).
func (a *App) URL() string { return a.urlOf("app") }

// MetricsURL is where /metrics is served, "off" when nowhere.
func (a *App) MetricsURL() string {
	if u := a.urlOf("metrics"); u != "" {
		return u + "/metrics"
	}
	return "off"
}

// HTTPServers are the process's HTTP servers by name (app, metrics, psp, msg,
// prs), for checking their settings.
func (a *App) HTTPServers() map[string]*http.Server {
	out := map[string]*http.Server{}
	for _, s := range a.servers {
		out[s.name] = s.srv
	}
	return out
}

// PSPURL, PRSURL, MsgURL and KYCURL are the simulators' base URLs ("" without them).
func (a *App) PSPURL() string { return a.urlOf("psp") }
func (a *App) PRSURL() string { return a.urlOf("prs") }
func (a *App) MsgURL() string { return a.urlOf("msg") }
func (a *App) KYCURL() string { return a.urlOf("kyc") }

func (a *App) urlOf(name string) string {
	if s := a.find(name); s != nil {
		return s.url()
	}
	return ""
}

// Run starts every component of the process and waits for all of them.
// It returns when ctx ends, after stopping them in the reverse order of
// their start (the listeners first, so no request meets a stopped
// service; Redis and PostgreSQL stay open until Close), or when one fails,
// after stopping the others.
func (a *App) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	var stops []func()
	// start runs one component in the group, with a context of its own
	// that only the stop sequence below cancels.
	start := func(name string, run func(context.Context) error) {
		cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan struct{})
		g.Go(func() error {
			defer close(done)
			if err := run(cctx); err != nil && cctx.Err() == nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			return nil
		})
		stops = append(stops, func() { cancel(); <-done })
	}
	if a.PSP != nil {
		start("psp simulator", a.PSP.Run)
	}
	for _, s := range a.servers {
		if s.name == "psp" || s.name == "prs" || s.name == "msg" || s.name == "kyc" {
			start(s.name+" http", s.serve)
		}
	}
	start("levers", func(ctx context.Context) error { a.Levers.Run(ctx); return nil })
	start("funnel", func(ctx context.Context) error {
		interval := a.Options.FunnelInterval
		if interval == 0 {
			interval = 500 * time.Millisecond
		}
		a.Funnel.Run(ctx, interval)
		return nil
	})
	start("committer", func(ctx context.Context) error { a.Booking.RunCommitter(ctx, a.Config.CommitWriters); return nil })
	if a.Options.Work && !a.Options.NoController {
		// One controller leads across all processes (lease with fencing).
		start("admission controller", func(ctx context.Context) error {
			a.Admission.NewController(admission.ControllerConfig{}).Run(ctx)
			return nil
		})
	}
	if a.Options.Work {
		// Started here, not in its goroutine, so that Ready means River works.
		if err := a.River.Start(context.WithoutCancel(ctx)); err != nil {
			g.Go(func() error { return fmt.Errorf("start river: %w", err) })
		}
		start("river", func(ctx context.Context) error {
			<-ctx.Done()
			// Let running jobs finish; what does not in time is retried.
			stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			return a.River.Stop(stopCtx)
		})
	}
	for _, s := range a.servers {
		if s.name == "app" || s.name == "metrics" {
			start(s.name+" http", s.serve)
		}
	}
	close(a.ready)
	<-gctx.Done()
	for i := len(stops) - 1; i >= 0; i-- {
		stops[i]()
	}
	return g.Wait()
}

// serve serves until ctx ends, then shuts down gracefully.
func (s *server) serve(ctx context.Context) error {
	shut := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(shut)
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		s.srv.Shutdown(sctx) //nolint:errcheck // a connection still open after 10s is cut by Close
		s.srv.Close()        //nolint:errcheck
	})
	err := s.srv.Serve(s.ln)
	if !stop() {
		<-shut // Serve returned because Shutdown began: wait for it to finish
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close releases what New opened, after Run has returned (or when it never
// ran): the background work of the services, then Redis and PostgreSQL.
func (a *App) Close() {
	if a.cancel != nil {
		a.cancel()
	}
	if a.lab != nil {
		a.lab.Close()
	}
	if a.Console != nil {
		a.Console.Close()
	}
	if a.Booking != nil {
		a.Booking.Close()
	}
	if a.PSP != nil {
		a.PSP.Close()
	}
	for _, s := range a.servers {
		s.ln.Close() //nolint:errcheck // closed already when it served
	}
	if a.ownRedis {
		a.Redis.Close() //nolint:errcheck
	}
	if a.simPool != nil {
		a.simPool.Close()
	}
	if a.ownPool {
		a.Pool.Close()
	}
}

// newRecon is the reconciliation service of the process (and of tatkal
// recon) with the configured limits.
func newRecon(cfg Config, pool *pgxpool.Pool, client *river.Client[pgx.Tx], log *slog.Logger, pause booking.PauseFunc) *recon.Service {
	return recon.New(recon.Config{Pool: pool, Jobs: client, Log: log, MaxFileBytes: cfg.ReconMaxFileBytes,
		ApprovalLimitPaise: cfg.ReconApprovalLimitPaise, Pause: pause})
}

// reconSources is where reconciliation fetches the outside legs: each
// gateway's settlement file, the bank statement, the core's export.
func reconSources(cfg Config) recon.Sources {
	keys := map[string]string{}
	for _, g := range cfg.Gateways() {
		keys[g.ID] = g.APIKey
	}
	return recon.Sources{HTTP: &http.Client{Timeout: time.Minute}, PSPURL: cfg.PSPURL, GatewayKeys: keys,
		BankToken: cfg.BankToken, CoreURL: cfg.PRSURL, CoreKey: cfg.PRSKey}
}

// gatewayIDs are the gateways finance reconciles.
func gatewayIDs(gws []payment.GatewayConfig) []string {
	var ids []string
	for _, g := range gws {
		ids = append(ids, g.ID)
	}
	return ids
}
