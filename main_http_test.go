package main

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"tatkal/booking/app"
	"tatkal/console"
)

// startMain runs the whole process on port 0 (and its metrics listener)
// with seeded demo data and the console's demo users.
func startMain(t *testing.T, mod func(*app.Config)) (*app.App, string) {
	t.Helper()
	cfg, _ := testConfig(t)
	if mod != nil {
		mod(&cfg)
	}
	if _, err := runCmd(t, cfg, "migrate"); err != nil {
		t.Fatal(err)
	}
	date := time.Now().AddDate(0, 0, 2).Format(time.DateOnly)
	if _, err := runCmd(t, cfg, "seed", "demo", "--date", date, "--opens-in", "-1m"); err != nil {
		t.Fatal(err)
	}
	if _, err := runCmd(t, cfg, "seed", "users", "--count", "1", "--prefix", "http", "--password", "secret-pw"); err != nil {
		t.Fatal(err)
	}
	m := startApp(t, cfg, app.Options{Serve: true, Simulators: true})
	if _, err := console.SeedDemoUsers(context.Background(), m.Pool); err != nil {
		t.Fatal(err)
	}
	return m, date
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// consoleLogin signs in as a demo user and returns a client carrying the
// session.
func consoleLogin(t *testing.T, base, login string) *http.Client {
	t.Helper()
	c, code := consoleSignIn(t, base, login, "console-demo")
	if code != http.StatusSeeOther {
		t.Fatalf("console login: %d", code)
	}
	return c
}

// consoleSignIn posts the console's sign-in form and returns a client
// carrying whatever session it got, and the answer's status.
func consoleSignIn(t *testing.T, base, login, password string) (*http.Client, int) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	form := loginForm(t, c, base)
	form.Set("login", login)
	form.Set("password", password)
	resp, err := c.PostForm(base+"/console/login", form)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return c, resp.StatusCode
}

// loginForm opens the console's sign-in page and returns its form's fields.
func loginForm(t *testing.T, c *http.Client, base string) url.Values {
	t.Helper()
	resp, err := c.Get(base + "/console/login")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := csrfField.FindStringSubmatch(string(b))
	if m == nil {
		t.Fatalf("no csrf field on the login page: %.500s", b)
	}
	return url.Values{"csrf": {m[1]}}
}

// A NUL byte or invalid UTF-8 in any input, on each endpoint where it used
// to give a 500, gets a 400 and changes nothing.
func TestBadTextIsRefusedEverywhere(t *testing.T) {
	t.Parallel()
	m, date := startMain(t, nil)
	base := m.URL()
	ops := consoleLogin(t, base, "ops1")
	count := func() (n int) {
		m.Pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM audit_log) + (SELECT count(*) FROM console_sessions)`).Scan(&n) //nolint:errcheck
		return n
	}
	before := count()
	do := func(c *http.Client, method, path, ctype, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	anon := &http.Client{}
	for _, bad := range []string{"%00", "%FF"} {
		jsonBad := `\u0000`
		if bad == "%FF" {
			jsonBad = "\xff"
		}
		cases := []struct {
			name                      string
			c                         *http.Client
			method, path, ctype, body string
		}{
			{"api login", anon, "POST", "/v1/auth/login", "application/json", `{"login":"http00001` + jsonBad + `","password":"secret-pw"}`},
			{"availability", anon, "GET", "/v1/availability?train=12951" + bad + "&date=" + date + "&class=3A", "", ""},
			{"console lookup", ops, "GET", "/console/lookup?q=x" + bad, "", ""},
			{"console trace", ops, "GET", "/console/trace?login=x" + bad, "", ""},
			{"console audit", ops, "GET", "/console/audit?action=x" + bad, "", ""},
			{"path", ops, "GET", "/console/payments/" + bad + "/x", "", ""},
		}
		// The console's sign-in form, with a valid CSRF pair.
		jar, _ := cookiejar.New(nil)
		fresh := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		form := loginForm(t, fresh, base)
		cases = append(cases, struct {
			name                      string
			c                         *http.Client
			method, path, ctype, body string
		}{"console login", fresh, "POST", "/console/login", "application/x-www-form-urlencoded",
			"csrf=" + url.QueryEscape(form.Get("csrf")) + "&login=ops1" + bad + "&password=wrong"})
		for _, tc := range cases {
			code, body := do(tc.c, tc.method, tc.path, tc.ctype, tc.body)
			if code != http.StatusBadRequest {
				t.Errorf("%s with %s: %d %.300s, want 400", tc.name, bad, code, body)
			}
			if strings.HasPrefix(tc.path, "/v1/") && !strings.Contains(body, "INVALID_TEXT") {
				t.Errorf("%s with %s: %.300s, want a problem with reason INVALID_TEXT", tc.name, bad, body)
			}
		}
	}
	if after := count(); after != before {
		t.Fatalf("refused requests wrote %d audit or session rows", after-before)
	}
	// Clean text still works.
	if code, body := do(anon, "POST", "/v1/auth/login", "application/json", `{"login":"http00001","password":"secret-pw"}`); code != 200 {
		t.Fatalf("clean login: %d %s", code, body)
	}
}

// Every page carries the security headers; /metrics is served only on its
// own listener; every server has read, write and idle timeouts.
func TestHeadersMetricsAndTimeouts(t *testing.T) {
	t.Parallel()
	m, _ := startMain(t, nil)
	for _, path := range []string{"/payments/return?payment_id=00000000-0000-0000-0000-000000000000", "/console/login", "/v1/openapi.json", "/healthz"} {
		resp, err := http.Get(m.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		for k, want := range map[string]string{"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"} {
			if got := resp.Header.Get(k); got != want {
				t.Errorf("%s: %s = %q, want %q", path, k, got, want)
			}
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("%s: CSP %q", path, csp)
		}
		if resp.Header.Get("Strict-Transport-Security") != "" {
			t.Errorf("%s: HSTS over plain http", path)
		}
	}
	resp, err := http.Get(m.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("public /metrics: %d, want 404", resp.StatusCode)
	}
	resp, err = http.Get(m.MetricsURL())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "tatkal_payments_unresolved") {
		t.Errorf("metrics listener: %d %.300s", resp.StatusCode, b)
	}
	servers := m.HTTPServers()
	if len(servers) != 6 {
		t.Errorf("servers: %v, want app, metrics, psp, prs, msg and kyc", servers)
	}
	for name, srv := range servers {
		if srv.ReadHeaderTimeout <= 0 || srv.ReadTimeout <= 0 || srv.WriteTimeout <= 0 || srv.IdleTimeout <= 0 {
			t.Errorf("%s server: read header %v, read %v, write %v, idle %v; want all set", name, srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout)
		}
	}
}

// TATKAL_PUBLIC_URL decides whether cookies are Secure and HSTS is sent,
// whatever the process itself sees (a proxy ends TLS before it).
func TestHTTPSPublicURLMeansSecureCookiesAndHSTS(t *testing.T) {
	t.Parallel()
	m, _ := startMain(t, func(c *app.Config) { c.PublicURL = "https://tatkal.example" })
	h := m.Handler
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httpRequest("GET", "/healthz", "", nil))
	if hsts := rec.Header().Get("Strict-Transport-Security"); !strings.Contains(hsts, "max-age=") {
		t.Errorf("HSTS = %q with an https public URL", hsts)
	}
	// A sign-in over the proxied http sets a Secure session cookie.
	get := httptest.NewRecorder()
	h.ServeHTTP(get, httpRequest("GET", "/console/login", "", nil))
	var csrf string
	for _, ck := range get.Result().Cookies() {
		if !ck.Secure {
			t.Errorf("cookie %s not Secure", ck.Name)
		}
	}
	if m := csrfField.FindStringSubmatch(get.Body.String()); m != nil {
		csrf = m[1]
	}
	post := httptest.NewRecorder()
	req := httpRequest("POST", "/console/login", "application/x-www-form-urlencoded",
		strings.NewReader(url.Values{"csrf": {csrf}, "login": {"ops1"}, "password": {"console-demo"}}.Encode()))
	for _, ck := range get.Result().Cookies() {
		req.AddCookie(ck)
	}
	h.ServeHTTP(post, req)
	if post.Code != http.StatusSeeOther {
		t.Fatalf("sign-in: %d %s", post.Code, post.Body)
	}
	found := false
	for _, ck := range post.Result().Cookies() {
		found = found || ck.Value != ""
		if ck.Value != "" && !ck.Secure {
			t.Errorf("session cookie %s not Secure behind an https public URL", ck.Name)
		}
	}
	if !found {
		t.Fatal("sign-in set no cookie")
	}
}

func httpRequest(method, target, ctype string, body io.Reader) *http.Request {
	r := httptest.NewRequest(method, target, body)
	if ctype != "" {
		r.Header.Set("Content-Type", ctype)
	}
	return r
}
