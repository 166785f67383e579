package pspsim

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"tatkal/booking/payment/pspapi"
)

func TestAdminRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{noRun: true})

	b.must(t, "GET", "/admin/routes", "", "", nil).wantError(t, http.StatusUnauthorized, pspapi.CodeUnauthorized)
	b.must(t, "GET", "/admin/routes", "wrong", "", nil).wantError(t, http.StatusUnauthorized, pspapi.CodeUnauthorized)
	b.must(t, "GET", "/admin/routes", apiKey("swiftpay"), "", nil).wantError(t, http.StatusUnauthorized, pspapi.CodeUnauthorized)

	list := decodeAs[[]pspapi.RouteConfig](t, b.must(t, "GET", "/admin/routes", adminToken, "", nil), http.StatusOK)
	var keys []string
	for _, rc := range list {
		keys = append(keys, routeKey(rc.Gateway, rc.Method))
	}
	if got := strings.Join(keys, " "); got != "bharatpg/CARD bharatpg/NETBANKING bharatpg/UPI swiftpay/CARD swiftpay/NETBANKING swiftpay/UPI" {
		t.Fatalf("routes = %s", got)
	}

	// A valid change is stored and shown; the body may omit gateway/method.
	rc := list[5]
	rc.Gateway, rc.Method = "", ""
	rc.DeclineRate, rc.LatencyP99Ms, rc.Outage = 0.25, 900, true
	got := decodeAs[pspapi.RouteConfig](t, b.must(t, "PUT", "/admin/routes/swiftpay/upi", adminToken, "", rc), http.StatusOK)
	if got.Gateway != "swiftpay" || got.Method != pspapi.UPI || got.DeclineRate != 0.25 || !got.Outage {
		t.Fatalf("PUT answer = %+v", got)
	}
	stored, ok, err := b.srv.route(context.Background(), b.env.Pool, "swiftpay", pspapi.UPI)
	if err != nil || !ok || stored != got {
		t.Fatalf("stored = %+v (%v %v), want %+v", stored, ok, err, got)
	}

	// Every bad value is named; nothing changes.
	bad := got
	bad.DeclineRate, bad.PendingResolveMs, bad.LostCallbackRate, bad.LatencyP50Ms, bad.FeeBps = 1.5, -1, -0.1, 2000, 20000
	e := b.must(t, "PUT", "/admin/routes/swiftpay/UPI", adminToken, "", bad).wantError(t, http.StatusBadRequest, pspapi.CodeInvalid)
	for _, want := range []string{"decline_rate", "pending_resolve_ms", "lost_callback_rate", "latency_p99_ms", "fee_bps"} {
		if !strings.Contains(e.Error, want) {
			t.Errorf("error %q does not name %s", e.Error, want)
		}
	}
	for name, body := range map[string]any{
		"unknown field":  `{"decline_rate": 0.1, "declien_rate": 0.2}`,
		"not json":       `decline_rate=1`,
		"route mismatch": pspapi.RouteConfig{Gateway: "bharatpg", Method: pspapi.UPI},
		"negative delay": pspapi.RouteConfig{CallbackDelayMs: -5},
		"rate above one": pspapi.RouteConfig{TimeoutRate: 2},
		"negative tps":   pspapi.RouteConfig{CapacityTPS: -1},
	} {
		if r := b.must(t, "PUT", "/admin/routes/swiftpay/UPI", adminToken, "", body); r.status != http.StatusBadRequest {
			t.Errorf("%s: status %d %s", name, r.status, r.body)
		} else {
			r.errorBody(t)
		}
	}
	b.must(t, "PUT", "/admin/routes/nopay/UPI", adminToken, "", got).wantError(t, http.StatusNotFound, pspapi.CodeNotFound)
	b.must(t, "PUT", "/admin/routes/swiftpay/WALLET", adminToken, "", got).wantError(t, http.StatusBadRequest, pspapi.CodeInvalid)
	b.must(t, "PUT", "/admin/routes/swiftpay/UPI", "wrong", "", got).wantError(t, http.StatusUnauthorized, pspapi.CodeUnauthorized)
	after, _, _ := b.srv.route(context.Background(), b.env.Pool, "swiftpay", pspapi.UPI)
	if after != got {
		t.Fatalf("a refused PUT changed the route: %+v", after)
	}

	// With no admin token configured, the admin API is shut.
	empty := ""
	cfg := testConfig(t, b.env, opts{admin: &empty})
	shut, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer shut.Close()
	ts := httptest.NewServer(shut.Handler())
	defer ts.Close()
	req, _ := http.NewRequest("GET", ts.URL+"/admin/routes", nil)
	req.Header.Set("Authorization", "Bearer ")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("admin with no token configured: %d", resp.StatusCode)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{noRun: true})
	base := testConfig(t, b.env, opts{})
	cases := map[string]func(*Config){
		"no pool":    func(c *Config) { c.Pool = nil },
		"bad schema": func(c *Config) { c.Schema = "psp; DROP TABLE x" },
		"bad gateway id": func(c *Config) {
			c.Gateways = []GatewayConfig{{ID: "Swift Pay", APIKeys: []string{"k"}, WebhookSecret: []byte("s")}}
		},
		"no secret":   func(c *Config) { c.Gateways = []GatewayConfig{{ID: "swiftpay", APIKeys: []string{"k"}}} },
		"no gateways": func(c *Config) { c.Gateways = nil },
		"empty api key": func(c *Config) {
			c.Gateways = []GatewayConfig{{ID: "swiftpay", APIKeys: []string{""}, WebhookSecret: []byte("s")}}
		},
		"unknown gateway": func(c *Config) { c.Routes = []pspapi.RouteConfig{{Gateway: "nopay", Method: pspapi.UPI}} },
		"bad route": func(c *Config) {
			c.Routes = []pspapi.RouteConfig{{Gateway: "swiftpay", Method: pspapi.UPI, DeclineRate: 3}}
		},
	}
	for name, mut := range cases {
		cfg := base
		mut(&cfg)
		if s, err := New(context.Background(), cfg); err == nil {
			s.Close()
			t.Errorf("%s: New succeeded", name)
		}
	}
}
