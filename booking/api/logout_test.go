package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
)

// Logging out kills that session at once on the server that answered,
// and within 5 s on another process; logging out everywhere kills every
// session issued so far, and a new login works again.
func TestLogoutRevokesSessions(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{})
	s.Users(t, "lo", 1)
	other := teststack.Start(t, s.Env, teststack.Options{}) // a second app process
	anon := &client{base: s.Server.URL, http: &http.Client{Timeout: 30 * time.Second}}
	login := func() string {
		r := anon.do(t, "POST", "/v1/auth/login", nil, loginBody("lo00001", "pw-lo"))
		tok, _ := r.body["token"].(string)
		if r.status != http.StatusOK || tok == "" {
			t.Fatalf("login: %d %s", r.status, r.raw)
		}
		return tok
	}
	wallet := func(base, tok string) reply {
		c := &client{base: base, token: tok, http: anon.http}
		return c.do(t, "GET", "/v1/wallet", nil, "")
	}
	a, b := login(), login()
	for _, base := range []string{s.Server.URL, other.Server.URL} {
		if r := wallet(base, a); r.status != http.StatusOK {
			t.Fatalf("session a before logout: %d %s", r.status, r.raw)
		}
	}

	c := &client{base: s.Server.URL, token: a, http: anon.http}
	if r := c.do(t, "POST", "/v1/auth/logout", nil, ""); r.status != http.StatusNoContent {
		t.Fatalf("logout: %d %s", r.status, r.raw)
	}
	if r := wallet(s.Server.URL, a); r.status != http.StatusUnauthorized || r.body["reason"] != "SESSION_REVOKED" {
		t.Fatalf("logged-out session on the same server: %d %s", r.status, r.raw)
	}
	if r := wallet(s.Server.URL, b); r.status != http.StatusOK {
		t.Fatalf("the other session after logging out one: %d %s", r.status, r.raw)
	}
	within(t, 5*time.Second, "logged-out session on another process", func() bool { return wallet(other.Server.URL, a).status == http.StatusUnauthorized })
	if r := wallet(other.Server.URL, b); r.status != http.StatusOK {
		t.Fatalf("the other session on another process: %d %s", r.status, r.raw)
	}

	// Everywhere: b dies on both processes, a new login works on both.
	c.token = b
	if r := c.do(t, "POST", "/v1/auth/logout-everywhere", nil, ""); r.status != http.StatusNoContent {
		t.Fatalf("logout everywhere: %d %s", r.status, r.raw)
	}
	if r := wallet(s.Server.URL, b); r.status != http.StatusUnauthorized {
		t.Fatalf("session after logout everywhere: %d %s", r.status, r.raw)
	}
	within(t, 5*time.Second, "session on another process after logout everywhere", func() bool { return wallet(other.Server.URL, b).status == http.StatusUnauthorized })
	// The signature-only token of the test stack (generation 0) dies too.
	var uid int64
	var gen int
	if err := s.Pool.QueryRow(context.Background(), `SELECT id, session_generation FROM users WHERE login = 'lo00001'`).Scan(&uid, &gen); err != nil || gen != 1 {
		t.Fatalf("generation %d (%v), want 1", gen, err)
	}
	if r := wallet(s.Server.URL, s.Token(uid)); r.status != http.StatusUnauthorized {
		t.Fatalf("an older-generation token: %d %s", r.status, r.raw)
	}
	fresh := login()
	for _, base := range []string{s.Server.URL, other.Server.URL} {
		if r := wallet(base, fresh); r.status != http.StatusOK {
			t.Fatalf("new login after logout everywhere: %d %s", r.status, r.raw)
		}
	}
	var rows int
	s.Pool.QueryRow(context.Background(), `SELECT count(*) FROM session_revocations WHERE user_id = $1`, uid).Scan(&rows) //nolint:errcheck
	if rows != 2 {
		t.Fatalf("%d revocation rows, want 2", rows)
	}
	// Without a session: 401, nothing revoked.
	anon.token = ""
	if r := anon.do(t, "POST", "/v1/auth/logout", nil, ""); r.status != http.StatusUnauthorized {
		t.Fatalf("logout without a session: %d %s", r.status, r.raw)
	}
}

// within fails the test unless cond holds within d, and logs how long it took.
func within(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	start := time.Now()
	testenv.Eventually(t, d, what, func() error { return testenv.Want(cond(), "still not true") })
	t.Logf("%s: took %s", what, time.Since(start).Round(time.Millisecond))
}
