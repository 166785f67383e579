package console_test

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"tatkal/booking/lab/teststack"
)

// TestRoutesByRole: every console route against every role and an
// anonymous visitor. Anonymous: GET redirects to the login page, anything
// else is 401; a wrong role gets 403; an allowed role gets through (its
// answer may still be a validation error or a redirect, never 401/403).
func TestRoutesByRole(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{})
	all := []string{"ops", "finance", "fraud", "admin"}
	routes := []struct {
		method, path string
		roles        []string
	}{
		{"GET", "/console/", all},
		{"GET", "/console/funnel", []string{"ops", "admin"}},
		{"GET", "/console/funnel.json", []string{"ops", "admin"}},
		{"GET", "/console/funnel/ws", []string{"ops", "admin"}},
		{"GET", "/console/levers", []string{"ops", "admin"}},
		{"POST", "/console/levers/preview", []string{"ops", "admin"}},
		{"POST", "/console/levers/propose", []string{"ops", "admin"}},
		{"POST", "/console/levers/999/approve", []string{"admin"}},
		{"POST", "/console/levers/999/reject", []string{"ops", "admin"}},
		{"GET", "/console/shards", []string{"ops", "admin"}},
		{"POST", "/console/shards/999/rebuild", []string{"ops", "admin"}},
		{"POST", "/console/shards/999/chart/retry", []string{"ops", "admin"}},
		{"POST", "/console/shards/999/chart/prepare", []string{"ops", "admin"}},
		{"GET", "/console/lab", []string{"ops", "admin"}},
		{"POST", "/console/lab", []string{"ops", "admin"}},
		{"GET", "/console/payments", []string{"ops", "finance", "admin"}},
		{"GET", "/console/schedules", []string{"ops", "finance", "admin"}},
		{"POST", "/console/payments/0190c8f2-0000-7000-8000-000000000000/inquire", []string{"ops", "finance", "admin"}},
		{"GET", "/console/lookup?q=nobody", []string{"ops", "fraud", "admin"}},
		{"GET", "/console/trace?login=nobody", []string{"ops", "fraud", "admin"}},
		{"GET", "/console/audit", all},
		{"GET", "/console/finance", []string{"finance", "admin"}},
		{"POST", "/console/finance/runs", []string{"finance", "admin"}},
		{"GET", "/console/finance/runs/999", []string{"finance", "admin"}},
		{"GET", "/console/finance/runs/999/workbook.xlsx", []string{"finance", "admin"}},
		{"GET", "/console/finance/runs/999/exceptions.csv", []string{"finance", "admin"}},
		{"GET", "/console/finance/files/diff?old=1&new=2", []string{"finance", "admin"}},
		{"POST", "/console/finance/files/1/current", []string{"finance", "admin"}},
		{"POST", "/console/finance/files/previews/0190c8f2-0000-7000-8000-000000000000/confirm", []string{"finance", "admin"}},
		{"POST", "/console/finance/files/previews/0190c8f2-0000-7000-8000-000000000000/cancel", []string{"finance", "admin"}},
		{"GET", "/console/finance/month", []string{"finance", "admin"}},
		{"GET", "/console/finance/month/2025-01/workbook.xlsx", []string{"finance", "admin"}},
		{"GET", "/console/finance/exceptions?state=UNRESOLVED", []string{"finance", "admin"}},
		{"GET", "/console/finance/exceptions/0190c8f2-0000-7000-8000-000000000000", []string{"finance", "admin"}},
		{"POST", "/console/finance/exceptions/0190c8f2-0000-7000-8000-000000000000/assign", []string{"finance", "admin"}},
		{"POST", "/console/finance/exceptions/0190c8f2-0000-7000-8000-000000000000/note", []string{"finance", "admin"}},
		{"POST", "/console/finance/exceptions/0190c8f2-0000-7000-8000-000000000000/resolve", []string{"finance", "admin"}},
		{"POST", "/console/finance/exceptions/0190c8f2-0000-7000-8000-000000000000/writeoff", []string{"finance", "admin"}},
		{"POST", "/console/finance/exceptions/0190c8f2-0000-7000-8000-000000000000/approve", []string{"finance", "admin"}},
		{"GET", "/console/finance/files", []string{"finance", "admin"}},
		{"POST", "/console/finance/files", []string{"finance", "admin"}},
		{"GET", "/console/finance/books", []string{"finance", "admin"}},
		{"GET", "/console/finance/books?term=pending", []string{"finance", "admin"}},
		{"POST", "/console/finance/messages/read", []string{"finance", "admin"}},
		{"GET", "/console/fraud", []string{"fraud", "admin"}},
		{"GET", "/console/fraud/clusters/999", []string{"fraud", "admin"}},
		{"GET", "/console/fraud/clusters/999/evidence.xlsx", []string{"fraud", "admin"}},
		{"POST", "/console/fraud/clusters/999/claim", []string{"fraud", "admin"}},
		{"POST", "/console/fraud/clusters/999/decide", []string{"fraud", "admin"}},
		{"POST", "/console/fraud/decisions/999/approve", []string{"fraud", "admin"}},
		{"POST", "/console/fraud/appeals/999", []string{"fraud", "admin"}},
		{"GET", "/console/fraud/appeals/999", []string{"fraud", "admin"}},
		{"POST", "/console/fraud/appeals/999/claim", []string{"fraud", "admin"}},
		{"POST", "/console/fraud/clusters/999/release", []string{"fraud", "admin"}},
		{"POST", "/console/fraud/clusters/999/handover", []string{"fraud", "admin"}},
		{"POST", "/console/fraud/clusters/999/close", []string{"fraud", "admin"}},
		{"POST", "/console/fraud/cluster-now", []string{"fraud", "admin"}},
		{"GET", "/console/tokens", []string{"admin"}},
		{"POST", "/console/tokens", []string{"admin"}},
		{"POST", "/console/tokens/999/revoke", []string{"admin"}},
		{"GET", "/console/users", []string{"admin"}},
		{"POST", "/console/users", []string{"admin"}},
		{"GET", "/console/users/nobody9", []string{"admin"}},
		{"POST", "/console/users/nobody9/role", []string{"admin"}},
		{"POST", "/console/users/nobody9/disable", []string{"admin"}},
		{"POST", "/console/users/nobody9/enable", []string{"admin"}},
		{"POST", "/console/users/nobody9/password", []string{"admin"}},
		{"POST", "/console/user-grants/999/approve", []string{"admin"}},
		{"POST", "/console/user-grants/999/reject", []string{"admin"}},
		{"GET", "/console/river/", []string{"admin"}},
		{"POST", "/console/logout", all},
	}
	users := map[string]string{"ops": "ops1", "finance": "finance1", "fraud": "fraud1", "admin": "admin1"}
	for _, who := range append([]string{"anonymous"}, all...) {
		t.Run(who, func(t *testing.T) {
			for _, rt := range routes {
				b := newBrowser(t, s.Server.URL)
				if who != "anonymous" {
					b.login(users[who])
				}
				var code int
				var body string
				var h http.Header
				if rt.method == "GET" {
					code, body, h = b.get(rt.path)
				} else {
					code, body, h = b.post(rt.path, url.Values{})
				}
				switch {
				case who == "anonymous" && rt.method == "GET" && (strings.HasSuffix(rt.path, ".json") || strings.HasSuffix(rt.path, "/ws")):
					if code != http.StatusUnauthorized {
						t.Errorf("anonymous %s %s: %d, want 401 (a script, not a page)", rt.method, rt.path, code)
					}
				case who == "anonymous" && rt.method == "GET":
					if code != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), "/console/login") {
						t.Errorf("anonymous %s %s: %d %s, want a redirect to the login page", rt.method, rt.path, code, h.Get("Location"))
					}
				case who == "anonymous":
					if code != http.StatusUnauthorized {
						t.Errorf("anonymous %s %s: %d, want 401", rt.method, rt.path, code)
					}
				case slices.Contains(rt.roles, who):
					if code == http.StatusForbidden || code == http.StatusUnauthorized || code >= 500 ||
						strings.HasPrefix(h.Get("Location"), "/console/login?next") {
						t.Errorf("%s %s %s: %d, want it allowed\n%.300s", who, rt.method, rt.path, code, body)
					}
				default:
					if code != http.StatusForbidden {
						t.Errorf("%s %s %s: %d, want 403", who, rt.method, rt.path, code)
					}
				}
			}
		})
	}
}

// TestAdminAPIByRole: every /v1/admin route against a personal API token
// of each role, no token, a wrong one and the simulators' shared token.
// No or unknown token: 401; a wrong role: 403; an allowed role gets
// through (404 or 400 for the empty calls here, never 401/403).
func TestAdminAPIByRole(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{})
	b := newBrowser(t, s.Server.URL)
	b.login("admin1")
	tokens := map[string]string{"none": "", "wrong": "tkc_" + strings.Repeat("A", 43), "shared": "test-admin"}
	for role, login := range map[string]string{"ops": "ops1", "finance": "finance1", "fraud": "fraud1", "admin": "admin2"} {
		tokens[role] = b.newToken(login, role+" matrix")
	}
	routes := []struct {
		method, path string
		roles        []string
	}{
		{"GET", "/v1/admin/levers", []string{"ops", "admin"}},
		{"POST", "/v1/admin/levers/preview", []string{"ops", "admin"}},
		{"POST", "/v1/admin/levers/changes", []string{"ops", "admin"}},
		{"POST", "/v1/admin/levers/changes/999/approve", []string{"admin"}},
		{"POST", "/v1/admin/levers/changes/999/reject", []string{"ops", "admin"}},
		{"GET", "/v1/internal/reconciliation/swiftpay/2025-06-04", []string{"finance", "admin"}},
	}
	for who, tok := range tokens {
		for _, rt := range routes {
			var body any
			if rt.method == "POST" {
				body = map[string]string{}
			}
			code, out := api(t, s.Server.URL, rt.method, rt.path, tok, body)
			switch {
			case who == "none" || who == "wrong" || who == "shared":
				if code != http.StatusUnauthorized {
					t.Errorf("%s token %s %s: %d, want 401", who, rt.method, rt.path, code)
				}
			case slices.Contains(rt.roles, who):
				if code == http.StatusUnauthorized || code == http.StatusForbidden || code >= 500 {
					t.Errorf("%s token %s %s: %d %v, want it allowed", who, rt.method, rt.path, code, out)
				}
			default:
				if code != http.StatusForbidden {
					t.Errorf("%s token %s %s: %d, want 403", who, rt.method, rt.path, code)
				}
			}
		}
	}
}

// TestCSRFAndSessions: a form without the session's token is refused and
// changes nothing; a cross-site POST is refused; a signed-out or expired
// session goes back to the login page.
func TestCSRFAndSessions(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{})
	b := newBrowser(t, s.Server.URL)
	b.login("ops1")
	form := url.Values{"name": {"kill_switch"}, "scope": {"NON_ESSENTIAL"}, "value": {"on"}, "reason": {"test csrf"},
		"confirm": {"kill_switch NON_ESSENTIAL"}, "csrf": {"wrong"}}
	if code, _, _ := b.post("/console/levers/propose", form); code != http.StatusForbidden {
		t.Fatalf("propose with a wrong csrf token: %d, want 403", code)
	}
	// Cross-site, even with the right token.
	form.Set("csrf", b.csrf)
	req, _ := http.NewRequest("POST", s.Server.URL+"/console/levers/propose", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-site propose: %d, want 403", resp.StatusCode)
	}
	var n int
	if err := s.Pool.QueryRow(t.Context(), `SELECT count(*) FROM lever_changes`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("refused forms changed something: %d changes (%v)", n, err)
	}
	// The right token works.
	if code, body, _ := b.post("/console/levers/propose", form); code != http.StatusSeeOther {
		t.Fatalf("propose: %d %.400s", code, body)
	}
	// Wrong password.
	b2 := newBrowser(t, s.Server.URL)
	_, page, _ := b2.get("/console/login")
	tok := csrfRE.FindStringSubmatch(page)[1]
	if code, _, _ := b2.post("/console/login", url.Values{"csrf": {tok}, "login": {"ops1"}, "password": {"nope"}}); code != http.StatusUnauthorized {
		t.Fatalf("wrong password: %d, want 401", code)
	}
	// Expiry: age the session.
	if _, err := s.Pool.Exec(t.Context(), `UPDATE console_sessions SET expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	code, _, h := b.get("/console/levers")
	if code != http.StatusSeeOther || !strings.Contains(h.Get("Location"), "expired=1") {
		t.Fatalf("expired session: %d %s, want a redirect to login saying it expired", code, h.Get("Location"))
	}
	// Logout.
	b3 := newBrowser(t, s.Server.URL)
	b3.login("admin1")
	if code, _, _ := b3.post("/console/logout", nil); code != http.StatusSeeOther {
		t.Fatalf("logout: %d", code)
	}
	if code, _, _ := b3.get("/console/audit"); code != http.StatusSeeOther {
		t.Fatalf("after logout: %d, want a redirect to login", code)
	}
}
