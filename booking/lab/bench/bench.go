package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"tatkal/booking"
	"tatkal/booking/admission"
	"tatkal/booking/api"
	"tatkal/booking/auth"
	"tatkal/booking/inventory"
	"tatkal/booking/lab/seed"
	"tatkal/booking/payment"
	"tatkal/booking/redisx"
)

// Options configure a run.
type Options struct {
	// Duration is the length of each measured phase.
	Duration time.Duration
	// Concurrency is the number of closed-loop clients in every phase.
	Concurrency int
	// Berths on the hot shard.
	Berths int
	// BaseURL is a running server that serves the /v1 API over Service.
	// Empty: Run serves the API itself on a loopback port.
	BaseURL    string
	Pool       *pgxpool.Pool
	Redis      redis.UniversalClient
	Service    *booking.Service
	SessionKey []byte
	// Admission is the server's waiting room and device bindings
	// (app.App.Admission): the API the bench serves itself (BaseURL empty)
	// verifies its clients' bindings with it, as the app's does, since
	// every hold needs a bound device. Required when BaseURL is empty.
	Admission *admission.Service
	// Payments is the payment orchestrator of the server under test: the
	// one behind BaseURL, or the one the bench's own API serves when
	// BaseURL is empty. Nil: the payment phases are skipped.
	Payments *payment.Service
	// Gateways are the gateways Payments knows: the callback phase's
	// payments are made at a simulator of the bench's with the same ids and
	// keys, and their webhooks signed with these secrets. Required with
	// Payments.
	Gateways []payment.GatewayConfig
	// NewPayments builds the orchestrator that makes the callback phase's
	// payments at the bench's simulator: the server's own constructor
	// (app.App.NewPayments), so they are made as the server makes its
	// own, on its River client. Required with Payments.
	NewPayments func(gws []payment.GatewayConfig, prefix string) *payment.Service
	// WalletUsers is how many wallet-funded users the wallet phase may
	// spend, one per confirmation. Zero: Concurrency plus 2,000 per second
	// of Duration; a phase that runs out stops early and says so.
	WalletUsers int
	// Callbacks is how many payments AWAITING_USER are prepared for the
	// callback phase, one per callback. Zero: sized from the wallet phase
	// just before (a callback confirms as the wallet does, with less
	// around it): Concurrency plus three times the wallet confirmations per
	// second for Duration, at most Concurrency plus 2,000 per second of
	// Duration. A phase that runs out stops early and says so; those it did
	// not reach are sent after it, unmeasured.
	Callbacks int
	// PipelineBatch is how many script calls share one round trip in the
	// pipelined Lua ceiling.
	PipelineBatch int
	// Writers is how many group-commit writers the PostgreSQL ceiling runs
	// (the service's committer runs TATKAL_COMMIT_WRITERS, default 1).
	Writers int
	// CommitWriters and ConfirmWriters are the server's hold and payment
	// confirmation group-commit writers (TATKAL_COMMIT_WRITERS,
	// TATKAL_CONFIRM_WRITERS), for the report; Command sets them.
	CommitWriters, ConfirmWriters int
	// FreshUsers is how many users each hold-only phase may spend (one
	// durable hold each). Zero: Concurrency plus 8,000 per second of
	// Duration, above what this path reaches on a small machine; a phase
	// that runs out stops early and says so.
	FreshUsers int
	// SpreadShards, when above zero, adds the spread phase: the hold and
	// cancel cycle over this many shards at once (with a Redis Cluster,
	// spread over its masters).
	SpreadShards int
	// ProfileDir, when set, receives a CPU profile of each phase
	// (<phase>.pprof) for `go tool pprof`.
	ProfileDir string
	// Log receives progress; nil discards it.
	Log *slog.Logger
	// NoSignals: the server under test records no fraud signals (set by
	// Command on the app it starts), for the figure before and after
	// recording; the report says so.
	NoSignals bool
	// SignalsOff switches the server's fraud recording off while set (the
	// server's fraud.Recorder.BenchDiscard); SignalsAB > 0 uses it: instead
	// of the usual phases, after the raw ceilings, service holds run for
	// SignalsAB with recording switched off and on in alternate slices of
	// one second, so both halves see the same machine.
	SignalsOff *atomic.Bool
	SignalsAB  time.Duration
	// WideConcurrency is how many clients the wide phase runs: service
	// durable holds as in the service phase with more clients, the rate
	// the service phase's is set beside. Zero: four times Concurrency;
	// negative: no wide phase.
	WideConcurrency int
}

// DefaultOptions are what `tatkal bench` uses without flags.
func DefaultOptions() Options {
	return Options{Duration: 5 * time.Second, Concurrency: 64, Berths: 400, PipelineBatch: 50, Writers: 3}
}

func (o Options) withDefaults() (Options, error) {
	d := DefaultOptions()
	if o.Duration <= 0 {
		o.Duration = d.Duration
	}
	if o.Concurrency <= 0 {
		o.Concurrency = d.Concurrency
	}
	if o.Berths <= 0 {
		o.Berths = d.Berths
	}
	if o.PipelineBatch <= 0 {
		o.PipelineBatch = d.PipelineBatch
	}
	if o.Writers <= 0 {
		o.Writers = d.Writers
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.WideConcurrency == 0 {
		o.WideConcurrency = 4 * o.Concurrency
	}
	perSecond := func(n int) int { return o.Concurrency + int(float64(n)*o.Duration.Seconds()) }
	if o.WalletUsers <= 0 {
		o.WalletUsers = perSecond(2000)
	}
	switch {
	case o.Pool == nil:
		return o, errors.New("bench: no PostgreSQL pool")
	case o.Redis == nil:
		return o, errors.New("bench: no Redis client")
	case o.Service == nil:
		return o, errors.New("bench: no booking service")
	case len(o.SessionKey) < 32:
		return o, errors.New("bench: the session key must be at least 32 bytes")
	case o.Payments != nil && len(o.Gateways) == 0:
		// No default: the callback phase must sign with the secrets Payments checks.
		return o, errors.New("bench: Payments needs Gateways, the ones it was configured with")
	case o.Payments != nil && o.NewPayments == nil:
		return o, errors.New("bench: Payments needs NewPayments, the server's constructor of its orchestrator")
	}
	return o, nil
}

// hotWaitlist is the hot shard's waitlist cap: high enough that it never
// sells out, so every answer of a hold-only phase is a durable hold.
const hotWaitlist = 1_000_000

// runEnv is what the phases share: the shards, their users and the way to
// reach the API.
type runEnv struct {
	opts  Options
	runID string
	// shard is the hot shard of the cycle and hold-only phases; rushShard
	// has the real waitlist cap, so the rush can sell it out.
	shard, rushShard *booking.Shard
	// The payment phases' shards, without a waitlist (nil when the payment
	// phases are skipped).
	walletShard, callbackShard *booking.Shard
	stops                      []string
	cycle                      []int64    // one user per client for the hold-and-cancel cycle
	fresh                      [2][]int64 // the service and HTTP hold-only phases: one user per durable hold
	wide                       []int64    // the wide phase's, one per durable hold
	rush                       []int64    // the rush: one user per durable hold
	walletUsers                []int64    // wallet-funded, one per confirmation
	callbackUsers              []int64    // one per prepared callback payment
	tokens                     map[int64]string
	devices                    map[int64]string // the HTTP users' device bindings (bindDevices), sent as X-Device-Token
	baseURL                    string
	created                    time.Time // account creation stated in the sessions

	// Filled by the payment phases.
	walletPayments            []uuid.UUID
	walletRate                float64 // confirmations per second, sizes the callback preparation
	callbacks                 *callbackRun
	footprintBeforeDuplicates footprint

	// The spread phase's shards, and each master's share of it.
	spread  []*booking.Shard
	masters []MasterShare
}

// maxCallbacks is the most payments the callback phase may prepare.
func (env *runEnv) maxCallbacks() int {
	if env.opts.Callbacks > 0 {
		return env.opts.Callbacks
	}
	return env.opts.Concurrency + int(2000*env.opts.Duration.Seconds())
}

// shards are every shard the run made.
func (env *runEnv) shards() []*booking.Shard {
	out := []*booking.Shard{env.shard, env.rushShard}
	if env.walletShard != nil {
		out = append(out, env.walletShard, env.callbackShard)
	}
	return append(out, env.spread...)
}

// Run seeds two fresh shards (the hot shard and the rush shard) and their
// users, measures every phase in turn and checks both shards' invariants at
// the end. A run that breaks an invariant still returns its report (Checks
// say what broke, OK is false) and no error: the numbers are worth reading
// either way.
func Run(ctx context.Context, opts Options) (Report, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return Report{}, err
	}
	if opts.SignalsAB > 0 {
		if opts.SignalsOff == nil {
			return Report{}, errors.New("bench: SignalsAB needs the server's SignalsOff switch")
		}
		opts.Payments, opts.SpreadShards = nil, 0
	}
	rep := Report{
		NumCPU: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version(),
		Duration: opts.Duration, Concurrency: opts.Concurrency, Berths: opts.Berths,
		PipelineBatch: opts.PipelineBatch, Writers: opts.Writers, CommitWriters: opts.CommitWriters, ConfirmWriters: opts.ConfirmWriters,
		HoldWindow: opts.Service.Rules().HoldWindow,
		LoadAvg:    loadAverage(), NoSignals: opts.NoSignals,
	}
	env, err := prepare(ctx, opts)
	if err != nil {
		return rep, err
	}
	rep.ShardID, rep.Shard, rep.RushShardID = env.shard.ID, env.shard.Key(), env.rushShard.ID
	rep.Users = len(env.cycle) + len(env.fresh[0]) + len(env.fresh[1]) + len(env.wide) + len(env.rush) + len(env.walletUsers) + len(env.callbackUsers)
	rep.WideConcurrency = max(opts.WideConcurrency, 0)
	if opts.SignalsAB > 0 {
		rep.WideConcurrency = 0
	}
	rep.StatementsWhy = statementsReady(ctx, opts.Pool)
	rep.Payments = opts.Payments != nil
	if rep.Payments {
		rep.WalletShardID, rep.WalletBerths = env.walletShard.ID, env.walletShard.Total
		rep.CallbackShardID, rep.CallbackBerths = env.callbackShard.ID, env.callbackShard.Total
	}
	rep.BaseURL, rep.OwnServer = opts.BaseURL, opts.BaseURL == ""
	if rep.OwnServer {
		url, stop, err := serveAPI(opts)
		if err != nil {
			return rep, err
		}
		defer stop()
		rep.BaseURL = url
	}
	env.baseURL = rep.BaseURL
	opts.Log.Info("bench ready", "hot_shard", env.shard.ID, "rush_shard", env.rushShard.ID, "users", rep.Users, "http", rep.BaseURL)

	type phase struct {
		name string
		out  *Phase
		run  func(context.Context, *runEnv) (Phase, error)
		// prep runs before the phase and post after it, both outside its
		// measurement (CPU, WAL and profile included).
		prep, post func(context.Context, *runEnv) error
	}
	phases := []phase{
		{name: "raw-lua", out: &rep.RawLua, run: rawLua},
		{name: "raw-lua-pipelined", out: &rep.RawLuaPipelined, run: rawLuaPipelined},
		{name: "raw-pg", out: &rep.RawPG, run: rawPG},
		{name: "cycle", out: &rep.Cycle, run: serviceCycle},
		{name: "service", out: &rep.Service, run: serviceHolds},
		{name: "wide", out: &rep.Wide, run: wideHolds},
		{name: "http", out: &rep.HTTP, run: httpHolds, prep: func(ctx context.Context, env *runEnv) error { return bindDevices(ctx, env, env.fresh[1]) }},
		{name: "rush", out: &rep.Rush, run: httpRush, prep: func(ctx context.Context, env *runEnv) error { return bindDevices(ctx, env, env.rush) }},
	}
	if rep.WideConcurrency == 0 {
		phases = slices.DeleteFunc(phases, func(p phase) bool { return p.name == "wide" })
	}
	if opts.SignalsAB > 0 {
		// Only what the comparison needs: the ceilings, then the A/B.
		phases = append(phases[:3], phase{name: "signals-ab", out: &rep.SignalsAB.Phase, run: func(ctx context.Context, env *runEnv) (Phase, error) {
			ph, ab, err := signalsAB(ctx, env)
			rep.SignalsAB = ab
			return ph, err
		}})
	}
	if opts.SpreadShards > 0 {
		phases = append(phases, phase{name: "spread", out: &rep.Spread, run: spreadCycle, prep: prepareSpread})
	}
	if rep.Payments {
		phases = append(phases,
			phase{name: "wallet", out: &rep.Wallet, run: walletConfirmations},
			phase{name: "callbacks", out: &rep.Callbacks, run: callbackPhase, prep: prepareCallbacks, post: drainCallbacks},
			phase{name: "duplicates", out: &rep.Duplicates, run: duplicatePhase})
	}
	for _, p := range phases {
		if p.prep != nil {
			opts.Log.Info("bench prepare", "phase", p.name)
			if err := p.prep(ctx, env); err != nil {
				return rep, fmt.Errorf("bench %s: prepare: %w", p.name, err)
			}
		}
		opts.Log.Info("bench phase", "phase", p.name, "duration", opts.Duration)
		stopProfile, err := startProfile(opts.ProfileDir, p.name)
		if err != nil {
			return rep, err
		}
		var stmts stmtSnapshot
		if rep.StatementsWhy == "" {
			stmts, _ = readStatements(ctx, opts.Pool)
		}
		before := sampleCPU(ctx, opts.Redis, opts.Pool)
		ph, err := p.run(ctx, env)
		ph.CPU = sampleCPU(ctx, opts.Redis, opts.Pool).since(before)
		stopProfile()
		ph.Statements.Why = rep.StatementsWhy
		if stmts != nil {
			if after, serr := readStatements(ctx, opts.Pool); serr == nil {
				ph.Statements = after.since(stmts)
			} else {
				ph.Statements.Why = fmt.Sprintf("pg_stat_statements: %v", serr)
			}
		}
		if err != nil {
			return rep, fmt.Errorf("bench %s: %w", p.name, err)
		}
		if prefix, ok := keyPrefixes[p.name]; ok {
			if ph.Holds, err = holdBatches(ctx, env, prefix); err != nil {
				return rep, fmt.Errorf("bench %s: %w", p.name, err)
			}
		}
		if sh := confirmShards(env)[p.name]; sh != nil {
			if ph.Confirmations, err = confirmationGroups(ctx, env, sh.ID); err != nil {
				return rep, fmt.Errorf("bench %s: %w", p.name, err)
			}
		}
		*p.out = ph
		if err := ctx.Err(); err != nil {
			return rep, fmt.Errorf("bench %s: %w", p.name, err)
		}
		if p.post != nil {
			if err := p.post(ctx, env); err != nil {
				return rep, fmt.Errorf("bench %s: after the phase: %w", p.name, err)
			}
		}
	}
	rep.SpreadShards, rep.Masters, rep.Redis = len(env.spread), env.masters, redisx.Addr(opts.Redis)
	if cb := env.callbacks; cb != nil {
		rep.CallbacksPrepared, rep.CallbackPrep, rep.CallbacksDrained = len(cb.hooks), cb.took, cb.drained
		rep.CallbackPrepFailures, rep.CallbacksSetBased = cb.failed, cb.setBased
	}

	rep.ShardsMade = len(env.shards())
	for _, sh := range env.shards() {
		c, err := inventory.Check(ctx, opts.Pool, opts.Service.Store(), sh.ID, opts.Service.Rules().HoldWindow)
		if err != nil {
			return rep, fmt.Errorf("bench: check shard %d: %w", sh.ID, err)
		}
		rep.Checks = append(rep.Checks, c)
	}
	if rep.Payments {
		pc, err := checkPayments(ctx, env, &rep)
		if err != nil {
			return rep, fmt.Errorf("bench: check payments: %w", err)
		}
		rep.PayCheck = &pc
	}
	return rep, nil
}

// keyPrefixes name each hold-writing phase's idempotency keys (see idemKey).
var keyPrefixes = map[string]string{"cycle": "c", "service": "s", "wide": "v", "http": "h", "rush": "r", "wallet": "w", "spread": "m"}

// holdBatches reads how a phase's holds were grouped into transactions.
func holdBatches(ctx context.Context, env *runEnv, phase string) (Batches, error) {
	var ids []int64
	for _, sh := range env.shards() {
		ids = append(ids, sh.ID)
	}
	return readBatches(ctx, env, `SELECT count(*) AS n FROM holds WHERE shard_id = ANY($1) AND idempotency_key LIKE $2 GROUP BY created_at`,
		ids, "bench-"+env.runID+"-"+phase+"-%")
}

// confirmShards are the payment phases' shards, by phase.
func confirmShards(env *runEnv) map[string]*booking.Shard {
	return map[string]*booking.Shard{"wallet": env.walletShard, "callbacks": env.callbackShard}
}

// confirmationGroups reads how the bookings of a payment phase's shard,
// so far, were grouped into transactions: read before anything is sent
// after the phase, it is the phase's own.
func confirmationGroups(ctx context.Context, env *runEnv, shardID int64) (Batches, error) {
	return readBatches(ctx, env, `SELECT count(*) AS n FROM bookings b JOIN holds h ON h.id = b.hold_id WHERE h.shard_id = $1 GROUP BY b.booked_at`,
		shardID)
}

// readBatches sums up perTransaction, a query of one row per transaction
// with its row count n.
func readBatches(ctx context.Context, env *runEnv, perTransaction string, args ...any) (Batches, error) {
	var g Batches
	err := env.opts.Pool.QueryRow(ctx, `
		SELECT coalesce(sum(n), 0), count(*), coalesce(percentile_disc(0.5) WITHIN GROUP (ORDER BY n), 0), coalesce(max(n), 0)
		FROM (`+perTransaction+`) g`, args...).Scan(&g.Rows, &g.Transactions, &g.P50, &g.Max)
	if err != nil {
		return g, fmt.Errorf("read batches: %w", err)
	}
	return g, nil
}

// newShard creates a shard of train 12951 3A with berths berths on a
// random far-future date, so runs never collide, and loads it into Redis.
func newShard(ctx context.Context, opts Options, berths int, waitlist *int) (*booking.Shard, error) {
	var id int64
	for attempt := 0; ; attempt++ {
		// 3 to 30 years out: no real booking and no earlier run is there.
		day := time.Now().In(booking.IST).AddDate(3, 0, mrand.IntN(27*365))
		date := time.Date(day.Year(), day.Month(), day.Day(), 0, 0, 0, 0, booking.IST)
		var err error
		id, err = seed.Shard(ctx, opts.Pool, seed.ShardSpec{Train: "12951", Date: date, Class: "3A", Berths: berths,
			OpensAt: time.Now().Add(-time.Minute), WaitlistCap: waitlist})
		if err == nil {
			break
		}
		if !errors.Is(err, seed.ErrShardExists) || attempt >= 5 {
			return nil, fmt.Errorf("bench: create shard: %w", err)
		}
	}
	if _, err := opts.Service.Rebuild(ctx, id); err != nil {
		return nil, fmt.Errorf("bench: load shard %d: %w", id, err)
	}
	shard, err := opts.Service.Catalog().ByID(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("bench: read shard %d: %w", id, err)
	}
	return shard, nil
}

// prepare seeds the demo trains (idempotent), the two shards and the
// users, and signs a session for every user.
func prepare(ctx context.Context, opts Options) (*runEnv, error) {
	env := &runEnv{opts: opts, runID: randHex(4), tokens: map[int64]string{}, devices: map[int64]string{}, created: time.Now().AddDate(0, 0, -30)}
	if _, err := seed.Demo(ctx, opts.Pool, seed.DemoOptions{}); err != nil {
		return nil, fmt.Errorf("bench: seed demo trains: %w", err)
	}
	wl := hotWaitlist
	var err error
	if env.shard, err = newShard(ctx, opts, opts.Berths, &wl); err != nil {
		return nil, err
	}
	if env.rushShard, err = newShard(ctx, opts, opts.Berths, nil); err != nil {
		return nil, err
	}
	if opts.Payments != nil {
		// No waitlist, and a berth per user: even if every confirmation
		// took the whole route, the shard would not sell out.
		none := 0
		if env.walletShard, err = newShard(ctx, opts, min(opts.WalletUsers, maxPayBerths), &none); err != nil {
			return nil, err
		}
		if env.callbackShard, err = newShard(ctx, opts, min(env.maxCallbacks(), maxPayBerths), &none); err != nil {
			return nil, err
		}
	}
	for _, s := range env.shard.Stops {
		env.stops = append(env.stops, s.Code)
	}

	// One live hold per user: the cycle needs one user per client (its
	// hold is cancelled at once, so the daily cap never binds); the other
	// phases need a fresh user for every durable hold they may get.
	fresh := opts.FreshUsers
	if fresh <= 0 {
		fresh = opts.Concurrency + int(8000*max(opts.Duration, opts.SignalsAB).Seconds())
	}
	rushN := env.rushShard.Total + env.rushShard.WaitlistCap + opts.Concurrency
	hash, err := auth.HashPassword(randHex(8), auth.Argon2Params{MemoryKiB: 64, Time: 1, Threads: 1})
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	second := fresh // the HTTP phase's, which the signals A/B does not run
	wide := 0
	if opts.WideConcurrency > 0 {
		wide = opts.WideConcurrency + int(8000*opts.Duration.Seconds())
	}
	if opts.SignalsAB > 0 {
		second, wide = 0, 0
	}
	if opts.FreshUsers > 0 && wide > 0 {
		wide = opts.FreshUsers
	}
	ids, err := seed.Users(ctx, opts.Pool, seed.UsersSpec{Count: opts.Concurrency + fresh + second + wide + rushN,
		Prefix: "bench" + env.runID + "_", PasswordHash: hash, CreatedAt: env.created})
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	env.cycle, ids = ids[:opts.Concurrency], ids[opts.Concurrency:]
	env.fresh[0], env.fresh[1], ids = ids[:fresh], ids[fresh:fresh+second], ids[fresh+second:]
	env.wide, env.rush = ids[:wide], ids[wide:]
	if opts.Payments != nil {
		if env.walletUsers, err = seed.Users(ctx, opts.Pool, seed.UsersSpec{Count: opts.WalletUsers, Prefix: "bench" + env.runID + "w_",
			PasswordHash: hash, CreatedAt: env.created, WalletRupees: walletRupees}); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		if env.callbackUsers, err = seed.Users(ctx, opts.Pool, seed.UsersSpec{Count: env.maxCallbacks(), Prefix: "bench" + env.runID + "p_",
			PasswordHash: hash, CreatedAt: env.created}); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
	}
	signer, err := auth.NewSigner(opts.SessionKey)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	exp := time.Now().Add(time.Hour)
	for _, u := range env.fresh[1] {
		env.tokens[u] = signer.Sign(auth.Session{UserID: u, Verified: true, CreatedAt: env.created, ExpiresAt: exp})
	}
	for _, u := range env.rush {
		env.tokens[u] = signer.Sign(auth.Session{UserID: u, Verified: true, CreatedAt: env.created, ExpiresAt: exp})
	}
	return env, nil
}

// maxPayBerths is the most berths a payment shard gets, within the 255
// coaches (of 72 3A berths) seed.Shard makes at most.
const maxPayBerths = 16_000

// walletRupees is each wallet user's opening balance: several times any
// 3A fare of the demo trains.
const walletRupees = 50_000

// serveAPI serves the /v1 API over loopback, as main.go's server does
// (minus the middleware that plays no part in a hold or a callback).
func serveAPI(opts Options) (string, func(), error) {
	signer, err := auth.NewSigner(opts.SessionKey)
	if err != nil {
		return "", nil, fmt.Errorf("bench: %w", err)
	}
	r := chi.NewRouter()
	if opts.Admission == nil {
		return "", nil, errors.New("bench: serving the API needs the server's admission service (Options.Admission) to verify device bindings")
	}
	api.New(api.Config{Service: opts.Service, Payments: opts.Payments, Pool: opts.Pool, Signer: signer, Admission: opts.Admission, Log: opts.Log}).Routes(r)
	return serveHandler(r)
}

// serveHandler serves h on a loopback port until stop is called; stop
// shuts the server down and waits for its goroutine to return.
func serveHandler(h http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("bench: listen: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	var g errgroup.Group
	g.Go(func() error {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx) //nolint:errcheck // Serve's own error is the one that counts
		if err := g.Wait(); err != nil {
			slog.Warn("bench: the API server stopped", "err", err)
		}
	}
	return "http://" + ln.Addr().String(), stop, nil
}

// startProfile writes a CPU profile of one phase when dir is set.
func startProfile(dir, phase string) (func(), error) {
	if dir == "" {
		return func() {}, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("bench: profile dir: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, phase+".pprof"))
	if err != nil {
		return nil, fmt.Errorf("bench: profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("bench: profile %s: %w", phase, err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// loadAverage is the machine's one-minute load average (-1 when unknown):
// other work on the machine shows in every figure.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) //nolint:errcheck // never fails (Go 1.24+)
	return hex.EncodeToString(b)
}
