// Command tatkal runs the Tatkal booking stack and its back office: one
// binary, subcommands for serving, working, migrating, seeding, checking
// invariants and benchmarking. This file parses flags and dispatches; the
// process is built in booking/app, and the commands' bodies live there and
// in the packages they concern (recon.Command).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"tatkal/booking/app"
	"tatkal/booking/lab/bench"
	"tatkal/booking/lab/chaos"
	"tatkal/booking/lab/rehearse"
	"tatkal/booking/lab/seed"
	"tatkal/console"
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
  worker    River workers only (expiry, payments, refunds, core sync, lever reverts, sweeper, back office)
  psp       the payment gateway simulator (two gateways: UPI, cards, net banking)
  prs       the reservation core simulator
  msg       the messaging gateway simulator (SMS and e-mail, delivery receipts)
  migrate   apply database migrations (idempotent)
  ids       reseal: passengers' ID numbers sealed again with the newest key of TATKAL_ID_KEYS
  users     console users: add (the first admin, team members), disable, enable, reset-password, list
  seed      demo | shard | users | abuse: create data for demos, tests, rehearsals
  check     verify seat invariants, Redis against PostgreSQL
  verify-window  recompute a waiting-room window's fair order from its revealed seed
  rehearse  one Tatkal rush through the real API, direct and through the waiting room, with faults
  bench     measure the hold path against the raw Redis and PostgreSQL ceilings
  chaos     a rush over several serve and worker processes, a fault mid-rush, the invariants after drain
  recon     reconciliation: ingest a settlement, bank or core file, run a day, export its workbook

Configuration (environment; secrets have no defaults outside dev, see SECURITY.md):
  DATABASE_URL         default postgres://127.0.0.1:5432/tatkal?sslmode=disable (created if missing)
  TATKAL_DB_POOL       PostgreSQL connections of this process (default: serve, worker 40; dev 20; psp, prs 20)
  REDIS_URL            default redis://127.0.0.1:6379/0 (several, comma-separated: a Redis Cluster)
  REDIS_CLUSTER_ADDRS  host:port,... of a Redis Cluster's nodes (overrides REDIS_URL)
  TATKAL_ADDR          default :8080
  TATKAL_METRICS_ADDR  default 127.0.0.1:9090 (/metrics and /debug/pprof/heap, off the public listener; "off" for none;
                       an address other machines reach needs TATKAL_METRICS_TOKEN)
  TATKAL_PUBLIC_URL    default http://127.0.0.1:8080 (gateway callbacks and returns come here;
                       https here means Secure cookies and HSTS)
  TATKAL_TRUSTED_PROXIES  CIDRs of the load balancers whose X-Forwarded-For names the client
                       (default none: the connection's peer is the client)
  TATKAL_REDIS_PREFIX  default tk (keys of one deployment)
  TATKAL_HOLD_WINDOW   default 3m
  TATKAL_MAX_HOLDS_IN_FLIGHT  default 512 (the excess is shed with 503)
  TATKAL_COMMIT_WRITERS  default 1 (group-commit writers; one lets batches grow while it flushes)
  TATKAL_CHALLENGE_BITS  default 14 (booking-time proof of work of an attested client, 8-24; unattested: 6 more)
  TATKAL_MEMORY_LIMIT  soft memory limit, e.g. 300MiB (default: serve --workers=false 200MiB, others none;
                       GOMEMLIMIT wins when set)
  TATKAL_RECON_MAX_FILE_MB  default 512 (largest reconciliation file taken)
  TATKAL_RECON_APPROVAL_RUPEES  default 10000 (an automatic money move above it waits for a second finance person)
  TATKAL_RECON_AT      default 06:00 (the daily reconciliation's time of day, IST)
  TATKAL_RECON_RERUN_DAYS  default 7 (a day with open items is reconciled again daily until T+N)
  TATKAL_PSP_URL       default http://127.0.0.1:8081 (the gateways)
  TATKAL_PRS_URL       default http://127.0.0.1:8082 (the reservation core)
  TATKAL_MSG_URL       default http://127.0.0.1:8083 (the messaging gateway: SMS, e-mail)
  TATKAL_KYC_URL       default unset (the identity verifier new accounts verify through; unset: verification off)
  Secrets (make each with: openssl rand -hex 32):
  TATKAL_SESSION_KEY      hex, 32+ bytes (serve, worker); dev keeps one in the database
  TATKAL_WEBHOOK_SECRETS  gateway=secret,... (serve, worker, psp); several per gateway while rotating
  TATKAL_PSP_API_KEYS     gateway=key,... (serve, worker, psp); same form
  TATKAL_PRS_KEY          the reservation core's API key (serve, worker, prs)
  TATKAL_FRAUD_KEY        keys the fraud signals' hashes (serve, worker)
  TATKAL_ID_KEYS          id=hex32bytes,... newest first: seal passengers' ID numbers at rest (serve, worker, ids);
                          dev keeps one in the database
  TATKAL_MSG_KEY          the messaging gateway's API key (serve, worker, msg)
  TATKAL_KYC_KEY          the identity verifier's API key (serve); unset: identity verification is off
  TATKAL_SIM_ADMIN_TOKEN  the simulators' fault API (psp, prs, msg); unset: that API is off
  TATKAL_BANK_TOKEN       the bank statement API's credential (worker, psp); unset: no statement is fetched
  TATKAL_METRICS_TOKEN    every request to TATKAL_METRICS_ADDR must send Authorization: Bearer <token> (serve);
                          needed when that address is not loopback; unset: none asked

Run "tatkal <command> --help" for a command's flags.
`

type command func(context.Context, app.Config, []string, io.Writer) error

var commands = map[string]command{
	"dev": cmdDev, "serve": cmdServe, "worker": cmdWorker, "migrate": cmdMigrate, "seed": cmdSeed, "check": cmdCheck,
	"verify-window": cmdVerifyWindow, "bench": cmdBench, "psp": cmdPSP, "prs": cmdPRS, "msg": cmdMsg, "recon": cmdRecon,
	"rehearse": cmdRehearse, "chaos": cmdChaos, "users": cmdUsers,
	"ids": cmdIDs,
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "--help" || args[0] == "-h" {
		fmt.Fprint(stdout, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "tatkal: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	cfg, err := app.FromEnv()
	if err != nil && !wantsHelp(args[1:]) {
		fmt.Fprintln(stderr, "tatkal:", err)
		return 2
	}
	if err := cmd(ctx, cfg, args[1:], stdout); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "tatkal:", err)
		var ue usageError
		if errors.As(err, &ue) {
			return 2
		}
		return 1
	}
	return 0
}

// wantsHelp says whether the arguments ask for help: help is printed even
// when the environment is wrong, and never connects to anything.
func wantsHelp(args []string) bool {
	for _, a := range args {
		if a == "-h" || a == "--help" || a == "-help" || a == "help" {
			return true
		}
	}
	return false
}

type usageError struct{ error }

// flags returns a command's flag set; its usage is the help text: what the
// command does, its flags with their defaults, and an example.
func flags(name, help, example string, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("tatkal "+name, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "%s\n\nUsage: tatkal %s [flags]\n", help, name)
		fs.PrintDefaults()
		fmt.Fprintf(fs.Output(), "\nExample:\n  %s\n", example)
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

func cmdDev(ctx context.Context, cfg app.Config, args []string, out io.Writer) error {
	fs := flags("dev", "Create the database, migrate, seed demo data, and run the server with workers and both simulators on this machine.",
		"tatkal dev --real-times", out)
	realTimes := fs.Bool("real-times", false, "open demo windows at the real Tatkal times instead of now")
	if err := parse(fs, args); err != nil {
		return err
	}
	return app.Dev(ctx, cfg, *realTimes, devData, backoffice.New(), lab, out)
}

// lab is the console's rehearsal lab in the serving processes.
func lab(a *app.App) app.LabCloser { return rehearse.NewLab(a) }

func cmdServe(ctx context.Context, cfg app.Config, args []string, out io.Writer) error {
	fs := flags("serve", "Serve the web pages and the /v1 API.", "TATKAL_ADDR=:8080 tatkal serve --workers=false", out)
	workers := fs.Bool("workers", true, "also run the River workers in this process")
	if err := parse(fs, args); err != nil {
		return err
	}
	return app.Serve(ctx, cfg, app.Options{Work: *workers, Serve: true, BackOffice: backoffice.New(), Lab: lab}, out)
}

func cmdWorker(ctx context.Context, cfg app.Config, args []string, out io.Writer) error {
	fs := flags("worker", "Run the River workers (hold expiry, payments, refunds, core sync, the sweeper) and the waiting room's controller.",
		"tatkal worker", out)
	if err := parse(fs, args); err != nil {
		return err
	}
	return app.Serve(ctx, cfg, app.Options{Work: true, BackOffice: backoffice.New()}, out)
}

func cmdMigrate(ctx context.Context, cfg app.Config, args []string, out io.Writer) error {
	fs := flags("migrate", "Apply tatkal's and River's database migrations. Safe to run again.", "DATABASE_URL=postgres://127.0.0.1:5432/tatkal tatkal migrate", out)
	if err := parse(fs, args); err != nil {
		return err
	}
	return app.Migrate(ctx, cfg, out)
}

func cmdIDs(ctx context.Context, cfg app.Config, args []string, out io.Writer) error {
	fs := flags("ids", "reseal: seal every passenger ID number still in clear, and seal again with the newest key of TATKAL_ID_KEYS every one\nsealed with an older key (list the new key first, keep the old ones after it until this has run, then drop them).\nSafe to run again, beside serving processes.", "TATKAL_ID_KEYS=k2=<new>,k1=<old> tatkal ids reseal", out)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err}
	}
	if fs.NArg() != 1 || fs.Arg(0) != "reseal" {
		return usageError{fmt.Errorf("ids: want: tatkal ids reseal")}
	}
	return app.ResealIDs(ctx, cfg, out)
}

func cmdCheck(ctx context.Context, cfg app.Config, args []string, out io.Writer) error {
	fs := flags("check", "Verify seat invariants per shard, Redis against PostgreSQL. Exits 1 on any violation.", "tatkal check --shard 3", out)
	shard := fs.Int64("shard", 0, "check only this shard id (default: every shard)")
	if err := parse(fs, args); err != nil {
		return err
	}
	return app.Check(ctx, cfg, *shard, out)
}

func cmdSeed(ctx context.Context, cfg app.Config, args []string, out io.Writer) error {
	if len(args) > 0 && args[0] == "abuse" { // fraud review's test population (booking/fraud)
		return rehearse.SeedAbuse(ctx, cfg, args[1:], out)
	}
	return usageOf(seed.Command(ctx, args, out, func(ctx context.Context) (*pgxpool.Pool, error) { return app.OpenCurrent(ctx, cfg) }), seed.ErrUsage)
}

func cmdBench(ctx context.Context, cfg app.Config, args []string, out io.Writer) error {
	fs := flags("bench", "Measure the hold path on one hot shard (raw Lua and PostgreSQL ceilings, service, HTTP, durable holds) and the payment path\n(wallet confirmations, gateway callbacks and their duplicates); p50/p99.",
		"tatkal bench --duration 10s --concurrency 64", out)
	opts := bench.DefaultOptions()
	fs.DurationVar(&opts.Duration, "duration", opts.Duration, "length of each measurement")
	fs.IntVar(&opts.Concurrency, "concurrency", opts.Concurrency, "concurrent clients")
	fs.IntVar(&opts.Berths, "berths", opts.Berths, "berths on the hot shard")
	fs.IntVar(&opts.PipelineBatch, "pipeline", opts.PipelineBatch, "script calls per pipeline in the raw Redis ceiling")
	fs.IntVar(&opts.Writers, "writers", opts.Writers, "group-commit writers in the raw PostgreSQL ceiling (the service runs TATKAL_COMMIT_WRITERS, default 1)")
	fs.IntVar(&opts.FreshUsers, "fresh-users", 0, "users each hold-only phase may spend, one per durable hold (default: concurrency + 8,000 per second of duration)")
	fs.IntVar(&opts.WideConcurrency, "wide-concurrency", 0, "clients of the wide phase, service holds set beside the service phase's (default: 4x concurrency; -1: no wide phase)")
	fs.IntVar(&opts.WalletUsers, "wallet-users", 0, "wallet-funded users the wallet phase may spend, one per confirmation (default: concurrency + 2,000 per second of duration)")
	fs.IntVar(&opts.Callbacks, "callbacks", 0, "payments prepared for the callback phase (default: concurrency + 3x the wallet confirmations per second for the duration)")
	fs.StringVar(&opts.ProfileDir, "cpuprofile-dir", "", "write a CPU profile of each phase here (<phase>.pprof)")
	fs.BoolVar(&opts.NoSignals, "no-signals", false, "record no fraud signals on the hold and confirmation paths: the cost of recording, against a run without it")
	fs.DurationVar(&opts.SignalsAB, "signals-ab", 0, "instead of the usual phases, measure recording's cost: service holds for this long with fraud recording off and on in alternate 1 s slices (e.g. 20s)")
	fs.IntVar(&opts.SpreadShards, "spread-shards", 0, "add a phase cycling holds over this many shards at once (default 12 with --redis-cluster, else off)")
	cluster := fs.String("redis-cluster", "", "run on this Redis Cluster (host:port,...) instead of REDIS_URL, and spread shards over its masters")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *cluster != "" {
		cfg.RedisClusterAddrs = *cluster
		if opts.SpreadShards == 0 {
			opts.SpreadShards = 12
		}
	}
	return bench.Command(ctx, cfg, opts, out)
}

// faultFlags collects repeated --fault NAME@FROM-TO.
type faultFlags struct{ fs *[]rehearse.Fault }

func (f faultFlags) String() string { return "" }
func (f faultFlags) Set(v string) error {
	ft, err := rehearse.ParseFault(v)
	if err != nil {
		return err
	}
	*f.fs = append(*f.fs, ft)
	return nil
}

func cmdRehearse(ctx context.Context, cfg app.Config, args []string, out io.Writer) error {
	fs := flags("rehearse", "Rehearse one Tatkal rush through the real HTTP API: travellers sign in, queue (queue mode), hold, pay and poll\n"+
		"to a terminal answer, once booking directly and once through the waiting room, with faults through the real levers\n"+
		"and simulators. Without --url it runs its own stack on free loopback ports, a scratch database and Redis prefix,\n"+
		"removed after. Writes rehearsal-<time>.json and .md (to a new temporary directory unless --out names one);\n"+
		"exits 1 if any run oversold, left a payment unresolved or did not balance. Faults: "+strings.Join(rehearse.FaultNames, ", ")+".",
		"tatkal rehearse --travellers 2000 --berths 600 --mode both --fault gateway-degraded@20s-40s", out)
	o := rehearse.Defaults()
	fs.IntVar(&o.Travellers, "travellers", o.Travellers, "travellers in the rush")
	fs.IntVar(&o.Berths, "berths", o.Berths, "berths on the shard")
	fs.Float64Var(&o.Aggressive, "aggressive", o.Aggressive, "share of aggressive travellers (retry and poll faster, ignore pacing)")
	fs.Float64Var(&o.RetryMultiplier, "retry-multiplier", o.RetryMultiplier, "how much faster aggressive travellers retry and poll")
	fs.DurationVar(&o.Duration, "duration", o.Duration, "observation window from the opening")
	fs.StringVar(&o.Mode, "mode", o.Mode, "direct, queue or both")
	fs.Uint64Var(&o.Seed, "seed", o.Seed, "first seed (travellers' kinds, parties, journeys, payments and declines)")
	fs.IntVar(&o.Seeds, "seeds", o.Seeds, "seeds to run (seed, seed+1, ...): the report gives mean and spread")
	fs.Float64Var(&o.Capacity, "capacity", o.Capacity, "backend capacity in hold and payment calls / s (a quarter during core-slow): the report's load figures")
	fs.BoolVar(&o.Parallel, "parallel", false, "run the seeds at once, each on a stack of its own")
	fs.Var(faultFlags{&o.Faults}, "fault", "NAME@FROM-TO after the opening, e.g. core-slow@20s-40s (repeatable)")
	fs.StringVar(&o.URL, "url", "", "rehearse against this running deployment (its DATABASE_URL, REDIS_URL, TATKAL_REDIS_PREFIX) instead of an own stack")
	fs.IntVar(&o.Follow, "follow", 1, "traveller whose path the report follows (1-based)")
	fs.DurationVar(&o.Drain, "drain", o.Drain, "how long payments may take to resolve after the window")
	dir := fs.String("out", "", "directory for the reports (default: a new temporary directory, printed at the start)")
	if err := parse(fs, args); err != nil {
		return err
	}
	o.Follow--
	if err := o.Check(); err != nil {
		return usageError{err}
	}
	return rehearse.Command(ctx, cfg, o, *dir, out)
}

func cmdChaos(ctx context.Context, cfg app.Config, args []string, out io.Writer) error {
	fs := flags("chaos", "Run a rush over several serve and worker processes of this binary (a scratch database and Redis prefix,\n"+
		"the simulators in this process; removed after), pull one fault a quarter into the rush, wait for the stack to drain\n"+
		"by itself and check the invariants: every HELD answer durable, no berth sold twice, every payment a ticket or a\n"+
		"refund, each PNR once in the core, the ledger balanced. Exits 1 on any violation. Faults: "+strings.Join(chaos.FaultNames, ", ")+
		"\n(the last two start a private PostgreSQL cluster or Redis Cluster for the run: PostgreSQL binaries under\n"+
		"/usr/lib/postgresql/*/bin, run as the postgres user when root; redis-server and redis-cli).",
		"tatkal chaos --fault serve-kill --users 120 --serves 3 --workers 2", out)
	o := chaos.DefaultOptions()
	fs.StringVar(&o.Fault, "fault", o.Fault, "the fault: "+strings.Join(chaos.FaultNames, ", "))
	fs.IntVar(&o.Users, "users", o.Users, "travellers in the rush")
	fs.IntVar(&o.Berths, "berths", o.Berths, "berths on the rush's shard")
	fs.IntVar(&o.Serves, "serves", o.Serves, "serve processes the rush is spread over")
	fs.IntVar(&o.Workers, "workers", o.Workers, "worker processes")
	fs.DurationVar(&o.HoldWindow, "hold-window", o.HoldWindow, "the processes' hold window (short: a hold whose answer died is swept within the run)")
	fs.DurationVar(&o.Drain, "drain", o.Drain, "how long the stack has to drain by itself after the rush")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := o.Check(); err != nil {
		return usageError{err}
	}
	return chaos.Command(ctx, cfg, o, out)
}

func cmdPSP(ctx context.Context, cfg app.Config, args []string, out io.Writer) error {
	fs := flags("psp", "Run the payment gateway simulator: gateways swiftpay and bharatpg with UPI, CARD and NETBANKING routes,\nfaults settable at runtime through /admin/routes (TATKAL_SIM_ADMIN_TOKEN). State lives in schema psp.",
		"tatkal psp --addr http://127.0.0.1:8081", out)
	addr := fs.String("addr", cfg.PSPURL, "listen address (URL)")
	if err := parse(fs, args); err != nil {
		return err
	}
	return app.PSP(ctx, cfg, *addr, out)
}

func cmdPRS(ctx context.Context, cfg app.Config, args []string, out io.Writer) error {
	fs := flags("prs", "Run the reservation core simulator: confirmed bookings are synced here by PNR; faults at /admin/faults.\nState lives in schema prs.",
		"tatkal prs --addr http://127.0.0.1:8082", out)
	addr := fs.String("addr", cfg.PRSURL, "listen address (URL)")
	if err := parse(fs, args); err != nil {
		return err
	}
	return app.PRS(ctx, cfg, *addr, out)
}

func cmdMsg(ctx context.Context, cfg app.Config, args []string, out io.Writer) error {
	fs := flags("msg", "Run the messaging gateway simulator: SMS and e-mail taken once per Idempotency-Key, delivery receipts\nat GET /v1/messages/{id}, latency and failures at /admin/faults. State lives in schema msg.",
		"tatkal msg --addr http://127.0.0.1:8083", out)
	addr := fs.String("addr", cfg.MsgURL, "listen address (URL)")
	if err := parse(fs, args); err != nil {
		return err
	}
	return app.Msg(ctx, cfg, *addr, out)
}

func cmdVerifyWindow(ctx context.Context, cfg app.Config, args []string, out io.Writer) error {
	fs := flags("verify-window", "Recompute a waiting-room window's admission order from its revealed seed and its cohort, and say whether\nthe admission log matches it. Exits 1 when it does not (or the seed is not revealed yet).",
		"tatkal verify-window --window 3", out)
	id := fs.Int64("window", 0, "window id: the shard id (GET /v1/windows/{id}/fairness)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *id <= 0 {
		return usageError{errors.New("--window is required")}
	}
	return app.VerifyWindow(ctx, cfg, *id, out)
}

// cmdRecon is reconciliation from the command line: ingest, run, export.
func cmdRecon(ctx context.Context, cfg app.Config, args []string, stdout io.Writer) error {
	return usageOf(app.Recon(ctx, cfg, args, stdout), recon.ErrUsage)
}

// cmdUsers manages console users from the command line; the password is
// read from this process's standard input (a terminal, or a pipe).
func cmdUsers(ctx context.Context, cfg app.Config, args []string, out io.Writer) error {
	return usageOf(console.UsersCommand(ctx, args, os.Stdin, out, func(ctx context.Context) (*pgxpool.Pool, error) { return app.OpenCurrent(ctx, cfg) }),
		console.ErrUsage)
}

// usageOf marks a package's usage errors as the command line's (exit 2).
func usageOf(err, errUsage error) error {
	if errors.Is(err, errUsage) {
		return usageError{err}
	}
	return err
}

// devData seeds tatkal dev's database (app.DevData): the demo trains, their
// windows open a minute ago unless realTimes, and five demo passengers with
// ₹5,000 in their wallets the first time.
func devData(ctx context.Context, pool *pgxpool.Pool, realTimes bool) (app.DevDemo, error) {
	opts := seed.DemoOptions{}
	if !realTimes {
		open := -time.Minute
		opts.OpensIn = &open
	}
	res, err := seed.Demo(ctx, pool, opts)
	if err != nil {
		return app.DevDemo{}, err
	}
	if _, err := seed.DemoUsers(ctx, pool, devPassword); err != nil {
		return app.DevDemo{}, err
	}
	return app.DevDemo{Journey: res.JourneyDate, Password: devPassword, Describe: func(out io.Writer) { seed.PrintDemo(out, res) }}, nil
}

// devPassword is the demo passengers' password (tatkal dev only).
const devPassword = "tatkal-demo"
