package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"tatkal/booking"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
	"tatkal/booking/payment"
	"tatkal/console/levers"
)

func pax() []booking.Passenger {
	return []booking.Passenger{{Name: "Asha Rao", Age: 34, Gender: "F", IDType: "PAN", IDRef: "ABCDE1234F"}}
}

func holdReq(user int64, key string, date time.Time) booking.HoldRequest {
	return booking.HoldRequest{UserID: user, IdempotencyKey: key, Train: "12951", Date: date, Class: "3A", From: "MMCT", To: "NDLS", Passengers: pax()}
}

func propose(name, scope, value string) levers.Proposal {
	return levers.Proposal{Name: name, Scope: scope, Value: value, Reason: "test change", Confirm: levers.ConfirmWord(name, scope)}
}

// TestLeverBounds: values out of bounds, unknown scopes, a wrong typed
// confirmation, a missing reason and a role that may not change levers are
// all refused and change nothing.
func TestLeverBounds(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{})
	ops := actor(t, s, "ops1")
	shard, _ := s.DemoShard(t, 20, 5)
	svc := s.Console.Levers()
	ctx := context.Background()
	bad := []struct {
		name string
		a    levers.Actor
		p    levers.Proposal
		code booking.Code
	}{
		{"hold window too short", ops, propose(levers.HoldWindow, "UPI", "59"), booking.EINVALID},
		{"hold window too long", ops, propose(levers.HoldWindow, "UPI", "901"), booking.EINVALID},
		{"hold window not a number", ops, propose(levers.HoldWindow, "UPI", "5m"), booking.EINVALID},
		{"hold window of no method", ops, propose(levers.HoldWindow, "CASH", "300"), booking.EINVALID},
		{"kill switch unknown", ops, propose(levers.KillSwitch, "UPI", "on"), booking.EINVALID},
		{"kill switch value", ops, propose(levers.KillSwitch, "CARD", "maybe"), booking.EINVALID},
		{"admission rate negative", ops, propose(levers.AdmissionRate, "global", "-1"), booking.EINVALID},
		{"admission rate above max", ops, propose(levers.AdmissionRate, "global", "20001"), booking.EINVALID},
		{"admission of no shard", ops, propose(levers.AdmissionPaused, "shard:999999", "on"), booking.EINVALID},
		{"route weight above max", ops, propose(levers.Route, "swiftpay/UPI", "1001,on"), booking.EINVALID},
		{"route unknown", ops, propose(levers.Route, "nopay/UPI", "10,on"), booking.EINVALID},
		{"window before it opens", ops, propose(levers.WindowClosesAt, "shard:"+itoa(shard), "2001-01-01T00:00:00Z"), booking.EINVALID},
		{"window 13 hours long", ops, propose(levers.WindowClosesAt, "shard:"+itoa(shard), time.Now().Add(13*time.Hour).Format(time.RFC3339)), booking.EINVALID},
		{"unknown lever", ops, propose("teleport", "global", "on"), booking.EINVALID},
		{"wrong confirmation", ops, levers.Proposal{Name: levers.KillSwitch, Scope: "CARD", Value: "on", Reason: "test", Confirm: "kill_switch"}, booking.EINVALID},
		{"no reason", ops, levers.Proposal{Name: levers.KillSwitch, Scope: "CARD", Value: "on", Confirm: "kill_switch CARD"}, booking.EINVALID},
		{"finance may not", actor(t, s, "finance1"), propose(levers.KillSwitch, "CARD", "on"), booking.EFORBIDDEN},
		{"fraud may not", actor(t, s, "fraud1"), propose(levers.KillSwitch, "CARD", "on"), booking.EFORBIDDEN},
	}
	for _, tc := range bad {
		if _, err := svc.Propose(ctx, tc.a, tc.p); booking.ErrorCode(err) != tc.code {
			t.Errorf("%s: got %v, want %s", tc.name, err, tc.code)
		}
	}
	var n int
	if err := s.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM lever_changes) + (SELECT count(*) FROM console_levers)`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("refused changes left %d rows (%v)", n, err)
	}
	// The edges are allowed.
	for _, p := range []levers.Proposal{propose(levers.HoldWindow, "UPI", "60"), propose(levers.HoldWindow, "CARD", "900"),
		propose(levers.AdmissionRate, "global", "5000")} {
		ch, err := svc.Propose(ctx, ops, p)
		if err != nil || ch.State != "APPLIED" {
			t.Errorf("%s %s=%s: %v %s, want applied", p.Name, p.Scope, p.Value, err, ch.State)
		}
	}
	// Above the admission ceiling needs a second admin.
	ch, err := svc.Propose(ctx, ops, propose(levers.AdmissionRate, "global", "5001"))
	if err != nil || ch.State != "PENDING" || !ch.Dangerous {
		t.Fatalf("admission above ceiling: %v %+v, want pending", err, ch)
	}
	// Through the JSON API with ops1's personal token: bounds too.
	a := newBrowser(t, s.Server.URL)
	a.login("admin1")
	tok := a.newToken("ops1", "bounds test")
	if code, _ := api(t, s.Server.URL, "POST", "/v1/admin/levers/changes", tok, map[string]string{"name": "hold_window", "scope": "NB",
		"value": "5", "reason": "api test", "confirm": "hold_window NB"}); code != http.StatusBadRequest {
		t.Fatalf("API out of bounds: %d, want 400 as every /v1 invalid request", code)
	}
	if code, _ := api(t, s.Server.URL, "GET", "/v1/admin/levers", "wrong", nil); code != http.StatusUnauthorized {
		t.Fatalf("API wrong token: %d, want 401", code)
	}
}

func itoa(n int64) string { return jsonNum(n) }

func jsonNum(n int64) string { b, _ := json.Marshal(n); return string(b) }

// TestLeverReachesSecondProcess: two app processes on one database; a change
// made through one is in force in the other within one second.
func TestLeverReachesSecondProcess(t *testing.T) {
	s := setup(t, teststack.Options{})
	ops := actor(t, s, "ops1")
	second := teststack.Start(t, s.Env, teststack.Options{})
	ctx := context.Background()
	// Warm both readers.
	if !s.Levers.WaitlistEnabled() || !second.Levers.MethodEnabled("CARD") {
		t.Fatal("defaults: waitlist and cards should be on")
	}
	for _, tc := range []struct {
		p     levers.Proposal
		check func() bool
	}{
		{propose(levers.KillSwitch, "CARD", "on"), func() bool { return !second.Levers.MethodEnabled("CARD") }},
		{propose(levers.KillSwitch, "WAITLIST", "on"), func() bool { return !second.Levers.WaitlistEnabled() }},
		{propose(levers.HoldWindow, "UPI", "420"), func() bool { d, ok := second.Levers.HoldWindow("UPI"); return ok && d == 7*time.Minute }},
		{propose(levers.AdmissionPaused, "global", "on"), func() bool { return second.Levers.AdmissionPaused(1) }},
	} {
		start := time.Now()
		if _, err := s.Console.Levers().Propose(ctx, ops, tc.p); err != nil {
			t.Fatalf("%s: %v", tc.p.Name, err)
		}
		testenv.Eventually(t, time.Second, tc.p.Name+" "+tc.p.Scope+" in force in the second process", func() error {
			return testenv.Want(tc.check(), "not yet")
		})
		t.Logf("%s %s reached the second process in %s", tc.p.Name, tc.p.Scope, time.Since(start).Round(time.Millisecond))
	}
}

// TestWindowExtensionNeedsSecondAdmin: a closed window refuses holds; an
// extension proposed by one admin changes nothing until a different admin
// approves; then the hold succeeds (in the other process too), and the
// audit log names proposer, approver, old and new values. The automatic
// revert then closes the window again.
func TestWindowExtensionNeedsSecondAdmin(t *testing.T) {
	s := setup(t, teststack.Options{})
	ops, admin1, admin2 := actor(t, s, "ops1"), actor(t, s, "admin1"), actor(t, s, "admin2")
	second := teststack.Start(t, s.Env, teststack.Options{Work: true}) // its River workers run the revert
	shard, date := s.DemoShard(t, 10, 0)
	users := s.Users(t, "winext", 2)
	ctx := context.Background()
	if _, err := s.Pool.Exec(ctx, `UPDATE inventory_shards SET window_closes_at = now() - interval '1 second' WHERE id = $1`, shard); err != nil {
		t.Fatal(err)
	}
	s.Service.Catalog().Forget()
	second.Service.Catalog().Forget()
	_, err := s.Service.Hold(ctx, teststack.Caller(users[0]), holdReq(users[0], "winext-0001", date))
	if booking.ErrorReason(err) != "WINDOW_CLOSED" {
		t.Fatalf("hold after the window closed: %v, want WINDOW_CLOSED", err)
	}
	svc := s.Console.Levers()
	scope := "shard:" + itoa(shard)
	p := propose(levers.WindowClosesAt, scope, time.Now().Add(time.Hour).Format(time.RFC3339))
	p.RevertAfter = 3 * time.Second
	ch, err := svc.Propose(ctx, admin1, p)
	if err != nil || ch.State != "PENDING" {
		t.Fatalf("propose extension: %v %+v, want pending", err, ch)
	}
	// Both processes read the levers as their next refresh would.
	s.Levers.Refresh(ctx)
	second.Levers.Refresh(ctx)
	if _, err := s.Service.Hold(ctx, teststack.Caller(users[0]), holdReq(users[0], "winext-0002", date)); booking.ErrorReason(err) != "WINDOW_CLOSED" {
		t.Fatalf("hold with the extension pending: %v, want still WINDOW_CLOSED", err)
	}
	if _, err := svc.Approve(ctx, admin1, ch.ID); booking.ErrorCode(err) != booking.EFORBIDDEN {
		t.Fatalf("self-approval: %v, want forbidden", err)
	}
	if _, err := svc.Approve(ctx, ops, ch.ID); booking.ErrorCode(err) != booking.EFORBIDDEN {
		t.Fatalf("approval by ops: %v, want forbidden", err)
	}
	ch, err = svc.Approve(ctx, admin2, ch.ID)
	if err != nil || ch.State != "APPLIED" || ch.ApprovedBy != "admin2" {
		t.Fatalf("approve: %v %+v", err, ch)
	}
	testenv.Eventually(t, time.Second, "a hold in the second process after approval", func() error {
		res, err := second.Service.Hold(ctx, teststack.Caller(users[1]), holdReq(users[1], "winext-1-"+jsonNum(time.Now().UnixNano()), date))
		return testenv.Want(err == nil && res.Status == "HELD", "%v %+v", err, res)
	})
	var detail map[string]any
	if err := s.Pool.QueryRow(ctx, `SELECT detail FROM audit_log WHERE action = 'lever.change' ORDER BY id DESC LIMIT 1`).Scan(&detail); err != nil {
		t.Fatal(err)
	}
	if detail["approver"] != "admin2" || detail["proposed_by"] != "admin1" || detail["old"] == "" || detail["new"] == "" || detail["reason"] != "test change" {
		t.Fatalf("audit of the change: %v", detail)
	}
	// Automatic revert (a River job): the old closing time comes back.
	testenv.Eventually(t, 6*time.Second, "the change reverted", func() error {
		var state string
		if err := s.Pool.QueryRow(ctx, `SELECT state FROM lever_changes WHERE id = $1`, ch.ID).Scan(&state); err != nil {
			t.Fatal(err)
		}
		return testenv.Want(state == "REVERTED", "%s", state)
	})
	// The second process's levers follow by themselves.
	testenv.Eventually(t, 2*time.Second, "the extension gone from the second process", func() error {
		at, ok := second.Levers.WindowClosesAt(shard)
		return testenv.Want(!ok || at.Before(time.Now()), "closes at %s", at)
	})
	if _, err := second.Service.Hold(ctx, teststack.Caller(users[0]), holdReq(users[0], "winext-0003", date)); booking.ErrorReason(err) != "WINDOW_CLOSED" {
		t.Fatalf("hold after the automatic revert: %v, want WINDOW_CLOSED", err)
	}
	var reverts int
	s.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action = 'lever.revert'`).Scan(&reverts) //nolint:errcheck
	if reverts != 1 {
		t.Fatalf("%d revert audit records, want 1", reverts)
	}
}

// TestKillSwitchAndHoldWindowTakeEffect: CARD off refuses card payments
// with METHOD_UNAVAILABLE; the waitlist switch stops TQWL offers; the hold
// window lever sets how long a UPI payment keeps the seats.
func TestKillSwitchAndHoldWindowTakeEffect(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{})
	ops := actor(t, s, "ops1")
	shard, date := s.DemoShard(t, 1, 5)
	_ = shard
	users := s.Users(t, "kill", 3)
	ctx := context.Background()
	svc := s.Console.Levers()
	for _, p := range []levers.Proposal{propose(levers.KillSwitch, "CARD", "on"), propose(levers.KillSwitch, "WAITLIST", "on"), propose(levers.HoldWindow, "UPI", "600")} {
		if _, err := svc.Propose(ctx, ops, p); err != nil {
			t.Fatal(err)
		}
	}
	s.Levers.Refresh(ctx)
	res, err := s.Service.Hold(ctx, teststack.Caller(users[0]), holdReq(users[0], "kill-0001", date))
	if err != nil || res.Status != "HELD" {
		t.Fatalf("hold: %v %+v", err, res)
	}
	_, err = s.Payments.Initiate(ctx, teststack.Caller(users[0]), paymentReq(res.HoldID.String(), "CARD"))
	if booking.ErrorReason(err) != "METHOD_UNAVAILABLE" || booking.ErrorCode(err) != booking.EUNAVAIL {
		t.Fatalf("card payment with CARD killed: %v, want METHOD_UNAVAILABLE", err)
	}
	// The only seat is held: with the waitlist switched off, the next attempt is sold out, not waitlisted.
	res2, err := s.Service.Hold(ctx, teststack.Caller(users[1]), holdReq(users[1], "kill-0002", date))
	if err != nil || res2.Status != "SOLD_OUT" {
		t.Fatalf("hold with WAITLIST killed: %v %+v, want SOLD_OUT", err, res2)
	}
	// UPI keeps the seats 600 s from the hold.
	if _, err := s.Payments.Initiate(ctx, teststack.Caller(users[0]), paymentReq(res.HoldID.String(), "UPI")); err != nil {
		t.Fatalf("upi: %v", err)
	}
	var created, expires time.Time
	if err := s.Pool.QueryRow(ctx, `SELECT created_at, expires_at FROM holds WHERE id = $1`, res.HoldID).Scan(&created, &expires); err != nil {
		t.Fatal(err)
	}
	if got := expires.Sub(created); got < 599*time.Second || got > 601*time.Second {
		t.Fatalf("UPI hold window %s, want 10m from the lever", got)
	}
}

// TestLeverForms drives the console forms: preview shows the effect and
// the word to type, a wrong word is refused, the right one applies.
func TestLeverForms(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{})
	b := newBrowser(t, s.Server.URL)
	b.login("ops1")
	form := url.Values{"name": {"hold_window"}, "scope": {"CARD"}, "value": {"480"}, "reason": {"slow 3DS today"}}
	code, body, _ := b.post("/console/levers/preview", form)
	if code != http.StatusOK || !strings.Contains(body, `data-testid="lever-preview"`) || !strings.Contains(body, "hold_window CARD") {
		t.Fatalf("preview: %d\n%.2000s", code, body)
	}
	form.Set("confirm", "hold_window")
	if code, body, _ = b.post("/console/levers/propose", form); code != http.StatusUnprocessableEntity || !strings.Contains(body, "to confirm") {
		t.Fatalf("wrong confirmation: %d %.500s", code, body)
	}
	form.Set("confirm", "hold_window CARD")
	if code, _, _ = b.post("/console/levers/propose", form); code != http.StatusSeeOther {
		t.Fatalf("propose: %d", code)
	}
	form.Set("value", "10")
	if code, body, _ = b.post("/console/levers/preview", form); code != http.StatusUnprocessableEntity || !strings.Contains(body, "60 to 900") {
		t.Fatalf("out of bounds preview: %d %.500s", code, body)
	}
	_, body, _ = b.get("/console/audit")
	if !strings.Contains(body, "lever.change") || !strings.Contains(body, "slow 3DS today") {
		t.Fatalf("audit page lacks the change:\n%.3000s", body)
	}
}

func paymentReq(hold, method string) payment.InitiateRequest {
	id, _ := uuid.Parse(hold)
	return payment.InitiateRequest{HoldID: id, Method: method, VPA: "asha@upi", IdempotencyKey: "pay-" + method + "-" + hold[:8]}
}

// TestAdminAPI: the JSON API under /v1/admin with personal API tokens and
// with a console session (X-CSRF-Token). Two-person approval holds by user
// id whatever path each person takes: a change proposed with admin1's
// token cannot be approved by admin1's console session, nor one proposed
// in admin2's console by admin2's token, nor by a token admin1 created
// for admin2 when admin1 proposed; another admin's token or session can.
func TestAdminAPI(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{})
	ctx := context.Background()
	b1 := newBrowser(t, s.Server.URL)
	b1.login("admin1")
	b2 := newBrowser(t, s.Server.URL)
	b2.login("admin2")
	tok1 := b1.newToken("admin1", "admin1 script")
	tok2 := b2.newToken("admin2", "admin2 script")
	tok2by1 := b1.newToken("admin2", "made by admin1 for admin2")
	session := func(b *browser, method, path, csrf string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(method, s.Server.URL+path, nil)
		if csrf != "" {
			req.Header.Set("X-CSRF-Token", csrf)
		}
		resp, err := b.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out) //nolint:errcheck
		return resp.StatusCode, out
	}
	state := func(id int64) (st, approver string) {
		s.Pool.QueryRow(ctx, `SELECT state, coalesce(approved_by, '') FROM lever_changes WHERE id = $1`, id).Scan(&st, &approver) //nolint:errcheck
		return
	}

	// 1. Proposed with admin1's token: neither that token nor admin1's
	// console (form or JSON) may approve it; admin2's session may.
	code, ch := api(t, s.Server.URL, "POST", "/v1/admin/levers/changes", tok1, map[string]string{"name": "route", "scope": "swiftpay/NB",
		"value": "0,off", "reason": "swiftpay NB down", "confirm": "route swiftpay/NB"})
	if code != http.StatusCreated || ch["State"] != "APPLIED" || ch["ProposedBy"] != "admin1" {
		t.Fatalf("disable one NB route: %d %v", code, ch)
	}
	code, ch = api(t, s.Server.URL, "POST", "/v1/admin/levers/changes", tok1, map[string]string{"name": "route", "scope": "bharatpg/NB",
		"value": "0,off", "reason": "both NB routes down", "confirm": "route bharatpg/NB"})
	if code != http.StatusAccepted || ch["State"] != "PENDING" {
		t.Fatalf("disable the last NB route: %d %v, want 202 pending", code, ch)
	}
	id := int64(ch["ID"].(float64))
	approve := "/v1/admin/levers/changes/" + itoa(id) + "/approve"
	if code, _ := api(t, s.Server.URL, "POST", approve, tok1, nil); code != http.StatusForbidden {
		t.Fatalf("token approving its own change: %d, want 403", code)
	}
	if code, _ := session(b1, "POST", approve, b1.csrf); code != http.StatusForbidden {
		t.Fatalf("admin1's session approving what admin1's token proposed: %d, want 403", code)
	}
	if code, _, _ := b1.post("/console/levers/"+itoa(id)+"/approve", nil); code != http.StatusForbidden {
		t.Fatalf("admin1's console form approving what admin1's token proposed: %d, want 403", code)
	}
	if st, _ := state(id); st != "PENDING" {
		t.Fatalf("refused approvals changed the change: %s", st)
	}
	if code, _ := session(b2, "POST", approve, ""); code != http.StatusForbidden {
		t.Fatalf("session without X-CSRF-Token: %d, want 403", code)
	}
	code, ch = session(b2, "POST", approve, b2.csrf)
	if code != http.StatusOK || ch["State"] != "APPLIED" || ch["ApprovedBy"] != "admin2" {
		t.Fatalf("approve by admin2's session: %d %v", code, ch)
	}
	var enabled int
	s.Pool.QueryRow(ctx, `SELECT count(*) FROM payment_routes WHERE method = 'NB' AND enabled`).Scan(&enabled) //nolint:errcheck
	if enabled != 0 {
		t.Fatalf("%d NB routes still enabled", enabled)
	}

	// 2. Vice versa: proposed in admin2's console; admin2's token may not
	// approve it, admin1's token may.
	form := url.Values{"name": {"admission_rate"}, "scope": {"global"}, "value": {"6000"}, "reason": {"big window"}, "confirm": {"admission_rate global"}}
	if code, body, _ := b2.post("/console/levers/propose", form); code != http.StatusSeeOther {
		t.Fatalf("propose in the console: %d %.500s", code, body)
	}
	var id2 int64
	if err := s.Pool.QueryRow(ctx, `SELECT id FROM lever_changes WHERE state = 'PENDING' AND proposed_by = 'admin2'`).Scan(&id2); err != nil {
		t.Fatal(err)
	}
	if code, _ := api(t, s.Server.URL, "POST", "/v1/admin/levers/changes/"+itoa(id2)+"/approve", tok2, nil); code != http.StatusForbidden {
		t.Fatalf("admin2's token approving admin2's console change: %d, want 403", code)
	}
	code, ch = api(t, s.Server.URL, "POST", "/v1/admin/levers/changes/"+itoa(id2)+"/approve", tok1, nil)
	if code != http.StatusOK || ch["State"] != "APPLIED" || ch["ApprovedBy"] != "admin1" {
		t.Fatalf("approve by admin1's token: %d %v", code, ch)
	}

	// 3. A token admin1 made for admin2 is also admin1's: it may not
	// approve what admin1 proposed.
	form = url.Values{"name": {"admission_rate"}, "scope": {"global"}, "value": {"7000"}, "reason": {"bigger window"}, "confirm": {"admission_rate global"}}
	if code, _, _ := b1.post("/console/levers/propose", form); code != http.StatusSeeOther {
		t.Fatalf("propose by admin1: %d", code)
	}
	var id3 int64
	if err := s.Pool.QueryRow(ctx, `SELECT id FROM lever_changes WHERE state = 'PENDING' AND proposed_by = 'admin1'`).Scan(&id3); err != nil {
		t.Fatal(err)
	}
	code, ch = api(t, s.Server.URL, "POST", "/v1/admin/levers/changes/"+itoa(id3)+"/approve", tok2by1, nil)
	if code != http.StatusForbidden || ch["code"] != "forbidden" || ch["reason"] != "SAME_PERSON" {
		t.Fatalf("token admin1 made for admin2 approving admin1's change: %d %v, want 403 SAME_PERSON", code, ch)
	}
	if st, _ := state(id3); st != "PENDING" {
		t.Fatalf("refused approval changed the change: %s", st)
	}
	if code, _ := api(t, s.Server.URL, "POST", "/v1/admin/levers/changes/"+itoa(id3)+"/approve", tok2, nil); code != http.StatusOK {
		t.Fatalf("admin2's own token approving admin1's change: %d", code)
	}
	// 4. And the other way: ops1's token, made by admin1, proposes; admin1
	// (the token's issuer) may not approve it, admin2 may.
	opsTok := b1.newToken("ops1", "ops1 script made by admin1")
	code, ch = api(t, s.Server.URL, "POST", "/v1/admin/levers/changes", opsTok, map[string]string{"name": "admission_rate", "scope": "global",
		"value": "8000", "reason": "ops asks", "confirm": "admission_rate global"})
	if code != http.StatusAccepted || ch["ProposedBy"] != "ops1" {
		t.Fatalf("ops token proposing: %d %v", code, ch)
	}
	id4 := int64(ch["ID"].(float64))
	if code, _, _ := b1.post("/console/levers/"+itoa(id4)+"/approve", nil); code != http.StatusForbidden {
		t.Fatalf("admin1 approving what a token admin1 made proposed: %d, want 403", code)
	}
	if code, _, _ := b2.post("/console/levers/"+itoa(id4)+"/approve", nil); code != http.StatusSeeOther {
		t.Fatalf("admin2 approving: %d", code)
	}
	if st, by := state(id4); st != "APPLIED" || by != "admin2" {
		t.Fatalf("change %d: %s by %q, want applied by admin2", id4, st, by)
	}
	// The database holds the rule too.
	if _, err := s.Pool.Exec(ctx, `UPDATE lever_changes SET approved_by_id = proposed_by_id WHERE id = $1`, id3); err == nil {
		t.Fatal("the database let a change be approved by its proposer")
	}

	f := newBrowser(t, s.Server.URL)
	f.login("finance1")
	if code, _ := session(f, "GET", "/v1/admin/levers", ""); code != http.StatusForbidden {
		t.Fatalf("finance reading levers: %d, want 403", code)
	}
}
