package pspsim

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"tatkal/booking/lab/testenv"
	"tatkal/booking/payment/pspapi"
)

const adminToken = "admin-secret"

// bankToken is the bank statement API's credential.
const bankToken = "bank-secret"

// opts tunes setup; zero values are the quick, fault-free test world.
type opts struct {
	route  func(*pspapi.RouteConfig) // changes every route
	routes []pspapi.RouteConfig      // replaces the routes entirely
	seed   int64
	now    func() time.Time
	env    *testenv.Env // share a database (restart tests)
	noRun  bool
	admin  *string
	hang   time.Duration   // TimeoutHang; default 5 s
	gws    []GatewayConfig // default testGateways
}

// bundle is one test's simulator, its HTTP server and a merchant's
// webhook receiver.
type bundle struct {
	env   *testenv.Env
	cfg   Config
	srv   *Server
	ts    *httptest.Server
	hooks *receiver
	http  *http.Client
	stop  func()
}

// testRoutes is every default gateway's three methods, fast and clean:
// millisecond latency, customer approves after 150 ms, 3 s to expire.
func testRoutes(mut func(*pspapi.RouteConfig)) []pspapi.RouteConfig {
	var out []pspapi.RouteConfig
	for _, g := range testGateways {
		for _, m := range []string{pspapi.UPI, pspapi.Card, pspapi.NetBanking} {
			rc := pspapi.RouteConfig{
				Gateway: g.ID, Method: m,
				LatencyP50Ms: 2, LatencyP99Ms: 8,
				PendingResolveMs: 300, LateSuccessMs: 1200,
				AutoApproveMs: 150, ExpireAfterMs: 3000,
			}
			switch m {
			case pspapi.Card:
				rc.FeeBps = 180
			case pspapi.NetBanking:
				rc.FeeBps = 150
			}
			if mut != nil {
				mut(&rc)
			}
			out = append(out, rc)
		}
	}
	return out
}

func testConfig(t *testing.T, env *testenv.Env, o opts) Config {
	routes := o.routes
	if routes == nil {
		routes = testRoutes(o.route)
	}
	seed := o.seed
	if seed == 0 {
		seed = 1
	}
	hang := o.hang
	if hang == 0 {
		hang = 5 * time.Second
	}
	token := adminToken
	if o.admin != nil {
		token = *o.admin
	}
	gws := testGateways
	if o.gws != nil {
		gws = o.gws
	}
	return Config{
		Pool: env.Pool, AdminToken: token, BankToken: bankToken, Gateways: gws, Routes: routes, Seed: seed, Now: o.now,
		Log:  slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
		Tick: 15 * time.Millisecond, WebhookRetryBase: 60 * time.Millisecond, WebhookRetryMax: 500 * time.Millisecond,
		WebhookMaxAttempts: 4, RefundDelay: 50 * time.Millisecond, TimeoutHang: hang,
		HTTPClient: &http.Client{Timeout: 2 * time.Second},
	}
}

// setup starts a simulator on a fresh database (or o.env) and runs it
// until the test ends.
func setup(t *testing.T, o opts) *bundle {
	t.Helper()
	env := o.env
	if env == nil {
		env = testenv.New(t)
	}
	clock := o.now
	if clock == nil {
		clock = time.Now
	}
	hooks := newReceiver(t, clock)
	cfg := testConfig(t, env, o)
	srv, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	b := &bundle{env: env, cfg: cfg, srv: srv, hooks: hooks, http: &http.Client{Timeout: 10 * time.Second}}
	b.ts = httptest.NewServer(srv.Handler())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	if o.noRun {
		done <- nil
	} else {
		go func() { done <- srv.Run(ctx) }()
	}
	var once sync.Once
	b.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
			srv.Close()
			b.ts.Close()
		})
	}
	t.Cleanup(b.stop)
	return b
}

// testGateways are this test binary's gateways, with random secrets as
// tatkal dev has.
var testGateways = NewGateways()

func apiKey(gw string) string {
	for _, g := range testGateways {
		if g.ID == gw {
			return g.APIKeys[0]
		}
	}
	return ""
}

func secret(gw string) []byte {
	for _, g := range testGateways {
		if g.ID == gw {
			return g.WebhookSecret
		}
	}
	return nil
}

// reply is an HTTP answer, read in full.
type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) errorBody(t *testing.T) pspapi.ErrorBody {
	t.Helper()
	var e pspapi.ErrorBody
	if err := json.Unmarshal(r.body, &e); err != nil {
		t.Fatalf("error answer is not JSON (%d): %s", r.status, r.body)
	}
	if e.Error == "" || e.Code == "" {
		t.Fatalf("error answer lacks error or code: %s", r.body)
	}
	return e
}

// wantError checks an error answer's status and code.
func (r reply) wantError(t *testing.T, status int, code string) pspapi.ErrorBody {
	t.Helper()
	if r.status != status {
		t.Fatalf("status = %d, want %d; body %s", r.status, status, r.body)
	}
	e := r.errorBody(t)
	if e.Code != code {
		t.Fatalf("code = %q, want %q (%s)", e.Code, code, e.Error)
	}
	return e
}

// call makes a request with a bearer token, an optional Idempotency-Key
// and an optional JSON body (a string is sent as is).
func (b *bundle) call(t *testing.T, client *http.Client, method, path, token, key string, body any) (reply, error) {
	t.Helper()
	r, err := testenv.Do(testenv.Request{Method: method, URL: b.ts.URL + path, Token: token, Body: body, Client: client,
		Header: map[string]string{pspapi.HeaderIdempotencyKey: key}})
	return reply{status: r.Status, header: r.Header, body: r.Raw}, err
}

func (b *bundle) must(t *testing.T, method, path, token, key string, body any) reply {
	t.Helper()
	r, err := b.call(t, b.http, method, path, token, key, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

func decodeAs[T any](t *testing.T, r reply, status int) T {
	t.Helper()
	if r.status != status {
		t.Fatalf("status = %d, want %d; body %s", r.status, status, r.body)
	}
	var v T
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("decode %T: %v: %s", v, err, r.body)
	}
	return v
}

// createReq is a valid create for method, its webhooks going to b.hooks.
func (b *bundle) createReq(merchantRef, method string, amount int64) pspapi.CreatePayment {
	req := pspapi.CreatePayment{
		MerchantRef: merchantRef, AmountPaise: amount, Currency: "INR", Method: method,
		CallbackURL: b.hooks.srv.URL + "/hooks/psp", ReturnURL: "https://merchant.example/pay/return?hold=h1",
	}
	switch method {
	case pspapi.UPI:
		req.VPA = "asha.k@okbank"
	case pspapi.NetBanking:
		req.Bank = "State Bank of India"
	}
	return req
}

// create makes a payment and expects 201.
func (b *bundle) create(t *testing.T, gw string, req pspapi.CreatePayment) pspapi.Payment {
	t.Helper()
	r := b.must(t, "POST", "/gw/"+gw+"/v1/payments", apiKey(gw), "key-"+req.MerchantRef, req)
	return decodeAs[pspapi.Payment](t, r, http.StatusCreated)
}

func (b *bundle) inquire(t *testing.T, gw, pspRef string) pspapi.Payment {
	t.Helper()
	return decodeAs[pspapi.Payment](t, b.must(t, "GET", "/gw/"+gw+"/v1/payments/"+pspRef, apiKey(gw), "", nil), http.StatusOK)
}

func (b *bundle) inquireByMerchantRef(t *testing.T, gw, ref string) pspapi.Payment {
	t.Helper()
	return decodeAs[pspapi.Payment](t, b.must(t, "GET", "/gw/"+gw+"/v1/payments?merchant_ref="+ref, apiKey(gw), "", nil), http.StatusOK)
}

// putRoute changes one route through the admin API.
func (b *bundle) putRoute(t *testing.T, gw, method string, mut func(*pspapi.RouteConfig)) pspapi.RouteConfig {
	t.Helper()
	var rc pspapi.RouteConfig
	for _, r := range decodeAs[[]pspapi.RouteConfig](t, b.must(t, "GET", "/admin/routes", adminToken, "", nil), http.StatusOK) {
		if r.Gateway == gw && r.Method == method {
			rc = r
		}
	}
	mut(&rc)
	return decodeAs[pspapi.RouteConfig](t, b.must(t, "PUT", "/admin/routes/"+gw+"/"+method, adminToken, "", rc), http.StatusOK)
}

// dbStatus reads a payment's status straight from the table.
func (b *bundle) dbStatus(t *testing.T, pspRef string) string {
	t.Helper()
	var status string
	if err := b.env.Pool.QueryRow(context.Background(), b.srv.q(`SELECT status FROM {s}.payments WHERE psp_ref = $1`), pspRef).Scan(&status); err != nil {
		t.Fatalf("read status of %s: %v", pspRef, err)
	}
	return status
}

func (b *bundle) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := b.env.Pool.QueryRow(context.Background(), b.srv.q(sql), args...).Scan(&n); err != nil {
		t.Fatalf("count: %v", err)
	}
	return n
}

// receiver is the merchant's webhook endpoint: it verifies every
// signature with pspapi.Verify and records what arrived.
type receiver struct {
	srv   *httptest.Server
	clock func() time.Time

	mu       sync.Mutex
	accepted []hook
	rejected []string // signature failures
	attempts map[string][]time.Time
	respond  func(pspapi.Webhook, int) int // status for the n-th attempt at an event; nil: 200
}

type hook struct {
	pspapi.Webhook
	raw    []byte
	header http.Header
	at     time.Time
}

func newReceiver(t *testing.T, clock func() time.Time) *receiver {
	rc := &receiver{clock: clock, attempts: map[string][]time.Time{}}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(func() {
		rc.srv.Close()
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if len(rc.rejected) > 0 {
			t.Errorf("webhooks with bad signatures: %v", rc.rejected)
		}
	})
	return rc
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	gw := r.Header.Get(pspapi.HeaderGateway)
	err := pspapi.Verify(secret(gw), r.Header.Get(pspapi.HeaderTimestamp), r.Header.Get(pspapi.HeaderSignature), body, rc.clock())
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if err != nil {
		rc.rejected = append(rc.rejected, fmt.Sprintf("%s: %v", gw, err))
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var h pspapi.Webhook
	if err := json.Unmarshal(body, &h); err != nil {
		rc.rejected = append(rc.rejected, "bad JSON: "+string(body))
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	rc.attempts[h.EventID] = append(rc.attempts[h.EventID], time.Now())
	if rc.respond != nil {
		if code := rc.respond(h, len(rc.attempts[h.EventID])); code != http.StatusOK {
			w.WriteHeader(code)
			return
		}
	}
	rc.accepted = append(rc.accepted, hook{Webhook: h, raw: body, header: r.Header.Clone(), at: time.Now()})
	w.WriteHeader(http.StatusOK)
}

func (rc *receiver) setRespond(f func(pspapi.Webhook, int) int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.respond = f
}

// of is every accepted webhook for pspRef, in arrival order.
func (rc *receiver) of(pspRef string) []hook {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []hook
	for _, h := range rc.accepted {
		if h.PSPRef == pspRef {
			out = append(out, h)
		}
	}
	return out
}

func (rc *receiver) attemptsAt(eventID string) []time.Time {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]time.Time(nil), rc.attempts[eventID]...)
}

// waitStatus waits for a webhook announcing status for pspRef.
func (rc *receiver) waitStatus(t *testing.T, pspRef, status string, d time.Duration) hook {
	t.Helper()
	var found hook
	testenv.Eventually(t, d, "webhook "+status+" for "+pspRef, func() error {
		for _, h := range rc.of(pspRef) {
			if h.Status == status {
				found = h
				return nil
			}
		}
		return fmt.Errorf("no %s webhook yet: %v", status, statuses(rc.of(pspRef)))
	})
	return found
}

func statuses(hs []hook) []string {
	var out []string
	for _, h := range hs {
		out = append(out, h.Status)
	}
	return out
}
