package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"tatkal/booking"
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
	"tatkal/console/levers"
)

// The degradation ladder and rules as data, end to end: every change is
// made through the console of one app process and observed through the
// API and pages of a second process on the same PostgreSQL and Redis,
// within seconds (the levers' reader caches half a second).

// leverForm proposes a change on the console form as b's user; a change
// that needs a second admin is approved on approver's console. It returns
// the change's id.
func leverForm(t *testing.T, s *teststack.Stack, b, approver *browser, name, scope, value string) int64 {
	t.Helper()
	code, body, _ := b.post("/console/levers/propose", url.Values{"name": {name}, "scope": {scope}, "value": {value},
		"reason": {"peak drill"}, "confirm": {levers.ConfirmWord(name, scope)}})
	if code != http.StatusSeeOther {
		t.Fatalf("propose %s %s=%s: %d\n%.1500s", name, scope, value, code, body)
	}
	var id int64
	var state string
	if err := s.Pool.QueryRow(context.Background(), `SELECT id, state FROM lever_changes ORDER BY id DESC LIMIT 1`).Scan(&id, &state); err != nil {
		t.Fatal(err)
	}
	if state == "PENDING" {
		if approver == nil {
			t.Fatalf("%s %s=%s waits for a second admin, and the test has none", name, scope, value)
		}
		if code, body, _ := approver.post("/console/levers/"+strconv.FormatInt(id, 10)+"/approve", nil); code != http.StatusSeeOther {
			t.Fatalf("approve change %d: %d\n%.1500s", id, code, body)
		}
	}
	return id
}

var siteCSRF = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// siteSignIn signs a passenger in on the site of base with a cookie client.
func siteSignIn(t *testing.T, base, login, password string) *http.Client {
	t.Helper()
	c := testenv.FormClient()
	page := testenv.Call(t, testenv.Request{Method: "GET", URL: base + "/signin", Client: c})
	m := siteCSRF.FindSubmatch(page.Raw)
	if m == nil {
		t.Fatalf("no CSRF token on the sign-in page:\n%.800s", page.Raw)
	}
	r := testenv.Call(t, testenv.Request{Method: "POST", URL: base + "/signin", Client: c, Header: map[string]string{"Origin": base},
		Body: url.Values{"login": {login}, "password": {password}, "csrf": {string(m[1])}}})
	if r.Status != http.StatusSeeOther {
		t.Fatalf("sign in %s: %d %.600s", login, r.Status, r.Raw)
	}
	return c
}

// TestLadderAndRulesReachSecondProcess: availability staleness, the
// NON_ESSENTIAL kill switch, the single-step form, slower queue polling,
// and the rules (hold window at hold time, the passenger limit), each
// changed on the first process's console and in force on the second's API
// and pages within seconds; a rule change that loosens a limit waits for a
// second admin.
func TestLadderAndRulesReachSecondProcess(t *testing.T) {
	s := setup(t, teststack.Options{})
	second := teststack.Start(t, s.Env, teststack.Options{})
	ctx := context.Background()
	shard, date := s.DemoShard(t, 20, 5)
	day := date.Format(time.DateOnly)
	users := s.Users(t, "lad", 3)
	ops := newBrowser(t, s.Server.URL)
	ops.login("ops1")
	admin := newBrowser(t, s.Server.URL)
	admin.login("admin2")
	base2 := second.Server.URL
	const within = 3 * time.Second

	// 1. Availability staleness: the second process serves (and lets caches keep) answers for 5 s.
	availURL := base2 + "/v1/availability?train=12951&class=3A&date=" + day
	// life is how long the answer is served for in all: its age plus
	// what is left of it (ttl_ms).
	life := func() (time.Duration, string) {
		r := testenv.Call(t, testenv.Request{Method: "GET", URL: availURL})
		if r.Status != http.StatusOK {
			t.Fatalf("availability: %d %s", r.Status, r.Raw)
		}
		n, _ := r.JSON["ttl_ms"].(float64)
		asOf, err := time.Parse(time.RFC3339Nano, fmt.Sprint(r.JSON["as_of"]))
		if err != nil {
			t.Fatalf("as_of: %v in %s", err, r.Raw)
		}
		left := time.Duration(n) * time.Millisecond
		if cc, want := r.Header.Get("Cache-Control"), fmt.Sprintf("public, max-age=%d", max(1, int(left.Round(time.Second)/time.Second))); cc != want {
			t.Fatalf("Cache-Control %q with ttl_ms %v, want %q", cc, n, want)
		}
		return time.Since(asOf) + left, r.Header.Get("Cache-Control")
	}
	if d, _ := life(); d > 1200*time.Millisecond {
		t.Fatalf("availability served for %s before the lever, want a second", d)
	}
	leverForm(t, s, ops, nil, levers.AvailabilityStaleness, "global", "5000")
	testenv.Eventually(t, within, "staleness of 5 s on the second process", func() error {
		d, cc := life()
		return testenv.Want(d > 4500*time.Millisecond && d < 5500*time.Millisecond, "served for %s, Cache-Control %q", d, cc)
	})

	// 2. NON_ESSENTIAL: the booking history of the second process's site
	// answers 503 and says why.
	site := siteSignIn(t, base2, "lad00001", "pw-lad")
	history := func() testenv.Reply {
		return testenv.Call(t, testenv.Request{Method: "GET", URL: base2 + "/bookings", Client: site})
	}
	pdf := func() testenv.Reply { // nobody's booking: 404 while PDFs run
		return testenv.Call(t, testenv.Request{Method: "GET", URL: base2 + "/bookings/0190a0f0-0000-7000-8000-000000000000/ticket.pdf", Client: site})
	}
	if r, p := history(), pdf(); r.Status != http.StatusOK || p.Status != http.StatusNotFound {
		t.Fatalf("before the switch: history %d, PDF of no booking %d", r.Status, p.Status)
	}
	leverForm(t, s, ops, nil, levers.KillSwitch, "NON_ESSENTIAL", "on")
	testenv.Eventually(t, within, "history switched off on the second process", func() error {
		r := history()
		return testenv.Want(r.Status == http.StatusServiceUnavailable && strings.Contains(string(r.Raw), "switched off during peak booking") &&
			r.Header.Get("Retry-After") == "300", "history: %d Retry-After %q", r.Status, r.Header.Get("Retry-After"))
	})
	if p := pdf(); p.Status != http.StatusServiceUnavailable || !strings.Contains(string(p.Raw), "e-ticket PDF is temporarily switched off") {
		t.Fatalf("PDF with NON_ESSENTIAL on: %d %.500s", p.Status, p.Raw)
	}

	// 3. The single-step form for the hot shard on the second process's site.
	window := func() string {
		r := testenv.Call(t, testenv.Request{Method: "GET", Client: site,
			URL: base2 + "/book?train=12951&class=3A&from=MMCT&to=NDLS&date=" + day})
		if r.Status != http.StatusOK {
			t.Fatalf("window page: %d %.500s", r.Status, r.Raw)
		}
		return string(r.Raw)
	}
	if p := window(); strings.Contains(p, `data-testid="light-note"`) || strings.Contains(p, `name="method"`) {
		t.Fatal("the window page is the single-step form before the lever")
	}
	leverForm(t, s, ops, nil, levers.LightForm, "shard:"+itoa(shard), "on")
	testenv.Eventually(t, within, "single-step form on the second process", func() error {
		p := window()
		return testenv.Want(strings.Contains(p, `data-testid="light-note"`) && strings.Contains(p, `name="method"`) && strings.Contains(p, `name="light"`),
			"not the single-step form yet")
	})

	// 4. Slower polling in the second process's waiting room.
	open := -time.Hour
	_, err := seed.Demo(ctx, s.Pool, seed.DemoOptions{OpensIn: &open})
	teststack.Must(t, err, "seed")
	qdate := date.AddDate(0, 0, 1)
	qshard, err := seed.Shard(ctx, s.Pool, seed.ShardSpec{Train: "12951", Date: qdate, Class: "3A", Berths: 8,
		OpensAt: time.Now().Add(-time.Minute), Mode: "queue"})
	teststack.Must(t, err, "seed queue shard")
	_, err = second.Service.Rebuild(ctx, qshard)
	teststack.Must(t, err, "load queue shard")
	tok := second.Token(users[2])
	bind := testenv.Call(t, testenv.Request{Method: "POST", URL: base2 + "/v1/devices/bind", Token: tok, Body: map[string]string{"device_token": "phone-ladder-0001"}})
	binding, _ := bind.JSON["device_binding"].(string)
	if bind.Status != http.StatusOK || binding == "" {
		t.Fatalf("bind: %d %s", bind.Status, bind.Raw)
	}
	dev := map[string]string{"X-Device-Token": binding}
	enter := testenv.Call(t, testenv.Request{Method: "POST", URL: base2 + "/v1/queue/enter", Token: tok, Header: dev,
		Body: map[string]any{"intent": map[string]string{"train_no": "12951", "journey_date": qdate.Format(time.DateOnly), "class": "3A"}}})
	ticket, _ := enter.JSON["queue_ticket"].(string)
	first, _ := enter.JSON["poll_after_ms"].(float64)
	if enter.Status != http.StatusOK || ticket == "" || first > 2000 {
		t.Fatalf("enter: %d %s", enter.Status, enter.Raw)
	}
	leverForm(t, s, ops, nil, levers.PollSlowdown, "global", "4")
	testenv.Eventually(t, 2*within, "polls four times slower on the second process", func() error {
		r := testenv.Call(t, testenv.Request{Method: "GET", URL: base2 + "/v1/queue/status?ticket=" + ticket, Token: tok, Header: dev})
		n, _ := r.JSON["poll_after_ms"].(float64)
		return testenv.Want(r.Status == http.StatusOK && n >= 3200 && n <= 4000, "status %d poll_after_ms %v (first %v)", r.Status, n, first)
	})

	// 5. Rules: a longer hold window at hold time loosens a limit, so it
	// waits for a second admin; a lower passenger limit does not.
	hold := func(user int64, key string, pax int) testenv.Reply {
		ps := make([]booking.Passenger, pax)
		for i := range ps {
			ps[i] = booking.Passenger{Name: fmt.Sprintf("Asha Rao %c", 'A'+i), Age: 34, Gender: "F", IDType: "PAN", IDRef: "ABCDE1234F"}
		}
		tok := second.Token(user)
		return testenv.Call(t, testenv.Request{Method: "POST", URL: base2 + "/v1/bookings/hold", Token: tok,
			Header: map[string]string{"Idempotency-Key": key, "X-Device-Token": second.DeviceBinding(user)},
			Body: map[string]any{"train_no": "12951", "journey_date": day, "class": "3A", "from": "MMCT", "to": "NDLS", "passengers": ps,
				"challenge": teststack.ChallengeObject(t, base2, tok, key, nil)}})
	}
	code, body, _ := ops.post("/console/levers/propose", url.Values{"name": {levers.Rule}, "scope": {"hold_window"}, "value": {"600"},
		"reason": {"slow banks today"}, "confirm": {"rule hold_window"}})
	var pending int64
	var state string
	if err := s.Pool.QueryRow(ctx, `SELECT id, state FROM lever_changes ORDER BY id DESC LIMIT 1`).Scan(&pending, &state); err != nil || code != http.StatusSeeOther || state != "PENDING" {
		t.Fatalf("a longer hold window: %d %s (%v), want pending a second admin\n%.1000s", code, state, err, body)
	}
	if code, _, _ := ops.post("/console/levers/"+strconv.FormatInt(pending, 10)+"/approve", nil); code != http.StatusForbidden {
		t.Fatalf("ops approving: %d, want 403", code)
	}
	if code, body, _ := admin.post("/console/levers/"+strconv.FormatInt(pending, 10)+"/approve", nil); code != http.StatusSeeOther {
		t.Fatalf("admin2 approving: %d %.800s", code, body)
	}
	// Applied before the passenger limit below: any snapshot of the levers
	// that has the limit has the window too.
	leverForm(t, s, ops, nil, levers.Rule, "max_passengers", "1")
	testenv.Eventually(t, within, "the passenger limit on the second process", func() error {
		r := hold(users[0], "ladder-two-pax", 2)
		return testenv.Want(r.Status == http.StatusBadRequest && r.JSON["reason"] == "TOO_MANY_PASSENGERS" &&
			strings.Contains(fmt.Sprint(r.JSON["detail"], r.JSON["message"]), "at most 1"), "two passengers: %d %s", r.Status, r.Raw)
	})
	start := time.Now()
	r := hold(users[1], "ladder-one-pax", 1)
	expires, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(r.JSON["hold_expires_at"]))
	if r.Status != http.StatusCreated || expires.Sub(start) < 595*time.Second || expires.Sub(start) > 605*time.Second {
		t.Fatalf("hold on the second process: %d expires in %s, want 600 s\n%s", r.Status, expires.Sub(start), r.Raw)
	}

	// Every change is in the audit log with the person's name.
	var audited int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action = 'lever.change'`).Scan(&audited); err != nil || audited != 6 {
		t.Fatalf("lever.change audited %d times (%v), want 6", audited, err)
	}
}

// TestRulesAsDataBoundsAndEffect: bad rule and ladder values are refused
// with a clear message and change nothing; the rules the second process
// holds and queues by (caps, agent bar, fraud thresholds) follow the
// console.
func TestRulesAsDataBoundsAndEffect(t *testing.T) {
	s := setup(t, teststack.Options{})
	second := teststack.Start(t, s.Env, teststack.Options{})
	ctx := context.Background()
	ops := newBrowser(t, s.Server.URL)
	ops.login("ops1")
	admin := newBrowser(t, s.Server.URL)
	admin.login("admin2")
	bad := []struct{ name, scope, value, says string }{
		{levers.Rule, "daily_cap", "0", "1 to 12"},
		{levers.Rule, "daily_cap", "2.5", "whole number"},
		{levers.Rule, "daily_cap", "lots", "whole number"},
		{levers.Rule, "max_passengers", "7", "1 to 6"},
		{levers.Rule, "fraud_edge_threshold", "0.555", "two decimals"},
		{levers.Rule, "fraud_edge_threshold", "NaN", "0.3 to 0.95"},
		{levers.Rule, "teleport", "1", "Rules are daily_cap"},
		{levers.PollSlowdown, "global", "11", "2 to 10"},
		{levers.PollSlowdown, "global", "1", "2 to 10"},
		{levers.PollSlowdown, "shard:999999", "2", "No shard 999999"},
		{levers.AvailabilityStaleness, "global", "100", "250 to 10000"},
		{levers.AvailabilityStaleness, "shard:1", "500", "scope global"},
		{levers.LightForm, "global", "maybe", "on or off"},
	}
	for _, tc := range bad {
		code, body, _ := ops.post("/console/levers/propose", url.Values{"name": {tc.name}, "scope": {tc.scope}, "value": {tc.value},
			"reason": {"bad value"}, "confirm": {levers.ConfirmWord(tc.name, tc.scope)}})
		if code != http.StatusUnprocessableEntity || !strings.Contains(body, tc.says) {
			t.Errorf("%s %s=%s: %d, want 422 saying %q\n%.600s", tc.name, tc.scope, tc.value, code, tc.says, body)
		}
	}
	var n int
	if err := s.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM lever_changes) + (SELECT count(*) FROM console_levers)`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("refused changes left %d rows (%v)", n, err)
	}

	base := second.Service.Rules()
	leverForm(t, s, ops, admin, levers.Rule, "daily_cap", "1")
	leverForm(t, s, ops, admin, levers.Rule, "person_daily_cap", "1")
	leverForm(t, s, ops, admin, levers.Rule, "agent_bar", "45")
	leverForm(t, s, ops, admin, levers.Rule, "passenger_accounts", "3")
	leverForm(t, s, ops, admin, levers.Rule, "fraud_min_members", "6")
	leverForm(t, s, ops, admin, levers.Rule, "fraud_edge_threshold", "0.7")
	testenv.Eventually(t, 2*time.Second, "the rules in force on the second process", func() error {
		r := second.Service.Rules()
		f := second.App.Fraud.Clusterer.Tune(second.App.Fraud.Clusterer.Config)
		return testenv.Want(r.DailyCap == 1 && r.PersonDailyCap == 1 && r.AgentBar == 45*time.Minute && r.PassengerAccounts == 3 &&
			f.MinMembers == 6 && f.EdgeThreshold == 0.7 && r.HoldWindow == base.HoldWindow, "rules %+v, fraud %d %v", r, f.MinMembers, f.EdgeThreshold)
	})
	// Loosening (a higher cap, a shorter agent bar) takes a second admin; tightening does not.
	for _, tc := range []struct {
		scope, value string
		dangerous    bool
	}{{"daily_cap", "3", true}, {"agent_bar", "20", true}, {"agent_bar", "60", false}, {"passenger_accounts", "2", false}} {
		code, _, _ := ops.post("/console/levers/propose", url.Values{"name": {levers.Rule}, "scope": {tc.scope}, "value": {tc.value},
			"reason": {"loosen"}, "confirm": {"rule " + tc.scope}})
		var state string
		if err := s.Pool.QueryRow(ctx, `SELECT state FROM lever_changes ORDER BY id DESC LIMIT 1`).Scan(&state); err != nil || code != http.StatusSeeOther ||
			(state == "PENDING") != tc.dangerous {
			t.Errorf("rule %s=%s: %d %s, want pending=%v", tc.scope, tc.value, code, state, tc.dangerous)
		}
	}
}
