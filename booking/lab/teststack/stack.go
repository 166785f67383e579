package teststack

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"tatkal/booking"
	"tatkal/booking/admission"
	"tatkal/booking/app"
	"tatkal/booking/auth"
	"tatkal/booking/db"
	"tatkal/booking/funnel"
	"tatkal/booking/inventory"
	"tatkal/booking/kyc"
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/notify"
	"tatkal/booking/payment"
	"tatkal/booking/payment/pspapi"
	"tatkal/booking/prs"
	"tatkal/booking/sim/pspsim"
	"tatkal/console"
	"tatkal/console/levers"
	"tatkal/jobs/schedule"
)

// Stack is one test's running booking stack: the process booking/app
// builds, on port 0, with the simulators in it.
type Stack struct {
	*testenv.Env
	App       *app.App
	Admission *admission.Service
	Funnel    *funnel.Recorder
	Levers    *levers.Reader
	Console   *console.Console
	Service   *booking.Service
	Payments  *payment.Service
	River     *river.Client[pgx.Tx]
	Server    *Endpoint
	Signer    *auth.Signer
	// Metrics serves /metrics apart from Server, as TATKAL_METRICS_ADDR does.
	Metrics *Endpoint
	// The simulators: real HTTP servers with their own schemas.
	PSP  *Endpoint
	Core *Endpoint
	Msg  *Endpoint
	// MsgKey is the messaging gateway's API key, random per stack.
	MsgKey string
	// Gateways are the merchant's side of the gateways' secrets, random per
	// stack as tatkal dev makes them (for tests that call or sign as a gateway).
	Gateways []payment.GatewayConfig
	// CoreKey is the reservation core's API key, random per stack.
	CoreKey string
	// simToken is the simulators' admin token, random per stack.
	simToken string
}

// Endpoint is one of the stack's HTTP listeners.
type Endpoint struct{ URL string }

// SessionKey signs the stack's sessions and admission tokens. A fixed test
// key, so that a test can sign as the stack does.
var SessionKey = []byte(strings.Repeat("k", 32))

// FraudKey keys the stacks' fraud signal hashes.
const FraudKey = "teststack-fraud-key-0123456789"

// IDKeys seal the stacks' passenger ID numbers: fixed, so that two stacks
// on one database (two processes of one deployment) read each other's.
var IDKeys = "test1=" + strings.Repeat("5a", 32)

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
	NotCreatedAfter    time.Duration
	InquiryAfter       time.Duration
	// Routes replaces the simulator's default route behaviour.
	Routes []pspapi.RouteConfig
	// SweepGrace: how long past expiry the sweeper waits (zero: the default).
	SweepGrace time.Duration
	// RescueStuckJobsAfter: how soon a job left running by a dead worker is
	// retried; a job's run is bounded by it too (River refuses a longer one).
	RescueStuckJobsAfter time.Duration
	// ConfirmWriters: payment confirmation groups written at once (0:
	// production's app.DefaultConfirmWriters; negative: no grouping).
	ConfirmWriters int
	// Pause is called at named points of the booking and payment paths
	// (booking.PauseFunc), for tests that force an interleaving.
	Pause booking.PauseFunc
	// ChallengeBits and RiskyExtraBits set the booking-time proof of work
	// (0: 6 and 2, cheap: every hold solves one, issue 39: 16; production's
	// are 14 and 6).
	ChallengeBits, RiskyExtraBits int
	// MsgFaults are the messaging simulator's initial faults (nil: its
	// defaults); RelayInterval, ReceiptPoll and MsgRetryBase pace delivery
	// (zero: a second).
	MsgFaults *notify.Faults
	// KYCFaults are the identity verifier simulator's initial faults (nil:
	// its defaults, kycsim.DefaultFaults).
	KYCFaults                                *kyc.Faults
	RelayInterval, ReceiptPoll, MsgRetryBase time.Duration
	// SignalsOff is the bench's switch of fraud recording (app.Options.BenchSignalsOff).
	SignalsOff *atomic.Bool
	// Lab gives the console a rehearsal lab (booking/lab/rehearse.NewLab).
	Lab func(*app.App) app.LabCloser
	// PassengerLimit keeps the rules' passenger limit across accounts on;
	// it is off otherwise, as the fixtures book one passenger for everyone.
	PassengerLimit bool
	// ReconMaxFileBytes: the reconciliation file size limit (0: recon's default).
	ReconMaxFileBytes int64
	// RedisURL: the Redis (a node, or a cluster's nodes) of this stack;
	// empty: the tests' single node.
	RedisURL string
	// Postgres: a private PostgreSQL (testenv.StartPostgres) for this
	// stack's database, which the test may restart; nil: the tests' server.
	Postgres *testenv.Postgres
	// SimulatorsOf: a stack whose simulators this one uses, with their
	// secrets, as a second process of one deployment does (nil: its own).
	SimulatorsOf *Stack
	// BackOffice adds back-office jobs to the process (app.Options.BackOffice).
	BackOffice app.BackOffice
	// ReconAt and ReconRerunDays set the daily reconciliation's time of day
	// (IST, to the second) and how long an open day is run again (nil, 0:
	// the schedule's defaults).
	ReconAt        *schedule.Clock
	ReconRerunDays int
	// WatchInterval: how often the invariant watch runs (0: the schedule's 30 s).
	WatchInterval time.Duration
}

// New builds and starts a stack on a fresh database.
func New(t testing.TB, opts Options) *Stack {
	t.Helper()
	redisURL := opts.RedisURL
	if redisURL == "" {
		redisURL = testenv.RedisURL()
	}
	if opts.Postgres != nil {
		return Start(t, testenv.NewOnPostgres(t, opts.Postgres, redisURL, testenv.PoolSize()), opts)
	}
	return Start(t, testenv.NewOn(t, redisURL, testenv.PoolSize()), opts)
}

// config is the process configuration of a stack on env: port 0 for the
// app and /metrics (the app puts its simulators on free ports itself),
// fresh secrets as tatkal dev makes them.
func config(env *testenv.Env) app.Config {
	cfg := app.Config{DatabaseURL: env.DatabaseURL, RedisURL: env.RedisURL, RedisPrefix: env.KeyPrefix, Addr: "127.0.0.1:0",
		MetricsAddr: "127.0.0.1:0", SessionKey: SessionKey,
		HoldWindow: booking.DefaultRules().HoldWindow, CommitWriters: 1}
	cfg.FraudKey, cfg.IDKeys = FraudKey, IDKeys
	return cfg.WithDevSecrets()
}

// Start starts a stack on an existing env (two stacks on one env are
// two app processes sharing PostgreSQL and Redis).
func Start(t testing.TB, env *testenv.Env, opts Options) *Stack {
	t.Helper()
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg := config(env)
	rules := booking.DefaultRules()
	rules.HoldWindow = cfg.HoldWindow
	if opts.Rules != nil {
		rules = *opts.Rules
	}
	if !opts.PassengerLimit {
		rules.PassengerAccounts = 0
	}
	cfg.MaxHoldsInFlight, cfg.SweepInterval = opts.MaxHoldsInFlight, opts.SweepInterval
	cfg.ReconMaxFileBytes = opts.ReconMaxFileBytes
	cfg.ReconAt, cfg.ReconRerunDays = opts.ReconAt, opts.ReconRerunDays
	cfg.WatchInterval = opts.WatchInterval
	switch {
	case opts.ConfirmWriters > 0:
		cfg.ConfirmWriters = opts.ConfirmWriters
	case opts.ConfirmWriters == 0:
		cfg.ConfirmWriters = app.DefaultConfirmWriters
	}
	if p := opts.SimulatorsOf; p != nil {
		pc := p.App.Config
		cfg.PSPURL, cfg.PRSURL, cfg.MsgURL, cfg.KYCURL, cfg.KYCKey = pc.PSPURL, pc.PRSURL, pc.MsgURL, pc.KYCURL, pc.KYCKey
		cfg.PSPAPIKeys, cfg.WebhookSecrets, cfg.PRSKey, cfg.MsgKey, cfg.SimAdminToken, cfg.BankToken = pc.PSPAPIKeys, pc.WebhookSecrets, pc.PRSKey, pc.MsgKey, pc.SimAdminToken, pc.BankToken
	}
	a, err := app.New(context.Background(), cfg, app.Options{Work: opts.Work, Serve: true, Simulators: opts.SimulatorsOf == nil, Log: log,
		Pool: env.Pool, Redis: env.Redis, BackOffice: opts.BackOffice,
		Rules: &rules, Pause: opts.Pause, SweepGrace: opts.SweepGrace, CatalogTTL: time.Minute, FunnelInterval: 200 * time.Millisecond,
		NoController: true, // tests admit by stepping a controller themselves
		Jobs:         app.JobTuning{Workers: 10, RescueStuckJobsAfter: opts.RescueStuckJobsAfter, JobTimeout: opts.RescueStuckJobsAfter},
		Payment: app.PaymentTuning{HoldWindows: opts.HoldWindows, Extension: opts.Extension, ResolutionDeadline: opts.ResolutionDeadline,
			LateGrace: opts.LateGrace, CreateTimeout: opts.CreateTimeout, NotCreatedAfter: opts.NotCreatedAfter, InquiryAfter: opts.InquiryAfter},
		SimRoutes: opts.Routes, SimSeed: 1, MsgFaults: opts.MsgFaults, KYCFaults: opts.KYCFaults, RelayInterval: opts.RelayInterval, ReceiptPoll: opts.ReceiptPoll, MsgRetryBase: opts.MsgRetryBase, ChallengeBits: cmp.Or(opts.ChallengeBits, 6), RiskyExtraBits: cmp.Or(opts.RiskyExtraBits, 2), Lab: opts.Lab,
		BenchSignalsOff: opts.SignalsOff})
	if err != nil {
		t.Fatalf("build the stack: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("stack: %v", err)
		}
		a.Close()
	})
	select {
	case <-a.Ready():
	case err := <-done:
		done <- err
		t.Fatalf("start the stack: %v", err)
	}
	return &Stack{Env: env, App: a, Admission: a.Admission, Funnel: a.Funnel, Levers: a.Levers, Console: a.Console, Service: a.Booking,
		Payments: a.Payments, River: a.River, Server: &Endpoint{a.URL()}, Signer: a.Signer, PSP: &Endpoint{a.Config.PSPURL},
		Core: &Endpoint{a.Config.PRSURL}, Msg: &Endpoint{a.Config.MsgURL}, MsgKey: a.Config.MsgKey, Metrics: &Endpoint{a.MetricsURL()[:len(a.MetricsURL())-len("/metrics")]},
		Gateways: a.Config.Gateways(), CoreKey: a.Config.PRSKey, simToken: a.Config.SimAdminToken}
}

// Token signs a session for a verified individual account.
func (s *Stack) Token(userID int64) string {
	return s.Signer.Sign(auth.Session{UserID: userID, Verified: true, CreatedAt: time.Now().Add(-30 * 24 * time.Hour),
		ExpiresAt: time.Now().Add(time.Hour)})
}

// DeviceBinding binds a device of the account's own (as POST
// /v1/devices/bind does) and returns the binding to send as
// X-Device-Token; "" if the binding failed (the hold then says why).
func (s *Stack) DeviceBinding(userID int64) string {
	b, err := s.Admission.BindDevice(context.Background(), userID, fmt.Sprintf("teststack-device-%012d", userID), "")
	if err != nil {
		return ""
	}
	return b.DeviceToken
}

// Caller is the booking.Caller of a verified individual account on a
// bound device (as an edge verifying its binding would pass it).
func Caller(userID int64) booking.Caller {
	return booking.Caller{UserID: userID, Verified: true, CreatedAt: time.Now().Add(-30 * 24 * time.Hour), Device: "teststack-device"}
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

// Stations12951 are the stops of train 12951 in order (seed's).
var Stations12951 = seed.Stations12951

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
	r := testenv.Call(t, testenv.Request{Method: "PUT", URL: base + path, Token: s.simToken, Body: body})
	if r.Status >= 300 {
		t.Fatalf("admin %s: %d %s", path, r.Status, r.Raw)
	}
}

// SetRoute changes one gateway route's behaviour at runtime.
func (s *Stack) SetRoute(t testing.TB, rc pspapi.RouteConfig) {
	s.admin(t, s.PSP.URL, "/admin/routes/"+rc.Gateway+"/"+rc.Method, rc)
}

// SetSettlementFaults changes a gateway's settlement file and the bank's
// statement (stray credits) at runtime.
func (s *Stack) SetSettlementFaults(t testing.TB, gateway string, f pspsim.SettlementFaults) {
	s.admin(t, s.PSP.URL, "/admin/settlement-faults/"+gateway, f)
}

// SetCoreFaults changes the reservation core's behaviour at runtime.
func (s *Stack) SetCoreFaults(t testing.TB, f prs.Faults) {
	s.admin(t, s.Core.URL, "/admin/faults", f)
}

// CheckInvariants runs the invariant check of a shard against PostgreSQL
// and Redis (inventory.Check) and fails the test on any violation.
func (s *Stack) CheckInvariants(t testing.TB, shardID int64) inventory.Report {
	t.Helper()
	rep, err := inventory.Check(context.Background(), s.Pool, s.Store, shardID, s.Service.Rules().HoldWindow)
	if err != nil {
		t.Fatalf("invariant check of shard %d: %v", shardID, err)
	}
	if !rep.OK() {
		t.Fatalf("invariants broken:\n%s", rep)
	}
	return rep
}

// SetMsgFaults changes the messaging gateway's behaviour at runtime.
func (s *Stack) SetMsgFaults(t testing.TB, f notify.Faults) {
	s.admin(t, s.Msg.URL, "/admin/faults", f)
}

// Recorded does what the core-sync job would for the ticket of hold: the
// reservation core records it and it leaves CONFIRMING, so its passenger
// may cancel it.
func (s *Stack) Recorded(t testing.TB, hold uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	var bookingID int64
	Must(t, s.Pool.QueryRow(ctx, `SELECT id FROM bookings WHERE hold_id = $1`, hold).Scan(&bookingID), "booking of hold %s", hold)
	Must(t, s.Service.SyncToCore(ctx, bookingID), "sync booking %d to the core", bookingID)
}

// CancelAsOperator cancels the booking of hold as the operator's side does
// (fraud enforcement: booking.Lifecycle.CancelBookingTx), which does not
// wait for the core to record it.
func (s *Stack) CancelAsOperator(t testing.TB, hold uuid.UUID, reason string) booking.CancelDone {
	t.Helper()
	ctx := context.Background()
	var done booking.CancelDone
	Must(t, db.Transact(ctx, s.Pool, func(tx pgx.Tx) error {
		var err error
		done, err = s.Service.CancelBookingTx(ctx, tx, hold, reason)
		return err
	}), "cancel the booking of hold %s as an operator", hold)
	s.Service.AfterCancelBooking(ctx, done)
	return done
}

// SetKYCFaults changes the identity verifier simulator's behaviour at runtime.
func (s *Stack) SetKYCFaults(t testing.TB, f kyc.Faults) {
	s.admin(t, s.App.KYCURL(), "/admin/faults", f)
}

// LastSMS waits (up to 30 s) for the messaging simulator to take an SMS to
// phone (10 digits) after since whose body matches want, and returns the
// newest such body: what the passenger reads on their handset.
func (s *Stack) LastSMS(t testing.TB, phone string, since time.Time, want *regexp.Regexp) string {
	t.Helper()
	var body string
	testenv.Eventually(t, 30*time.Second, "an SMS to "+phone+" matching "+want.String(), func() error {
		rows, err := s.Pool.Query(context.Background(), `SELECT body FROM msg.messages WHERE channel = 'SMS' AND recipient = $1 AND accepted_at >= $2
			ORDER BY accepted_at DESC`, phone, since)
		if err != nil {
			return err
		}
		bodies, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, b := range bodies {
			if want.MatchString(b) {
				body = b
				return nil
			}
		}
		return fmt.Errorf("%d SMS, none matching", len(bodies))
	})
	return body
}
