package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"tatkal/booking/lab/teststack"
)

// Signing in to the console goes back only to a console page, whatever the
// attacker put in next: http.Redirect cleans "/console/../" away and a
// browser drops tabs and newlines and reads "\" as "/", so a prefix test
// let "/console/../\t/evil.example" through to //evil.example.
func TestConsoleLoginNextStaysInConsole(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{})
	signIn := func(next string) (int, string) {
		t.Helper()
		b := newBrowser(t, s.Server.URL)
		_, body, _ := b.get("/console/login?next=" + url.QueryEscape(next))
		m := csrfRE.FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no csrf token on the login page:\n%.500s", body)
		}
		if strings.Contains(body, "evil.example") {
			t.Errorf("the login page carries next %q on:\n%.2000s", next, body)
		}
		code, _, h := b.post("/console/login", url.Values{"csrf": {m[1]}, "login": {"ops1"}, "password": {password}, "next": {next}})
		return code, h.Get("Location")
	}
	code, home := signIn("")
	if code != http.StatusSeeOther || !strings.HasPrefix(home, "/console/") {
		t.Fatalf("sign in: %d to %q", code, home)
	}
	for _, next := range []string{
		"/console/../\t/evil.example/x",
		"/console/../\\evil.example/x",
		"/console/\t/../../evil.example/x",
		"/console/../%09/evil.example/x",
		"/console/%2e%2e/%2F%2Fevil.example/x",
		"//evil.example/console/",
		"/\t/evil.example/console/",
		"https://evil.example/console/",
		"/console/" + strings.Repeat("a", 5000),
	} {
		code, loc := signIn(next)
		if code != http.StatusSeeOther || loc != home {
			t.Errorf("sign in with next %q: %d to %q, want 303 to %q", next, code, loc, home)
		}
	}
	if code, loc := signIn("/console/audit?q=x"); code != http.StatusSeeOther || loc != "/console/audit?q=x" {
		t.Errorf("sign in with an own next: %d to %q", code, loc)
	}
}
