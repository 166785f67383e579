package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"tatkal/booking/lab/teststack"
)

// offSite are "next" values (as the form or query carries them, decoded)
// that a prefix test lets through and a browser follows elsewhere: it
// drops tabs and newlines anywhere in a URL and reads "\" as "/"; and
// http.Redirect cleans "/x/../" away before the browser sees it.
var offSite = []string{
	"/\t/evil.example/x",
	"/\n/evil.example/x",
	"\t//evil.example/x",
	"/x/../\t/evil.example/x",
	"//evil.example/x",
	"//\tevil.example/x",
	`/\evil.example/x`,
	"/%09/evil.example/x",
	"/%2F%2Fevil.example/x",
	"/%5Cevil.example/x",
	"https://evil.example/x",
	"javascript:alert(1)",
	"/" + strings.Repeat("a", 5000),
}

// landsHome fails unless loc is exactly the home page, and (whatever it
// is) a browser would stay on base reading it.
func landsHome(t *testing.T, base, what, next string, status int, loc string) {
	t.Helper()
	b, _ := url.Parse(base)
	seen := strings.NewReplacer("\t", "", "\n", "", "\r", "", `\`, "/").Replace(loc)
	ref, err := url.Parse(seen)
	if err == nil {
		ref = b.ResolveReference(ref)
	}
	if status != http.StatusSeeOther || loc != "/" || err != nil || ref.Host != b.Host {
		t.Errorf("%s with next %q: %d to %q (a browser goes to %v), want 303 to /", what, next, status, loc, ref)
	}
}

// Signing in, the language switch and identity verification send the
// browser back only to a page of this site, whatever the attacker put in
// next or back.
func TestRedirectsStayOnSite(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{})
	ctx := context.Background()
	users := s.Users(t, "rdr", 2)
	for _, next := range offSite {
		b := newBrowser(t, s)
		status, loc, _ := b.post("/signin", "/signin", url.Values{"login": {"rdr00001"}, "password": {"pw-rdr"}, "next": {next}})
		landsHome(t, s.Server.URL, "sign in", next, status, loc)
		status, loc, _ = b.get("/signin?next=" + url.QueryEscape(next))
		landsHome(t, s.Server.URL, "sign-in page signed in", next, status, loc)
		status, loc, _ = b.post("/passengers", "/lang", url.Values{"lang": {"en"}, "back": {next}})
		landsHome(t, s.Server.URL, "language switch", next, status, loc)
	}
	// Our own pages, with their queries, are where the passenger goes back to.
	b := newBrowser(t, s)
	if status, loc, _ := b.post("/signin", "/signin", url.Values{"login": {"rdr00001"}, "password": {"pw-rdr"},
		"next": {"/passengers?notice=saved"}}); status != http.StatusSeeOther || loc != "/passengers?notice=saved" {
		t.Fatalf("sign in with an own next: %d to %q", status, loc)
	}

	// An unverified passenger goes through /verify, which carries next on.
	_, err := s.Pool.Exec(ctx, `UPDATE users SET id_verification_status = 'UNVERIFIED', verified_at = NULL, phone_hash = NULL WHERE id = $1`, users[1])
	teststack.Must(t, err, "unverify")
	v := newBrowser(t, s)
	next := offSite[0]
	if status, loc, _ := v.post("/signin", "/signin", url.Values{"login": {"rdr00002"}, "password": {"pw-rdr"}, "next": {next}}); status != http.StatusSeeOther ||
		loc != "/verify?next=%2F" {
		t.Errorf("unverified sign in with next %q: %d to %q, want /verify?next=%%2F", next, status, loc)
	}
	// The form's next field is checked as it is written, not only when
	// it comes back.
	nextIsHome := func(page string) bool {
		n := strings.Count(page, `name="next" value="/"`)
		return n > 0 && n == strings.Count(page, `name="next"`)
	}
	if _, _, page := v.get("/verify?next=" + url.QueryEscape(next)); !nextIsHome(page) {
		t.Errorf("the verify page carries next %q on:\n%.2000s", next, page)
	}
	if status, _, page := v.post("/verify", "/verify/send", url.Values{"phone": {"9876543210"}, "next": {next}}); status != http.StatusOK || !nextIsHome(page) {
		t.Fatalf("send a code with next %q: %d\n%.2000s", next, status, page)
	}
	status, loc, _ := v.post("/verify", "/verify", url.Values{"code": {lastCode(t, s, users[1])}, "next": {next}})
	landsHome(t, s.Server.URL, "verify", next, status, loc)
}
