package console_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"tatkal/booking"
	"tatkal/booking/lab/teststack"
	"tatkal/console/levers"
)

// TestSharedAdminTokenRefused: the simulators' admin token (the stack's
// "test-admin", like dev's "dev-admin") is no identity on /v1/admin: every
// call with it is 401 and changes nothing.
func TestSharedAdminTokenRefused(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{})
	for _, tok := range []string{"test-admin", "dev-admin"} {
		for _, call := range []struct{ method, path, body string }{
			{"GET", "/v1/admin/levers", ""},
			{"POST", "/v1/admin/levers/changes", `{"name":"kill_switch","scope":"CARD","value":"on","reason":"shared token","confirm":"kill_switch CARD"}`},
			{"POST", "/v1/admin/levers/changes/1/approve", ""},
		} {
			req, _ := http.NewRequest(call.method, s.Server.URL+call.path, strings.NewReader(call.body))
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s %s with the shared token %q: %d, want 401", call.method, call.path, tok, resp.StatusCode)
			}
		}
	}
	var n int
	if err := s.Pool.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM lever_changes) + (SELECT count(*) FROM console_levers)`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("the shared token changed something: %d rows (%v)", n, err)
	}
}

// TestAuditBounded: a failed console login with a 200 KB login, control
// characters and invalid UTF-8 leaves no audit row above the caps; the
// audit writer truncates and cleans whatever any caller gives it.
func TestAuditBounded(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{})
	ctx := context.Background()
	huge := strings.Repeat("x", 200<<10)
	b := newBrowser(t, s.Server.URL)
	_, page, _ := b.get("/console/login")
	tok := csrfRE.FindStringSubmatch(page)[1]
	b.post("/console/login", url.Values{"csrf": {tok}, "login": {huge}, "password": {"nope"}})
	var maxActor, maxDetail int
	if err := s.Pool.QueryRow(ctx, `SELECT coalesce(max(octet_length(actor)), 0), coalesce(max(octet_length(detail::text)), 0) FROM audit_log`).
		Scan(&maxActor, &maxDetail); err != nil {
		t.Fatal(err)
	}
	if maxActor > 100 || maxDetail > 8<<10 {
		t.Fatalf("after a 200 KB login: largest actor %d bytes, detail %d bytes; want ≤ 100 and ≤ 8 KB", maxActor, maxDetail)
	}

	// The writer itself, whatever the caller.
	dirty := "evil\x1b[31m\r\nadmin\x00\xff" + huge
	if err := levers.Audit(ctx, s.Pool, dirty, "test.bounded", dirty, map[string]any{"note": dirty, "nested": []any{dirty, 7}, dirty[:20]: true}); err != nil {
		t.Fatalf("audit: %v", err)
	}
	var actor, subject, detail string
	if err := s.Pool.QueryRow(ctx, `SELECT actor, subject, detail::text FROM audit_log WHERE action = 'test.bounded'`).Scan(&actor, &subject, &detail); err != nil {
		t.Fatal(err)
	}
	for what, v := range map[string]string{"actor": actor, "subject": subject, "detail": detail} {
		if !utf8.ValidString(v) || strings.ContainsAny(v, "\x00\x1b\r\n\ufffd") || strings.Contains(v, `\u001b`) || strings.Contains(v, `\u0000`) {
			t.Errorf("%s keeps control characters or invalid UTF-8: %.80q", what, v)
		}
	}
	if len(actor) > 100 || !strings.HasPrefix(actor, "evil[31madmin") || !strings.HasSuffix(actor, "…") {
		t.Errorf("actor %d bytes %.120q, want the cleaned start, truncated with …", len(actor), actor)
	}
	if len(subject) > 300 || len(detail) > 8<<10 {
		t.Errorf("subject %d bytes, detail %d bytes: not bounded", len(subject), len(detail))
	}
	if !strings.Contains(detail, "evil[31m") {
		t.Errorf("detail lost its content: %.200s", detail)
	}
	// Many capped strings together: kept as a marked excerpt within 8 KB.
	many := map[string]any{}
	for i := range 40 {
		many[strings.Repeat("k", i+1)] = strings.Repeat(`"<\`, 400)
	}
	if err := levers.Audit(ctx, s.Pool, "ops1", "test.many", "", many); err != nil {
		t.Fatalf("audit: %v", err)
	}
	var size int
	var truncated bool
	if err := s.Pool.QueryRow(ctx, `SELECT octet_length(detail::text), (detail->>'truncated')::bool FROM audit_log WHERE action = 'test.many'`).
		Scan(&size, &truncated); err != nil {
		t.Fatal(err)
	}
	if !truncated || size > 8<<10 {
		t.Fatalf("a 48 KB detail stored as %d bytes, truncated %v; want a marked excerpt within 8 KB", size, truncated)
	}
}

// TestNoticeFromURLIgnored: ?notice= puts no text on any console page.
func TestNoticeFromURLIgnored(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{})
	b := newBrowser(t, s.Server.URL)
	b.login("admin1")
	evil := url.QueryEscape(`<script>alert(1)</script>Call 1800-FAKE now`)
	for _, p := range []string{"/console/levers", "/console/shards", "/console/payments", "/console/audit", "/console/tokens", "/console/users", "/console/funnel", "/console/lookup"} {
		code, body, _ := b.get(p + "?notice=" + evil + "&error=" + evil)
		if code != http.StatusOK {
			t.Fatalf("%s: %d", p, code)
		}
		if strings.Contains(body, "1800-FAKE") || strings.Contains(body, `data-testid="notice"`) {
			t.Errorf("%s shows text from the URL:\n%.1500s", p, body)
		}
	}
}

var auditRowRE = regexp.MustCompile(`data-testid="audit-row" data-id="(\d+)"`)
var olderRE = regexp.MustCompile(`href="([^"]+)" data-testid="audit-older"`)

// TestAuditPaging: the audit view shows 100 rows a page, newest first,
// and pages back with the filter kept, every row once.
func TestAuditPaging(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{})
	ctx := context.Background()
	if _, err := s.Pool.Exec(ctx, `INSERT INTO audit_log (actor, action, subject)
		SELECT 'ops1', CASE WHEN g % 2 = 0 THEN 'page.even' ELSE 'page.odd' END, g::text FROM generate_series(1, 500) g`); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, s.Server.URL)
	b.login("finance1")
	seen := map[string]bool{}
	path := "/console/audit?action=page.even"
	pages := 0
	for path != "" {
		code, body, _ := b.get(path)
		if code != http.StatusOK {
			t.Fatalf("%s: %d", path, code)
		}
		pages++
		rows := auditRowRE.FindAllStringSubmatch(body, -1)
		if len(rows) > 100 {
			t.Fatalf("page %d has %d rows, want at most 100", pages, len(rows))
		}
		if strings.Contains(body, "page.odd") {
			t.Fatalf("page %d lost the filter", pages)
		}
		for _, r := range rows {
			if seen[r[1]] {
				t.Fatalf("row %s shown twice", r[1])
			}
			seen[r[1]] = true
		}
		path = ""
		if m := olderRE.FindStringSubmatch(body); m != nil {
			path = strings.ReplaceAll(m[1], "&amp;", "&")
			if !strings.Contains(path, "action=page.even") {
				t.Fatalf("older link %q drops the filter", path)
			}
		}
		if pages > 10 {
			t.Fatal("paging does not end")
		}
	}
	if pages != 3 || len(seen) != 250 {
		t.Fatalf("%d pages, %d rows; want 3 pages of 250 rows", pages, len(seen))
	}
	// A bad cursor is a clear 400, not a 500.
	if code, _, _ := b.get("/console/audit?before=abc"); code != http.StatusBadRequest {
		t.Fatalf("bad cursor: %d, want 400", code)
	}
	if code, _, _ := b.get("/console/audit?action=" + url.QueryEscape("a\x00b")); code != http.StatusBadRequest {
		t.Fatalf("NUL in the filter: %d, want 400", code)
	}
}

// TestAPITokenLifecycle: an admin creates a personal token for ops1 in the
// console; it is shown once and stored only as its SHA-256; it acts as
// ops1 (role ops) on /v1/admin and records when it was used; revoked in
// the console, it stops working at once. Creation and revocation are
// audited without the token.
func TestAPITokenLifecycle(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{})
	ctx := context.Background()
	b := newBrowser(t, s.Server.URL)
	b.login("admin1")
	tok := b.newToken("ops1", "ops deploy script")
	var id int64
	var hash []byte
	var used *time.Time
	if err := s.Pool.QueryRow(ctx, `SELECT id, token_hash, last_used_at FROM console_api_tokens`).Scan(&id, &hash, &used); err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256([]byte(tok)); !bytes.Equal(hash, sum[:]) || used != nil {
		t.Fatalf("stored hash %x, want SHA-256 of the token; last used %v before any use", hash, used)
	}
	var leaks int
	if err := s.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM console_api_tokens t WHERE strpos(t::text, $1) > 0)
		+ (SELECT count(*) FROM audit_log a WHERE strpos(a::text, $1) > 0)`, tok[4:]).Scan(&leaks); err != nil || leaks != 0 {
		t.Fatalf("the token is stored in clear in %d rows (%v)", leaks, err)
	}
	_, page, _ := b.get("/console/tokens")
	if strings.Contains(page, tok) || !strings.Contains(page, `data-testid="token-`+itoa(id)+`"`) {
		t.Fatalf("the list shows the token again, or lacks it:\n%.2000s", page)
	}

	// It acts as ops1: may read and propose, may not approve.
	if code, out := api(t, s.Server.URL, "GET", "/v1/admin/levers", tok, nil); code != http.StatusOK {
		t.Fatalf("read levers with the token: %d %v", code, out)
	}
	code, ch := api(t, s.Server.URL, "POST", "/v1/admin/levers/changes", tok, map[string]string{"name": "kill_switch", "scope": "NON_ESSENTIAL",
		"value": "on", "reason": "by token", "confirm": "kill_switch NON_ESSENTIAL"})
	if code != http.StatusCreated || ch["ProposedBy"] != "ops1" {
		t.Fatalf("propose with the token: %d %v, want applied as ops1", code, ch)
	}
	var via string
	s.Pool.QueryRow(ctx, `SELECT detail->>'via' FROM audit_log WHERE action = 'lever.propose'`).Scan(&via) //nolint:errcheck
	if via != "api-token "+itoa(id) {
		t.Fatalf("the audit says the change came via %q", via)
	}
	if code, _ := api(t, s.Server.URL, "POST", "/v1/admin/levers/changes/1/approve", tok, nil); code != http.StatusForbidden {
		t.Fatalf("an ops token approving: %d, want 403", code)
	}
	s.Pool.QueryRow(ctx, `SELECT last_used_at FROM console_api_tokens WHERE id = $1`, id).Scan(&used) //nolint:errcheck
	if used == nil || time.Since(*used) > time.Minute {
		t.Fatalf("last used %v, want just now", used)
	}
	if _, page, _ = b.get("/console/tokens"); strings.Contains(page, `data-testid="token-used-`+itoa(id)+`">never<`) {
		t.Fatal("the list says the token was never used")
	}

	// Revoked in the console: refused at once, and the page says so once.
	code, _, h := b.post("/console/tokens/"+itoa(id)+"/revoke", nil)
	if code != http.StatusSeeOther || h.Get("Location") != "/console/tokens" {
		t.Fatalf("revoke: %d %s", code, h.Get("Location"))
	}
	_, page, _ = b.get("/console/tokens")
	if !strings.Contains(page, `data-testid="notice"`) || !strings.Contains(page, "revoked") {
		t.Fatalf("no notice after revoking:\n%.2000s", page)
	}
	if _, page, _ = b.get("/console/tokens"); strings.Contains(page, `data-testid="notice"`) {
		t.Fatal("the notice is shown twice")
	}
	if code, _ := api(t, s.Server.URL, "GET", "/v1/admin/levers", tok, nil); code != http.StatusUnauthorized {
		t.Fatalf("revoked token: %d, want 401", code)
	}
	if code, _, _ := b.post("/console/tokens/"+itoa(id)+"/revoke", nil); code != http.StatusNotFound {
		t.Fatalf("revoking twice: %d, want 404", code)
	}
	var audits int
	s.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE actor = 'admin1' AND subject = $1 AND action IN ('token.create', 'token.revoke')`,
		"token "+itoa(id)).Scan(&audits) //nolint:errcheck
	if audits != 2 {
		t.Fatalf("%d token audit records, want create and revoke", audits)
	}

	// Expired tokens and tokens of disabled users stop too.
	t2 := b.newToken("admin2", "expiry")
	t3 := b.newToken("fraud1", "disable")
	if code, _ := api(t, s.Server.URL, "GET", "/v1/admin/levers", t2, nil); code != http.StatusOK {
		t.Fatalf("fresh admin token: %d", code)
	}
	if _, err := s.Pool.Exec(ctx, `UPDATE console_api_tokens SET expires_at = now(), created_at = now() - interval '1 day' WHERE label = 'expiry'`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pool.Exec(ctx, `UPDATE console_users SET disabled = true WHERE login = 'fraud1'`); err != nil {
		t.Fatal(err)
	}
	for _, tk := range []string{t2, t3} {
		if code, _ := api(t, s.Server.URL, "GET", "/v1/admin/levers", tk, nil); code != http.StatusUnauthorized {
			t.Fatalf("expired or disabled user's token: %d, want 401", code)
		}
	}
	// Bad forms change nothing.
	var before int
	s.Pool.QueryRow(ctx, `SELECT count(*) FROM console_api_tokens`).Scan(&before) //nolint:errcheck
	for _, f := range []url.Values{
		{"user": {"nobody"}, "label": {"x"}, "days": {"30"}},
		{"user": {"ops1"}, "label": {""}, "days": {"30"}},
		{"user": {"ops1"}, "label": {"x"}, "days": {"366"}},
		{"user": {"ops1"}, "label": {"x\x00y"}, "days": {"30"}},
	} {
		want := http.StatusUnprocessableEntity
		if strings.ContainsRune(f.Get("label"), 0) {
			want = http.StatusBadRequest // refused before any handler (httpx.ValidText)
		}
		if code, _, _ := b.post("/console/tokens", f); code != want {
			t.Errorf("create %v: %d, want %d", f, code, want)
		}
	}
	var after int
	s.Pool.QueryRow(ctx, `SELECT count(*) FROM console_api_tokens`).Scan(&after) //nolint:errcheck
	if after != before {
		t.Fatalf("refused forms created %d tokens", after-before)
	}
}

// TestLeverActorIsAPerson: the lever service takes no one's word for who
// they are: an actor with no user id, a disabled user, or a role claimed
// above the user's own is refused, changing nothing.
func TestLeverActorIsAPerson(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{})
	ctx := context.Background()
	svc := s.Console.Levers()
	p := levers.Proposal{Name: levers.KillSwitch, Scope: "CARD", Value: "on", Reason: "who am I", Confirm: "kill_switch CARD"}
	fin := actor(t, s, "finance1")
	fin.Role = "admin"
	for name, a := range map[string]levers.Actor{
		"no user":       {Login: "admin-token", Role: "admin"},
		"claimed admin": fin,
	} {
		if _, err := svc.Propose(ctx, a, p); booking.ErrorCode(err) != booking.EFORBIDDEN {
			t.Errorf("%s proposing: %v, want forbidden", name, err)
		}
	}
	ops := actor(t, s, "ops1")
	if _, err := s.Pool.Exec(ctx, `UPDATE console_users SET disabled = true WHERE login = 'ops1'`); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Propose(ctx, ops, p); booking.ErrorCode(err) != booking.EFORBIDDEN {
		t.Errorf("disabled user proposing: %v, want forbidden", err)
	}
	var n int
	if err := s.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM lever_changes) + (SELECT count(*) FROM console_levers)`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("refused actors changed %d rows (%v)", n, err)
	}
}
