package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"tatkal/booking/lab/teststack"
)

// TestOperationsPages: stuck payments with "inquire now" (audited), lookup
// by login, hold id and PNR-less holds, the user trace, a rebuild that
// needs its typed confirmation (audited), /metrics and River's UI.
func TestOperationsPages(t *testing.T) {
	t.Parallel()
	// No simulated customer approves the payment while the test reads it as stuck.
	s := setup(t, teststack.Options{Routes: teststack.QuietRoutes()})
	shard, date := s.DemoShard(t, 4, 0)
	users := s.Users(t, "opsp", 2)
	ctx := context.Background()
	res, err := s.Service.Hold(ctx, teststack.Caller(users[0]), holdReq(users[0], "opsp-00001", date))
	if err != nil {
		t.Fatal(err)
	}
	pay, err := s.Payments.Initiate(ctx, teststack.Caller(users[0]), paymentReq(res.HoldID.String(), "UPI"))
	if err != nil {
		t.Fatalf("initiate: %v", err)
	}
	if _, err := s.Pool.Exec(ctx, `UPDATE payments SET initiated_at = now() - interval '10 minutes' WHERE id = $1`, pay.ID); err != nil {
		t.Fatal(err)
	}
	s.Funnel.Flush(ctx) //nolint:errcheck

	b := newBrowser(t, s.Server.URL)
	b.login("ops1")
	code, body, _ := b.get("/console/payments?min_age=5m")
	if code != 200 || !strings.Contains(body, `data-testid="payment-`+pay.ID.String()) {
		t.Fatalf("stuck payments page lacks %s: %d\n%.2000s", pay.ID, code, body)
	}
	code, _, h := b.post("/console/payments/"+pay.ID.String()+"/inquire", nil)
	if code != http.StatusSeeOther || h.Get("Location") != "/console/payments" {
		t.Fatalf("inquire: %d %s", code, h.Get("Location"))
	}
	if _, body, _ := b.get("/console/payments"); !strings.Contains(body, `data-testid="notice"`) || !strings.Contains(body, "Asked the gateway about "+pay.ID.String()) {
		t.Fatalf("no notice after the inquiry:\n%.2000s", body)
	}
	var n int
	s.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action = 'payment.inquire' AND actor = 'ops1' AND subject = $1`, pay.ID.String()).Scan(&n) //nolint:errcheck
	if n != 1 {
		t.Fatalf("%d inquiry audit records, want 1", n)
	}

	for _, q := range []string{"opsp00001", res.HoldID.String()} {
		_, body, _ = b.get("/console/lookup?q=" + url.QueryEscape(q))
		if !strings.Contains(body, res.HoldID.String()) {
			t.Fatalf("lookup %s lacks the hold:\n%.2000s", q, body)
		}
	}
	_, body, _ = b.get("/console/trace?login=opsp00001")
	for _, want := range []string{`data-testid="trace-outcome"`, "hold granted", "UPI", "never completed payment"} {
		if !strings.Contains(body, want) {
			t.Fatalf("trace lacks %q:\n%.3000s", want, body)
		}
	}
	_, body, _ = b.get("/console/trace?login=nobody-here")
	if !strings.Contains(body, "No passenger account") {
		t.Fatalf("trace of an unknown login:\n%.1000s", body)
	}

	// Rebuild: refused without the typed word, done and audited with it.
	rb := "/console/shards/" + itoa(shard) + "/rebuild"
	if code, _, _ := b.post(rb, url.Values{"confirm": {"rebuild"}}); code != http.StatusUnprocessableEntity {
		t.Fatalf("rebuild without confirmation: %d, want 422", code)
	}
	var epoch int64
	s.Pool.QueryRow(ctx, `SELECT epoch FROM inventory_shards WHERE id = $1`, shard).Scan(&epoch) //nolint:errcheck
	if code, _, _ := b.post(rb, url.Values{"confirm": {"rebuild " + itoa(shard)}}); code != http.StatusSeeOther {
		t.Fatalf("rebuild: %d", code)
	}
	var after int64
	s.Pool.QueryRow(ctx, `SELECT epoch FROM inventory_shards WHERE id = $1`, shard).Scan(&after)                      //nolint:errcheck
	s.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action = 'shard.rebuild' AND actor = 'ops1'`).Scan(&n) //nolint:errcheck
	if after <= epoch || n != 1 {
		t.Fatalf("rebuild: epoch %d -> %d, %d audit records", epoch, after, n)
	}
	_, body, _ = b.get("/console/shards")
	if !strings.Contains(body, `data-testid="shard-row-`+itoa(shard)) || !strings.Contains(body, "pill green") {
		t.Fatalf("shards page:\n%.2000s", body)
	}

	// /metrics: on its own listener; the public one has none.
	if resp, err := http.Get(s.Server.URL + "/metrics"); err != nil {
		t.Fatal(err)
	} else if resp.Body.Close(); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("public /metrics: %d, want 404", resp.StatusCode)
	}
	fams := scrape(t, s.Metrics.URL)
	if g := fams["tatkal_payments_unresolved"]; g == nil || len(g.GetMetric()) != 1 || g.GetMetric()[0].GetGauge().GetValue() < 1 {
		t.Fatalf("tatkal_payments_unresolved: %v, want at least the stuck payment", g)
	}

	// River's UI, for admins.
	a := newBrowser(t, s.Server.URL)
	a.login("admin1")
	code, body, _ = a.get("/console/river/")
	if code != 200 || !strings.Contains(strings.ToLower(body), "<html") {
		t.Fatalf("river ui: %d %.500s", code, body)
	}
	code, body, _ = a.get("/console/river/api/jobs?state=available&limit=5")
	if code != 200 || !strings.HasPrefix(strings.TrimSpace(body), "{") {
		t.Fatalf("river ui api: %d %.500s", code, body)
	}
}
