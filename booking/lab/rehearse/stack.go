package rehearse

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"tatkal/booking"
	"tatkal/booking/app"
	"tatkal/booking/audit"
	"tatkal/booking/db"
	"tatkal/booking/inventory"
	"tatkal/booking/payment/pspapi"
	"tatkal/booking/prs"
	"tatkal/booking/redisx"
	"tatkal/booking/secrets"
	"tatkal/booking/sim/pspsim"
	"tatkal/console/levers"
)

// target is what a rehearsal runs against: the app's public URL, its
// database and Redis (for setting up and for the checks after), and the
// levers the faults pull.
type target struct {
	base     string
	pool     *pgxpool.Pool
	rdb      redis.UniversalClient
	prefix   string
	store    *inventory.Store
	pspURL   string
	prsURL   string
	simToken string
	app      *app.App // nil against --url
	// slow delays every hold at hold.begin while set (core-slow, own
	// stack only: it is this process's pause point).
	slow   atomic.Int64 // nanoseconds
	paused atomic.Bool  // controller outage: no new admissions
	close  func()
}

// HoldSlowdown is the delay added to every hold during core-slow: with
// the hold path's concurrency bounded, four times the service time is a
// quarter of the capacity.
const HoldSlowdown = 60 * time.Millisecond

// CoreSlowFaults is the reservation core's setting during core-slow.
var CoreSlowFaults = prs.Faults{LatencyMs: 300, JitterMs: 200}

// startOwn creates a scratch database (migrated) and Redis prefix and
// starts the whole process on free loopback ports: app, River workers,
// the waiting room's controller and both simulators. Close removes them.
// With inPlace it runs on cfg's own database and prefix instead, and
// leaves them (tatkal seed abuse's population stays for the analysts).
// The process trusts X-Forwarded-For from loopback: the driver plays
// the load balancer, so a traveller's address is the one it names.
func startOwn(ctx context.Context, cfg app.Config, log *slog.Logger, inPlace bool, routes []pspapi.RouteConfig) (*target, error) {
	cfg = cfg.WithDevSecrets()
	if len(cfg.SessionKey) == 0 {
		cfg.SessionKey, _ = hex.DecodeString(secrets.Random())
	}
	name := "tatkal_rehearse_" + randHex(6)
	if !inPlace {
		cfg.DatabaseURL = db.WithDatabase(cfg.DatabaseURL, name)
		cfg.RedisPrefix = "rh" + randHex(5)
	}
	cfg.Addr, cfg.MetricsAddr, cfg.PublicURL = "127.0.0.1:0", "off", ""
	cfg.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	if cfg.DBPool == 0 {
		cfg.DBPool = 30
	}
	if cfg.HoldWindow == 0 {
		cfg.HoldWindow = booking.DefaultRules().HoldWindow
	}
	cfg.CommitWriters = max(cfg.CommitWriters, 1)
	if err := db.CreateDatabase(ctx, cfg.DatabaseURL); err != nil {
		return nil, fmt.Errorf("scratch database: %w", err)
	}
	dropDB := func() { db.DropDatabase(cfg.DatabaseURL, name) }
	if inPlace {
		dropDB = func() {}
	}
	if err := app.Migrate(ctx, cfg, io.Discard); err != nil {
		dropDB()
		return nil, err
	}
	t := &target{prefix: cfg.RedisPrefix, simToken: cfg.SimAdminToken}
	a, err := app.New(ctx, cfg, app.Options{Work: true, Serve: true, Simulators: true, Log: log, SimRoutes: routes, SimSeed: 1,
		ChallengeBits: 10, RiskyExtraBits: 2, FunnelInterval: 500 * time.Millisecond,
		Pause: func(ctx context.Context, point string) {
			if d := time.Duration(t.slow.Load()); d > 0 && point == "hold.begin" {
				select {
				case <-time.After(d):
				case <-ctx.Done():
				}
			}
		}})
	if err != nil {
		dropDB()
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()
	select {
	case <-a.Ready():
	case err := <-done:
		cancel()
		a.Close()
		dropDB()
		return nil, fmt.Errorf("start the stack: %w", err)
	}
	t.base, t.pool, t.rdb, t.app = a.URL(), a.Pool, a.Redis, a
	t.store, t.pspURL, t.prsURL = a.Store, a.PSPURL(), a.PRSURL()
	t.close = func() {
		cancel()
		if err := <-done; err != nil {
			log.Warn("rehearsal stack stopped", "err", err)
		}
		if !inPlace {
			redisx.DeletePrefix(a.Redis, cfg.RedisPrefix)
		}
		a.Close()
		dropDB()
	}
	return t, nil
}

// attach rehearses against a running deployment at url, reaching its
// database and Redis through cfg; the simulators' faults need
// TATKAL_SIM_ADMIN_TOKEN, and core-slow is refused (its hold-path half is
// a pause point of the app's own process).
func attach(ctx context.Context, cfg app.Config, url string) (*target, error) {
	pool, err := app.OpenCurrent(ctx, cfg)
	if err != nil {
		return nil, err
	}
	opt, err := redis.ParseURL(cfg.RedisURL)
	if err != nil {
		pool.Close()
		return nil, err
	}
	rdb := redis.NewClient(opt)
	t := &target{base: strings.TrimRight(url, "/"), pool: pool, rdb: rdb, prefix: cfg.RedisPrefix, store: inventory.New(rdb, cfg.RedisPrefix),
		pspURL: cfg.PSPURL, prsURL: cfg.PRSURL, simToken: cfg.SimAdminToken}
	t.close = func() { rdb.Close(); pool.Close() } //nolint:errcheck
	return t, nil
}

// admin sends one call to a simulator's admin API.
func (t *target) admin(ctx context.Context, base, path string, body any) error {
	if t.simToken == "" {
		return errors.New("the simulators' admin API needs " + app.EnvSimAdminToken)
	}
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, "PUT", base+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+t.simToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("simulator admin %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		msg, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("simulator admin %s: %d %s", path, resp.StatusCode, msg)
	}
	return nil
}

// degradedRoutes is gateway degradation: one in four declined, one in
// ten timing out, one in five callbacks lost, four times the latency.
func degradedRoutes() []pspapi.RouteConfig {
	rs := pspsim.DefaultRoutes()
	for i := range rs {
		r := &rs[i]
		r.AutoApproveMs, r.AbandonRate, r.ExpireAfterMs = -1, 0, customerExpiry
		r.LateSuccessMs = min(r.LateSuccessMs, bankLateMs)
		r.DeclineRate, r.TimeoutRate, r.LostCallbackRate = 0.25, 0.1, 0.2
		r.LatencyP50Ms, r.LatencyP99Ms = r.LatencyP50Ms*4, r.LatencyP99Ms*4
	}
	return rs
}

// customerExpiry is how long a rehearsal's customer has on the bank's
// page: a payment abandoned when the window ends resolves in the drain.
const customerExpiry = 30000

// bankLateMs is when a bank's late success arrives in a rehearsal. A real
// bank may take ten minutes (the simulator's default), far past any drain:
// the three in a thousand such payments stayed PENDING_AT_BANK at the
// bank, correctly, and were counted unresolved. At 25 s they still come
// after the customer's approval and the first inquiries, which must keep
// asking, and they resolve inside the drain.
const bankLateMs = 25000

// normalRoutes are the rehearsal's routes outside a fault: the gateway
// decides nothing for the customer (each traveller's seeded decision), so
// nobody is approved for them.
func normalRoutes() []pspapi.RouteConfig {
	rs := pspsim.DefaultRoutes()
	for i := range rs {
		rs[i].AutoApproveMs, rs[i].AbandonRate, rs[i].DeclineRate, rs[i].ExpireAfterMs = -1, 0, 0, customerExpiry
		rs[i].LateSuccessMs = min(rs[i].LateSuccessMs, bankLateMs)
	}
	return rs
}

// cleanRoutes are routes without faults, where the customer decides on
// the page: an abuse population's payments are not what it measures.
func cleanRoutes() []pspapi.RouteConfig {
	rs := normalRoutes()
	for i := range rs {
		r := &rs[i]
		r.TimeoutRate, r.PendingRate, r.LateSuccessRate, r.LostCallbackRate, r.DuplicateCallbackRate = 0, 0, 0, 0, 0
	}
	return rs
}

// callsPerAdmission are the backend calls an admitted traveller makes: a
// hold and a payment, doubled for holds that find the berths gone and
// retries (queue mode measured 4.5 backend calls per booking).
const callsPerAdmission = 4

// meterAdmission sets the shard's admission_rate lever (audited as the
// rehearsal's) to what capacity serves: capacity / callsPerAdmission
// admissions a second. seeds/001 derives its queue's admission rate from
// the PRS capacity it takes as an input, and cuts both together in a
// fault ("ideal immediate feedback"); so does the lab, as an operator who
// knows the backend's capacity would before the opening. Left to the
// adaptive rate, queue mode admitted 50 a second from the draw, which sent
// 164 calls a second against 100, and the calls of those admitted before a
// fault ran into its first second (28 against 25); the adaptive rate is
// the controller's own tests' subject.
func (t *target) meterAdmission(ctx context.Context, shardID int64, capacity float64) error {
	return setLeverValue(ctx, t.pool, shardID, levers.AdmissionRate, strconv.Itoa(max(int(capacity/callsPerAdmission), 1)))
}

// throttleFor is the shard_throttle value that keeps hold and payment
// calls together within capacity a second: the lever gives holds and
// payment initiations a budget each, and any one second may pass rate+1
// of each.
func throttleFor(capacity float64) int {
	return max(int((capacity-2)/2), 1)
}

// pull starts (on) or ends a fault on shard; capacity is the backend's
// (Options.Capacity).
func (t *target) pull(ctx context.Context, f Fault, shardID int64, on bool, capacity float64) error {
	switch f.Name {
	case FaultCoreSlow:
		if t.app == nil {
			return errors.New("core-slow needs the rehearsal's own stack (no --url)")
		}
		faults := prs.Faults{}
		// The waiting room is told, as seeds/001's "ideal immediate
		// feedback" cuts its admission rate with the capacity: the shard's
		// admission_rate lever (the operator's) admits what a quarter of the
		// capacity serves. The adaptive rate alone reacts only once holds are
		// slow, after the draw's first admissions have gone through at once.
		throttle := "off"
		if on {
			faults = CoreSlowFaults
			t.slow.Store(int64(HoldSlowdown))
			capacity /= 4
			throttle = strconv.Itoa(throttleFor(capacity))
		} else {
			t.slow.Store(0)
		}
		if err := t.meterAdmission(ctx, shardID, capacity); err != nil {
			return err
		}
		// seeds/001 cuts the service rate too: the core serves a quarter,
		// and the calls over it are refused at the door (origin traffic).
		// The queue meters admissions, not calls already in flight: the
		// travellers admitted before the fault still hold and pay in its
		// first second.
		if err := setLeverValue(ctx, t.pool, shardID, levers.ShardThrottle, throttle); err != nil {
			return err
		}
		// "Ideal immediate feedback": the own stack sees the levers now,
		// not at its reader's next half-second refresh (which let 29
		// calls reach the core in the fault's first second against 25).
		t.app.Levers.Refresh(ctx)
		return t.admin(ctx, t.prsURL, "/admin/faults", faults)
	case FaultGateway:
		rs := normalRoutes()
		if on {
			rs = degradedRoutes()
		}
		for _, r := range rs {
			if err := t.admin(ctx, t.pspURL, "/admin/routes/"+r.Gateway+"/"+r.Method, r); err != nil {
				return err
			}
		}
		return nil
	case FaultRedis:
		if on {
			return t.store.Wipe(ctx, shardID)
		}
		return nil // the sweeper rebuilds it
	case FaultController:
		t.paused.Store(on)
		return setLever(ctx, t.pool, shardID, on)
	}
	return fmt.Errorf("unknown fault %q", f.Name)
}

// setLever sets the admission_paused lever of the shard (see
// setLeverValue).
func setLever(ctx context.Context, pool *pgxpool.Pool, shardID int64, on bool) error {
	v := "off"
	if on {
		v = "on"
	}
	return setLeverValue(ctx, pool, shardID, levers.AdmissionPaused, v)
}

// setLeverValue sets a lever of the shard where every process's lever
// reader finds it, recorded and audited as the rehearsal's change;
// sandbox shards only, never a real window.
func setLeverValue(ctx context.Context, pool *pgxpool.Pool, shardID int64, name, v string) error {
	scope := "shard:" + strconv.FormatInt(shardID, 10)
	return db.Transact(ctx, pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO console_levers (name, scope, value, updated_by, updated_at)
			SELECT $4, $2, $3, 'rehearsal', now() FROM inventory_shards WHERE id = $1 AND sandbox
			ON CONFLICT (name, scope) DO UPDATE SET value = EXCLUDED.value, updated_by = EXCLUDED.updated_by, updated_at = now()`,
			shardID, scope, v, name)
		if err != nil {
			return fmt.Errorf("set %s: %w", name, err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("shard %d is not a sandbox shard: the rehearsal pulls no lever on it", shardID)
		}
		return audit.Write(ctx, tx, "rehearsal", "rehearsal.fault", name+" "+scope, map[string]any{"value": v})
	})
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) //nolint:errcheck
	return hex.EncodeToString(b)
}
