package chaos

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"tatkal/booking"
	"tatkal/booking/app"
	"tatkal/booking/auth"
	"tatkal/booking/db"
	"tatkal/booking/inventory"
	"tatkal/booking/lab/localsrv"
	"tatkal/booking/lab/seed"
	"tatkal/booking/payment/pspapi"
	"tatkal/booking/redisx"
	"tatkal/booking/secrets"
	"tatkal/booking/sim/pspsim"
)

// Faults tatkal chaos injects mid-rush.
const (
	FaultServeKill  = "serve-kill"  // SIGKILL of the first serve process
	FaultWorkerKill = "worker-kill" // SIGKILL of the first worker process
	FaultRedisWipe  = "redis-wipe"  // the shard's seat state deleted from Redis
	// The two below break a whole store, so the run starts one of its own
	// (package localsrv) rather than touch a shared server.
	FaultPostgresRestart = "postgres-restart" // a private PostgreSQL stopped for PostgresDown, then started
	FaultRedisFailover   = "redis-failover"   // the shard's master in a private Redis Cluster SIGKILLed; its replica takes over
)

// FaultNames lists the faults, for --help.
var FaultNames = []string{FaultServeKill, FaultWorkerKill, FaultRedisWipe, FaultPostgresRestart, FaultRedisFailover}

// Options are one chaos run's settings (tatkal chaos's flags).
type Options struct {
	Fault      string
	Users      int           // travellers in the rush
	Berths     int           // berths on the rush's shard
	Serves     int           // serve processes the rush is spread over
	Workers    int           // worker processes
	HoldWindow time.Duration // short, so a hold whose answer died is swept within the run
	Drain      time.Duration // how long the stack has to drain by itself
}

// DefaultOptions are the chaos test's rush: 120 travellers on 40 berths,
// three serve and two worker processes.
func DefaultOptions() Options {
	return Options{Fault: FaultServeKill, Users: 120, Berths: 40, Serves: 3, Workers: 2, HoldWindow: 20 * time.Second, Drain: 4 * time.Minute}
}

// Check says what is wrong with the options.
func (o Options) Check() error {
	var errs []error
	known := false
	for _, f := range FaultNames {
		known = known || f == o.Fault
	}
	if !known {
		errs = append(errs, fmt.Errorf("--fault %q: one of %s", o.Fault, strings.Join(FaultNames, ", ")))
	}
	if o.Users < 10 || o.Users > 10000 {
		errs = append(errs, errors.New("--users: 10..10000"))
	}
	if o.Berths < 1 || o.Berths > 5000 {
		errs = append(errs, errors.New("--berths: 1..5000"))
	}
	if o.Serves < 2 || o.Serves > 8 {
		errs = append(errs, errors.New("--serves: 2..8 (one is killed by serve-kill, the rush needs another)"))
	}
	if o.Workers < 2 || o.Workers > 8 {
		errs = append(errs, errors.New("--workers: 2..8"))
	}
	if o.HoldWindow < 5*time.Second || o.Drain < 30*time.Second {
		errs = append(errs, errors.New("--hold-window at least 5s, --drain at least 30s"))
	}
	return errors.Join(errs...)
}

// Routes are the rush's gateways: they decline 15 % and lose or repeat
// 20 % of callbacks, but every customer answers within a second, so every
// payment can end within the run.
func Routes() []pspapi.RouteConfig {
	var routes []pspapi.RouteConfig
	for _, rc := range pspsim.DefaultRoutes() {
		rc.LatencyP50Ms, rc.LatencyP99Ms, rc.TimeoutRate, rc.PendingRate, rc.LateSuccessRate = 10, 80, 0, 0, 0
		rc.DeclineRate, rc.LostCallbackRate, rc.DuplicateCallbackRate, rc.CallbackDelayMs = 0.15, 0.2, 0.2, 0
		rc.AutoApproveMs, rc.AbandonRate, rc.CapacityTPS = 300, 0, 0
		routes = append(routes, rc)
	}
	return routes
}

// Command is tatkal chaos: on a scratch database and Redis prefix (removed
// after), with the simulators in this process, it starts o.Serves serve
// and o.Workers worker processes of this binary, rushes one shard through
// the serve processes, pulls the fault a quarter into the rush, waits for
// the stack to drain by itself and prints the invariants' verdict. A
// fault that breaks a store runs the whole stack on a private one started
// for the run (postgres-restart: a PostgreSQL cluster; redis-failover: a
// Redis Cluster with replicas). It fails on any broken invariant.
func Command(ctx context.Context, cfg app.Config, o Options, out io.Writer) error {
	if err := o.Check(); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this binary: %w", err)
	}
	say := func(format string, args ...any) { fmt.Fprintf(out, "chaos: "+format+"\n", args...) }
	// The store the fault breaks is a private one, started for this run.
	var pg *localsrv.Postgres
	var rc *localsrv.RedisCluster
	switch o.Fault {
	case FaultPostgresRestart:
		if pg, err = localsrv.StartPostgres(); err != nil {
			return fmt.Errorf("--fault %s: %w", o.Fault, err)
		}
		defer pg.Close()
		cfg.DatabaseURL = pg.BaseURL
		say("a private PostgreSQL on port %d (its log: %s)", pg.Port, pg.LogFile())
	case FaultRedisFailover:
		if rc, err = localsrv.StartRedisCluster(); err != nil {
			return fmt.Errorf("--fault %s: %w", o.Fault, err)
		}
		defer rc.Close()
		cfg.RedisURL, cfg.RedisClusterAddrs = rc.URL, rc.URL
		say("a private Redis Cluster, masters %s, a replica each", rc.URL)
	}
	cfg = cfg.WithDevSecrets()
	if cfg.SessionKey, err = hex.DecodeString(secrets.Random()); err != nil {
		return err
	}
	name := "tatkal_chaos_" + secrets.Random()[:12]
	base := cfg.DatabaseURL
	cfg.DatabaseURL, cfg.RedisPrefix = db.WithDatabase(base, name), "ch"+secrets.Random()[:10]
	cfg.Addr, cfg.MetricsAddr, cfg.HoldWindow, cfg.DBPool = "127.0.0.1:0", "off", o.HoldWindow, 8
	if err := db.CreateDatabase(ctx, cfg.DatabaseURL); err != nil {
		return fmt.Errorf("scratch database: %w", err)
	}
	defer db.DropDatabase(base, name)
	if err := app.Migrate(ctx, cfg, io.Discard); err != nil {
		return err
	}
	logFile, err := os.CreateTemp("", "tatkal-chaos-*.log")
	if err != nil {
		return err
	}
	defer logFile.Close()
	fmt.Fprintf(out, "chaos: fault %s, %d travellers on %d berths, %d serve and %d worker processes; their logs: %s\n",
		o.Fault, o.Users, o.Berths, o.Serves, o.Workers, logFile.Name())

	// The simulators (gateways, core, messaging) in this process.
	simLog := slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// go-redis logs each failed dial (to a killed master, many a second)
	// on standard error: they belong with the processes' logs.
	redis.SetLogger(redisLog{simLog})
	sims, err := app.New(ctx, cfg, app.Options{Simulators: true, SimRoutes: Routes(), SimSeed: 1, Log: simLog})
	if err != nil {
		return err
	}
	defer sims.Close()
	defer redisx.DeletePrefix(sims.Redis, cfg.RedisPrefix)
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- sims.Run(runCtx) }()
	defer func() { stop(); <-done }()
	select {
	case <-sims.Ready():
	case err := <-done:
		done <- err
		return fmt.Errorf("start the simulators: %w", err)
	}
	cfg.PSPURL, cfg.PRSURL, cfg.MsgURL = sims.PSPURL(), sims.PRSURL(), sims.MsgURL()

	// The rush's shard and travellers.
	open := -time.Minute
	if _, err := seed.Demo(ctx, sims.Pool, seed.DemoOptions{OpensIn: &open}); err != nil {
		return fmt.Errorf("seed the network: %w", err)
	}
	d := time.Now().In(booking.IST).AddDate(0, 0, 5)
	date := time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, booking.IST)
	zero := 0
	shardID, err := seed.Shard(ctx, sims.Pool, seed.ShardSpec{Train: "12951", Date: date, Class: "3A", Berths: o.Berths,
		OpensAt: time.Now().Add(-time.Minute), WaitlistCap: &zero})
	if err != nil {
		return fmt.Errorf("seed the shard: %w", err)
	}
	if _, err := sims.Booking.Rebuild(ctx, shardID); err != nil {
		return fmt.Errorf("load the shard: %w", err)
	}
	hash, err := auth.HashPassword("chaos", auth.Argon2Params{MemoryKiB: 64, Time: 1, Threads: 1})
	if err != nil {
		return err
	}
	users, err := seed.Users(ctx, sims.Pool, seed.UsersSpec{Count: o.Users, Prefix: "chaos_", PasswordHash: hash, WalletRupees: 20_000,
		CreatedAt: time.Now().AddDate(0, 0, -30)})
	if err != nil {
		return fmt.Errorf("seed users: %w", err)
	}
	signer, err := auth.NewSigner(cfg.SessionKey)
	if err != nil {
		return err
	}
	travellers := make([]*Traveller, len(users))
	for i, u := range users {
		travellers[i] = &Traveller{User: u, Token: signer.Sign(auth.Session{UserID: u, Verified: true,
			CreatedAt: time.Now().AddDate(0, 0, -30), ExpiresAt: time.Now().Add(time.Hour)})}
	}

	// The processes.
	// Every hold solves a booking challenge: the lightest one, since the
	// rush measures the processes' survival, not the puzzle.
	env := append(cfg.Environ(), "TATKAL_ADDR=127.0.0.1:0", "TATKAL_METRICS_ADDR=off", "TATKAL_CHALLENGE_BITS=8")
	var serves, workers []*process
	defer func() {
		for _, p := range append(serves, workers...) {
			p.kill()
		}
	}()
	// Each serve process is its own public URL, so the gateway's callbacks
	// for a payment reach the process that created it (the default would
	// send them to :8080, to nobody or to a dev stack); the workers' refunds
	// call back to the last one, which serve-kill spares.
	var public string
	for range o.Serves {
		addr, err := freeAddr()
		if err != nil {
			return err
		}
		public = "http://" + addr
		p, err := startProcess(exe, append(env, "TATKAL_DB_POOL=5", "TATKAL_ADDR="+addr, "TATKAL_PUBLIC_URL="+public), logFile,
			"tatkal serving on ", "serve", "--workers=false")
		if err != nil {
			return err
		}
		serves = append(serves, p)
	}
	for range o.Workers {
		p, err := startProcess(exe, append(env, "TATKAL_DB_POOL=8", "TATKAL_PUBLIC_URL="+public), logFile, "tatkal worker running", "worker")
		if err != nil {
			return err
		}
		workers = append(workers, p)
	}
	urls := make([]string, len(serves))
	for i, p := range serves {
		urls[i] = p.url
	}
	say("serve processes at %s", strings.Join(urls, ", "))

	var failover *RedisFailover
	if rc != nil {
		if failover, err = NewRedisFailover(ctx, rc, sims.Store.MetaKey(shardID)); err != nil {
			return fmt.Errorf("find the shard's Redis master: %w", err)
		}
	}

	c := NewClient(urls, date)
	tally := NewTally()
	c.Seen = tally.Seen
	var faultErr error
	started := time.Now()
	c.Rush(ctx, travellers, func(wait func(n int64), done func() int64) {
		wait(int64(len(travellers)) / 4)
		switch o.Fault {
		case FaultServeKill:
			serves[0].kill()
			say("killed serve 1 of %d (SIGKILL) after %d travellers", len(serves), done())
		case FaultWorkerKill:
			workers[0].kill()
			say("killed worker 1 of %d (SIGKILL) after %d travellers", len(workers), done())
		case FaultRedisWipe:
			if faultErr = sims.Store.Wipe(ctx, shardID); faultErr == nil {
				say("wiped the shard's seat state from Redis after %d travellers", done())
			}
		case FaultPostgresRestart:
			faultErr = RestartPostgres(pg, PostgresDown, tally, done, say)
		case FaultRedisFailover:
			faultErr = failover.Pull(tally, done, say)
		}
	})
	if faultErr != nil {
		return fmt.Errorf("pull %s: %w", o.Fault, faultErr)
	}
	oc := c.Outcome(travellers)
	say("rush over in %s: %s", time.Since(started).Round(time.Millisecond), oc)
	// The rush's own broken promises: its answers, a store's outage, and
	// processes that did not outlive a fault not aimed at them.
	violations := oc.Violations()
	if pg != nil || rc != nil {
		during, after := tally.Counts()
		say("answered during the fault (0: no answer): %v; after it: %v", during, after)
	}
	if pg != nil {
		violations = append(violations, tally.OutageViolations("PostgreSQL")...)
	}
	for i, p := range serves {
		if !p.alive() && !(o.Fault == FaultServeKill && i == 0) {
			violations = append(violations, fmt.Sprintf("serve %d of %d did not outlive the fault", i+1, len(serves)))
		}
	}
	for i, p := range workers {
		if !p.alive() && !(o.Fault == FaultWorkerKill && i == 0) {
			violations = append(violations, fmt.Sprintf("worker %d of %d did not outlive the fault", i+1, len(workers)))
		}
	}

	say("draining (up to %s)", o.Drain)
	t := Target{Pool: sims.Pool, Store: sims.Store, CoreURL: cfg.PRSURL, CoreKey: cfg.PRSKey, HoldWindow: o.HoldWindow}
	var last time.Time
	if err := Drain(ctx, t, shardID, o.Drain, func(open, unsynced int, _ inventory.Report) {
		if time.Since(last) >= 5*time.Second {
			last = time.Now()
			say("  %d payments open, %d tickets not at the core yet", open, unsynced)
		}
	}); err != nil {
		return err
	}
	v, err := Check(ctx, t, shardID, date, oc.Held)
	if err != nil {
		return err
	}
	v.Violations = append(violations, v.Violations...)
	fmt.Fprintf(out, "\nInvariants after drain (fault %s):\n%s", o.Fault, v.Report())
	for _, msg := range violations {
		fmt.Fprintf(out, "  FAIL  %s\n", msg)
	}
	if !v.OK() {
		return fmt.Errorf("%d invariants broken: %s", len(v.Violations), strings.Join(v.Violations, "; "))
	}
	fmt.Fprintln(out, "PASS")
	return nil
}

// redisLog is go-redis's logger on slog.
type redisLog struct{ log *slog.Logger }

func (l redisLog) Printf(ctx context.Context, format string, args ...any) {
	l.log.WarnContext(ctx, fmt.Sprintf(format, args...), "from", "go-redis")
}

// process is a serve or worker process of this binary.
type process struct {
	cmd    *exec.Cmd
	url    string        // a serve process's API
	exited chan struct{} // closed once it has ended
}

func (p *process) kill() {
	p.cmd.Process.Kill() //nolint:errcheck // it may have ended already
	<-p.exited
}

// alive says whether the process is still running.
func (p *process) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// startProcess runs exe with args and env, its standard error to log, and
// waits for the standard output line starting with ready (serve's names
// its URL next).
func startProcess(exe string, env []string, log io.Writer, ready string, args ...string) (*process, error) {
	up := make(chan string, 1)
	cmd := exec.Command(exe, args...)
	// Standard output through a writer, not a pipe read beside Wait (which
	// closes the pipe under the reader): Wait returns once it is copied.
	cmd.Env, cmd.Stderr, cmd.Stdout = env, log, &readyLine{prefix: ready, up: up}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s %s: %w", filepath.Base(exe), strings.Join(args, " "), err)
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	go func() {
		cmd.Wait() //nolint:errcheck // alive and the log say how it ended
		close(p.exited)
	}()
	select {
	case url := <-up:
		p.url = url
		return p, nil
	case <-p.exited:
	case <-time.After(60 * time.Second):
	}
	p.kill()
	return nil, fmt.Errorf("%s %s did not start (see its log)", filepath.Base(exe), strings.Join(args, " "))
}

// readyLine watches a child's standard output for the line starting with
// prefix and sends the word after it (serve's URL) once; the rest of the
// output is dropped.
type readyLine struct {
	prefix string
	up     chan<- string
	buf    []byte
	sent   bool
}

func (r *readyLine) Write(b []byte) (int, error) {
	if r.sent {
		return len(b), nil
	}
	r.buf = append(r.buf, b...)
	for {
		line, rest, ok := bytes.Cut(r.buf, []byte{'\n'})
		if !ok {
			if len(r.buf) > 64<<10 {
				r.buf = r.buf[:0] // no line that long is the one looked for
			}
			return len(b), nil
		}
		r.buf = rest
		if after, found := strings.CutPrefix(string(line), r.prefix); found {
			url, _, _ := strings.Cut(after, " ")
			r.up <- url // buffered: the one send
			r.sent, r.buf = true, nil
			return len(b), nil
		}
	}
}

// freeAddr is a free loopback address for a child's listener.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}
