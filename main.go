// Command tatkal runs the Tatkal booking stack and its back office: one
// binary, subcommands for serving, working, migrating, seeding, checking
// invariants and benchmarking.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/riverqueue/river"

	"tatkal/booking"
	"tatkal/booking/admission"
	"tatkal/booking/api"
	"tatkal/booking/auth"
	"tatkal/booking/bench"
	"tatkal/booking/db"
	"tatkal/booking/fraud"
	"tatkal/booking/funnel"
	"tatkal/booking/httpx"
	"tatkal/booking/inventory"
	"tatkal/booking/payment"
	"tatkal/booking/payment/pspsim"
	"tatkal/booking/prs"
	"tatkal/booking/secrets"
	"tatkal/booking/seed"
	"tatkal/booking/web"
	"tatkal/console"
	"tatkal/console/levers"
	"tatkal/jobs"
	"tatkal/jobs/backoffice"
	"tatkal/recon"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `tatkal: Tatkal train booking, fair under a 10:00 rush.

Usage: tatkal <command> [flags]

Commands:
  dev       create the database, migrate, seed demo data, run everything here
  serve     web + API (and the River workers unless --workers=false)
  worker    River workers only (expiry, payments, refunds, core sync, sweeper)
  psp       the payment gateway simulator (two gateways: UPI, cards, net banking)
  prs       the reservation core simulator
  migrate   apply database migrations (idempotent)
  seed      demo | shard | users: create data for demos, tests, rehearsals
  check     verify seat invariants, Redis against PostgreSQL
  verify-window  recompute a waiting-room window's fair order from its revealed seed
  bench     measure the hold path against the raw Redis and PostgreSQL ceilings
  recon     reconciliation: ingest a settlement, bank or core file, run a day, export its workbook

Configuration (environment; secrets have no defaults outside dev, see SECURITY.md):
  DATABASE_URL         default postgres://127.0.0.1:5432/tatkal?sslmode=disable (created if missing)
  TATKAL_DB_POOL       PostgreSQL connections of this process (default: serve, worker 40; dev 20; psp, prs 20)
  REDIS_URL            default redis://127.0.0.1:6379/0
  TATKAL_ADDR          default :8080
  TATKAL_METRICS_ADDR  default 127.0.0.1:9090 (/metrics, off the public listener; "off" for none)
  TATKAL_PUBLIC_URL    default http://127.0.0.1:8080 (gateway callbacks and returns come here;
                       https here means Secure cookies and HSTS)
  TATKAL_REDIS_PREFIX  default tk (keys of one deployment)
  TATKAL_HOLD_WINDOW   default 3m
  TATKAL_MAX_HOLDS_IN_FLIGHT  default 512 (the excess is shed with 503)
  TATKAL_COMMIT_WRITERS  default 1 (group-commit writers; one lets batches grow while it flushes)
  TATKAL_PSP_URL       default http://127.0.0.1:8081 (the gateways)
  TATKAL_PRS_URL       default http://127.0.0.1:8082 (the reservation core)
  Secrets (make each with: openssl rand -hex 32):
  TATKAL_SESSION_KEY      hex, 32+ bytes (serve, worker); dev keeps one in the database
  TATKAL_WEBHOOK_SECRETS  gateway=secret,... (serve, worker, psp); several per gateway while rotating
  TATKAL_PSP_API_KEYS     gateway=key,... (serve, worker, psp); same form
  TATKAL_PRS_KEY          the reservation core's API key (serve, worker, prs)
  TATKAL_SIM_ADMIN_TOKEN  the simulators' fault API (psp, prs); unset: that API is off

Run "tatkal <command> --help" for a command's flags.
`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "--help" || args[0] == "-h" {
		fmt.Fprint(stdout, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cfg, err := configFromEnv()
	if err != nil {
		fmt.Fprintln(stderr, "tatkal:", err)
		return 2
	}
	cmds := map[string]func(context.Context, Config, []string, io.Writer) error{
		"dev": cmdDev, "serve": cmdServe, "worker": cmdWorker, "migrate": cmdMigrate,
		"seed": cmdSeed, "check": cmdCheck, "verify-window": cmdVerifyWindow, "bench": cmdBench, "psp": cmdPSP, "prs": cmdPRS, "recon": cmdRecon,
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "tatkal: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	if err := cmd(ctx, cfg, args[1:], stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintln(stderr, "tatkal:", err)
			return 2
		}
		fmt.Fprintln(stderr, "tatkal:", err)
		return 1
	}
	return 0
}

type usageError struct{ error }

// Config is everything a process needs, from the environment.
type Config struct {
	DatabaseURL      string
	DBPool           int // TATKAL_DB_POOL: connections of this process's pool; 0: the command's default
	RedisURL         string
	Addr             string
	MetricsAddr      string // Prometheus text, kept off the public listener
	SessionKey       []byte
	RedisPrefix      string
	HoldWindow       time.Duration
	MaxHoldsInFlight int
	CommitWriters    int
	SweepInterval    time.Duration
	PublicURL        string
	PSPURL           string
	PRSURL           string
	PRSKey           string
	// SimAdminToken guards the simulators' fault-setting API. It is the
	// simulators' own and no identity in the product.
	SimAdminToken string
	// WebhookSecrets and PSPAPIKeys are per gateway, newest first: we call
	// with the first key and accept callbacks signed with any secret; the
	// simulator signs with the first secret and accepts any key.
	WebhookSecrets secrets.PerGateway
	PSPAPIKeys     secrets.PerGateway
}

// Secret variables, by the commands that need them.
const (
	envWebhookSecrets = "TATKAL_WEBHOOK_SECRETS"
	envPSPAPIKeys     = "TATKAL_PSP_API_KEYS"
	envPRSKey         = "TATKAL_PRS_KEY"
	envSessionKey     = "TATKAL_SESSION_KEY"
	envSimAdminToken  = "TATKAL_SIM_ADMIN_TOKEN"
)

func configFromEnv() (Config, error) {
	cfg := Config{
		DatabaseURL:      env("DATABASE_URL", "postgres://127.0.0.1:5432/tatkal?sslmode=disable"),
		RedisURL:         env("REDIS_URL", "redis://127.0.0.1:6379/0"),
		Addr:             env("TATKAL_ADDR", ":8080"),
		MetricsAddr:      env("TATKAL_METRICS_ADDR", "127.0.0.1:9090"),
		RedisPrefix:      env("TATKAL_REDIS_PREFIX", "tk"),
		HoldWindow:       3 * time.Minute,
		MaxHoldsInFlight: 512,
		CommitWriters:    1,
		SweepInterval:    30 * time.Second,
		PublicURL:        env("TATKAL_PUBLIC_URL", "http://127.0.0.1:8080"),
		PSPURL:           env("TATKAL_PSP_URL", "http://127.0.0.1:8081"),
		PRSURL:           env("TATKAL_PRS_URL", "http://127.0.0.1:8082"),
		PRSKey:           os.Getenv(envPRSKey),
		SimAdminToken:    os.Getenv(envSimAdminToken),
	}
	if os.Getenv("TATKAL_ADMIN_TOKEN") != "" {
		return cfg, fmt.Errorf("TATKAL_ADMIN_TOKEN is gone: the simulators' token is now %s, and the console accepts no shared token (operators use personal API tokens)", envSimAdminToken)
	}
	if u, err := url.Parse(cfg.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return cfg, fmt.Errorf("TATKAL_PUBLIC_URL %q: want http(s)://host[:port]", cfg.PublicURL)
	}
	var err error
	if cfg.WebhookSecrets, err = secrets.ParseList(envWebhookSecrets, os.Getenv(envWebhookSecrets)); err != nil {
		return cfg, err
	}
	if cfg.PSPAPIKeys, err = secrets.ParseList(envPSPAPIKeys, os.Getenv(envPSPAPIKeys)); err != nil {
		return cfg, err
	}
	if v := os.Getenv(envSessionKey); v != "" {
		key, err := hex.DecodeString(v)
		if err != nil || len(key) < 32 {
			return cfg, fmt.Errorf("%s must be at least 32 bytes in hex; %s", envSessionKey, secrets.Hint)
		}
		cfg.SessionKey = key
	}
	if v := os.Getenv("TATKAL_DB_POOL"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 4 || n > 1000 {
			return cfg, fmt.Errorf("TATKAL_DB_POOL %q: want 4-1000 connections", v)
		}
		cfg.DBPool = n
	}
	if v := os.Getenv("TATKAL_HOLD_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 10*time.Second || d > 30*time.Minute {
			return cfg, fmt.Errorf("TATKAL_HOLD_WINDOW %q: want a duration between 10s and 30m", v)
		}
		cfg.HoldWindow = d
	}
	if v := os.Getenv("TATKAL_COMMIT_WRITERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 16 {
			return cfg, fmt.Errorf("TATKAL_COMMIT_WRITERS %q: want 1-16", v)
		}
		cfg.CommitWriters = n
	}
	if v := os.Getenv("TATKAL_MAX_HOLDS_IN_FLIGHT"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return cfg, fmt.Errorf("TATKAL_MAX_HOLDS_IN_FLIGHT %q: want a positive number", v)
		}
		cfg.MaxHoldsInFlight = n
	}
	return cfg, nil
}

// pool is the pool size: TATKAL_DB_POOL, else the command's default (see
// README: serve and worker 40, dev 20, psp and prs 20), so that a dev stack
// and the test suite fit beside each other in PostgreSQL's 100 connections.
func (c Config) pool(def int) int32 {
	if c.DBPool > 0 {
		return int32(c.DBPool)
	}
	return int32(def)
}

// secureCookies says whether browsers reach us over https (behind a
// TLS-terminating proxy the process itself never sees TLS).
func (c Config) secureCookies() bool { return strings.HasPrefix(c.PublicURL, "https://") }

// Which secrets a command needs.
const (
	needGateways = 1 << iota // TATKAL_WEBHOOK_SECRETS and TATKAL_PSP_API_KEYS
	needPRSKey
	needSessionKey
)

// requireSecrets refuses to start without the secrets in need, each set
// from the environment and none a known development value, naming every
// missing one and how to make it.
func (c Config) requireSecrets(need int) error {
	var errs []error
	if need&needGateways != 0 {
		switch {
		case len(c.WebhookSecrets) == 0:
			errs = append(errs, fmt.Errorf("%s is not set (gateway=secret,...: the secret each gateway signs its callbacks with); %s", envWebhookSecrets, secrets.Hint))
		case len(c.PSPAPIKeys) == 0:
			errs = append(errs, fmt.Errorf("%s is not set (gateway=key,...: the key we call each gateway with); %s", envPSPAPIKeys, secrets.Hint))
		case !slices.Equal(c.WebhookSecrets.IDs(), c.PSPAPIKeys.IDs()):
			errs = append(errs, fmt.Errorf("%s names gateways %v but %s names %v: each gateway needs both", envWebhookSecrets,
				c.WebhookSecrets.IDs(), envPSPAPIKeys, c.PSPAPIKeys.IDs()))
		}
	}
	if need&needPRSKey != 0 {
		if err := secrets.Check(envPRSKey, c.PRSKey); err != nil {
			errs = append(errs, err)
		}
	}
	if need&needSessionKey != 0 && len(c.SessionKey) == 0 {
		errs = append(errs, fmt.Errorf("%s is not set (hex, 32+ bytes: signs passenger sessions and admission tokens); %s", envSessionKey, secrets.Hint))
	}
	if c.SimAdminToken != "" {
		if err := secrets.Check(envSimAdminToken, c.SimAdminToken); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// withDevSecrets fills every secret the environment leaves unset with a
// fresh random one, as tatkal dev does at each start: nothing that works
// against a dev stack works against any other.
func (c Config) withDevSecrets() Config {
	if len(c.WebhookSecrets) == 0 && len(c.PSPAPIKeys) == 0 {
		c.WebhookSecrets, c.PSPAPIKeys = secrets.PerGateway{}, secrets.PerGateway{}
		for _, g := range pspsim.NewGateways() {
			c.WebhookSecrets[g.ID] = []string{string(g.WebhookSecret)}
			c.PSPAPIKeys[g.ID] = g.APIKeys
		}
	}
	if c.PRSKey == "" {
		c.PRSKey = secrets.Random()
	}
	if c.SimAdminToken == "" {
		c.SimAdminToken = secrets.Random()
	}
	return c
}

// gateways is the merchant's side: call with the first key, accept a
// callback signed with any secret.
func (c Config) gateways() []payment.GatewayConfig {
	var out []payment.GatewayConfig
	for _, id := range c.PSPAPIKeys.IDs() {
		g := payment.GatewayConfig{ID: id, BaseURL: c.PSPURL, APIKey: c.PSPAPIKeys[id][0]}
		for _, s := range c.WebhookSecrets[id] {
			g.WebhookSecrets = append(g.WebhookSecrets, []byte(s))
		}
		out = append(out, g)
	}
	return out
}

// reconSources is where reconciliation fetches the outside legs: each
// gateway's settlement file, the bank statement, the core's export.
func (c Config) reconSources() recon.Sources {
	keys := map[string]string{}
	for _, g := range c.gateways() {
		keys[g.ID] = g.APIKey
	}
	return recon.Sources{HTTP: &http.Client{Timeout: time.Minute}, PSPURL: c.PSPURL, GatewayKeys: keys,
		BankToken: c.SimAdminToken, CoreURL: c.PRSURL, CoreKey: c.PRSKey}
}

// simGateways is the simulator's side: sign with the first secret, accept
// any key.
func (c Config) simGateways() []pspsim.GatewayConfig {
	var out []pspsim.GatewayConfig
	for _, id := range c.WebhookSecrets.IDs() {
		out = append(out, pspsim.GatewayConfig{ID: id, APIKeys: c.PSPAPIKeys[id], WebhookSecret: []byte(c.WebhookSecrets[id][0])})
	}
	return out
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// Main is one running tatkal process: its connections, services, River
// client and HTTP server. Tests start it on port 0.
type Main struct {
	Config   Config
	Pool     *pgxpool.Pool
	Redis    redis.UniversalClient
	Store    *inventory.Store
	Booking  *booking.Service
	Payments *payment.Service
	Funnel   *funnel.Recorder
	Levers   *levers.Reader
	River    *river.Client[pgx.Tx]
	Console  *console.Console
	Server   *http.Server
	Listener net.Listener
	// Metrics serves /metrics on its own listener (TATKAL_METRICS_ADDR),
	// nil when that is "off".
	Metrics         *http.Server
	MetricsListener net.Listener
	Work            bool // run River workers in this process

	// Admission is the waiting room; its controller runs where Work is set.
	Admission *admission.Service

	cancel context.CancelFunc
	done   chan struct{}
}

// Open connects to PostgreSQL and Redis and builds the services. A service
// that cannot be reached is named, with how to start it.
func Open(ctx context.Context, cfg Config, work bool) (*Main, error) {
	m := &Main{Config: cfg, Work: work}
	pool, err := db.Open(ctx, cfg.DatabaseURL, cfg.pool(40))
	if err != nil {
		return nil, fmt.Errorf("%w\nIs PostgreSQL running? Start it with: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start", err)
	}
	m.Pool = pool
	opt, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("parse REDIS_URL: %w", err)
	}
	opt.PoolSize = 200
	m.Redis = redis.NewClient(opt)
	if err := m.Redis.Ping(ctx).Err(); err != nil {
		m.Close()
		return nil, fmt.Errorf("reach Redis at %s: %w\nIs Redis running? Start it with: redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save \"\" --appendonly no", opt.Addr, err)
	}
	return m, nil
}

// Build creates the services; the schema must be migrated first.
func (m *Main) Build(ctx context.Context) error {
	if len(m.Config.SessionKey) == 0 {
		return fmt.Errorf("%s is not set; %s", envSessionKey, secrets.Hint)
	}
	m.Store = inventory.New(m.Redis, m.Config.RedisPrefix)
	rules := booking.DefaultRules()
	rules.HoldWindow = m.Config.HoldWindow
	svcs := &jobs.Services{}
	office := &backoffice.Services{Fraud: &fraud.Service{Pool: m.Pool, Clusterer: fraud.Clusterer{Config: fraud.DefaultConfig()}},
		Sources: m.Config.reconSources()}
	// The service needs a River client to enqueue in its transactions and
	// the workers need the service: build the client with the (not yet
	// filled) services, then fill them.
	client, err := jobs.NewClient(m.Pool, svcs, jobs.Config{Work: m.Work, SweepInterval: m.Config.SweepInterval, Logger: slog.Default(),
		More: backoffice.Jobs(office)})
	if err != nil {
		return err
	}
	m.River = client
	core := prs.NewClient(m.Config.PRSURL, m.Config.PRSKey, &http.Client{Timeout: 10 * time.Second})
	m.Funnel = funnel.New(m.Redis, m.Config.RedisPrefix, slog.Default())
	m.Levers = levers.NewReader(m.Pool, slog.Default())
	m.Booking = booking.NewService(booking.ServiceConfig{Pool: m.Pool, Store: m.Store, Jobs: client, Rules: rules, Core: core, Funnel: m.Funnel, Levers: m.Levers})
	m.Payments = payment.New(payment.Config{Pool: m.Pool, Redis: m.Redis, Prefix: m.Config.RedisPrefix, Booking: m.Booking, Jobs: client, Funnel: m.Funnel, Levers: m.Levers,
		Gateways: m.Config.gateways(), CallbackURL: m.Config.PublicURL + "/v1/internal/payments/callback",
		ReturnURL: m.Config.PublicURL + "/payments/return"})
	svcs.Booking, svcs.Payments = m.Booking, m.Payments
	office.Booking, office.Payments = m.Booking, m.Payments
	office.Recon = recon.New(recon.Config{Pool: m.Pool, Jobs: client, Log: slog.Default()})
	m.Admission, err = admission.New(admission.Config{Pool: m.Pool, Redis: m.Redis, Prefix: m.Config.RedisPrefix, Store: m.Store,
		Catalog: m.Booking.Catalog(), Funnel: m.Funnel, Levers: m.Levers, Rules: rules, Secret: m.Config.SessionKey})
	if err != nil {
		return err
	}
	m.Booking.SetAdmission(m.Admission.Verifier(), m.Config.RedisPrefix)
	return nil
}

// sessionKey returns the stored session key, generating it on first run:
// for tatkal dev only; everywhere else the key comes from the environment
// and never sits in a table.
func sessionKey(ctx context.Context, pool *pgxpool.Pool) ([]byte, error) {
	b := make([]byte, 32)
	rand.Read(b) //nolint:errcheck
	var v string
	err := pool.QueryRow(ctx, `WITH ins AS (
		INSERT INTO settings (key, value) VALUES ('session_key', $1) ON CONFLICT (key) DO NOTHING RETURNING value)
		SELECT value FROM ins UNION ALL SELECT value FROM settings WHERE key = 'session_key' LIMIT 1`, hex.EncodeToString(b)).Scan(&v)
	if err != nil {
		return nil, fmt.Errorf("session key: %w", err)
	}
	return hex.DecodeString(v)
}

// Handler returns the HTTP routes of this process.
func (m *Main) Handler() (http.Handler, error) {
	signer, err := auth.NewSigner(m.Config.SessionKey)
	if err != nil {
		return nil, err
	}
	r := chi.NewRouter()
	r.Use(middleware.Recoverer)
	r.Get("/healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok\n")) }) //nolint:errcheck
	r.Get("/readyz", m.ready)
	(&web.Pages{Booking: m.Booking, Payments: m.Payments, Log: slog.Default()}).Routes(r)
	api.New(api.Config{Service: m.Booking, Payments: m.Payments, Pool: m.Pool, Signer: signer, MaxHoldsInFlight: m.Config.MaxHoldsInFlight, Admission: m.Admission}).Routes(r)
	m.Console = console.New(console.Config{Pool: m.Pool, Redis: m.Redis, Store: m.Store, Booking: m.Booking, Payments: m.Payments, Funnel: m.Funnel,
		River: m.River, HoldWindow: m.Config.HoldWindow, QueueDepth: m.Admission.Depth, QueueRefusals: m.Admission.Refusals, SecureCookies: m.Config.secureCookies()})
	m.Console.Routes(r)
	return httpx.App(r, httpx.AppOptions{HTTPS: m.Config.secureCookies(), APIReject: api.RejectInput,
		CSP: map[string]string{"/console/river/": httpx.InlineStyleCSP}}), nil
}

// ready answers whether this process can serve: PostgreSQL, Redis and the
// schema all current.
func (m *Main) ready(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	checks := map[string]string{"postgres": "ok", "redis": "ok", "migrations": "ok"}
	ok := true
	if err := m.Pool.Ping(ctx); err != nil {
		checks["postgres"], ok = err.Error(), false
	}
	if err := m.Redis.Ping(ctx).Err(); err != nil {
		checks["redis"], ok = err.Error(), false
	}
	if pending, err := db.Pending(ctx, m.Pool); err != nil {
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

// Start runs the committer, the River client (workers when m.Work) and,
// when serve is set, the HTTP server on m.Config.Addr.
func (m *Main) Start(ctx context.Context, serve bool) error {
	ctx, m.cancel = context.WithCancel(ctx)
	m.done = make(chan struct{})
	go func() {
		defer close(m.done)
		go m.Funnel.Run(ctx, 500*time.Millisecond)
		if m.Work && m.Admission != nil {
			// The admission controller: one leads across all processes (lease with fencing).
			ctl := make(chan struct{})
			go func() { m.Admission.NewController(admission.ControllerConfig{}).Run(ctx); close(ctl) }()
			defer func() { <-ctl }()
		}
		m.Booking.RunCommitter(ctx, m.Config.CommitWriters)
	}()
	if m.Work {
		if err := m.River.Start(ctx); err != nil {
			return fmt.Errorf("start river: %w", err)
		}
	}
	if !serve {
		return nil
	}
	h, err := m.Handler()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", m.Config.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", m.Config.Addr, err)
	}
	m.Listener = ln
	m.Server = httpx.NewServer(h)
	go serveOn(m.Server, ln, "app")
	if m.Config.MetricsAddr != "off" {
		mln, err := net.Listen("tcp", m.Config.MetricsAddr)
		if err != nil {
			return fmt.Errorf("listen on %s (TATKAL_METRICS_ADDR; \"off\" turns metrics off): %w", m.Config.MetricsAddr, err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", m.Console.Metrics())
		m.MetricsListener, m.Metrics = mln, httpx.NewServer(mux)
		go serveOn(m.Metrics, mln, "metrics")
	}
	return nil
}

func serveOn(srv *http.Server, ln net.Listener, name string) {
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		slog.Error("http server", "server", name, "err", err)
	}
}

// metricsURL says where /metrics is served, if anywhere.
func metricsURL(m *Main) string {
	if m.MetricsListener == nil {
		return "off"
	}
	return "http://" + m.MetricsListener.Addr().String() + "/metrics"
}

// URL is the base URL of the running server.
func (m *Main) URL() string {
	addr := m.Listener.Addr().(*net.TCPAddr)
	return fmt.Sprintf("http://127.0.0.1:%d", addr.Port)
}

// Close stops serving, lets River finish running jobs, stops the committer
// and closes connections.
func (m *Main) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if m.Server != nil {
		m.Server.Shutdown(ctx) //nolint:errcheck
	}
	if m.Metrics != nil {
		m.Metrics.Shutdown(ctx) //nolint:errcheck
	}
	if m.River != nil && m.Work {
		m.River.Stop(ctx) //nolint:errcheck
	}
	if m.cancel != nil {
		m.cancel()
		<-m.done
	}
	if m.Redis != nil {
		m.Redis.Close()
	}
	if m.Pool != nil {
		m.Pool.Close()
	}
}

func flags(name, help string, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("tatkal "+name, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "%s\n\nUsage: tatkal %s [flags]\n", help, name)
		fs.PrintDefaults()
	}
	return fs
}

func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))}
	}
	return nil
}

func cmdMigrate(ctx context.Context, cfg Config, args []string, out io.Writer) error {
	fs := flags("migrate", "Apply tatkal's and River's database migrations. Safe to run again.", out)
	if err := parse(fs, args); err != nil {
		return err
	}
	pool, err := db.Open(ctx, cfg.DatabaseURL, 4)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := db.Migrate(ctx, pool); err != nil {
		return err
	}
	fmt.Fprintln(out, "migrations are current")
	return nil
}

func cmdServe(ctx context.Context, cfg Config, args []string, out io.Writer) error {
	fs := flags("serve", "Serve the web pages and the /v1 API.", out)
	workers := fs.Bool("workers", true, "also run the River workers in this process")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := cfg.requireSecrets(needGateways | needPRSKey | needSessionKey); err != nil {
		return err
	}
	return serveUntilDone(ctx, cfg, *workers, true, out)
}

func cmdWorker(ctx context.Context, cfg Config, args []string, out io.Writer) error {
	fs := flags("worker", "Run the River workers: hold expiry, seat sync, the sweeper.", out)
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := cfg.requireSecrets(needGateways | needPRSKey | needSessionKey); err != nil {
		return err
	}
	return serveUntilDone(ctx, cfg, true, false, out)
}

func serveUntilDone(ctx context.Context, cfg Config, work, serve bool, out io.Writer) error {
	m, err := Open(ctx, cfg, work)
	if err != nil {
		return err
	}
	defer m.Close()
	if pending, err := db.Pending(ctx, m.Pool); err != nil {
		return fmt.Errorf("%w (run: tatkal migrate)", err)
	} else if len(pending) > 0 {
		return fmt.Errorf("migrations pending: %s (run: tatkal migrate)", strings.Join(pending, ", "))
	}
	if err := m.Build(ctx); err != nil {
		return err
	}
	if err := m.Start(ctx, serve); err != nil {
		return err
	}
	if serve {
		fmt.Fprintf(out, "tatkal serving on %s (workers: %t)\n", m.URL(), work)
	} else {
		fmt.Fprintln(out, "tatkal worker running")
	}
	<-ctx.Done()
	fmt.Fprintln(out, "shutting down")
	return nil
}

func cmdCheck(ctx context.Context, cfg Config, args []string, out io.Writer) error {
	fs := flags("check", "Verify seat invariants per shard, Redis against PostgreSQL. Exits 1 on any violation.", out)
	shard := fs.Int64("shard", 0, "check only this shard id (default: every shard)")
	if err := parse(fs, args); err != nil {
		return err
	}
	m, err := Open(ctx, cfg, false)
	if err != nil {
		return err
	}
	defer m.Close()
	store := inventory.New(m.Redis, cfg.RedisPrefix)
	ids := []int64{*shard}
	if *shard == 0 {
		rows, err := m.Pool.Query(ctx, `SELECT id FROM inventory_shards ORDER BY id`)
		if err != nil {
			return fmt.Errorf("list shards: %w", err)
		}
		if ids, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
			return fmt.Errorf("list shards: %w", err)
		}
	}
	bad := 0
	for _, id := range ids {
		rep, err := inventory.Check(ctx, m.Pool, store, id, cfg.HoldWindow)
		if err != nil {
			return err
		}
		fmt.Fprint(out, rep.String())
		if !rep.OK() {
			bad++
		}
	}
	if bad > 0 {
		return fmt.Errorf("%d of %d shard(s) violate an invariant", bad, len(ids))
	}
	fmt.Fprintf(out, "all %d shard(s) hold their invariants\n", len(ids))
	return nil
}

func cmdSeed(ctx context.Context, cfg Config, args []string, out io.Writer) error {
	if len(args) == 0 || (args[0] != "demo" && args[0] != "shard" && args[0] != "users") {
		if len(args) > 0 && (args[0] == "--help" || args[0] == "-h") {
			fmt.Fprintln(out, seedUsage)
			return flag.ErrHelp
		}
		return usageError{errors.New("seed what? " + seedUsage)}
	}
	pool, err := db.Open(ctx, cfg.DatabaseURL, 8)
	if err != nil {
		return err
	}
	defer pool.Close()
	if pending, err := db.Pending(ctx, pool); err != nil || len(pending) > 0 {
		return fmt.Errorf("the schema is not current (run: tatkal migrate)")
	}
	switch args[0] {
	case "demo":
		fs := flags("seed demo", "Create the three demo trains of DOMAIN.md, their coaches and Tatkal shards for one journey date.", out)
		date := fs.String("date", "", "journey date YYYY-MM-DD (default tomorrow, IST)")
		opensIn := fs.Duration("opens-in", 0, "open every window this long from now (e.g. 2m; negative: already open); default the real opening times")
		if err := parse(fs, args[1:]); err != nil {
			return err
		}
		opts := seed.DemoOptions{}
		if *date != "" {
			d, err := time.ParseInLocation(time.DateOnly, *date, booking.IST)
			if err != nil {
				return usageError{fmt.Errorf("--date %q: want YYYY-MM-DD", *date)}
			}
			opts.JourneyDate = d
		}
		if isSet(fs, "opens-in") {
			opts.OpensIn = opensIn
		}
		res, err := seed.Demo(ctx, pool, opts)
		if err != nil {
			return err
		}
		printDemo(out, res)
	case "shard":
		fs := flags("seed shard", "Create one Tatkal shard with K berths, for tests, benchmarks and rehearsals.", out)
		train := fs.String("train", "12951", "train number (a demo train; run seed demo first)")
		date := fs.String("date", "", "journey date YYYY-MM-DD (required)")
		class := fs.String("class", "3A", "class")
		berths := fs.Int("berths", 0, "berths to sell (default: the Tatkal quota, 30% of each coach)")
		opensIn := fs.Duration("opens-in", 0, "window opens this long from now (negative: already open); default the real time")
		mode := fs.String("mode", "direct", "direct (no waiting room) or queue")
		wl := fs.Int("waitlist", -1, "TQWL cap (default: 60% of berths AC, 30% non-AC)")
		if err := parse(fs, args[1:]); err != nil {
			return err
		}
		if *mode != "direct" && *mode != "queue" {
			return usageError{fmt.Errorf("--mode %q: want direct or queue", *mode)}
		}
		d, err := time.ParseInLocation(time.DateOnly, *date, booking.IST)
		if err != nil {
			return usageError{fmt.Errorf("--date %q: want YYYY-MM-DD", *date)}
		}
		spec := seed.ShardSpec{Train: *train, Date: d, Class: *class, Berths: *berths, Mode: *mode}
		if isSet(fs, "opens-in") {
			spec.OpensAt = time.Now().Add(*opensIn)
		}
		if *wl >= 0 {
			spec.WaitlistCap = wl
		}
		id, err := seed.Shard(ctx, pool, spec)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "shard %d: train %s %s %s TQ\n", id, *train, *date, *class)
	case "users":
		fs := flags("seed users", "Create identity-verified passenger accounts P00001... each with one saved, validated passenger.", out)
		count := fs.Int("count", 10, "how many")
		prefix := fs.String("prefix", "user", "login prefix")
		password := fs.String("password", "", "password for all of them (required)")
		wallet := fs.Int("wallet", 0, "wallet balance in rupees (used once wallets exist)")
		agent := fs.Bool("agent", false, "create agent accounts")
		if err := parse(fs, args[1:]); err != nil {
			return err
		}
		if *password == "" || *count < 1 || *prefix == "" {
			return usageError{errors.New("seed users needs --password, a positive --count and a --prefix")}
		}
		ids, err := seed.Users(ctx, pool, seed.UsersSpec{Count: *count, Prefix: *prefix, Password: *password, WalletRupees: *wallet, Agent: *agent})
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "created %d users %s%05d..%s%05d (ids %d..%d)\n", len(ids), *prefix, 1, *prefix, len(ids), ids[0], ids[len(ids)-1])
	}
	return nil
}

const seedUsage = `tatkal seed demo  [--date D] [--opens-in DUR]
tatkal seed shard --date D [--train N] [--class C] [--berths K] [--opens-in DUR] [--mode direct|queue]
tatkal seed users --count N --prefix P --password X [--wallet RUPEES]`

func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func printDemo(out io.Writer, res seed.DemoResult) {
	fmt.Fprintf(out, "journey date %s\n", res.JourneyDate.Format(time.DateOnly))
	for _, s := range res.Shards {
		fmt.Fprintf(out, "  shard %-3d %s %-3s %4d berths, %2d legs, TQWL cap %3d, window %s - %s IST\n", s.ID, s.Train, s.Class, s.Berths, s.Legs,
			s.WaitlistCap, s.OpensAt.In(booking.IST).Format("Jan 2 15:04"), s.ClosesAt.In(booking.IST).Format("Jan 2 15:04"))
	}
}

func cmdDev(ctx context.Context, cfg Config, args []string, out io.Writer) error {
	fs := flags("dev", "Create the database, migrate, seed demo data, and run the server with workers on this machine.", out)
	realTimes := fs.Bool("real-times", false, "open demo windows at the real Tatkal times instead of now")
	if err := parse(fs, args); err != nil {
		return err
	}
	cfg = cfg.withDevSecrets()
	if cfg.DBPool == 0 {
		cfg.DBPool = 20 // app, workers and both simulators share it; idle, a handful are open
	}
	m, err := Open(ctx, cfg, true)
	if err != nil {
		return err
	}
	defer m.Close()
	if err := db.Migrate(ctx, m.Pool); err != nil {
		return err
	}
	if len(m.Config.SessionKey) == 0 {
		if m.Config.SessionKey, err = sessionKey(ctx, m.Pool); err != nil {
			return err
		}
	}
	opts := seed.DemoOptions{}
	if !*realTimes {
		open := -time.Minute
		opts.OpensIn = &open
	}
	res, err := seed.Demo(ctx, m.Pool, opts)
	if err != nil {
		return err
	}
	const demoPassword = "tatkal-demo"
	var n int
	if err := m.Pool.QueryRow(ctx, `SELECT count(*) FROM users WHERE login LIKE 'demo%'`).Scan(&n); err != nil {
		return fmt.Errorf("count demo users: %w", err)
	}
	if _, err := console.SeedDemoUsers(ctx, m.Pool); err != nil {
		return err
	}
	if n == 0 {
		if _, err := seed.Users(ctx, m.Pool, seed.UsersSpec{Count: 5, Prefix: "demo", Password: demoPassword, WalletRupees: 5000}); err != nil {
			return err
		}
	}
	cfg.PublicURL = "http://" + strings.Replace(cfg.Addr, ":", "127.0.0.1:", 1)
	if !strings.HasPrefix(cfg.Addr, ":") {
		cfg.PublicURL = "http://" + cfg.Addr
	}
	m.Config.PublicURL = cfg.PublicURL
	psp, err := startPSP(ctx, m.Pool, cfg, cfg.PSPURL)
	if err != nil {
		return err
	}
	defer psp.server.Shutdown(context.Background()) //nolint:errcheck
	core, err := startPRS(ctx, m.Pool, cfg, cfg.PRSURL)
	if err != nil {
		return err
	}
	defer core.server.Shutdown(context.Background()) //nolint:errcheck
	if err := m.Build(ctx); err != nil {
		return err
	}
	if err := m.Start(ctx, true); err != nil {
		return err
	}
	url := m.URL()
	printDemo(out, res)
	fmt.Fprintf(out, `
tatkal is running.
  API        %[1]s/v1   (OpenAPI: %[1]s/v1/openapi.json)
  health     %[1]s/healthz  %[1]s/readyz   metrics %[7]s
  gateways   %[4]s (simulated; faults: PUT %[4]s/admin/routes/{gw}/{method}, token %[6]s)
  core       %[5]s (simulated reservation system; faults: PUT %[5]s/admin/faults)
  logins     demo00001 .. demo00005, password %[2]s (wallets hold ₹5,000)
  console    %[1]s/console  ops1, finance1, fraud1, admin1, admin2 (one per role; two admins approve each other), password console-demo

Book a seat with curl:
  TOKEN=$(curl -s %[1]s/v1/auth/login -H 'Content-Type: application/json' \
    -d '{"login":"demo00001","password":"%[2]s"}' | sed 's/.*"token":"\([^"]*\)".*/\1/')
  curl -s %[1]s/v1/bookings/hold -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
    -H "Idempotency-Key: try-$(date +%%s)" -d '{"train_no":"12951","journey_date":"%[3]s","class":"3A",
    "from":"MMCT","to":"NDLS","passengers":[{"name":"Asha Rao","age":34,"gender":"F","id_type":"PAN","id_ref":"ABCDE1234F"}]}'
  # then pay from the wallet with the hold_id it printed:
  curl -s %[1]s/v1/payments/initiate -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
    -d '{"hold_id":"<hold_id>","method":"WALLET","idempotency_key":"pay-'$(date +%%s)'"}'

Ctrl-C stops it.
`, url, demoPassword, res.JourneyDate.Format(time.DateOnly), psp.URL(), core.URL(), cfg.SimAdminToken, metricsURL(m))
	<-ctx.Done()
	fmt.Fprintln(out, "shutting down")
	return nil
}

func cmdBench(ctx context.Context, cfg Config, args []string, out io.Writer) error {
	fs := flags("bench", "Measure the hold path on one hot shard (raw Lua and PostgreSQL ceilings, service, HTTP, durable holds) and the payment path\n(wallet confirmations, gateway callbacks and their duplicates); p50/p99.", out)
	opts := bench.DefaultOptions()
	fs.DurationVar(&opts.Duration, "duration", opts.Duration, "length of each measurement")
	fs.IntVar(&opts.Concurrency, "concurrency", opts.Concurrency, "concurrent clients")
	fs.IntVar(&opts.Berths, "berths", opts.Berths, "berths on the hot shard")
	fs.IntVar(&opts.PipelineBatch, "pipeline", opts.PipelineBatch, "script calls per pipeline in the raw Redis ceiling")
	fs.IntVar(&opts.Writers, "writers", opts.Writers, "group-commit writers in the raw PostgreSQL ceiling (the service runs 3)")
	fs.IntVar(&opts.FreshUsers, "fresh-users", 0, "users each hold-only phase may spend, one per durable hold (default: concurrency + 8,000 per second of duration)")
	fs.IntVar(&opts.WalletUsers, "wallet-users", 0, "wallet-funded users the wallet phase may spend, one per confirmation (default: concurrency + 2,000 per second of duration)")
	fs.IntVar(&opts.Callbacks, "callbacks", 0, "payments prepared for the callback phase (default: concurrency + 3x the wallet confirmations per second for the duration)")
	fs.StringVar(&opts.ProfileDir, "cpuprofile-dir", "", "write a CPU profile of each phase here (<phase>.pprof)")
	if err := parse(fs, args); err != nil {
		return err
	}
	// The bench runs its own simulators: fresh secrets, as tatkal dev.
	cfg = cfg.withDevSecrets()
	cfg.MetricsAddr = "off"
	if len(cfg.SessionKey) == 0 {
		cfg.SessionKey, _ = hex.DecodeString(secrets.Random())
	}
	m, err := Open(ctx, cfg, false)
	if err != nil {
		return err
	}
	defer m.Close()
	if err := db.Migrate(ctx, m.Pool); err != nil {
		return err
	}
	if err := m.Build(ctx); err != nil {
		return err
	}
	if err := m.Start(ctx, true); err != nil {
		return err
	}
	opts.BaseURL, opts.Pool, opts.Redis, opts.Service = m.URL(), m.Pool, m.Redis, m.Booking
	opts.Payments, opts.Gateways = m.Payments, m.Config.gateways()
	opts.SessionKey = m.Config.SessionKey
	opts.Log = slog.Default()
	rep, err := bench.Run(ctx, opts)
	if err != nil {
		return err
	}
	fmt.Fprint(out, rep.String())
	return nil
}

// simulator is one of the stand-ins for an outside system, serving HTTP on
// its own address.
type simulator struct {
	name   string
	server *http.Server
	ln     net.Listener
}

func (s *simulator) URL() string {
	return fmt.Sprintf("http://127.0.0.1:%d", s.ln.Addr().(*net.TCPAddr).Port)
}

func listenSim(name, rawURL string, h http.Handler) (*simulator, error) {
	addr := strings.TrimPrefix(strings.TrimPrefix(rawURL, "http://"), "https://")
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s simulator: listen on %s: %w", name, addr, err)
	}
	sim := &simulator{name: name, ln: ln, server: httpx.NewServer(h)}
	go serveOn(sim.server, ln, name)
	return sim, nil
}

// startPSP runs the gateway simulator on addr until ctx ends.
func startPSP(ctx context.Context, pool *pgxpool.Pool, cfg Config, addr string) (*simulator, error) {
	srv, err := pspsim.New(ctx, pspsim.Config{Pool: pool, AdminToken: cfg.SimAdminToken, Gateways: cfg.simGateways(), PublicURL: addr})
	if err != nil {
		return nil, err
	}
	go srv.Run(ctx)
	return listenSim("psp", addr, srv.Handler())
}

// startPRS runs the reservation core simulator on addr.
func startPRS(ctx context.Context, pool *pgxpool.Pool, cfg Config, addr string) (*simulator, error) {
	srv, err := prs.NewServer(ctx, prs.ServerConfig{Pool: pool, APIKey: cfg.PRSKey, AdminToken: cfg.SimAdminToken})
	if err != nil {
		return nil, err
	}
	return listenSim("prs", addr, srv.Handler())
}

func cmdPSP(ctx context.Context, cfg Config, args []string, out io.Writer) error {
	fs := flags("psp", "Run the payment gateway simulator: gateways swiftpay and bharatpg with UPI, CARD and NETBANKING routes,\nfaults settable at runtime through /admin/routes (TATKAL_SIM_ADMIN_TOKEN). State lives in schema psp.", out)
	addr := fs.String("addr", cfg.PSPURL, "listen address (URL)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := cfg.requireSecrets(needGateways); err != nil {
		return err
	}
	pool, err := db.Open(ctx, cfg.DatabaseURL, cfg.pool(20))
	if err != nil {
		return err
	}
	defer pool.Close()
	sim, err := startPSP(ctx, pool, cfg, *addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "payment gateway simulator on %s (%s)\n", sim.URL(), simAdminState(cfg))
	<-ctx.Done()
	return sim.server.Shutdown(context.Background())
}

func cmdPRS(ctx context.Context, cfg Config, args []string, out io.Writer) error {
	fs := flags("prs", "Run the reservation core simulator: confirmed bookings are synced here by PNR; faults at /admin/faults.\nState lives in schema prs.", out)
	addr := fs.String("addr", cfg.PRSURL, "listen address (URL)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := cfg.requireSecrets(needPRSKey); err != nil {
		return err
	}
	pool, err := db.Open(ctx, cfg.DatabaseURL, cfg.pool(20))
	if err != nil {
		return err
	}
	defer pool.Close()
	sim, err := startPRS(ctx, pool, cfg, *addr)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "reservation core simulator on %s (%s)\n", sim.URL(), simAdminState(cfg))
	<-ctx.Done()
	return sim.server.Shutdown(context.Background())
}

// simAdminState says whether a simulator's fault API is on, never the token.
func simAdminState(cfg Config) string {
	if cfg.SimAdminToken == "" {
		return "admin API off: set " + envSimAdminToken + " to change faults"
	}
	return "admin API on, token from " + envSimAdminToken
}

func cmdVerifyWindow(ctx context.Context, cfg Config, args []string, out io.Writer) error {
	fs := flags("verify-window", "Recompute a waiting-room window's admission order from its revealed seed and its cohort, and say whether\nthe admission log matches it. Exits 1 when it does not (or the seed is not revealed yet).", out)
	id := fs.Int64("window", 0, "window id: the shard id (GET /v1/windows/{id}/fairness)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *id <= 0 {
		return usageError{errors.New("--window is required")}
	}
	pool, err := db.Open(ctx, cfg.DatabaseURL, 2)
	if err != nil {
		return err
	}
	defer pool.Close()
	rep, err := admission.VerifyWindow(ctx, pool, *id)
	if err != nil {
		return err
	}
	fmt.Fprint(out, rep.String())
	if !rep.OK() {
		return fmt.Errorf("window %d: not verified", *id)
	}
	return nil
}

// cmdRecon is reconciliation from the command line: ingest, run, export.
func cmdRecon(ctx context.Context, cfg Config, args []string, stdout io.Writer) error {
	if err := recon.Command(ctx, cfg.DatabaseURL, args, stdout); err != nil {
		if errors.Is(err, recon.ErrUsage) {
			return usageError{err}
		}
		return err
	}
	return nil
}
