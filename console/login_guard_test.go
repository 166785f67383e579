package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"tatkal/booking/lab/teststack"
)

// Console sign-in goes through the login guard: after five wrong passwords
// even the right one is refused (429, Retry-After) until the backoff has
// passed; every failure is in the audit log and the failure record.
func TestConsoleLoginBacksOff(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{})
	b := newBrowser(t, s.Server.URL)
	_, body, _ := b.get("/console/login")
	attempt := func(pw string) (int, http.Header) {
		m := csrfRE.FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no csrf token on the login page:\n%.500s", body)
		}
		code, got, h := b.post("/console/login", url.Values{"csrf": {m[1]}, "login": {"ops1"}, "password": {pw}})
		if code != http.StatusSeeOther {
			body = got
		}
		return code, h
	}
	for i := range 5 {
		if code, _ := attempt("wrong-" + strconv.Itoa(i)); code != http.StatusUnauthorized {
			t.Fatalf("wrong password %d: %d", i, code)
		}
	}
	code, h := attempt(password)
	if code != http.StatusTooManyRequests || h.Get("Retry-After") == "" {
		t.Fatalf("right password straight after five wrong ones: %d %v, want 429 with Retry-After", code, h)
	}
	secs, _ := strconv.Atoi(h.Get("Retry-After"))
	time.Sleep(time.Duration(secs)*time.Second + 100*time.Millisecond)
	if code, _ := attempt(password); code != http.StatusSeeOther {
		t.Fatalf("right password after the backoff: %d", code)
	}
	var audited, recorded int
	ctx := context.Background()
	s.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action = 'console.login_failed'`).Scan(&audited)            //nolint:errcheck
	s.Pool.QueryRow(ctx, `SELECT count(*) FROM login_failures WHERE scope = 'console' AND login = 'ops1'`).Scan(&recorded) //nolint:errcheck
	if audited != 5 || recorded != 5 {
		t.Fatalf("%d audited and %d recorded failures, want 5 and 5", audited, recorded)
	}
}
