package recon

import (
	"context"
	"fmt"
	"log/slog"
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
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/payment/pspapi"
	"tatkal/booking/prs"
	"tatkal/booking/sim/prssim"
	"tatkal/booking/sim/pspsim"
)

const (
	pspAdmin = "psp-admin"
	bankCred = "bank-credential"
	prsKey   = "prs-key"
	prsAdmin = "prs-admin"
)

// world is one test's back office: a fresh database, the gateway and core
// simulators as real HTTP servers, our tables seeded by fixtures, and the
// recon service with an insert-only River client.
type world struct {
	t       *testing.T
	ctx     context.Context
	env     *testenv.Env
	svc     *Service
	river   *river.Client[pgx.Tx]
	pspURL  string
	prsURL  string
	core    *prs.Client
	src     Sources
	day     time.Time     // the business date, midnight IST
	start   time.Duration // when in the day our fixtures' payments start
	shard   shardInfo
	userID  int64
	seq     atomic.Int64
	http    *http.Client
	hookURL string
}

type shardInfo struct {
	ID                  int64
	Train, Class, Quota string
	From, To            string
	Journey             time.Time
}

// day0 is a Wednesday, so T+1 and T+2 are plain business days.
var day0 = time.Date(2025, 6, 4, 0, 0, 0, 0, booking.IST)

func newWorld(t *testing.T) *world {
	t.Helper()
	env := testenv.New(t)
	ctx := context.Background()
	w := &world{t: t, ctx: ctx, env: env, day: day0, start: 11 * time.Hour, http: &http.Client{Timeout: 20 * time.Second}}
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))

	// The gateway simulator's clock runs from noon of the business date.
	start := time.Now()
	clock := func() time.Time { return day0.Add(12 * time.Hour).Add(time.Since(start)) }
	var routes []pspapi.RouteConfig
	for gw, fees := range DefaultContracts() {
		for our, bps := range fees {
			m := our
			if m == "NB" {
				m = pspapi.NetBanking
			}
			routes = append(routes, pspapi.RouteConfig{Gateway: gw, Method: m, AutoApproveMs: 5, ExpireAfterMs: 60000, FeeBps: bps})
		}
	}
	gateways := pspsim.NewGateways()
	psp, err := pspsim.New(ctx, pspsim.Config{Pool: env.Pool, AdminToken: pspAdmin, BankToken: bankCred, Gateways: gateways, Routes: routes, Seed: 42, Now: clock, Log: log,
		Tick: 10 * time.Millisecond, RefundDelay: 10 * time.Millisecond, WebhookMaxAttempts: 1, HTTPClient: &http.Client{Timeout: time.Second}})
	if err != nil {
		t.Fatalf("psp simulator: %v", err)
	}
	pts := httptest.NewServer(psp.Handler())
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); psp.Run(runCtx) }() //nolint:errcheck
	core, err := prssim.NewServer(ctx, prssim.ServerConfig{Pool: env.Pool, APIKey: prsKey, AdminToken: prsAdmin, Log: log, Seed: 1})
	if err != nil {
		t.Fatalf("core simulator: %v", err)
	}
	cts := httptest.NewServer(core.Handler())
	hooks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	t.Cleanup(func() {
		stop()
		<-done
		psp.Close()
		pts.Close()
		cts.Close()
		hooks.Close()
	})
	w.pspURL, w.prsURL, w.hookURL = pts.URL, cts.URL, hooks.URL
	w.core = prs.NewClient(cts.URL, prsKey, w.http)
	keys := map[string]string{}
	for _, g := range gateways {
		keys[g.ID] = g.APIKeys[0]
	}
	w.src = Sources{HTTP: w.http, PSPURL: pts.URL, GatewayKeys: keys, BankToken: bankCred, CoreURL: cts.URL, CoreKey: prsKey}

	rc, err := river.NewClient(riverpgxv5.New(env.Pool), &river.Config{})
	if err != nil {
		t.Fatalf("river: %v", err)
	}
	w.river = rc
	w.svc = New(Config{Pool: env.Pool, Jobs: rc, Log: log})

	demo, err := seed.Demo(ctx, env.Pool, seed.DemoOptions{JourneyDate: day0.AddDate(0, 0, 1)})
	if err != nil {
		t.Fatalf("seed: %v", err)
	}
	sh := demo.Shards[0]
	w.shard = shardInfo{ID: sh.ID, Train: sh.Train, Class: sh.Class, Quota: sh.Quota, Journey: demo.JourneyDate}
	w.must(env.Pool.QueryRow(ctx, `SELECT (SELECT station_code FROM train_stops WHERE train_number = $1 AND seq = 0),
		(SELECT station_code FROM train_stops WHERE train_number = $1 AND seq = 1)`, sh.Train).Scan(&w.shard.From, &w.shard.To))
	users, err := seed.Users(ctx, env.Pool, seed.UsersSpec{Count: 1, Prefix: "rc" + uuid.NewString()[:6], PasswordHash: "x"})
	if err != nil {
		t.Fatalf("users: %v", err)
	}
	w.userID = users[0]
	return w
}

func (w *world) must(err error) {
	w.t.Helper()
	if err != nil {
		w.t.Fatal(err)
	}
}

// spec describes one of our payments and what became of it everywhere.
type spec struct {
	gateway  string
	method   string // UPI, CARD, NB
	amount   int64
	ours     string // our payment state
	captured bool   // the gateway captured it
	booked   bool   // a booking exists for its hold (made by this payment)
	synced   bool   // the booking was sent to the core
	refund   int64  // a refund of this much, processed by the gateway and by us
	sameHold *made  // pay for another payment's hold (a second charge)
	topup    bool   // a wallet top-up through the gateway: no hold
	at       time.Duration
}

// made is what a fixture created.
type made struct {
	ID        uuid.UUID
	Hold      uuid.UUID
	Amount    int64
	PSPRef    string
	RefundID  uuid.UUID
	RefundRef string
	Refund    int64
	PNR       string
	BookingID int64
}

// clean is a payment that went right: captured, booked, synced.
func clean(gw, method string, amount int64) spec {
	return spec{gateway: gw, method: method, amount: amount, ours: "SUCCESS", captured: true, booked: true, synced: true}
}

// make creates the specs concurrently (the gateway's part over HTTP).
func (w *world) make(specs ...spec) []*made {
	w.t.Helper()
	out := make([]*made, len(specs))
	var wg sync.WaitGroup
	errs := make([]error, len(specs))
	for i, s := range specs {
		if s.sameHold != nil {
			continue // after their first payment exists
		}
		wg.Go(func() { out[i], errs[i] = w.make1(s) })
	}
	wg.Wait()
	for i, s := range specs {
		if s.sameHold != nil {
			out[i], errs[i] = w.make1(s)
		}
	}
	for _, err := range errs {
		if err != nil {
			w.t.Fatal(err)
		}
	}
	return out
}

func (w *world) make1(s spec) (*made, error) {
	ctx := w.ctx
	n := w.seq.Add(1)
	m := &made{ID: uuid.Must(uuid.NewV7()), Amount: s.amount}
	initiated := w.day.Add(w.start + time.Duration(n)*time.Second + s.at)
	var hold *uuid.UUID
	purpose := "HOLD"
	switch {
	case s.topup:
		purpose = "TOPUP"
	case s.sameHold != nil:
		m.Hold = s.sameHold.Hold
	default:
		m.Hold = uuid.Must(uuid.NewV7())
		state := "EXPIRED"
		if s.booked {
			state = "CONFIRMED"
		}
		if _, err := w.env.Pool.Exec(ctx, `INSERT INTO holds (id, shard_id, user_id, idempotency_key, kind, from_seq, to_seq, seat_count, berths,
			passengers, fare_paise, fare_breakup, state, epoch, opening_day, created_at, expires_at)
			VALUES ($1, $2, $3, $4, 'SEAT', 0, 1, 1, ARRAY[$5::int], '[]', $6, '{}', $7, 1, $8, $9, $9)`,
			m.Hold, w.shard.ID, w.userID, "k"+m.Hold.String(), n, s.amount, state, w.day, initiated); err != nil {
			return nil, fmt.Errorf("hold: %w", err)
		}
	}
	if !s.topup {
		hold = &m.Hold
	}
	var resolved *time.Time
	if s.ours == "SUCCESS" || s.ours == "FAILED" || s.ours == "REFUNDED" {
		r := initiated.Add(time.Minute)
		resolved = &r
	}
	if _, err := w.env.Pool.Exec(ctx, `INSERT INTO payments (id, hold_id, user_id, psp, route, method, amount_paise, state, idempotency_key,
		deadline, initiated_at, resolved_at, purpose) VALUES ($1, $2, $3, $4, $5, $5, $6, $7, $8, $9, $9, $10, $11)`,
		m.ID, hold, w.userID, s.gateway, s.method, s.amount, s.ours, "p"+m.ID.String(), initiated, resolved, purpose); err != nil {
		return nil, fmt.Errorf("payment: %w", err)
	}
	if s.captured {
		ref, err := w.capture(s.gateway, s.method, m.ID.String(), s.amount)
		if err != nil {
			return nil, err
		}
		m.PSPRef = ref
		if s.ours != "UNKNOWN" && s.ours != "INITIATED" {
			w.must2(w.env.Pool.Exec(ctx, `UPDATE payments SET psp_ref = $2 WHERE id = $1`, m.ID, ref))
		}
	}
	if s.booked {
		m.PNR = fmt.Sprintf("8%09d", 100000000+n*7919%899999999)
		if err := w.env.Pool.QueryRow(ctx, `INSERT INTO bookings (pnr, hold_id, user_id, shard_id, from_seq, to_seq, status, fare_paise, booked_at, prs_state)
			VALUES ($1, $2, $3, $4, 0, 1, 'CONFIRMED', $5, $6, $7) RETURNING id`, m.PNR, m.Hold, w.userID, w.shard.ID, s.amount,
			initiated.Add(time.Minute), map[bool]string{true: "SYNCED", false: "PENDING"}[s.synced]).Scan(&m.BookingID); err != nil {
			return nil, fmt.Errorf("booking: %w", err)
		}
		if _, err := w.env.Pool.Exec(ctx, `INSERT INTO booking_passengers (booking_id, seq, shard_id, name, age, gender, berth_idx, coach,
			berth_no, berth_type, from_seq, to_seq, status) VALUES ($1, 1, $2, 'A PASSENGER', 40, 'F', $3, 'B1', $4, 'LB', 0, 1, 'CONFIRMED')`,
			m.BookingID, w.shard.ID, n, n); err != nil {
			return nil, fmt.Errorf("passenger: %w", err)
		}
		if s.synced {
			if _, err := w.core.Sync(ctx, prs.Booking{PNR: m.PNR, Train: w.shard.Train, JourneyDate: w.shard.Journey.Format(time.DateOnly),
				Class: w.shard.Class, Quota: w.shard.Quota, From: w.shard.From, To: w.shard.To, FromSeq: 0, ToSeq: 1,
				Status: prs.StatusConfirmed, FarePaise: s.amount,
				Passengers: []prs.Passenger{{Seq: 1, Name: "A PASSENGER", Age: 40, Gender: "F", Coach: "B1", BerthNo: int(n), BerthType: "LB"}}}); err != nil {
				return nil, fmt.Errorf("core sync: %w", err)
			}
		}
	}
	if s.refund > 0 {
		m.RefundID, m.Refund = uuid.Must(uuid.NewV7()), s.refund
		ref, err := w.refundAtGateway(s.gateway, m.PSPRef, m.RefundID.String(), s.refund)
		if err != nil {
			return nil, err
		}
		m.RefundRef = ref
		if _, err := w.env.Pool.Exec(ctx, `INSERT INTO refunds (id, payment_id, reason, amount_paise, state, gateway_ref, initiated_at, completed_at)
			VALUES ($1, $2, 'SYSTEM', $3, 'PROCESSED', $4, $5, $5)`, m.RefundID, m.ID, s.refund, ref, initiated.Add(2*time.Minute)); err != nil {
			return nil, fmt.Errorf("refund: %w", err)
		}
	}
	return m, nil
}

func (w *world) must2(_ any, err error) { w.must(err) }

// call makes a JSON request to a simulator.
func (w *world) call(method, url, token, key string, body, out any) error {
	r, err := testenv.Do(testenv.Request{Ctx: w.ctx, Client: w.http, Method: method, URL: url, Token: token, Body: body,
		Header: map[string]string{pspapi.HeaderIdempotencyKey: key}})
	if err != nil {
		return err
	}
	if r.Status >= 300 {
		return fmt.Errorf("%s %s: %d %v", method, url, r.Status, r.JSON)
	}
	if out != nil {
		return r.Decode(out)
	}
	return nil
}

func (w *world) key(gw string) string { return w.src.GatewayKeys[gw] }

// capture creates a payment at the gateway and waits for the customer's
// (automatic) approval.
func (w *world) capture(gw, method, merchantRef string, amount int64) (string, error) {
	m := method
	req := pspapi.CreatePayment{MerchantRef: merchantRef, AmountPaise: amount, Currency: "INR", Method: m,
		CallbackURL: w.hookURL + "/cb", ReturnURL: w.hookURL + "/ret"}
	switch method {
	case "UPI":
		req.VPA = "someone@okbank"
	case "NB":
		req.Method, req.Bank = pspapi.NetBanking, "HDFC"
	}
	var p pspapi.Payment
	if err := w.call("POST", w.pspURL+"/gw/"+gw+"/v1/payments", w.key(gw), "c"+merchantRef, req, &p); err != nil {
		return "", err
	}
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err := w.call("GET", w.pspURL+"/gw/"+gw+"/v1/payments/"+p.PSPRef, w.key(gw), "", nil, &p); err != nil {
			return "", err
		}
		if p.Status == pspapi.StatusSuccess {
			return p.PSPRef, nil
		}
	}
	return "", fmt.Errorf("payment %s never captured (%s)", p.PSPRef, p.Status)
}

func (w *world) refundAtGateway(gw, pspRef, merchantRef string, amount int64) (string, error) {
	var r pspapi.Refund
	if err := w.call("POST", w.pspURL+"/gw/"+gw+"/v1/refunds", w.key(gw), "r"+merchantRef,
		pspapi.CreateRefund{PSPRef: pspRef, AmountPaise: amount, MerchantRef: merchantRef, Reason: "test"}, &r); err != nil {
		return "", err
	}
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err := w.call("GET", w.pspURL+"/gw/"+gw+"/v1/refunds/"+r.RefundRef, w.key(gw), "", nil, &r); err != nil {
			return "", err
		}
		if r.Status == pspapi.RefundProcessed {
			return r.RefundRef, nil
		}
	}
	return "", fmt.Errorf("refund %s never processed", r.RefundRef)
}

func (w *world) settlementFaults(gw string, f pspsim.SettlementFaults) {
	w.t.Helper()
	w.must(w.call("PUT", w.pspURL+"/admin/settlement-faults/"+gw, pspAdmin, "", f, nil))
}

func (w *world) exportFaults(f prs.ExportFaults) {
	w.t.Helper()
	w.must(w.call("PUT", w.prsURL+"/admin/export-faults", prsAdmin, "", f, nil))
}

// ingestDay fetches everything a run of the day needs: the gateway's files
// of the day and the next two, the bank statements of the three days after,
// and the core's export of the journey date.
func (w *world) ingestDay(gw string) {
	w.t.Helper()
	for i := range 3 {
		_, err := w.svc.FetchSettlement(w.ctx, w.src, gw, w.day.AddDate(0, 0, i), "job:test")
		w.must(err)
		_, err = w.svc.FetchBank(w.ctx, w.src, w.day.AddDate(0, 0, i+1), "job:test")
		w.must(err)
	}
	_, err := w.svc.FetchCore(w.ctx, w.src, w.shard.Journey, "job:test")
	w.must(err)
}

// run reconciles the day as of T+4.
func (w *world) run(gw string) RunSummary {
	w.t.Helper()
	sum, err := w.svc.Run(w.ctx, RunRequest{Gateway: gw, Date: w.day, AsOf: w.day.AddDate(0, 0, 4).Add(12 * time.Hour), By: "finance1"})
	w.must(err)
	return sum
}

// unresolved is every unresolved exception of the day, by kind and ref.
func (w *world) exceptions(gw string) []Exception {
	w.t.Helper()
	ex, err := w.svc.Exceptions(w.ctx, Filter{Gateway: gw, BusinessDate: w.day, Limit: 1000})
	w.must(err)
	return ex
}

func (w *world) count(sql string, args ...any) int {
	w.t.Helper()
	var n int
	w.must(w.env.Pool.QueryRow(w.ctx, sql, args...).Scan(&n))
	return n
}
