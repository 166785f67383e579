package web_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"tatkal/booking/lab/teststack"
)

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// browser is a cookie-keeping HTTP client on the stack's site that does
// not follow redirects (tests look at them).
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newBrowser(t *testing.T, s *teststack.Stack) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, base: s.Server.URL, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

// get returns status, Location and body.
func (b *browser) get(path string) (int, string, string) {
	b.t.Helper()
	resp, err := b.c.Get(b.base + path)
	if err != nil {
		b.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), string(body)
}

// post submits a form with the CSRF token of the page at from.
func (b *browser) post(from, path string, form url.Values) (int, string, string) {
	b.t.Helper()
	_, _, page := b.get(from)
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		b.t.Fatalf("no CSRF token on %s:\n%.800s", from, page)
	}
	form.Set("csrf", m[1])
	req, _ := http.NewRequest(http.MethodPost, b.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", b.base)
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), string(body)
}

func (b *browser) signIn(login, password string) {
	b.t.Helper()
	status, loc, body := b.post("/signin", "/signin", url.Values{"login": {login}, "password": {password}})
	if status != http.StatusSeeOther {
		b.t.Fatalf("sign in as %s: %d %.600s", login, status, body)
	}
	_ = loc
}
