package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"tatkal/booking"
	"tatkal/booking/auth"
	"tatkal/booking/fraud/review"
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
	"tatkal/booking/payment"
	"tatkal/console"
)

// fraudRing books four ring accounts a confirmed ticket each through the
// wallet and puts them in one flagged cluster of the shard's window, with
// evidence edges (shared device and instrument) as clustering writes them.
func fraudRing(t *testing.T, s *teststack.Stack) (cluster int64, members []int64, holds []uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	shardID, date := s.DemoShard(t, 6, 0)
	ids, err := seed.Users(ctx, s.Pool, seed.UsersSpec{Count: 4, Prefix: "tout", PasswordHash: "x", WalletRupees: 20000})
	if err != nil {
		t.Fatal(err)
	}
	for i, u := range ids {
		res, err := s.Service.Hold(ctx, teststack.Caller(u), booking.HoldRequest{UserID: u, IdempotencyKey: fmt.Sprintf("tout-hold-%04d", i),
			Train: "12951", Date: date, Class: "3A", Quota: "TQ", From: "MMCT", To: "NDLS",
			Passengers: []booking.Passenger{{Name: "Resold Passenger", Age: 30 + i, Gender: "M", IDType: "PAN", IDRef: fmt.Sprintf("RESOL%04dP", i)}}})
		if err != nil {
			t.Fatalf("hold %d: %v", i, err)
		}
		if _, err := s.Payments.Initiate(ctx, teststack.Caller(u), payment.InitiateRequest{HoldID: res.HoldID, Method: "WALLET",
			IdempotencyKey: fmt.Sprintf("tout-pay-%04d", i)}); err != nil {
			t.Fatalf("pay %d: %v", i, err)
		}
		holds = append(holds, res.HoldID)
	}
	var window time.Time
	if err := s.Pool.QueryRow(ctx, `SELECT window_opens_at FROM inventory_shards WHERE id = $1`, shardID).Scan(&window); err != nil {
		t.Fatal(err)
	}
	var edges []string
	for i := 1; i < len(ids); i++ {
		edges = append(edges, fmt.Sprintf(`{"window":"%s","a":%d,"b":%d,"weight":0.9,"evidence":[{"kind":"instrument","weight":0.5,"shared":1,"group":4},{"kind":"device","weight":0.4,"shared":1,"group":4}]}`,
			window.UTC().Format(time.RFC3339), ids[0], ids[i]))
	}
	ev := fmt.Sprintf(`{"why":["3 of 3 links: device","3 of 3 links: instrument","flagged: 4 accounts, score 2.70"],"kinds":{"device":3,"instrument":3},"edges":[%s],"edges_total":3}`,
		strings.Join(edges, ","))
	if err := s.Pool.QueryRow(ctx, `INSERT INTO fraud_clusters (window_opens_at, score, flagged, members, evidence)
		VALUES ($1, 2.7, true, $2, $3) RETURNING id`, window, len(ids), ev).Scan(&cluster); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool.Exec(ctx, `INSERT INTO fraud_cluster_members (cluster_id, user_id) SELECT $1, unnest($2::bigint[])`, cluster, ids); err != nil {
		t.Fatal(err)
	}
	return cluster, ids, holds
}

// TestBrowserFraudAnalysts drives the fraud pages in headless Chromium: an
// analyst claims a flagged cluster from the queue, reads its evidence (the
// why, the graph, the evidence table, the members' bookings), proposes a
// bulk cancel; a second analyst finds it awaiting approval and approves it;
// nothing changes for the members until the enforcement batch runs (after
// the delay); then the cluster page shows the bookings cancelled and the
// enforcement in its history. Screenshots go to $TATKAL_SCREENSHOTS when set.
func TestBrowserFraudAnalysts(t *testing.T) {
	testenv.Chromium(t)
	t.Parallel()
	s := setup(t, teststack.Options{})
	if _, err := console.SeedUsers(context.Background(), s.Pool, []console.DemoUser{{Login: "fraud2", Password: password, Role: console.Fraud}},
		auth.Argon2Params{MemoryKiB: 64, Time: 1, Threads: 1}); err != nil {
		t.Fatal(err)
	}
	cluster, members, holds := fraudRing(t, s)
	cid := fmt.Sprint(cluster)
	ctx0 := context.Background()
	var pnrs []string
	rows, err := s.Pool.Query(ctx0, `SELECT pnr FROM bookings WHERE hold_id = ANY($1) AND status = 'CONFIRMED' ORDER BY id`, holds)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var p string
		rows.Scan(&p) //nolint:errcheck
		pnrs = append(pnrs, p)
	}
	rows.Close()
	if len(pnrs) != 4 {
		t.Fatalf("%d confirmed ring bookings, want 4", len(pnrs))
	}

	b := testenv.NewBrowser(t, testenv.BrowserOptions{Width: 1440, Height: 1000, Timeout: 90 * time.Second})
	ctx := b.Ctx
	base := s.Server.URL
	do, text, count, submit := b.Do, b.Text, b.Count, b.Submit
	shot := func(name string) { b.Shot("fraud-" + name) }
	login := func(who string) { t.Helper(); signIn(t, b, base, who) }
	// What each member sees of their booking over the API.
	memberSees := func() string {
		t.Helper()
		var out []string
		for i, h := range holds {
			req, _ := http.NewRequest("GET", base+"/v1/bookings/"+h.String()+"/status", nil)
			req.Header.Set("Authorization", "Bearer "+s.Token(members[i]))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			out = append(out, fmt.Sprintf("%d %s", resp.StatusCode, body))
		}
		return strings.Join(out, "\n")
	}

	// 1. The first analyst finds the cluster at the top of the queue and claims it.
	login("fraud1")
	do("queue", chromedp.Navigate(base+"/console/fraud"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="fraud-cluster-`+cid+`"]`)))
	shot("queue")
	submit("claim from queue", `[data-testid="fraud-claim-`+cid+`"]`)
	do("cluster page", chromedp.Navigate(base+"/console/fraud/clusters/"+cid), chromedp.WaitVisible(chromedp.CSS(`[data-testid=fraud-cluster]`)))
	if got := text(`[data-testid=fraud-claimed-by]`); got != "fraud1" {
		t.Fatalf("claimed by %q, want fraud1", got)
	}

	// 2. The evidence: why, the graph, the edges, the members and their bookings.
	if got := text(`[data-testid=fraud-why]`); !strings.Contains(got, "instrument") || !strings.Contains(got, "flagged: 4 accounts") {
		t.Fatalf("why: %q", got)
	}
	if n := count(`[data-testid=fraud-graph] line`); n != 3 {
		t.Errorf("graph edges: %d, want 3", n)
	}
	if n := count(`[data-testid=fraud-graph] circle`); n != 4 {
		t.Errorf("graph nodes: %d, want 4", n)
	}
	if n := count(`[data-testid=fraud-evidence] tbody tr`); n != 6 {
		t.Errorf("evidence rows: %d, want 6 (3 edges × device and instrument)", n)
	}
	if got := text(`[data-testid=fraud-evidence]`); !strings.Contains(got, "tout00001") || !strings.Contains(got, "device") {
		t.Errorf("evidence table: %q", got)
	}
	if n := count(`[data-testid=fraud-members] tbody tr`); n != 4 {
		t.Errorf("members: %d, want 4", n)
	}
	for _, p := range pnrs {
		if got := text(`[data-testid="fraud-booking-` + p + `"] [data-testid=fraud-booking-status]`); got != "CONFIRMED" {
			t.Errorf("booking %s before: %q", p, got)
		}
	}
	shot("cluster-evidence")

	// 3. A bulk cancel: it waits for a second analyst.
	do("decide form", chromedp.SetValue(chromedp.CSS(`[data-testid=fraud-outcome]`), review.CancelBookings),
		chromedp.SetValue(chromedp.CSS(`[data-testid=fraud-reason]`), "PASSENGER_RESALE"),
		chromedp.SetValue(chromedp.CSS(`[data-testid=fraud-decide] input[name=note]`), "four accounts, one device and one UPI address, resold passengers"))
	submit("decide", `[data-testid=fraud-decide-submit]`)
	if got := text(`[data-testid=fraud-decisions]`); !strings.Contains(got, "CANCEL_BOOKINGS") || !strings.Contains(got, "Awaits a second analyst") {
		t.Fatalf("decision: %q", got)
	}
	if n := count(`[data-testid=fraud-approve]`); n != 0 {
		t.Fatal("the deciding analyst is offered the approval")
	}
	shot("proposed")
	before := memberSees()

	// 4. The second analyst approves it from the queue page.
	if _, err := chromedp.Call(ctx, network.ClearBrowserCookies, cdp.Empty{}); err != nil {
		t.Fatalf("sign out: %v", err)
	}
	login("fraud2")
	do("queue as fraud2", chromedp.Navigate(base+"/console/fraud"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=fraud-approvals]`)))
	if got := text(`[data-testid=fraud-approvals]`); !strings.Contains(got, "CANCEL_BOOKINGS") || !strings.Contains(got, "fraud1") {
		t.Fatalf("approvals: %q", got)
	}
	shot("approvals")
	do("cluster as fraud2", chromedp.Navigate(base+"/console/fraud/clusters/"+cid), chromedp.WaitVisible(chromedp.CSS(`[data-testid=fraud-approve]`)))
	submit("approve", `[data-testid=fraud-approve]`)
	if got := text(`[data-testid=fraud-decisions]`); !strings.Contains(got, "Approved by fraud2") {
		t.Fatalf("after approval: %q", got)
	}
	if n := count(`[data-testid=fraud-not-enforced]`); n != 1 {
		t.Fatal("the page does not say the decision is not enforced yet")
	}
	shot("approved")

	// 5. Nothing changes for the members until the batch runs.
	enf := &review.Enforcer{Review: review.New(s.Pool), Booking: s.Service}
	if n, err := enf.RunDue(ctx0); err != nil || n != 0 {
		t.Fatalf("before the delay the batch enforced %d (err %v)", n, err)
	}
	if after := memberSees(); after != before {
		t.Errorf("members saw a change before enforcement:\n%s\n%s", before, after)
	}
	var cancelled int
	if err := s.Pool.QueryRow(ctx0, `SELECT count(*) FROM bookings WHERE hold_id = ANY($1) AND status = 'CANCELLED'`, holds).Scan(&cancelled); err != nil || cancelled != 0 {
		t.Fatalf("%d bookings cancelled before enforcement (err %v)", cancelled, err)
	}
	// The delay passes; the batch runs.
	if _, err := s.Pool.Exec(ctx0, `UPDATE fraud_decisions SET enforce_after = now() - interval '1 second' WHERE cluster_id = $1`, cluster); err != nil {
		t.Fatal(err)
	}
	if n, err := enf.RunDue(ctx0); err != nil || n != 1 {
		t.Fatalf("the batch enforced %d decisions (err %v), want 1", n, err)
	}

	// 6. The cluster page shows every booking cancelled and the enforcement.
	do("cluster after", chromedp.Navigate(base+"/console/fraud/clusters/"+cid), chromedp.WaitVisible(chromedp.CSS(`[data-testid=fraud-enforced]`)))
	for _, p := range pnrs {
		if got := text(`[data-testid="fraud-booking-` + p + `"] [data-testid=fraud-booking-status]`); got != "CANCELLED" {
			t.Errorf("booking %s after enforcement: %q", p, got)
		}
	}
	if got := text(`[data-testid=fraud-history]`); !strings.Contains(got, "fraud.claim") || !strings.Contains(got, "fraud.decide") ||
		!strings.Contains(got, "fraud.approve") || !strings.Contains(got, "fraud.enforce") {
		t.Errorf("history: %q", got)
	}
	shot("enforced")
	do("metrics", chromedp.Navigate(base+"/console/fraud"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=fraud-metrics]`)))
	if got := text(`[data-testid=fraud-metrics]`); !strings.Contains(got, "CANCEL_BOOKINGS") || !strings.Contains(got, "clusters cleared 0 of 1 (0.0 %)") {
		t.Errorf("metrics: %q", got)
	}
	shot("metrics")
	if after := memberSees(); !strings.Contains(after, "CANCELLED") {
		t.Errorf("members do not see the cancellation: %s", after)
	}
}
