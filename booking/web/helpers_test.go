package web_test

import (
	"net/http"
	"net/url"
	"regexp"
	"testing"

	"tatkal/booking/lab/testenv"
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
	return &browser{t: t, base: s.Server.URL, c: testenv.FormClient()}
}

// get returns status, Location and body.
func (b *browser) get(path string) (int, string, string) {
	b.t.Helper()
	r := testenv.Call(b.t, testenv.Request{Method: "GET", URL: b.base + path, Client: b.c})
	return r.Status, r.Header.Get("Location"), string(r.Raw)
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
	r := testenv.Call(b.t, testenv.Request{Method: http.MethodPost, URL: b.base + path, Client: b.c, Body: form,
		Header: map[string]string{"Origin": b.base}})
	return r.Status, r.Header.Get("Location"), string(r.Raw)
}

func (b *browser) signIn(login, password string) {
	b.t.Helper()
	status, loc, body := b.post("/signin", "/signin", url.Values{"login": {login}, "password": {password}})
	if status != http.StatusSeeOther {
		b.t.Fatalf("sign in as %s: %d %.600s", login, status, body)
	}
	_ = loc
}
