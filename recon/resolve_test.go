package recon

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"tatkal/booking"
	"tatkal/booking/auth"
	"tatkal/booking/india"
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/payment"
)

// The resolution tests run on the app's own graph: booking/teststack,
// which imports this package (through booking/app and the console), so
// the tests themselves (TestAutomaticResolutions, ...) are in package
// recon_test (resolve_stack_test.go) and hand their bodies here a way to
// start app processes.

// Proc is one app process of a live stack, as booking/app builds it.
type Proc struct {
	Env      *testenv.Env
	Service  *booking.Service
	Payments *payment.Service
	Recon    *Service
	River    *river.Client[pgx.Tx]
	PSPURL   string // the gateways' simulator, shared by every process
	Gateways []payment.GatewayConfig
}

// ProcOptions say how a process runs: Resolver works recon's resolution
// jobs, Pause is its pause hook (booking.PauseFunc, recon's points among
// them), RescueAfter how soon its River retries a job left running by a
// dead process (zero: River's default).
type ProcOptions struct {
	Resolver    bool
	Pause       booking.PauseFunc
	RescueAfter time.Duration
}

// StartProc starts an app process with River workers on the test's
// database; the first one runs the simulators, the others use them.
type StartProc func(*testing.T, ProcOptions) *Proc

// demoShard seeds one open shard of train 12951 3A, loaded in Redis.
func (p *Proc) demoShard(t *testing.T, berths int) (int64, time.Time) {
	t.Helper()
	ctx := context.Background()
	open := -time.Minute
	if _, err := seed.Demo(ctx, p.Env.Pool, seed.DemoOptions{OpensIn: &open}); err != nil {
		t.Fatalf("seed demo: %v", err)
	}
	date := time.Now().In(booking.IST).AddDate(0, 0, 5)
	date = time.Date(date.Year(), date.Month(), date.Day(), 0, 0, 0, 0, booking.IST)
	waitlist := 0
	id, err := seed.Shard(ctx, p.Env.Pool, seed.ShardSpec{Train: "12951", Date: date, Class: "3A", Berths: berths,
		OpensAt: time.Now().Add(-time.Minute), WaitlistCap: &waitlist})
	if err != nil {
		t.Fatalf("seed shard: %v", err)
	}
	if _, err := p.Service.Rebuild(ctx, id); err != nil {
		t.Fatalf("load shard: %v", err)
	}
	return id, date
}

func (p *Proc) user(t *testing.T, prefix string) int64 {
	t.Helper()
	hash, err := auth.HashPassword("pw-"+prefix, auth.Argon2Params{MemoryKiB: 64, Time: 1, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := seed.Users(context.Background(), p.Env.Pool, seed.UsersSpec{Count: 1, Prefix: prefix, PasswordHash: hash})
	if err != nil {
		t.Fatalf("seed users: %v", err)
	}
	return ids[0]
}

// liveWorld is a world over a live stack, its fixtures today's, its
// recon service the process's.
func liveWorld(t *testing.T, p *Proc, prefix string) *world {
	t.Helper()
	shard, journey := p.demoShard(t, 20)
	hooks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(hooks.Close)
	now := time.Now().In(booking.IST)
	keys := map[string]string{}
	for _, g := range p.Gateways {
		keys[g.ID] = g.APIKey
	}
	w := &world{t: t, ctx: context.Background(), env: p.Env, svc: p.Recon, pspURL: p.PSPURL, http: &http.Client{Timeout: 20 * time.Second}, hookURL: hooks.URL,
		day: time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, booking.IST), userID: p.user(t, prefix),
		shard: shardInfo{ID: shard, Journey: journey}, src: Sources{PSPURL: p.PSPURL, GatewayKeys: keys}}
	// Our fixtures start just after midnight IST, so they are today's.
	w.start = time.Minute
	return w
}

// AutomaticResolutions is TestAutomaticResolutions: automatic
// resolutions go through the live payment path, once: a
// payment the gateway captured but we never heard of (its hold long gone)
// ends refunded by the late-success path; a second charge on a booked
// hold is refunded. Each resolution is first killed mid-job, then run four
// times at once (as retried or resumed jobs would), and each payment still
// gets one refund, at the gateway too; the day then reconciles clean.
//
// The test's recon service enqueues its resolutions with an insert-only
// client, so no process works them: the test runs them itself, and its
// pause hook holds one at recon's first pause point once armed.
func AutomaticResolutions(t *testing.T, start StartProc) {
	st := start(t, ProcOptions{})
	ctx := context.Background()
	pool := st.Env.Pool
	insertOnly, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	w := liveWorld(t, st, "rz")
	var armed atomic.Bool
	reached := make(chan string, 1)
	w.svc = New(Config{Pool: pool, Jobs: insertOnly, Pause: func(ctx context.Context, point string) {
		if armed.CompareAndSwap(true, false) {
			reached <- point
			<-ctx.Done()
		}
	}})

	const gw = "swiftpay"
	m := w.make(
		spec{gateway: gw, method: "UPI", amount: 145000, ours: "UNKNOWN", captured: true}, // paid, not booked
		spec{gateway: gw, method: "CARD", amount: 165000, ours: "SUCCESS", captured: true, booked: true},
	)
	lost, kept := m[0], m[1]
	second := w.make(spec{gateway: gw, method: "CARD", amount: 165000, ours: "SUCCESS", captured: true, sameHold: kept, at: time.Minute})[0]
	// The lost payment's hold lapsed two hours ago: past the late grace, so
	// the late-success path refunds rather than retakes.
	w.must2(pool.Exec(ctx, `UPDATE holds SET updated_at = now() - interval '2 hours' WHERE id = $1`, lost.Hold))

	_, err = w.svc.FetchSettlement(ctx, w.src, gw, w.day, "job:test")
	w.must(err)
	sum, err := w.svc.Run(ctx, RunRequest{Gateway: gw, Date: w.day, By: "finance1"})
	w.must(err)
	ex := w.exceptions(gw)
	if len(ex) != 2 || sum.Exceptions != 2 {
		t.Fatalf("exceptions %+v", ex)
	}
	for _, e := range ex {
		var wantPay uuid.UUID
		switch e.Kind {
		case PaidNotBooked:
			wantPay = lost.ID
		case DuplicateCharge:
			wantPay = second.ID
		default:
			t.Fatalf("unexpected %s %s", e.Kind, e.Ref)
		}
		if e.PaymentID == nil || *e.PaymentID != wantPay || e.Path != PathAuto {
			t.Fatalf("%s: %+v", e.Kind, e)
		}
		// A first attempt dies at its pause point (the worker killed mid-job):
		// the exception stays open, and the retries below finish it once.
		armed.Store(true)
		kctx, kill := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() { errc <- w.svc.Resolve(kctx, e.ID, st.Payments, st.Service) }()
		point := <-reached
		kill()
		if err := <-errc; err == nil {
			t.Fatalf("%s: the killed attempt at %s succeeded", e.Kind, point)
		}
		if got, _ := w.svc.Exception(ctx, e.ID); got.State != StateOpen {
			t.Fatalf("%s: killed at %s, the exception is %s", e.Kind, point, got.State)
		}
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				if err := w.svc.Resolve(ctx, e.ID, st.Payments, st.Service); err != nil {
					t.Errorf("resolve %s: %v", e.Kind, err)
				}
			})
		}
		wg.Wait()
	}

	// Every payment of the day ends a ticket or a refund: the two extra
	// charges refunded at the gateway, once each.
	deadline := time.Now().Add(30 * time.Second)
	for {
		done := w.count(`SELECT count(*) FROM payments WHERE id = ANY($1) AND state = 'REFUNDED'`, []uuid.UUID{lost.ID, second.ID})
		if done == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 2 refunded", done)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := w.count(`SELECT count(*) FROM refunds WHERE payment_id = ANY($1)`, []uuid.UUID{lost.ID, second.ID, kept.ID}); n != 2 {
		t.Fatalf("%d refunds", n)
	}
	if n := w.count(`SELECT count(*) FROM psp.refunds WHERE psp_ref = ANY($1)`, []string{lost.PSPRef, second.PSPRef, kept.PSPRef}); n != 2 {
		t.Fatalf("%d refunds at the gateway", n)
	}
	if n := w.count(`SELECT count(*) FROM refunds r JOIN payments p ON p.id = r.payment_id WHERE p.id = $1 AND r.reason = 'LATE_SUCCESS_NO_SEAT'`, lost.ID); n != 1 {
		t.Fatal("the lost payment was not refunded by the late-success path")
	}
	if n := w.count(`SELECT count(*) FROM bookings WHERE hold_id = $1`, kept.Hold); n != 1 {
		t.Fatal("the kept charge lost its ticket")
	}
	for _, e := range w.exceptions(gw) {
		if e.State != StateResolved || len(e.Resolution) < 5 || e.Resolution[:5] != "AUTO_" {
			t.Fatalf("%s: %s %s", e.Kind, e.State, e.Resolution)
		}
		if n := w.count(`SELECT count(*) FROM reconciliation_exception_events WHERE exception_id = $1 AND to_state = 'RESOLVED'`, e.ID); n != 1 {
			t.Fatalf("%s resolved %d times", e.Kind, n)
		}
	}

	// The refunds are in the gateway's file now; the day reconciles with
	// nothing left open.
	_, err = w.svc.FetchSettlement(ctx, w.src, gw, w.day, "job:test")
	w.must(err)
	_, err = w.svc.Run(ctx, RunRequest{Gateway: gw, Date: w.day, By: "finance1"})
	w.must(err)
	open, err := w.svc.Exceptions(ctx, Filter{State: "UNRESOLVED"})
	w.must(err)
	if len(open) != 0 {
		t.Fatalf("still open: %+v", open)
	}
}

// ResolutionWorkerKilled is TestResolutionWorkerKilled: an automatic resolution runs as a River job
// in an app process that is stopped mid-job, after the money moved and
// before the exception closed (the pause hook holds it there); a second
// process picks the job up. The resolution happens exactly once: one
// refund here and at the gateway, one RESOLVED in the history. Afterwards
// every payment of the day is a ticket or a refund, and the day's books
// balance to the paisa with nothing pending.
func ResolutionWorkerKilled(t *testing.T, start StartProc) {
	ctx := context.Background()
	reached := make(chan string, 1)
	// Process A works the resolution and dies at its pause point: the job
	// never returns, so A's River never records it (as a killed process
	// would not), and the rest of the resolution never runs there.
	release := make(chan struct{})
	a := start(t, ProcOptions{Resolver: true, Pause: func(ctx context.Context, point string) {
		if point == "recon.resolve.after-effect" {
			select {
			case reached <- point:
			default:
			}
			<-release
			panic("process A is dead")
		}
	}})
	t.Cleanup(func() { close(release) })
	w := liveWorld(t, a, "wk")
	pool := a.Env.Pool

	const gw = "swiftpay"
	m := w.make(
		spec{gateway: gw, method: "UPI", amount: 145000, ours: "UNKNOWN", captured: true}, // paid, not booked
		spec{gateway: gw, method: "CARD", amount: 165000, ours: "SUCCESS", captured: true, booked: true},
		spec{gateway: gw, method: "UPI", amount: 98000, ours: "SUCCESS", captured: true, booked: true},
	)
	lost := m[0]
	w.must2(pool.Exec(ctx, `UPDATE holds SET updated_at = now() - interval '2 hours' WHERE id = $1`, lost.Hold))
	_, err := w.svc.FetchSettlement(ctx, w.src, gw, w.day, "job:test")
	w.must(err)
	if _, err := w.svc.Run(ctx, RunRequest{Gateway: gw, Date: w.day, By: "finance1"}); err != nil {
		t.Fatal(err)
	}
	ex := w.exceptions(gw)
	if len(ex) != 1 || ex[0].Kind != PaidNotBooked {
		t.Fatalf("exceptions %+v", ex)
	}
	e := ex[0]

	// A reaches the pause with the money moved, and its process stops.
	select {
	case <-reached:
	case <-time.After(30 * time.Second):
		t.Fatal("the resolution job never reached its pause point")
	}
	if n := w.count(`SELECT count(*) FROM refunds WHERE payment_id = $1`, lost.ID); n != 1 {
		t.Fatalf("at the pause: %d refunds, want the money moved once", n)
	}
	stopCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	a.River.StopAndCancel(stopCtx) //nolint:errcheck // its job does not return: the stop gives up on it
	cancel()
	// A dead process's connections die with it: PostgreSQL ends the
	// resolution's transaction, which held the exception's lock.
	w.must2(pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND state LIKE 'idle in transaction%' AND pid <> pg_backend_pid()`))
	if got, _ := w.svc.Exception(ctx, e.ID); got.State != StateOpen {
		t.Fatalf("after the kill the exception is %s, want OPEN", got.State)
	}

	// Process B rescues the job A left running and finishes it.
	start(t, ProcOptions{Resolver: true, RescueAfter: 5 * time.Second})
	deadline := time.Now().Add(90 * time.Second) // River's rescuer looks every 30 s
	for {
		got, err := w.svc.Exception(ctx, e.ID)
		w.must(err)
		if got.State == StateResolved {
			if got.Resolution != "AUTO_REFUND" {
				t.Fatalf("resolved as %s, want AUTO_REFUND", got.Resolution)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the resumed job never resolved it: %s", got.State)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := w.count(`SELECT count(*) FROM reconciliation_exception_events WHERE exception_id = $1 AND to_state = 'RESOLVED'`, e.ID); n != 1 {
		t.Fatalf("resolved %d times", n)
	}
	// River records the second attempt's completion after the resolution commits.
	for {
		var jobState string
		var attempts int
		w.must(pool.QueryRow(ctx, `SELECT state, attempt FROM river_job WHERE kind = 'recon_resolve'`).Scan(&jobState, &attempts))
		if jobState == "completed" {
			if attempts != 2 {
				t.Fatalf("the resolution job completed on attempt %d, want the second (A's was killed)", attempts)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the resolution job is %s after %d attempts", jobState, attempts)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The refund reaches the gateway once; every payment is a ticket or a refund.
	for {
		if w.count(`SELECT count(*) FROM payments WHERE id = $1 AND state = 'REFUNDED'`, lost.ID) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the refund never completed")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := w.count(`SELECT count(*) FROM psp.refunds WHERE psp_ref = $1`, lost.PSPRef); n != 1 {
		t.Fatalf("%d refunds at the gateway", n)
	}
	if n := w.count(`SELECT count(*) FROM payments p WHERE p.initiated_at >= $1 AND p.initiated_at < $2 AND NOT (
			EXISTS (SELECT 1 FROM bookings b WHERE b.hold_id = p.hold_id) OR EXISTS (SELECT 1 FROM refunds r WHERE r.payment_id = p.id))`,
		w.day, w.day.AddDate(0, 0, 1)); n != 0 {
		t.Fatalf("%d payments of the day are neither a ticket nor a refund", n)
	}
	bk, err := w.svc.Books(ctx, w.day, "")
	w.must(err)
	want := int64(145000 + 165000 + 98000)
	if bk.Paise[TermCollected] != want || bk.Paise[TermTickets] != 165000+98000 || bk.Paise[TermRefunds] != 145000 ||
		bk.Paise[TermPending] != 0 || bk.Difference != 0 {
		t.Fatalf("books %+v, want ₹%s collected = tickets + the refund, nothing pending", bk, india.Decimal(want))
	}
	lines, err := w.svc.BookLines(ctx, w.day, "", TermRefunds, 10, 0)
	w.must(err)
	if len(lines) != 1 || lines[0].PaymentID != lost.ID {
		t.Fatalf("refund lines %+v", lines)
	}
}
