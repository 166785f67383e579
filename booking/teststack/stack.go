// Package teststack starts the booking stack of one test: service,
// committer, River workers and the /v1 API on a real HTTP server.
package teststack

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"tatkal/booking"
	"tatkal/booking/admission"
	"tatkal/booking/api"
	"tatkal/booking/auth"
	"tatkal/booking/funnel"
	"tatkal/booking/httpx"
	"tatkal/booking/payment"
	"tatkal/booking/payment/pspapi"
	"tatkal/booking/payment/pspsim"
	"tatkal/booking/prs"
	"tatkal/booking/seed"
	"tatkal/booking/testenv"
	"tatkal/booking/web"
	"tatkal/console"
	"tatkal/console/levers"
	"tatkal/jobs"
)

// Stack is one test's running booking stack.
type Stack struct {
	*testenv.Env
	Admission *admission.Service
	Funnel    *funnel.Recorder
	Levers    *levers.Reader
	Console   *console.Console
	Service   *booking.Service
	Payments  *payment.Service
	River     *river.Client[pgx.Tx]
	Server    *httptest.Server
	Signer    *auth.Signer
	// Metrics serves /metrics apart from Server, as TATKAL_METRICS_ADDR does.
	Metrics *httptest.Server
	// The simulators: real HTTP servers with their own schemas.
	PSP  *httptest.Server
	Core *httptest.Server
	// Gateways are the merchant's side of the gateways' secrets, random per
	// stack as tatkal dev makes them (for tests that call or sign as a gateway).
	Gateways []payment.GatewayConfig
	// CoreKey is the reservation core's API key, random per stack.
	CoreKey string
}

const adminToken = "test-admin"

// Options adjust a stack; zero values mean defaults.
type Options struct {
	Rules            *booking.Rules
	MaxHoldsInFlight int
	Work             bool // run River workers (hold expiry, seat sync, sweeper, payments)
	SweepInterval    time.Duration
	// Payment tuning (zero: the payment package's defaults).
	HoldWindows        map[string]time.Duration
	Extension          time.Duration
	ResolutionDeadline time.Duration
	LateGrace          time.Duration
	CreateTimeout      time.Duration
	// Routes replaces the simulator's default route behaviour.
	Routes []pspapi.RouteConfig
	// SweepGrace: how long past expiry the sweeper waits (zero: the default).
	SweepGrace time.Duration
	// RescueStuckJobsAfter: how soon a job left running by a dead worker is retried.
	RescueStuckJobsAfter time.Duration
	// Pause is called at named points of the booking and payment paths
	// (booking.PauseFunc), for tests that force an interleaving.
	Pause booking.PauseFunc
}

// New builds and starts a stack on a fresh database.
func New(t testing.TB, opts Options) *Stack {
	t.Helper()
	env := testenv.New(t)
	return Start(t, env, opts)
}

// Start starts a stack on an existing env (two stacks on one env are
// two app processes sharing PostgreSQL and Redis).
func Start(t testing.TB, env *testenv.Env, opts Options) *Stack {
	t.Helper()
	rules := booking.DefaultRules()
	if opts.Rules != nil {
		rules = *opts.Rules
	}
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup

	// The outside world first: the gateways and the reservation core.
	gateways := pspsim.NewGateways()
	coreKey := rand.Text()
	psp, err := pspsim.New(ctx, pspsim.Config{Pool: env.Pool, AdminToken: adminToken, Gateways: gateways, Log: log,
		Routes: opts.Routes, Seed: 1})
	if err != nil {
		t.Fatalf("psp simulator: %v", err)
	}
	pspServer := httptest.NewServer(psp.Handler())
	wg.Add(1)
	go func() {
		defer wg.Done()
		psp.Run(ctx)
	}()
	core, err := prs.NewServer(ctx, prs.ServerConfig{Pool: env.Pool, APIKey: coreKey, AdminToken: adminToken, Log: log})
	if err != nil {
		t.Fatalf("core simulator: %v", err)
	}
	coreServer := httptest.NewServer(core.Handler())

	svcs := &jobs.Services{}
	client, err := jobs.NewClient(env.Pool, svcs, jobs.Config{Work: opts.Work, SweepInterval: opts.SweepInterval, Logger: log, Workers: 10,
		RescueStuckJobsAfter: opts.RescueStuckJobsAfter})
	if err != nil {
		t.Fatalf("river: %v", err)
	}
	rec := funnel.New(env.Redis, env.KeyPrefix, log)
	lev := levers.NewReader(env.Pool, log)
	svc := booking.NewService(booking.ServiceConfig{Pool: env.Pool, Store: env.Store, Jobs: client, Rules: rules, Log: log, Funnel: rec, SweepGrace: opts.SweepGrace, Levers: lev, Pause: opts.Pause,
		Catalog: booking.NewCatalog(env.Pool, time.Minute), Core: prs.NewClient(coreServer.URL, coreKey, &http.Client{Timeout: 5 * time.Second})})
	srv := httptest.NewUnstartedServer(nil)
	gws := merchantSide(gateways, pspServer.URL)
	pay := payment.New(payment.Config{Pool: env.Pool, Redis: env.Redis, Prefix: env.KeyPrefix, Booking: svc, Jobs: client, Gateways: gws,
		CallbackURL: "http://" + srv.Listener.Addr().String() + "/v1/internal/payments/callback",
		ReturnURL:   "http://" + srv.Listener.Addr().String() + "/payments/return",
		HoldWindows: opts.HoldWindows, Extension: opts.Extension, ResolutionDeadline: opts.ResolutionDeadline,
		LateGrace: opts.LateGrace, CreateTimeout: opts.CreateTimeout, Log: log, Funnel: rec, Levers: lev, Pause: opts.Pause})
	svcs.Booking, svcs.Payments = svc, pay
	signer, err := auth.NewSigner([]byte(strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	r := chi.NewRouter()
	adm, err := admission.New(admission.Config{Pool: env.Pool, Redis: env.Redis, Prefix: env.KeyPrefix, Store: env.Store,
		Catalog: svc.Catalog(), Funnel: rec, Levers: lev, Rules: rules, Secret: []byte(strings.Repeat("k", 32)), Log: log})
	if err != nil {
		t.Fatalf("waiting room: %v", err)
	}
	svc.SetAdmission(adm.Verifier(), env.KeyPrefix)
	cons := console.New(console.Config{Pool: env.Pool, Redis: env.Redis, Store: env.Store, Booking: svc, Payments: pay, Funnel: rec, River: client,
		HoldWindow: rules.HoldWindow, QueueDepth: adm.Depth, QueueRefusals: adm.Refusals, Log: log, Context: ctx})
	cons.Routes(r)
	api.New(api.Config{Service: svc, Payments: pay, Pool: env.Pool, Signer: signer, MaxHoldsInFlight: opts.MaxHoldsInFlight, Log: log,
		Admission: adm}).Routes(r)
	(&web.Pages{Booking: svc, Payments: pay, Log: log}).Routes(r)
	// The same wrapping as the binary's: security headers, cross-origin
	// protection, the text check.
	srv.Config.Handler = httpx.App(r, httpx.AppOptions{APIReject: api.RejectInput, CSP: map[string]string{"/console/river/": httpx.InlineStyleCSP}})
	srv.Start()
	metricsServer := httptest.NewServer(cons.Metrics())
	wg.Add(1)
	go func() {
		defer wg.Done()
		go rec.Run(ctx, 200*time.Millisecond)
		svc.RunCommitter(ctx, 1)
	}()
	if opts.Work {
		if err := client.Start(ctx); err != nil {
			t.Fatalf("start river: %v", err)
		}
	}
	t.Cleanup(func() {
		srv.Close()
		metricsServer.Close()
		pspServer.Close()
		coreServer.Close()
		if opts.Work {
			stopCtx, c := context.WithTimeout(context.Background(), 10*time.Second)
			client.Stop(stopCtx) //nolint:errcheck
			c()
		}
		cancel()
		wg.Wait()
	})
	return &Stack{Env: env, Admission: adm, Funnel: rec, Levers: lev, Console: cons, Service: svc, Payments: pay, River: client, Server: srv, Signer: signer, PSP: pspServer, Core: coreServer,
		Gateways: gws, CoreKey: coreKey, Metrics: metricsServer}
}

// merchantSide is what our payment service knows of the simulator's
// gateways: the API key to call with and the secret callbacks are signed with.
func merchantSide(gateways []pspsim.GatewayConfig, baseURL string) []payment.GatewayConfig {
	var gws []payment.GatewayConfig
	for _, g := range gateways {
		gws = append(gws, payment.GatewayConfig{ID: g.ID, BaseURL: baseURL, APIKey: g.APIKeys[0], WebhookSecrets: [][]byte{g.WebhookSecret}})
	}
	return gws
}

// Token signs a session for a verified individual account.
func (s *Stack) Token(userID int64) string {
	return s.Signer.Sign(auth.Session{UserID: userID, Verified: true, CreatedAt: time.Now().Add(-30 * 24 * time.Hour),
		ExpiresAt: time.Now().Add(time.Hour)})
}

// Caller is the booking.Caller of a verified individual account.
func Caller(userID int64) booking.Caller {
	return booking.Caller{UserID: userID, Verified: true, CreatedAt: time.Now().Add(-30 * 24 * time.Hour)}
}

// DemoShard seeds the demo network and one open shard of train 12951 3A
// (MMCT..NDLS, 7 legs) with berths berths, returning its id and date.
func (s *Stack) DemoShard(t testing.TB, berths int, waitlist int) (int64, time.Time) {
	t.Helper()
	ctx := context.Background()
	open := -time.Minute
	if _, err := seed.Demo(ctx, s.Pool, seed.DemoOptions{OpensIn: &open}); err != nil {
		t.Fatalf("seed demo: %v", err)
	}
	date := time.Now().In(booking.IST).AddDate(0, 0, 5)
	date = time.Date(date.Year(), date.Month(), date.Day(), 0, 0, 0, 0, booking.IST)
	id, err := seed.Shard(ctx, s.Pool, seed.ShardSpec{Train: "12951", Date: date, Class: "3A", Berths: berths,
		OpensAt: time.Now().Add(-time.Minute), WaitlistCap: &waitlist})
	if err != nil {
		t.Fatalf("seed shard: %v", err)
	}
	if _, err := s.Service.Rebuild(ctx, id); err != nil {
		t.Fatalf("load shard: %v", err)
	}
	return id, date
}

// Users seeds n verified users and returns their ids.
func (s *Stack) Users(t testing.TB, prefix string, n int) []int64 {
	t.Helper()
	hash, err := auth.HashPassword("pw-"+prefix, auth.Argon2Params{MemoryKiB: 64, Time: 1, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := seed.Users(context.Background(), s.Pool, seed.UsersSpec{Count: n, Prefix: prefix, PasswordHash: hash})
	if err != nil {
		t.Fatalf("seed users: %v", err)
	}
	return ids
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Stations of train 12951 in order, for journeys in tests.
var Stations12951 = []string{"MMCT", "BVI", "ST", "BRC", "RTM", "NAD", "KOTA", "NDLS"}

// Must fails the test on err.
func Must(t testing.TB, err error, what string, args ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", fmt.Sprintf(what, args...), err)
	}
}

// admin sends an admin call to a simulator.
func (s *Stack) admin(t testing.TB, base, path string, body any) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("PUT", base+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("admin %s: %v", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		msg, _ := io.ReadAll(resp.Body)
		t.Fatalf("admin %s: %d %s", path, resp.StatusCode, msg)
	}
}

// SetRoute changes one gateway route's behaviour at runtime.
func (s *Stack) SetRoute(t testing.TB, rc pspapi.RouteConfig) {
	s.admin(t, s.PSP.URL, "/admin/routes/"+rc.Gateway+"/"+rc.Method, rc)
}

// SetCoreFaults changes the reservation core's behaviour at runtime.
func (s *Stack) SetCoreFaults(t testing.TB, f prs.Faults) {
	s.admin(t, s.Core.URL, "/admin/faults", f)
}
