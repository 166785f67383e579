package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"tatkal/booking/lab/teststack"
)

// Reloading the page that showed a new token sends its form again: that
// makes no second token, and says which token the form made.
func TestTokenFormReloadMakesOneToken(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{})
	b := newBrowser(t, s.Server.URL)
	b.login("admin1")
	form := url.Values{"user": {"ops1"}, "label": {"deploy"}, "days": {"30"}, "form_nonce": {b.tokenFormNonce()}}
	code, page, _ := b.post("/console/tokens", form)
	m := newTokenRE.FindStringSubmatch(page)
	if code != http.StatusCreated || m == nil {
		t.Fatalf("create: %d\n%.1500s", code, page)
	}
	code, page, _ = b.post("/console/tokens", form) // the reload
	if code != http.StatusConflict || newTokenRE.MatchString(page) || !strings.Contains(page, "already sent") {
		t.Fatalf("reload: %d, want 409 naming the token already made, no new token:\n%.2000s", code, page)
	}
	// A form without its one-time value makes nothing either.
	form.Del("form_nonce")
	if code, _, _ = b.post("/console/tokens", form); code != http.StatusUnprocessableEntity {
		t.Fatalf("form without its one-time value: %d, want 422", code)
	}
	var n int
	if err := s.Pool.QueryRow(context.Background(), `SELECT count(*) FROM console_api_tokens`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d tokens (%v), want 1", n, err)
	}
	// A fresh form makes a fresh token.
	if tok := b.newToken("ops1", "second"); tok == m[1] {
		t.Fatal("the second token repeats the first")
	}
}
