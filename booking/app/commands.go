package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"tatkal/booking"
	"tatkal/booking/admission"
	"tatkal/booking/db"
	"tatkal/booking/fraud"
	"tatkal/booking/httpx"
	"tatkal/booking/inventory"
	"tatkal/booking/pii"
	"tatkal/booking/redisx"
	"tatkal/booking/secrets"
	"tatkal/booking/sim/msgsim"
	"tatkal/booking/sim/prssim"
	"tatkal/booking/sim/pspsim"
	"tatkal/console"
	"tatkal/jobs"
	"tatkal/recon"
)

// The bodies of the binary's commands; main.go parses their flags. Each
// connects to nothing before its flags and secrets are checked.

// openDB opens a pool of size connections, naming PostgreSQL and how to
// start it when it cannot be reached.
func openDB(ctx context.Context, cfg Config, size int32) (*pgxpool.Pool, error) {
	pool, err := db.Open(ctx, cfg.DatabaseURL, size)
	if err != nil {
		return nil, fmt.Errorf("%w\nIs PostgreSQL running? Start it with: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start", err)
	}
	return pool, nil
}

// openRedis connects to Redis, naming it and how to start it when it
// cannot be reached.
func openRedis(ctx context.Context, cfg Config) (redis.UniversalClient, error) {
	rdb, err := redisx.Open(cfg.RedisURL, cfg.RedisClusterAddrs, 200)
	if err != nil {
		return nil, err
	}
	if err := rdb.Ping(ctx).Err(); err != nil {
		rdb.Close() //nolint:errcheck
		return nil, fmt.Errorf("reach Redis at %s: %w\nIs Redis running? Start it with: redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save \"\" --appendonly no", redisx.Addr(rdb), err)
	}
	return rdb, nil
}

// OpenCurrent opens a small pool on a schema that must be current (for
// commands that write data, e.g. tatkal seed).
func OpenCurrent(ctx context.Context, cfg Config) (*pgxpool.Pool, error) {
	pool, err := openDB(ctx, cfg, 8)
	if err != nil {
		return nil, err
	}
	if pending, err := db.Pending(ctx, pool); err != nil || len(pending) > 0 {
		pool.Close()
		return nil, fmt.Errorf("the schema is not current (run: tatkal migrate)")
	}
	return pool, nil
}

// ResealIDs runs tatkal ids reseal: every ID number in clear sealed, every
// one sealed under an older key sealed again under the newest.
func ResealIDs(ctx context.Context, cfg Config, out io.Writer) error {
	ids, err := pii.Parse(cfg.IDKeys)
	if err != nil {
		return err
	}
	if err := secrets.Check(EnvFraudKey, cfg.FraudKey); err != nil {
		return fmt.Errorf("%w (the ID numbers' keyed hashes are computed with it)", err)
	}
	pool, err := OpenCurrent(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	svc := booking.NewService(booking.ServiceConfig{Pool: pool, IDs: ids, Fraud: &fraud.Recorder{Key: []byte(cfg.FraudKey)}})
	defer svc.Close()
	n, err := svc.ResealIDs(ctx)
	fmt.Fprintf(out, "%d rows sealed under key %s\n", n, ids.Newest())
	return err
}

// Recon runs tatkal recon ARGS on the reconciliation service built as the
// process builds it (its limits; an insert-only River client for the
// automatic resolutions a run enqueues, whose workers run in the worker
// processes), connecting only once the arguments are checked.
func Recon(ctx context.Context, cfg Config, args []string, out io.Writer) error {
	open := func(ctx context.Context) (*recon.Service, func(), error) {
		pool, err := OpenCurrent(ctx, cfg)
		if err != nil {
			return nil, nil, err
		}
		client, err := jobs.NewClient(pool, &jobs.Services{}, jobs.Config{})
		if err != nil {
			pool.Close()
			return nil, nil, err
		}
		return newRecon(cfg, pool, client, slog.Default(), nil), pool.Close, nil
	}
	return recon.Command(ctx, open, recon.Limits{MaxFileBytes: cfg.ReconMaxFileBytes}, args, out)
}

// Serve runs the process (tatkal serve and tatkal worker) until ctx ends.
func Serve(ctx context.Context, cfg Config, opts Options, out io.Writer) error {
	if err := cfg.RequireSecrets(NeedGateways | NeedPRSKey | NeedSessionKey | NeedMsgKey); err != nil {
		return err
	}
	// A worker serves no metrics, but shares the deployment's settings:
	// refused alike, before anything connects.
	if err := cfg.CheckMetrics(); err != nil {
		return err
	}
	limit := applyMemoryLimit(cfg, opts)
	a, err := New(ctx, cfg, opts)
	if err != nil {
		return err
	}
	defer a.Close()
	if opts.Serve {
		fmt.Fprintf(out, "tatkal serving on %s (workers: %t, memory limit: %s)\n", a.URL(), opts.Work, limitText(limit))
	} else {
		fmt.Fprintln(out, "tatkal worker running")
	}
	err = a.Run(ctx)
	fmt.Fprintln(out, "shutting down")
	return err
}

// limitText is a soft memory limit for a person: "none" or MiB.
func limitText(limit int64) string {
	if limit == math.MaxInt64 {
		return "none"
	}
	return fmt.Sprintf("%d MiB", limit>>20)
}

// Migrate applies tatkal's and River's migrations.
func Migrate(ctx context.Context, cfg Config, out io.Writer) error {
	pool, err := openDB(ctx, cfg, 4)
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

// Check verifies the seat invariants of one shard (0: every shard).
func Check(ctx context.Context, cfg Config, shard int64, out io.Writer) error {
	pool, err := openDB(ctx, cfg, 4)
	if err != nil {
		return err
	}
	defer pool.Close()
	rdb, err := openRedis(ctx, cfg)
	if err != nil {
		return err
	}
	defer rdb.Close() //nolint:errcheck
	store := inventory.New(rdb, cfg.RedisPrefix)
	ids := []int64{shard}
	if shard == 0 {
		rows, err := pool.Query(ctx, `SELECT id FROM inventory_shards ORDER BY id`)
		if err != nil {
			return fmt.Errorf("list shards: %w", err)
		}
		if ids, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
			return fmt.Errorf("list shards: %w", err)
		}
	}
	bad := 0
	for _, id := range ids {
		rep, err := inventory.Check(ctx, pool, store, id, cfg.HoldWindow)
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

// VerifyWindow recomputes a waiting-room window's order from its seed.
func VerifyWindow(ctx context.Context, cfg Config, id int64, out io.Writer) error {
	pool, err := openDB(ctx, cfg, 2)
	if err != nil {
		return err
	}
	defer pool.Close()
	rep, err := admission.VerifyWindow(ctx, pool, id)
	if err != nil {
		return err
	}
	fmt.Fprint(out, rep.String())
	if !rep.OK() {
		return fmt.Errorf("window %d: not verified", id)
	}
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

// devSetting returns the stored value of key, storing v on first run: for
// tatkal dev only (see sessionKey).
func devSetting(ctx context.Context, pool *pgxpool.Pool, key, v string) (string, error) {
	err := pool.QueryRow(ctx, `WITH ins AS (
		INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING RETURNING value)
		SELECT value FROM ins UNION ALL SELECT value FROM settings WHERE key = $1 LIMIT 1`, key, v).Scan(&v)
	if err != nil {
		return "", fmt.Errorf("dev setting %s: %w", key, err)
	}
	return v, nil
}

// DevDemo is what tatkal dev seeded, as it tells the developer.
type DevDemo struct {
	Journey  time.Time       // the demo trains' journey date
	Password string          // the demo passengers' password
	Describe func(io.Writer) // what was seeded, printed once everything runs
}

// DevData seeds the demo into dev's migrated database (package seed's
// ForDev): the lab stands above the app, never below it.
type DevData func(ctx context.Context, pool *pgxpool.Pool, realTimes bool) (DevDemo, error)

// prepareDev migrates, keeps the session key in the database, seeds the
// demo with data and the console's demo users, for tatkal dev.
func prepareDev(ctx context.Context, cfg *Config, realTimes, keepIDKeys bool, data DevData) (DevDemo, error) {
	pool, err := openDB(ctx, *cfg, 4)
	if err != nil {
		return DevDemo{}, err
	}
	defer pool.Close()
	if err := db.Migrate(ctx, pool); err != nil {
		return DevDemo{}, err
	}
	if len(cfg.SessionKey) == 0 {
		if cfg.SessionKey, err = sessionKey(ctx, pool); err != nil {
			return DevDemo{}, err
		}
	}
	if keepIDKeys { // the passengers a dev database keeps stay readable at the next start
		if cfg.IDKeys, err = devSetting(ctx, pool, "id_keys", cfg.IDKeys); err != nil {
			return DevDemo{}, err
		}
	}
	demo, err := data(ctx, pool, realTimes)
	if err != nil {
		return demo, err
	}
	if _, err := console.SeedDemoUsers(ctx, pool); err != nil {
		return demo, err
	}
	return demo, nil
}

// Dev creates the database, migrates, seeds the demo and runs everything
// here, simulators and the back office included, with fresh secrets, until
// ctx ends.
func Dev(ctx context.Context, cfg Config, realTimes bool, data DevData, office BackOffice, lab func(*App) LabCloser, out io.Writer) error {
	keepIDKeys := cfg.IDKeys == ""
	cfg = cfg.WithDevSecrets()
	if cfg.DBPool == 0 {
		cfg.DBPool = 20 // app, workers and both simulators share it; idle, a handful are open
	}
	res, err := prepareDev(ctx, &cfg, realTimes, keepIDKeys, data)
	if err != nil {
		return err
	}
	cfg.PublicURL = "" // the app's own listener
	a, err := New(ctx, cfg, Options{Work: true, Serve: true, Simulators: true, BackOffice: office, Lab: lab})
	if err != nil {
		return err
	}
	defer a.Close()
	res.Describe(out)
	fmt.Fprintf(out, `
tatkal is running.
  API        %[1]s/v1   (OpenAPI: %[1]s/v1/openapi.json)
  health     %[1]s/healthz  %[1]s/readyz   metrics %[7]s
  gateways   %[4]s (simulated; faults: PUT %[4]s/admin/routes/{gw}/{method}, token %[6]s)
  core       %[5]s (simulated reservation system; faults: PUT %[5]s/admin/faults)
  messages   %[8]s (simulated SMS and e-mail gateway; faults: PUT %[8]s/admin/faults)
  identity   %[9]s (simulated Aadhaar-style KYC; faults: PUT %[9]s/admin/faults); open an account at %[1]s/signup
  logins     demo00001 .. demo00005, password %[2]s (wallets hold ₹5,000)
  console    %[1]s/console  ops1, finance1, fraud1, admin1, admin2 (one per role; two admins approve each other),
             team-treasury, team-reservations, team-disputes, ... (one per owning team of exceptions), password console-demo

Book a seat with curl:
  TOKEN=$(curl -s %[1]s/v1/auth/login -H 'Content-Type: application/json' \
    -d '{"login":"demo00001","password":"%[2]s"}' | sed 's/.*"token":"\([^"]*\)".*/\1/')
  KEY=try-$(date +%%s)
  # bind this device (every hold needs one):
  DEVICE=$(curl -s %[1]s/v1/devices/bind -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
    -d '{"device_token":"my-laptop-0000000001"}' | sed 's/.*"device_binding":"\([^"]*\)".*/\1/')
  # every hold carries a booking check: POST /v1/challenge {"attempt":KEY} and solve it (see
  # /v1/openapi.json), or POST /v1/challenge/otp and send the SMS code (in the messages simulator)
  curl -s %[1]s/v1/bookings/hold -H "Authorization: Bearer $TOKEN" -H "X-Device-Token: $DEVICE" -H 'Content-Type: application/json' \
    -H "Idempotency-Key: $KEY" -d '{"train_no":"12951","journey_date":"%[3]s","class":"3A",
    "from":"MMCT","to":"NDLS","passengers":[{"name":"Asha Rao","age":34,"gender":"F","id_type":"PAN","id_ref":"ABCDE1234F"}],
    "challenge":{"type":"OTP","code":"<code>"}}'
  # then pay from the wallet with the hold_id it printed:
  curl -s %[1]s/v1/payments/initiate -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
    -d '{"hold_id":"<hold_id>","method":"WALLET","idempotency_key":"pay-'$(date +%%s)'"}'

Ctrl-C stops it.
`, a.URL(), res.Password, res.Journey.Format(time.DateOnly), a.PSPURL(), a.PRSURL(), cfg.SimAdminToken, a.MetricsURL(), a.MsgURL(), a.KYCURL())
	err = a.Run(ctx)
	fmt.Fprintln(out, "shutting down")
	return err
}

// simulate serves one simulator on addr until ctx ends, with run (if any)
// driving its simulated world beside it.
func simulate(ctx context.Context, name, addr string, srv *server, run func(context.Context) error, describe func(url string)) error {
	ln, err := listenURL(addr)
	if err != nil {
		return fmt.Errorf("%s simulator: %w", name, err)
	}
	srv.ln = ln
	describe(srv.url())
	g, gctx := errgroup.WithContext(ctx)
	if run != nil {
		g.Go(func() error { return run(gctx) })
	}
	g.Go(func() error { return srv.serve(gctx) })
	return g.Wait()
}

// PSP runs the payment gateway simulator on addr until ctx ends.
func PSP(ctx context.Context, cfg Config, addr string, out io.Writer) error {
	if err := cfg.RequireSecrets(NeedGateways); err != nil {
		return err
	}
	pool, err := openDB(ctx, cfg, cfg.Pool(20))
	if err != nil {
		return err
	}
	defer pool.Close()
	sim, err := pspsim.New(ctx, pspsim.Config{Pool: pool, AdminToken: cfg.SimAdminToken, BankToken: cfg.BankToken, Gateways: cfg.SimGateways(), PublicURL: addr})
	if err != nil {
		return err
	}
	defer sim.Close()
	return simulate(ctx, "psp", addr, &server{name: "psp", srv: httpx.NewServer(sim.Handler())}, sim.Run, func(url string) {
		fmt.Fprintf(out, "payment gateway simulator on %s (%s)\n", url, simAdminState(cfg))
	})
}

// PRS runs the reservation core simulator on addr until ctx ends.
func PRS(ctx context.Context, cfg Config, addr string, out io.Writer) error {
	if err := cfg.RequireSecrets(NeedPRSKey); err != nil {
		return err
	}
	pool, err := openDB(ctx, cfg, cfg.Pool(20))
	if err != nil {
		return err
	}
	defer pool.Close()
	sim, err := prssim.NewServer(ctx, prssim.ServerConfig{Pool: pool, APIKey: cfg.PRSKey, AdminToken: cfg.SimAdminToken})
	if err != nil {
		return err
	}
	return simulate(ctx, "prs", addr, &server{name: "prs", srv: httpx.NewServer(sim.Handler())}, nil, func(url string) {
		fmt.Fprintf(out, "reservation core simulator on %s (%s)\n", url, simAdminState(cfg))
	})
}

// Msg runs the messaging gateway simulator on addr until ctx ends.
func Msg(ctx context.Context, cfg Config, addr string, out io.Writer) error {
	if err := cfg.RequireSecrets(NeedMsgKey); err != nil {
		return err
	}
	pool, err := openDB(ctx, cfg, cfg.Pool(20))
	if err != nil {
		return err
	}
	defer pool.Close()
	sim, err := msgsim.New(ctx, msgsim.Config{Pool: pool, APIKey: cfg.MsgKey, AdminToken: cfg.SimAdminToken})
	if err != nil {
		return err
	}
	return simulate(ctx, "msg", addr, &server{name: "msg", srv: httpx.NewServer(sim.Handler())}, nil, func(url string) {
		fmt.Fprintf(out, "messaging gateway simulator on %s (%s)\n", url, simAdminState(cfg))
	})
}

// simAdminState says whether a simulator's fault API is on, never the token.
func simAdminState(cfg Config) string {
	if cfg.SimAdminToken == "" {
		return "admin API off: set " + EnvSimAdminToken + " to change faults"
	}
	return "admin API on, token from " + EnvSimAdminToken
}

// listenURL listens on a URL's host:port.
func listenURL(addr string) (net.Listener, error) {
	addr = strings.TrimPrefix(strings.TrimPrefix(addr, "http://"), "https://")
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ln, nil
}
