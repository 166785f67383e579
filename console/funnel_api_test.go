package console_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"strings"
	"testing"
	"time"

	"tatkal/booking"
	"tatkal/booking/admission"
	"tatkal/booking/funnel"
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
	"tatkal/console"
)

// TestFunnelLiveAPI: GET /v1/admin/funnel/live refuses a call without a
// token, with a passenger's session token and with a finance person's
// token; with an ops person's token it answers every stage, and the p95 of
// the queue, holds, payments and confirmations from the seeded latencies.
func TestFunnelLiveAPI(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{})
	ctx := context.Background()
	b := newBrowser(t, s.Server.URL)
	b.login("admin1")
	opsTok, finTok := b.newToken("ops1", "funnel robot"), b.newToken("finance1", "finance robot")
	passenger := s.Users(t, "fnl", 1)[0]
	url := s.Server.URL + "/v1/admin/funnel/live"
	for _, c := range []struct {
		name, token string
		want        int
	}{{"no token", "", 401}, {"a passenger's session", s.Token(passenger), 401}, {"a finance person's token", finTok, 403}, {"a made-up token", "tkc_nothing", 401}} {
		if r := testenv.Call(t, testenv.Request{Method: "GET", URL: url, Token: c.token}); r.Status != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, r.Status, r.Raw, c.want)
		}
	}
	if r := testenv.Call(t, testenv.Request{Method: "GET", URL: url + "?seconds=0", Token: opsTok}); r.Status != 400 || r.JSON["reason"] != "BAD_SECONDS" {
		t.Errorf("seconds=0: %d %s", r.Status, r.Raw)
	}

	// Seeded latencies: p95 is the upper bound of the bucket the 95th
	// sample of 100 falls in.
	seedLatency := func(stage string, fast, slow time.Duration, nSlow int) {
		for i := range 100 {
			d := fast
			if i < nSlow {
				d = slow
			}
			s.Funnel.Observe(stage, d)
		}
	}
	seedLatency(funnel.QueueEntered, 15*time.Millisecond, 0, 0)                   // all in (10, 20]: 20
	seedLatency(funnel.HoldAttempt, 3*time.Millisecond, 400*time.Millisecond, 10) // 10 slow: 500
	seedLatency(funnel.PayInitiated, 150*time.Millisecond, 0, 0)                  // 200
	seedLatency(funnel.Confirmed, 30*time.Millisecond, 1500*time.Millisecond, 4)  // 4 slow, 95th fast: 50
	s.Funnel.Add(0, funnel.Shed, 7)
	if err := s.Funnel.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{funnel.QueueEntered: 20, funnel.HoldAttempt: 500, funnel.PayInitiated: 200, funnel.Confirmed: 50}
	var live console.LiveFunnel
	testenv.Eventually(t, 5*time.Second, "the seeded second in the live funnel", func() error {
		r := testenv.Call(t, testenv.Request{Method: "GET", URL: url + "?seconds=30", Token: opsTok})
		if r.Status != 200 {
			return fmt.Errorf("%d %s", r.Status, r.Raw)
		}
		live = console.LiveFunnel{}
		if err := r.Decode(&live); err != nil {
			return err
		}
		got := map[string]console.LiveStage{}
		for _, st := range live.Stages {
			got[st.Stage] = st
		}
		for st, ms := range want {
			g := got[st]
			if g.P95MS == nil || *g.P95MS != ms || g.Samples != 100 {
				return fmt.Errorf("%s: p95 %v over %d samples, want %d ms over 100", st, g.P95MS, g.Samples, ms)
			}
		}
		if g := got[funnel.Expired]; g.P95MS != nil || g.Samples != 0 {
			return fmt.Errorf("expired has no latency, got %+v", g)
		}
		if got[funnel.Shed].Count != 7 {
			return fmt.Errorf("shed %d, want 7", got[funnel.Shed].Count)
		}
		return nil
	})
	if live.Seconds != 30 || len(live.Stages) != len(funnel.Stages) {
		t.Fatalf("answer: %+v", live)
	}
}

// TestLeverSuggestionFromQueueDepth: a deep queue on a shard whose holds
// are fast suggests raising its admission rate, on the funnel page, the
// levers page and the API; the suggestion's link opens the lever form
// filled in, and nothing changes until a person confirms.
func TestLeverSuggestionFromQueueDepth(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{})
	ctx := context.Background()
	open := -time.Minute
	if _, err := seed.Demo(ctx, s.Pool, seed.DemoOptions{OpensIn: &open}); err != nil {
		t.Fatal(err)
	}
	date := time.Now().In(booking.IST).AddDate(0, 0, 9)
	date = time.Date(date.Year(), date.Month(), date.Day(), 0, 0, 0, 0, booking.IST)
	shardID, err := seed.Shard(ctx, s.Pool, seed.ShardSpec{Train: "12951", Date: date, Class: "3A", Berths: 8,
		OpensAt: time.Now().Add(10 * time.Minute), Mode: "queue"})
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, s.Server.URL)
	b.login("ops1")
	if _, page, _ := b.get("/console/funnel"); strings.Contains(page, `data-testid="lever-suggestions"`) {
		t.Fatalf("a suggestion with an empty queue:\n%.2000s", page)
	}
	const n = 240
	for i, uid := range s.Users(t, "deep", n) {
		c := admission.Caller{UserID: uid, Verified: true, CreatedAt: time.Now().AddDate(0, -1, 0), SessionToken: fmt.Sprintf("st_deep_%d", i),
			DeviceToken: s.Admission.DeviceKeys().BindDevice(uid, fmt.Sprintf("deep-device-%d", i), time.Now().Add(time.Hour))}
		if _, err := s.Admission.Enter(ctx, c, admission.Intent{TrainNo: "12951", JourneyDate: date, Class: "3A"}); err != nil {
			t.Fatal(err)
		}
	}
	if w, _, err := s.Admission.Depth(ctx, shardID); err != nil || w != n {
		t.Fatalf("queue depth %d (%v), want %d", w, err, n)
	}
	_, page, _ := b.get("/console/funnel")
	page = html.UnescapeString(page)
	scope := fmt.Sprintf("shard:%d", shardID)
	if !strings.Contains(page, "admission_rate "+scope+" → 50") || !strings.Contains(page, fmt.Sprintf("%d waiting", n)) {
		t.Fatalf("funnel page lacks the suggestion:\n%.3000s", page)
	}
	link := fmt.Sprintf("/console/levers?name=admission_rate&reason=deep+queue%%3A+%d+waiting%%2C+drain+in+about+60+s&revert_after=15m&scope=shard%%3A%d&value=50", n, shardID)
	if !strings.Contains(page, link) {
		t.Fatalf("funnel page lacks the link %s:\n%.3000s", link, page)
	}
	code, form, _ := b.get(link)
	if code != http.StatusOK {
		t.Fatalf("open the proposal: %d", code)
	}
	for _, want := range []string{`name="scope" value="` + scope + `"`, `name="value" value="50"`, `name="revert_after" value="15m"`,
		`<option value="admission_rate" selected>`, fmt.Sprintf(`name="reason" value="deep queue: %d waiting, drain in about 60 s"`, n)} {
		if !strings.Contains(form, want) {
			t.Fatalf("lever form not filled (%s):\n%.4000s", want, form)
		}
	}
	var changes int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM lever_changes`).Scan(&changes); err != nil || changes != 0 {
		t.Fatalf("opening a suggestion changed a lever: %d (%v)", changes, err)
	}
	b2 := newBrowser(t, s.Server.URL)
	b2.login("admin1")
	tok := b2.newToken("ops1", "suggest robot")
	var live console.LiveFunnel
	if err := testenv.Call(t, testenv.Request{Method: "GET", URL: s.Server.URL + "/v1/admin/funnel/live", Token: tok}).Decode(&live); err != nil {
		t.Fatal(err)
	}
	if len(live.Suggest) != 1 || live.Suggest[0].Scope != scope || live.Suggest[0].Value != "50" {
		t.Fatalf("API suggestions: %+v", live.Suggest)
	}
	var q *console.LiveShard
	for i := range live.Shards {
		if live.Shards[i].ID == shardID {
			q = &live.Shards[i]
		}
	}
	if q == nil || q.Waiting != n {
		t.Fatalf("API shards: %+v", live.Shards)
	}
}
