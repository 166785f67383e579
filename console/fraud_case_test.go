package console_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/xuri/excelize/v2"

	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
)

// TestClusterWindowNowIsTheAnalystsAct: the fraud page's "cluster this
// window now" queues one clustering run of a window that has opened,
// audited with the analyst's login in the same transaction as the job; a
// window that never opened, or a made-up one, queues nothing and says why;
// ops may not press it.
func TestClusterWindowNowIsTheAnalystsAct(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{})
	ctx := context.Background()
	shardID, _ := s.DemoShard(t, 4, 0)
	var window time.Time
	if err := s.Pool.QueryRow(ctx, `SELECT window_opens_at FROM inventory_shards WHERE id = $1`, shardID).Scan(&window); err != nil {
		t.Fatal(err)
	}
	jobs := func() int {
		t.Helper()
		var n int
		if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'fraud_cluster_window'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := jobs()
	fraud := newBrowser(t, s.Server.URL)
	fraud.login("fraud1")
	if _, page, _ := fraud.get("/console/fraud"); !strings.Contains(page, `data-testid="fraud-cluster-now"`) ||
		!strings.Contains(page, window.UTC().Format(time.RFC3339Nano)) {
		t.Fatalf("the fraud page offers no button for the open window %s:\n%.2000s", window, page)
	}
	for _, bad := range []string{"", "yesterday", window.Add(time.Minute).UTC().Format(time.RFC3339), window.AddDate(0, 0, 2).UTC().Format(time.RFC3339)} {
		if code, _, _ := fraud.post("/console/fraud/cluster-now", url.Values{"window": {bad}}); code != http.StatusSeeOther {
			t.Fatalf("window %q: %d", bad, code)
		}
		if _, page, _ := fraud.get("/console/fraud"); !strings.Contains(page, "window") {
			t.Errorf("window %q: no reason given", bad)
		}
	}
	if n := jobs(); n != before {
		t.Fatalf("bad windows queued %d runs", n-before)
	}
	ops := newBrowser(t, s.Server.URL)
	ops.login("ops1")
	if code, _, _ := ops.post("/console/fraud/cluster-now", url.Values{"window": {window.UTC().Format(time.RFC3339Nano)}}); code != http.StatusForbidden {
		t.Fatalf("ops pressing it: %d, want 403", code)
	}
	if code, _, _ := fraud.post("/console/fraud/cluster-now", url.Values{"window": {window.UTC().Format(time.RFC3339Nano)}}); code != http.StatusSeeOther {
		t.Fatalf("cluster now: %d", code)
	}
	if _, page, _ := fraud.get("/console/fraud"); !strings.Contains(page, "queued") {
		t.Errorf("no notice after queuing:\n%.1500s", page)
	}
	if n := jobs(); n != before+1 {
		t.Fatalf("%d runs queued, want 1", n-before)
	}
	var args string
	if err := s.Pool.QueryRow(ctx, `SELECT args::text FROM river_job WHERE kind = 'fraud_cluster_window' ORDER BY id DESC LIMIT 1`).Scan(&args); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(args, window.UTC().Format("2006-01-02T15:04:05")) {
		t.Errorf("job args %s, want the window %s", args, window.UTC())
	}
	var actor string
	if err := s.Pool.QueryRow(ctx, `SELECT actor FROM audit_log WHERE action = 'fraud.cluster_now' AND subject = $1`,
		"window:"+window.UTC().Format(time.RFC3339Nano)).Scan(&actor); err != nil || actor != "fraud1" {
		t.Fatalf("audit of the run: %q (%v), want fraud1", actor, err)
	}
}

// TestCaseShowsWhatIsSharedMasked: the case page and the evidence workbook
// say what the members share (the UPI address's bank, the /24, passenger
// initials, a device) with how many accounts share each, masked: no full
// UPI address, no passenger name.
func TestCaseShowsWhatIsSharedMasked(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{})
	cluster, _, holds := fraudRing(t, s)
	shareSignals(t, s, holds)
	b := newBrowser(t, s.Server.URL)
	b.login("fraud1")
	_, page, _ := b.get(fmt.Sprintf("/console/fraud/clusters/%d", cluster))
	i := strings.Index(page, `data-testid="fraud-shared"`)
	if i < 0 {
		t.Fatalf("no shared table:\n%.3000s", page)
	}
	shared := page[i:min(len(page), i+4000)]
	for _, want := range []string{"••@okicici", "203.0.113.0/24", "R. K., 41", "device ••7f3a"} {
		if !strings.Contains(shared, want) {
			t.Errorf("shared table lacks %q:\n%s", want, shared)
		}
	}
	for _, secret := range []string{"touts.desk99", "ramesh", "dev-shared"} {
		if strings.Contains(strings.ToLower(page), secret) {
			t.Errorf("the page shows %q", secret)
		}
	}
	r := testenv.Call(t, testenv.Request{Method: "GET", URL: s.Server.URL + fmt.Sprintf("/console/fraud/clusters/%d/evidence.xlsx", cluster), Client: b.c})
	f, err := excelize.OpenReader(bytes.NewReader(r.Raw))
	if err != nil {
		t.Fatalf("workbook: %v (%d)", err, r.Status)
	}
	defer f.Close()
	rows, err := f.GetRows("Shared")
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]string{}
	for _, row := range rows[1:] {
		found[row[1]] = row[2]
	}
	for what, n := range map[string]string{"••@okicici": "3", "203.0.113.0/24": "3", "R. K., 41": "2", "device ••7f3a": "3"} {
		if found[what] != n {
			t.Errorf("workbook: %q shared by %q accounts, want %s (%v)", what, found[what], n, found)
		}
	}
}

// shareSignals records what the live path would have for the ring's
// holds: one device and one /24 for the first three, one passenger
// ("ramesh kumar", 41) booked by the first two, and one UPI address paying
// for the first three.
func shareSignals(t *testing.T, s *teststack.Stack, holds []uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	for i, h := range holds {
		dev, net := fmt.Sprintf("dev-own-%d", i), fmt.Sprintf("198.51.%d.0/24", 100+i)
		if i < 3 {
			dev, net = "dev-shared-7f3a", "203.0.113.0/24"
		}
		if _, err := s.Pool.Exec(ctx, `INSERT INTO fraud_signals (hold_id, shard_id, user_id, window_opens_at, account_created_at, account_age_days,
				identity_verified, agent, device_id, ip_net24, held_at, since_open_ms)
			SELECT h.id, h.shard_id, h.user_id, s.window_opens_at, now(), 30, true, false, $2, $3::cidr, now(), 1000
			FROM holds h JOIN inventory_shards s ON s.id = h.shard_id WHERE h.id = $1
			ON CONFLICT (hold_id) DO UPDATE SET device_id = EXCLUDED.device_id, ip_net24 = EXCLUDED.ip_net24`, h, dev, net); err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("someone else %d", i)
		if i < 2 {
			name = "ramesh kumar"
		}
		if _, err := s.Pool.Exec(ctx, `INSERT INTO fraud_signal_passengers (hold_id, seq, name_norm, age) VALUES ($1, 5, $2, 41)`, h, name); err != nil {
			t.Fatal(err)
		}
		if i < 3 {
			if _, err := s.Pool.Exec(ctx, `UPDATE payments SET vpa = 'touts.desk99@okicici' WHERE hold_id = $1`, h); err != nil {
				t.Fatal(err)
			}
		}
	}
}
