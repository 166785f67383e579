package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"tatkal/booking"
	"tatkal/booking/lab/teststack"
	"tatkal/console/levers"
)

// TestShardThrottleLever: shard_throttle takes off or 1..20000 per second,
// global or per existing shard; anything else is refused with a message
// that says what to give, and changes nothing. Above 5,000 waits for a
// second admin. Changes are audited as the person's, and the reader
// answers the shard's own value ahead of the global one.
func TestShardThrottleLever(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{})
	ops, admin2 := actor(t, s, "ops1"), actor(t, s, "admin2")
	shard, _ := s.DemoShard(t, 10, 0)
	other := shard + 1000 // any shard without a throttle of its own
	svc := s.Console.Levers()
	ctx := context.Background()
	scope := "shard:" + itoa(shard)
	counts := func() (n int) {
		t.Helper()
		if err := s.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM lever_changes) + (SELECT count(*) FROM console_levers)
			+ (SELECT count(*) FROM audit_log WHERE action LIKE 'lever.%')`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := counts()
	for _, tc := range []struct{ scope, value, says string }{
		{scope, "0", "off or 1 to 20000"}, {scope, "-1", "off or 1 to 20000"}, {scope, "20001", "off or 1 to 20000"},
		{scope, "fast", "off or 1 to 20000"}, {scope, "", "off or 1 to 20000"}, {"global", "5.5", "off or 1 to 20000"},
		{"shard:999999", "5", "No shard 999999"}, {"shard:x", "5", "give global or shard:N"}, {"CARD", "5", "give global or shard:N"},
	} {
		_, err := svc.Propose(ctx, ops, propose(levers.ShardThrottle, tc.scope, tc.value))
		if booking.ErrorCode(err) != booking.EINVALID || !strings.Contains(booking.ErrorMessage(err), tc.says) {
			t.Errorf("%s = %q: %v, want invalid saying %q", tc.scope, tc.value, err, tc.says)
		}
		if _, err := svc.Preview(ctx, propose(levers.ShardThrottle, tc.scope, tc.value)); booking.ErrorCode(err) != booking.EINVALID {
			t.Errorf("preview %s = %q: %v, want invalid", tc.scope, tc.value, err)
		}
	}
	if n := counts(); n != before {
		t.Fatalf("refused throttles changed %d rows", n-before)
	}
	if r, ok := s.Levers.ShardThrottle(shard); ok || s.Levers.Throttling() {
		t.Fatalf("unset throttle reads %d %v", r, ok)
	}

	// The edges are taken; 20000 (above 5,000) waits for a second admin.
	for _, v := range []string{"1", " OFF "} {
		if ch, err := svc.Propose(ctx, ops, propose(levers.ShardThrottle, scope, v)); err != nil || ch.State != "APPLIED" {
			t.Fatalf("%s = %q: %v %+v, want applied", scope, v, err, ch)
		}
	}
	ch, err := svc.Propose(ctx, ops, propose(levers.ShardThrottle, "global", "20000"))
	if err != nil || ch.State != "PENDING" || !ch.Dangerous {
		t.Fatalf("global 20000: %v %+v, want pending for a second admin", err, ch)
	}
	if ch, err = svc.Approve(ctx, admin2, ch.ID); err != nil || ch.State != "APPLIED" {
		t.Fatalf("approve global 20000: %v %+v", err, ch)
	}
	if ch, err := svc.Propose(ctx, ops, propose(levers.ShardThrottle, scope, "5000")); err != nil || ch.State != "APPLIED" {
		t.Fatalf("%s = 5000: %v %+v, want applied without a second admin", scope, err, ch)
	}
	s.Levers.Refresh(ctx)
	if r, ok := s.Levers.ShardThrottle(shard); !ok || r != 5000 {
		t.Errorf("the shard's own throttle: %d %v, want 5000", r, ok)
	}
	if r, ok := s.Levers.ShardThrottle(other); !ok || r != 20000 {
		t.Errorf("another shard under the global throttle: %d %v, want 20000", r, ok)
	}
	if _, err := svc.Propose(ctx, ops, propose(levers.ShardThrottle, "global", "off")); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Propose(ctx, ops, propose(levers.ShardThrottle, scope, "off")); err != nil {
		t.Fatal(err)
	}
	s.Levers.Refresh(ctx)
	if r, ok := s.Levers.ShardThrottle(shard); ok || s.Levers.Throttling() {
		t.Errorf("throttles off read %d %v", r, ok)
	}
	// The console's levers page offers it, previews it and sets it.
	b := newBrowser(t, s.Server.URL)
	b.login("ops1")
	if code, body, _ := b.get("/console/levers"); code != http.StatusOK || !strings.Contains(body, "shard_throttle") || !strings.Contains(body, "Throttle holds and payments") {
		t.Fatalf("levers page: %d lacks shard_throttle\n%.2000s", code, body)
	}
	form := url.Values{"name": {"shard_throttle"}, "scope": {scope}, "value": {"fast"}, "reason": {"core is slow"}}
	if code, body, _ := b.post("/console/levers/preview", form); code != http.StatusUnprocessableEntity || !strings.Contains(body, "off or 1 to 20000") {
		t.Fatalf("form preview of fast: %d %.500s", code, body)
	}
	form.Set("value", "250")
	if code, body, _ := b.post("/console/levers/preview", form); code != http.StatusOK || !strings.Contains(body, "At most 250 hold calls a second") {
		t.Fatalf("form preview: %d %.2000s", code, body)
	}
	form.Set("confirm", "shard_throttle "+scope)
	if code, _, _ := b.post("/console/levers/propose", form); code != http.StatusSeeOther {
		t.Fatalf("form propose: %d", code)
	}
	s.Levers.Refresh(ctx)
	if r, ok := s.Levers.ShardThrottle(shard); !ok || r != 250 {
		t.Fatalf("after the form: %d %v, want 250", r, ok)
	}
	if _, err := svc.Propose(ctx, ops, propose(levers.ShardThrottle, scope, "off")); err != nil {
		t.Fatal(err)
	}
	// Every applied change is audited as the person who made it.
	var audited, fromForm int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE detail->>'reason' = 'core is slow')
		FROM audit_log WHERE action = 'lever.change' AND subject LIKE 'shard_throttle %' AND actor = 'ops1'`).Scan(&audited, &fromForm); err != nil {
		t.Fatal(err)
	}
	if audited != 8 || fromForm != 1 {
		t.Errorf("%d shard_throttle changes audited as ops1 (%d from the form), want 8 (1)", audited, fromForm)
	}
}
