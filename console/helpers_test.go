package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"tatkal/booking/auth"
	"tatkal/booking/teststack"
	"tatkal/console"
)

const password = "console-test"

var testUsers = []console.DemoUser{
	{Login: "ops1", Password: password, Role: console.Ops},
	{Login: "finance1", Password: password, Role: console.Finance},
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

// browser is an HTTP client with cookies that does not follow redirects.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
	csrf string
}

func newBrowser(t *testing.T, base string) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, base: base, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func (b *browser) get(path string) (int, string, http.Header) {
	b.t.Helper()
	resp, err := b.c.Get(b.base + path)
	if err != nil {
		b.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if m := csrfRE.FindStringSubmatch(string(body)); m != nil && !strings.HasPrefix(path, "/console/login") {
		b.csrf = m[1]
	}
	return resp.StatusCode, string(body), resp.Header
}

func (b *browser) post(path string, form url.Values) (int, string, http.Header) {
	b.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	if form.Get("csrf") == "" {
		form.Set("csrf", b.csrf)
	}
	req, _ := http.NewRequest("POST", b.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp.Header
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

func ioCopy(dst *strings.Builder, resp *http.Response) (int64, error) {
	defer resp.Body.Close()
	return io.Copy(dst, resp.Body)
}
