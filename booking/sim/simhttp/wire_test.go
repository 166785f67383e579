package simhttp_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"tatkal/booking/lab/testenv"
	"tatkal/booking/notify"
	"tatkal/booking/payment/pspapi"
	"tatkal/booking/prs"
	"tatkal/booking/sim/msgsim"
	"tatkal/booking/sim/prssim"
	"tatkal/booking/sim/pspsim"
)

const (
	apiKey = "sim-api-key-0123456789"
	admin  = "sim-admin-token-0123456789"
)

// wire is one request to a simulator and what it must answer: the status,
// the error code and a word of the message (or, where a client or the lab
// reads them, the exact bytes) and the headers a caller acts on.
type wire struct {
	name, method, path, token string
	key                       string // Idempotency-Key
	body                      any
	status                    int
	code                      string            // "" : not an error answer
	says                      string            // in the error message
	raw                       string            // exact body when set
	header                    map[string]string // headers that must be there
}

// party is a running simulator: its base URL and the field of its error
// body that holds the message.
type party struct {
	base, message string
}

func (c wire) check(t *testing.T, d party) testenv.Reply {
	t.Helper()
	r := testenv.Call(t, testenv.Request{Method: c.method, URL: d.base + c.path, Token: c.token, Body: c.body,
		Header: map[string]string{"Idempotency-Key": c.key}})
	if r.Status != c.status {
		t.Errorf("%s: %s %s = %d %.300s, want %d", c.name, c.method, c.path, r.Status, r.Raw, c.status)
	}
	if got := r.Header.Get("Content-Type"); got != "application/json" {
		t.Errorf("%s: Content-Type %q", c.name, got)
	}
	msg, _ := r.JSON[d.message].(string)
	if c.code != "" && (r.JSON["code"] != c.code || msg == "") {
		t.Errorf("%s: body %.300s, want code %s and a %s", c.name, r.Raw, c.code, d.message)
	}
	if !strings.Contains(msg, c.says) {
		t.Errorf("%s: %s %q does not say %q", c.name, d.message, msg, c.says)
	}
	if c.raw != "" && string(r.Raw) != c.raw {
		t.Errorf("%s: body %q, want %q", c.name, r.Raw, c.raw)
	}
	for k, v := range c.header {
		if got := r.Header.Get(k); got != v {
			t.Errorf("%s: %s %q, want %q", c.name, k, got, v)
		}
	}
	return r
}

// setting checks c as a PUT of its body, then a GET of the same path
// answering what the PUT stored.
func (c wire) setting(t *testing.T, d party) {
	t.Helper()
	c.method = "PUT"
	c.check(t, d)
	c.name, c.method, c.body = c.name+", read back", "GET", nil
	c.check(t, d)
}

// adminOff checks that a simulator started with no admin token refuses
// every caller of path, whatever token it brings, with want.
func adminOff(t *testing.T, d party, path string, want wire) {
	t.Helper()
	for _, tok := range []string{"", apiKey, admin} {
		want.name, want.method, want.path, want.token = "admin off, token "+tok, "GET", path, tok
		want.check(t, d)
	}
}

func serve(t *testing.T, h interface{ Handler() http.Handler }) string {
	t.Helper()
	hs := httptest.NewServer(h.Handler())
	t.Cleanup(hs.Close)
	return hs.URL
}

func logger(t *testing.T) *slog.Logger { return slog.New(slog.NewTextHandler(t.Output(), nil)) }

// The three simulators' HTTP outside the happy path, each in its own
// party's words: health, unknown endpoints and methods, bearer refusals,
// bodies that are not one bounded JSON object, the admin fault API (a bad
// setting changes nothing; a good one is answered as stored) and failures
// the caller is told to retry. The product's adapters (booking/notify,
// booking/prs, booking/payment) and the lab rely on these answers, so the
// shared helper must keep every one of them.
func TestWire(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	health := wire{name: "health", method: "GET", path: "/healthz", status: 200, raw: `{"status":"ok"}` + "\n"}

	t.Run("msg", func(t *testing.T) {
		sim, err := msgsim.New(ctx, msgsim.Config{Pool: env.Pool, APIKey: apiKey, AdminToken: admin, Log: logger(t), Seed: 7})
		if err != nil {
			t.Fatal(err)
		}
		d := party{base: serve(t, sim), message: "message"}
		unauthorized := `{"code":"UNAUTHORIZED","message":"missing or wrong bearer token"}` + "\n"
		realm := map[string]string{"WWW-Authenticate": `Bearer realm="msg"`}
		sms := notify.Message{Channel: "SMS", To: "asha", Body: "code 1", ClientRef: "n-1"}
		huge := `{"channel":"EMAIL","to":"asha","body":"` + strings.Repeat("a", 4<<20) + `","client_ref":"n-2"}`
		for _, c := range []wire{
			health,
			{name: "no such endpoint", method: "GET", path: "/v2/nope", token: apiKey, status: 404,
				raw: `{"code":"NO_SUCH_ENDPOINT","message":"no such endpoint"}` + "\n"},
			{name: "no key", method: "POST", path: "/v1/messages", body: sms, status: 401, raw: unauthorized, header: realm},
			{name: "admin token on /v1", method: "GET", path: "/v1/messages/msg_x", token: admin, status: 401, raw: unauthorized, header: realm},
			{name: "api key on /admin", method: "GET", path: "/admin/faults", token: apiKey, status: 401, raw: unauthorized, header: realm},
			{name: "not json", method: "PUT", path: "/admin/faults", token: admin, body: "{", status: 400, code: "BAD_REQUEST"},
			{name: "unknown field", method: "PUT", path: "/admin/faults", token: admin, body: `{"fail_rat":1}`, status: 400, code: "BAD_REQUEST", says: "unknown field"},
			{name: "trailing data", method: "PUT", path: "/admin/faults", token: admin, body: `{"fail_rate":1}{}`, status: 400, code: "BAD_REQUEST", says: "after the"},
			{name: "bad setting", method: "PUT", path: "/admin/faults", token: admin, body: notify.Faults{FailRate: 2}, status: 400, code: "BAD_REQUEST", says: "[0,1]"},
			{name: "body over 4 MiB", method: "POST", path: "/v1/messages", token: apiKey, key: "k-2", body: huge, status: 400, code: "BAD_REQUEST", says: "too large"},
		} {
			c.check(t, d)
		}
		if f := sim.Faults(); f != msgsim.DefaultFaults {
			t.Fatalf("refused admin calls changed the faults: %+v", f)
		}
		var n int
		if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM msg.messages`).Scan(&n); err != nil || n != 0 {
			t.Fatalf("refused sends stored %d messages (%v)", n, err)
		}

		wire{name: "faults", path: "/admin/faults", token: admin, body: notify.Faults{FailRate: 1, DeliverAfterMs: 10}, status: 200,
			raw: `{"latency_ms":0,"jitter_ms":0,"fail_rate":1,"lost_reply_rate":0,"reply_delay_ms":0,"undeliverable_rate":0,"deliver_after_ms":10}` + "\n"}.setting(t, d)
		wire{name: "busy", method: "POST", path: "/v1/messages", token: apiKey, key: "k-1", body: sms, status: 503,
			raw: `{"code":"UNAVAILABLE","message":"the gateway is busy; retry"}` + "\n", header: map[string]string{"Retry-After": "1"}}.check(t, d)

		// With no admin token configured the admin API admits nobody.
		shut, err := msgsim.New(ctx, msgsim.Config{Pool: env.Pool, APIKey: apiKey, Log: logger(t)})
		if err != nil {
			t.Fatal(err)
		}
		adminOff(t, party{base: serve(t, shut), message: "message"}, "/admin/faults", wire{status: 401, raw: unauthorized, header: realm})
	})

	t.Run("prs", func(t *testing.T) {
		sim, err := prssim.NewServer(ctx, prssim.ServerConfig{Pool: env.Pool, APIKey: apiKey, AdminToken: admin, Log: logger(t), Seed: 7})
		if err != nil {
			t.Fatal(err)
		}
		d := party{base: serve(t, sim), message: "message"}
		unauthorized := `{"code":"UNAUTHORIZED","message":"missing or wrong bearer token"}` + "\n"
		realm := map[string]string{"WWW-Authenticate": `Bearer realm="prs"`}
		huge := `{"pnr":"4100000001","train":"` + strings.Repeat("1", 64<<10) + `"}`
		badExport := prs.ExportFaults{UnknownPNRs: -1}
		for _, c := range []wire{
			health,
			{name: "no such endpoint", method: "GET", path: "/v2/nope", token: apiKey, status: 404,
				raw: `{"code":"NO_SUCH_ENDPOINT","message":"no such endpoint"}` + "\n"},
			{name: "method not allowed", method: "DELETE", path: "/v1/bookings/4100000001", token: apiKey, status: 405,
				raw: `{"code":"BAD_REQUEST","message":"method not allowed"}` + "\n"},
			{name: "no key", method: "GET", path: "/v1/bookings/4100000001", status: 401, raw: unauthorized, header: realm},
			{name: "api key on /admin", method: "GET", path: "/admin/faults", token: apiKey, status: 401, raw: unauthorized, header: realm},
			{name: "unknown field", method: "PUT", path: "/admin/faults", token: admin, body: `{"outage":true,"x":1}`, status: 400, code: prs.CodeBadRequest, says: "unknown field"},
			{name: "trailing data", method: "PUT", path: "/admin/faults", token: admin, body: `{"outage":true}{}`, status: 400, code: prs.CodeBadRequest, says: "after the"},
			{name: "bad setting", method: "PUT", path: "/admin/faults", token: admin, body: prs.Faults{FailRate: 2}, status: 400, code: prs.CodeBadRequest, says: "fail_rate"},
			{name: "bad export setting", method: "PUT", path: "/admin/export-faults", token: admin, body: badExport, status: 400, code: prs.CodeBadRequest, says: "unknown_pnrs"},
			{name: "export setting not json", method: "PUT", path: "/admin/export-faults", token: admin, body: "[", status: 400, code: prs.CodeBadRequest},
			{name: "body over 64 KiB", method: "PUT", path: "/v1/bookings/4100000001", token: apiKey, body: huge, status: 400, code: prs.CodeBadRequest, says: "too large"},
			{name: "export faults unset", method: "GET", path: "/admin/export-faults", token: admin, status: 200,
				raw: `{"seed":0,"drop":{},"change_fare":{},"unknown_pnrs":0}` + "\n"},
		} {
			c.check(t, d)
		}
		wire{name: "export faults", path: "/admin/export-faults", token: admin, body: prs.ExportFaults{Seed: 3, Drop: prs.ExportPick{PNRs: []string{"4100000001"}}},
			status: 200, raw: `{"seed":3,"drop":{"pnrs":["4100000001"]},"change_fare":{},"unknown_pnrs":0}` + "\n"}.setting(t, d)
		wire{name: "outage", path: "/admin/faults", token: admin, body: prs.Faults{Outage: true},
			status: 200, raw: `{"latency_ms":0,"jitter_ms":0,"fail_rate":0,"outage":true,"reject_rate":0,"timeout_rate":0}` + "\n"}.setting(t, d)
		wire{name: "down", method: "GET", path: "/v1/bookings/4100000001", token: apiKey, status: 503,
			raw: `{"code":"UNAVAILABLE","message":"the reservation core is down"}` + "\n", header: map[string]string{"Retry-After": "1"}}.check(t, d)

		shut, err := prssim.NewServer(ctx, prssim.ServerConfig{Pool: env.Pool, APIKey: apiKey, Log: logger(t)})
		if err != nil {
			t.Fatal(err)
		}
		adminOff(t, party{base: serve(t, shut), message: "message"}, "/admin/faults", wire{status: 401, raw: unauthorized, header: realm})
	})

	t.Run("psp", func(t *testing.T) {
		gws := pspsim.NewGateways()
		key := gws[0].APIKeys[0]
		const bank = "bank-token"
		bankRealm := map[string]string{"WWW-Authenticate": `Bearer realm="bank"`}
		cfg := pspsim.Config{Pool: env.Pool, AdminToken: admin, BankToken: bank, Gateways: gws, Log: logger(t), Seed: 7}
		sim, err := pspsim.New(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(sim.Close)
		d := party{base: serve(t, sim), message: "error"}
		realm := map[string]string{"WWW-Authenticate": `Bearer realm="psp"`}
		pay := "/gw/" + gws[0].ID + "/v1/payments"
		faults := "/admin/settlement-faults/" + gws[0].ID
		huge := `{"merchant_ref":"` + strings.Repeat("m", 64<<10) + `"}`
		for _, c := range []wire{
			health,
			{name: "no such endpoint", method: "GET", path: "/v2/nope", status: 404,
				raw: `{"error":"no such endpoint: GET /v2/nope","code":"NOT_FOUND"}` + "\n"},
			{name: "method not allowed", method: "DELETE", path: "/admin/routes", token: admin, status: 405,
				raw: `{"error":"method not allowed on /admin/routes","code":"INVALID_REQUEST"}` + "\n"},
			{name: "no key", method: "POST", path: pay, key: "k-1", body: "{}", status: 401, header: realm,
				raw: `{"error":"send Authorization: Bearer \u003capi key\u003e of gateway ` + gws[0].ID + `","code":"UNAUTHORIZED"}` + "\n"},
			{name: "other gateway's key", method: "GET", path: pay + "/pay_x", token: gws[1].APIKeys[0], status: 401, header: realm, code: pspapi.CodeUnauthorized},
			{name: "api key on /admin", method: "GET", path: "/admin/routes", token: key, status: 401, header: realm,
				raw: `{"error":"send Authorization: Bearer \u003cadmin token\u003e","code":"UNAUTHORIZED"}` + "\n"},
			{name: "api key on the bank", method: "GET", path: "/bank/v1/statements/2025-06-05.csv", token: key, status: 401, header: bankRealm, code: pspapi.CodeUnauthorized},
			{name: "admin token on the bank", method: "GET", path: "/bank/v1/statements/2025-06-05.csv", token: admin, status: 401, header: bankRealm,
				raw: `{"error":"send Authorization: Bearer \u003cbank token\u003e","code":"UNAUTHORIZED"}` + "\n"},
			{name: "not json", method: "POST", path: pay, token: key, key: "k-2", body: "{", status: 400, code: pspapi.CodeInvalid},
			{name: "unknown field", method: "POST", path: pay, token: key, key: "k-3", body: `{"amount":1}`, status: 400, code: pspapi.CodeInvalid, says: "unknown field"},
			{name: "trailing data", method: "POST", path: pay, token: key, key: "k-4", body: `{}{}`, status: 400, code: pspapi.CodeInvalid, says: "after the"},
			{name: "body over 64 KiB", method: "POST", path: pay, token: key, key: "k-5", body: huge, status: 400, code: pspapi.CodeInvalid, says: "too large"},
			{name: "bad settlement faults", method: "PUT", path: faults, token: admin, body: `{"drop":{"rate":2}}`, status: 400, code: pspapi.CodeInvalid, says: "drop.rate"},
			{name: "settlement faults not json", method: "PUT", path: faults, token: admin, body: `{"drop":`, status: 400, code: pspapi.CodeInvalid},
			{name: "unknown gateway's faults", method: "GET", path: "/admin/settlement-faults/nopay", token: admin, status: 404, code: pspapi.CodeNotFound, says: "nopay"},
			{name: "settlement faults unset", method: "GET", path: faults, token: admin, status: 200,
				raw: `{"drop":{},"duplicate":{},"change_amount":{},"overcharge_fee":{},"next_day":{},"omit_refund":{},"chargeback":{},"short_pay":{},"phantom_lines":0}` + "\n"},
		} {
			c.check(t, d)
		}
		wire{name: "settlement faults", path: faults, token: admin, body: pspsim.SettlementFaults{PhantomLines: 2, ShortPay: pspsim.FaultPick{Rate: 1, Paise: 300}}, status: 200,
			raw: `{"drop":{},"duplicate":{},"change_amount":{},"overcharge_fee":{},"next_day":{},"omit_refund":{},"chargeback":{},"short_pay":{"rate":1,"paise":300},"phantom_lines":2}` + "\n"}.setting(t, d)

		cfg.AdminToken = ""
		shut, err := pspsim.New(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(shut.Close)
		adminOff(t, party{base: serve(t, shut), message: "error"}, "/admin/routes", wire{status: 403,
			raw: `{"error":"the admin API is disabled: no admin token is configured","code":"FORBIDDEN"}` + "\n"})
	})
}
