package pspsim

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"tatkal/booking/payment/pspapi"
	"tatkal/booking/sim/simhttp"
)

// GatewayConfig is one simulated gateway and the secrets it shares with
// its merchant. Several API keys may be live at once, so a merchant can
// rotate without downtime: any of them is accepted.
type GatewayConfig struct {
	ID            string
	APIKeys       []string
	WebhookSecret []byte // signs every webhook
}

// Config configures a Server. Zero values mean the documented default.
type Config struct {
	Pool       *pgxpool.Pool
	Schema     string // default "psp"
	AdminToken string // empty: the admin API refuses every call
	// BankToken is the bank statement API's credential, the bank's own,
	// not the simulator's admin token; empty: the bank refuses every call.
	BankToken string
	Gateways  []GatewayConfig // required: no secret is compiled in
	// PublicURL is the base URL customers' browsers use for the pay pages;
	// empty means the scheme and host of the API request that created the
	// payment.
	PublicURL  string
	Log        *slog.Logger     // default slog.Default()
	Now        func() time.Time // default time.Now
	Seed       int64            // fault decisions are a pure function of it; 0 = random
	HTTPClient *http.Client     // for webhooks; default 10 s timeout

	// Routes seeds the route table where a route is missing, so settings
	// changed through the admin API survive restarts. Default: every
	// gateway carries UPI, CARD and NETBANKING as in DefaultRoutes.
	Routes []pspapi.RouteConfig
	// Tick is how often the background loops look for due work (100 ms).
	Tick time.Duration
	// Webhook retries on failure: WebhookRetryBase doubling up to
	// WebhookRetryMax, WebhookMaxAttempts attempts in all (5 s, 10 min, 8).
	WebhookRetryBase   time.Duration
	WebhookRetryMax    time.Duration
	WebhookMaxAttempts int
	// RefundDelay is how long a refund stays PENDING before PROCESSED (2 s).
	RefundDelay time.Duration
	// TimeoutHang bounds how long a create hit by a timeout fault hangs
	// before answering 504 (30 s); a client that gives up ends it sooner.
	TimeoutHang time.Duration
}

// Server is one simulator process. Handler serves the API, pages and
// admin API; Run drives customers, banks, refunds and webhooks.
type Server struct {
	cfg      Config
	pool     *pgxpool.Pool
	log      *slog.Logger
	schema   string // sanitized identifier
	gateways map[string]GatewayConfig
	seed     uint64
	handler  http.Handler
	pages    *template.Template
	limiter  *limiter
	dialect  simhttp.Dialect // words for bad bodies and internal errors
	fpKey    []byte          // keys card fingerprints and account references (instrument.go)

	rngMu sync.Mutex
	rng   *mrand.Rand

	// ctx is cancelled by Close: it ends hanging requests and Run.
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	closed bool
	runs   sync.WaitGroup
}

var (
	gatewayIDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)
	schemaPattern    = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)
)

// GatewayIDs are the gateways the simulator plays by default.
var GatewayIDs = []string{"swiftpay", "bharatpg"}

// NewGateways returns GatewayIDs with fresh random secrets: what tatkal dev
// and tests run with. No secret is compiled in, so none can be read from
// the source and used against a real deployment.
func NewGateways() []GatewayConfig {
	out := make([]GatewayConfig, 0, len(GatewayIDs))
	for _, id := range GatewayIDs {
		out = append(out, GatewayConfig{ID: id, APIKeys: []string{"sk_" + randomHex(24)}, WebhookSecret: []byte("whsec_" + randomHex(32))})
	}
	return out
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) //nolint:errcheck // never fails
	return hex.EncodeToString(b)
}

// New checks cfg, creates the schema and tables when missing, and seeds
// missing routes. It does not start the background loops; call Run.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Pool == nil {
		return nil, errors.New("pspsim: config needs a Pool")
	}
	if cfg.Schema == "" {
		cfg.Schema = "psp"
	}
	if !schemaPattern.MatchString(cfg.Schema) {
		return nil, fmt.Errorf("pspsim: schema %q: use lower-case letters, digits and _", cfg.Schema)
	}
	if len(cfg.Gateways) == 0 {
		return nil, errors.New("pspsim: config needs Gateways and their secrets (see NewGateways)")
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	cfg.Tick = orDefault(cfg.Tick, 100*time.Millisecond)
	cfg.WebhookRetryBase = orDefault(cfg.WebhookRetryBase, 5*time.Second)
	cfg.WebhookRetryMax = orDefault(cfg.WebhookRetryMax, 10*time.Minute)
	cfg.RefundDelay = orDefault(cfg.RefundDelay, 2*time.Second)
	cfg.TimeoutHang = orDefault(cfg.TimeoutHang, 30*time.Second)
	if cfg.WebhookMaxAttempts <= 0 {
		cfg.WebhookMaxAttempts = 8
	}

	gws := map[string]GatewayConfig{}
	for _, g := range cfg.Gateways {
		switch {
		case !gatewayIDPattern.MatchString(g.ID):
			return nil, fmt.Errorf("pspsim: gateway id %q: use lower-case letters, digits, _ and -", g.ID)
		case len(g.APIKeys) == 0 || slices.Contains(g.APIKeys, "") || len(g.WebhookSecret) == 0:
			return nil, fmt.Errorf("pspsim: gateway %q needs an API key and a webhook secret", g.ID)
		case gws[g.ID].ID != "":
			return nil, fmt.Errorf("pspsim: gateway %q configured twice", g.ID)
		}
		gws[g.ID] = g
	}

	seed := uint64(cfg.Seed)
	if seed == 0 {
		var b [8]byte
		rand.Read(b[:]) //nolint:errcheck // never fails
		seed = binary.LittleEndian.Uint64(b[:])
	}
	s := &Server{
		cfg:      cfg,
		pool:     cfg.Pool,
		log:      cfg.Log.With("component", "pspsim"),
		schema:   quoteIdent(cfg.Schema),
		gateways: gws,
		seed:     seed,
		limiter:  newLimiter(),
		rng:      mrand.New(mrand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
	}
	s.dialect = simhttp.Dialect{Log: s.log, Internal: pspapi.ErrorBody{Error: "internal error", Code: pspapi.CodeInternal},
		BadRequest: func(msg string) any { return pspapi.ErrorBody{Error: msg, Code: pspapi.CodeInvalid} }}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	s.pages = pages

	routes := cfg.Routes
	if routes == nil {
		for _, g := range cfg.Gateways {
			routes = append(routes, defaultRoutesFor(g.ID)...)
		}
	}
	for _, rc := range routes {
		if _, ok := gws[rc.Gateway]; !ok {
			return nil, fmt.Errorf("pspsim: route %s/%s: gateway not configured", rc.Gateway, rc.Method)
		}
		if err := validateRoute(rc); err != nil {
			return nil, fmt.Errorf("pspsim: route %s/%s: %w", rc.Gateway, rc.Method, err)
		}
	}
	if err := s.migrate(ctx); err != nil {
		return nil, err
	}
	if err := s.seedRoutes(ctx, routes); err != nil {
		return nil, err
	}
	s.handler = s.routes()
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Handler serves the gateway API, the customer pages and the admin API.
func (s *Server) Handler() http.Handler { return s.handler }

// routes is every endpoint, top to bottom.
func (s *Server) routes() http.Handler {
	r := chi.NewRouter()
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, notFound("no such endpoint: %s %s", r.Method, r.URL.Path))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, &apiError{status: http.StatusMethodNotAllowed, code: pspapi.CodeInvalid, msg: "method not allowed on " + r.URL.Path})
	})
	r.Get("/healthz", simhttp.Health)
	settlementFaults := simhttp.Setting[SettlementFaults]{Name: "settlement faults", Limit: maxBody, Log: s.log,
		Fail: s.writeError, Load: s.loadSettlementFaults, Save: s.saveSettlementFaults}

	r.Route("/gw/{gw}", func(r chi.Router) {
		r.Group(func(r chi.Router) {
			r.Use(s.requireAPIKey)
			r.Post("/v1/payments", s.api(s.handleCreatePayment))
			r.Get("/v1/payments", s.api(s.handleFindPayment))
			r.Get("/v1/payments/{ref}", s.api(s.handleGetPayment))
			r.Post("/v1/refunds", s.api(s.handleCreateRefund))
			r.Get("/v1/refunds/{ref}", s.api(s.handleGetRefund))
			r.Get("/v1/settlements/{file}", s.api(s.handleSettlement))
		})
		r.Get("/pay/{ref}", s.handlePayPage)
		r.Post("/pay/{ref}/approve", s.handleDecision(true))
		r.Post("/pay/{ref}/decline", s.handleDecision(false))
	})

	r.Route("/admin", func(r chi.Router) {
		r.Use(s.requireAdmin)
		r.Get("/routes", s.api(s.handleListRoutes))
		r.Put("/routes/{gw}/{method}", s.api(s.handlePutRoute))
		r.Get("/settlement-faults/{gw}", settlementFaults.Get)
		r.Put("/settlement-faults/{gw}", settlementFaults.Put)
	})
	// The bank's statement of payouts, behind the bank's own credential.
	r.With(s.requireBank).Get("/bank/v1/statements/{file}", s.api(s.handleBankStatement))
	return r
}

// Run drives the simulated world until ctx ends or Close is called:
// customers approving or abandoning, banks answering late, refunds being
// paid out and webhooks being delivered and retried. Work is claimed in
// the database, so two servers on one schema never do it twice.
func (s *Server) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.runs.Add(1)
	s.mu.Unlock()
	defer s.runs.Done()

	ctx, stop := context.WithCancel(ctx)
	defer stop()
	defer context.AfterFunc(s.ctx, stop)()

	var deliveries sync.WaitGroup
	defer deliveries.Wait()
	slots := make(chan struct{}, 32) // concurrent webhook deliveries

	s.log.InfoContext(ctx, "psp simulator running", "gateways", len(s.gateways), "tick", s.cfg.Tick)
	t := time.NewTicker(s.cfg.Tick)
	defer t.Stop()
	for {
		if err := s.advancePayments(ctx); err != nil && ctx.Err() == nil {
			s.log.ErrorContext(ctx, "advance payments", "err", err)
		}
		if err := s.processRefunds(ctx); err != nil && ctx.Err() == nil {
			s.log.ErrorContext(ctx, "process refunds", "err", err)
		}
		if err := s.dispatchWebhooks(ctx, slots, &deliveries); err != nil && ctx.Err() == nil {
			s.log.ErrorContext(ctx, "dispatch webhooks", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Close stops Run and ends hanging requests, then waits for Run to return.
// The pool belongs to the caller and stays open.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.runs.Wait()
}

// now is the simulator's clock, at the precision PostgreSQL keeps.
func (s *Server) now() time.Time {
	return s.cfg.Now().UTC().Truncate(time.Microsecond)
}

// newRef returns an unguessable reference with a readable prefix.
func newRef(prefix string) string {
	return prefix + rand.Text()
}
