package console_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"tatkal/booking/auth"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
	"tatkal/console"
	"tatkal/console/levers"
)

const password = "console-test"

var testUsers = []console.DemoUser{
	{Login: "ops1", Password: password, Role: console.Ops},
	{Login: "finance1", Password: password, Role: console.Finance},
	{Login: "finance2", Password: password, Role: console.Finance},
	{Login: "fraud1", Password: password, Role: console.Fraud},
	{Login: "admin1", Password: password, Role: console.Admin},
	{Login: "admin2", Password: password, Role: console.Admin},
}

// setup starts a stack with the console and one user per role.
func setup(t *testing.T, opts teststack.Options) *teststack.Stack {
	t.Helper()
	s := teststack.New(t, opts)
	if _, err := console.SeedUsers(context.Background(), s.Pool, testUsers, auth.Argon2Params{MemoryKiB: 64, Time: 1, Threads: 1}); err != nil {
		t.Fatal(err)
	}
	return s
}

// actor is a seeded console user as a lever actor, as the console form
// would make it.
func actor(t *testing.T, s *teststack.Stack, login string) levers.Actor {
	t.Helper()
	a := levers.Actor{Login: login, Via: "console"}
	if err := s.Pool.QueryRow(context.Background(), `SELECT id, role FROM console_users WHERE login = $1`, login).Scan(&a.UserID, &a.Role); err != nil {
		t.Fatalf("console user %s: %v", login, err)
	}
	return a
}

// browser is an HTTP client with cookies that does not follow redirects.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
	csrf string
}

func newBrowser(t *testing.T, base string) *browser {
	return &browser{t: t, base: base, c: testenv.FormClient()}
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (b *browser) get(path string) (int, string, http.Header) {
	b.t.Helper()
	r := testenv.Call(b.t, testenv.Request{Method: "GET", URL: b.base + path, Client: b.c})
	if m := csrfRE.FindSubmatch(r.Raw); m != nil && !strings.HasPrefix(path, "/console/login") {
		b.csrf = string(m[1])
	}
	return r.Status, string(r.Raw), r.Header
}

func (b *browser) post(path string, form url.Values) (int, string, http.Header) {
	b.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	if form.Get("csrf") == "" {
		form.Set("csrf", b.csrf)
	}
	r := testenv.Call(b.t, testenv.Request{Method: "POST", URL: b.base + path, Client: b.c, Body: form,
		Header: map[string]string{"Sec-Fetch-Site": "same-origin"}})
	return r.Status, string(r.Raw), r.Header
}

// login signs in and remembers the session's CSRF token.
func (b *browser) login(login string) {
	b.t.Helper()
	_, body, _ := b.get("/console/login")
	m := csrfRE.FindStringSubmatch(body)
	if m == nil {
		b.t.Fatalf("login page has no csrf token:\n%s", body)
	}
	code, body, h := b.post("/console/login", url.Values{"csrf": {m[1]}, "login": {login}, "password": {password}})
	if code != http.StatusSeeOther {
		b.t.Fatalf("login %s: %d %s", login, code, body)
	}
	b.get(h.Get("Location"))
	if b.csrf == "" {
		b.get("/console/audit")
	}
}

var newTokenRE = regexp.MustCompile(`data-testid="new-token">(tkc_[A-Za-z0-9_-]+)<`)

// newToken creates a personal API token for login on the console's token
// page (the browser's user must be an admin) and returns it.
func (b *browser) newToken(login, label string) string {
	b.t.Helper()
	code, body, _ := b.post("/console/tokens", url.Values{"user": {login}, "label": {label}, "days": {"30"}, "form_nonce": {b.tokenFormNonce()}})
	m := newTokenRE.FindStringSubmatch(body)
	if code != http.StatusCreated || m == nil {
		b.t.Fatalf("create a token for %s: %d\n%.2000s", login, code, body)
	}
	return m[1]
}

var formNonceRE = regexp.MustCompile(`name="form_nonce" value="([^"]+)"`)

// tokenFormNonce opens the token page and returns its form's one-time value.
func (b *browser) tokenFormNonce() string {
	b.t.Helper()
	_, page, _ := b.get("/console/tokens")
	m := formNonceRE.FindStringSubmatch(page)
	if m == nil {
		b.t.Fatalf("the token form has no one-time value:\n%.2000s", page)
	}
	return m[1]
}

// api calls /v1/admin with a bearer token (empty: none) and decodes the JSON answer.
func api(t *testing.T, base, method, path, token string, body any) (int, map[string]any) {
	t.Helper()
	r := testenv.Call(t, testenv.Request{Method: method, URL: base + path, Token: token, Body: body})
	return r.Status, r.JSON
}

// signIn signs who in on the console in the headless browser b.
func signIn(t *testing.T, b *testenv.Browser, base, who string) {
	t.Helper()
	b.Do("open login", chromedp.Navigate(base+"/console/login"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=login]`)),
		chromedp.SetValue(chromedp.CSS(`[data-testid=login-name]`), who), chromedp.SetValue(chromedp.CSS(`[data-testid=login-password]`), password))
	b.Submit("sign in", `[data-testid=login-submit]`)
	if got := b.Text(`[data-testid=whoami]`); !strings.HasPrefix(got, who) {
		t.Fatalf("signed in as %q, want %s", got, who)
	}
}
