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
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"tatkal/booking"
	"tatkal/booking/payment/pspapi"
	"tatkal/booking/payment/pspsim"
	"tatkal/booking/teststack"
)

// Automatic resolutions go through the live payment path, once: a
// payment the gateway captured but we never heard of (its hold long gone)
// ends refunded by the late-success path; a second charge on a booked
// hold is refunded. Each resolution is first killed mid-job, then run four
// times at once (as retried or resumed jobs would), and each payment still
// gets one refund, at the gateway too; the day then reconciles clean.
func TestAutomaticResolutions(t *testing.T) {
	t.Parallel()
	var routes []pspapi.RouteConfig
	for _, gw := range pspsim.GatewayIDs {
		for _, m := range []string{pspapi.UPI, pspapi.Card, pspapi.NetBanking} {
			our := m
			if m == pspapi.NetBanking {
				our = "NB"
			}
			routes = append(routes, pspapi.RouteConfig{Gateway: gw, Method: m, AutoApproveMs: 5, ExpireAfterMs: 60000,
				FeeBps: DefaultContracts()[gw][our]})
		}
	}
	st := teststack.New(t, teststack.Options{Work: true, Routes: routes})
	ctx := context.Background()
	shard, journey := st.DemoShard(t, 20, 0)
	users := st.Users(t, "rz", 1)
	hooks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(hooks.Close)
	now := time.Now().In(booking.IST)
	keys := map[string]string{}
	for _, g := range st.Gateways {
		keys[g.ID] = g.APIKey
	}
	insertOnly, err := river.NewClient(riverpgxv5.New(st.Pool), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, ctx: ctx, env: st.Env, pspURL: st.PSP.URL, http: &http.Client{Timeout: 20 * time.Second}, hookURL: hooks.URL,
		day: time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, booking.IST), userID: users[0],
		shard: shardInfo{ID: shard, Journey: journey}, src: Sources{PSPURL: st.PSP.URL, GatewayKeys: keys}}
	var armed atomic.Bool
	reached := make(chan string, 1)
	w.svc = New(Config{Pool: st.Pool, Jobs: insertOnly, Pause: func(ctx context.Context, point string) {
		if armed.CompareAndSwap(true, false) {
			reached <- point
			<-ctx.Done()
		}
	}})
	// Our fixtures start just after midnight IST, so they are today's.
	w.start = time.Minute

	const gw = "swiftpay"
	m := w.make(
		spec{gateway: gw, method: "UPI", amount: 145000, ours: "UNKNOWN", captured: true}, // paid, not booked
		spec{gateway: gw, method: "CARD", amount: 165000, ours: "SUCCESS", captured: true, booked: true},
	)
	lost, kept := m[0], m[1]
	second := w.make(spec{gateway: gw, method: "CARD", amount: 165000, ours: "SUCCESS", captured: true, sameHold: kept, at: time.Minute})[0]
	// The lost payment's hold lapsed two hours ago: past the late grace, so
	// the late-success path refunds rather than retakes.
	w.must2(st.Pool.Exec(ctx, `UPDATE holds SET updated_at = now() - interval '2 hours' WHERE id = $1`, lost.Hold))

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
