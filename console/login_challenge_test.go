package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"tatkal/booking/admission/token"
	"tatkal/booking/auth"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
)

// lockFromElsewhere locks a console account the way an attacker elsewhere
// would: wrong passwords from several addresses, none reaching its own
// allowance (net picks fresh ones), until the account's allowance is
// spent; its backoff starts at ten minutes here.
func lockFromElsewhere(t *testing.T, s *teststack.Stack, login string, net int) {
	t.Helper()
	g := auth.NewGuard(auth.GuardConfig{Pool: s.Pool, Scope: "console", BaseDelay: 10 * time.Minute})
	for i := range 20 {
		err := g.Attempt(context.Background(), login, fmt.Sprintf("192.0.%d.%d", net, 1+i/4), auth.Proof{},
			func(context.Context) (bool, error) { return false, nil })
		if err != auth.ErrWrongCredentials {
			t.Fatalf("guess %d: %v", i, err)
		}
	}
}

var challengeRE = regexp.MustCompile(`data-challenge="(lc_[0-9a-f]+)" data-bits="(\d+)"`)

// A console account locked from elsewhere: the sign-in page shows its
// owner a challenge (with a no-script explanation); solved, with the
// right password, it signs in; used again, it is refused. A huge submitted
// login is shown back cut to 64 characters.
func TestConsoleLoginChallenge(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{})
	lockFromElsewhere(t, s, "ops1", 2)
	b := newBrowser(t, s.Server.URL)
	_, body, _ := b.get("/console/login")
	post := func(form url.Values) (int, string, http.Header) {
		t.Helper()
		m := csrfRE.FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no csrf token on the page:\n%.500s", body)
		}
		form.Set("csrf", m[1])
		code, got, h := b.post("/console/login", form)
		if code != http.StatusSeeOther {
			body = got
		}
		return code, got, h
	}
	code, page, _ := post(url.Values{"login": {"ops1"}, "password": {password}})
	m := challengeRE.FindStringSubmatch(page)
	if code != http.StatusTooManyRequests || m == nil {
		t.Fatalf("locked account, right password: %d, want 429 with a challenge:\n%.2000s", code, page)
	}
	if !strings.Contains(page, `data-testid="challenge-noscript"`) || !strings.Contains(page, `value="ops1"`) {
		t.Fatalf("the challenge page lacks the no-script explanation or the login:\n%.2000s", page)
	}
	bits, _ := strconv.Atoi(m[2])
	nonce := token.Solve(m[1], bits)
	code, _, h := post(url.Values{"login": {"ops1"}, "password": {password}, "challenge": {m[1]}, "nonce": {nonce}})
	if code != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), "/console/") {
		t.Fatalf("right password with the solved challenge: %d, want 303 into the console:\n%.1500s", code, body)
	}

	// The same challenge again, in another browser, after a relock.
	lockFromElsewhere(t, s, "ops1", 3)
	b = newBrowser(t, s.Server.URL)
	_, body, _ = b.get("/console/login")
	code, page, _ = post(url.Values{"login": {"ops1"}, "password": {password}, "challenge": {m[1]}, "nonce": {nonce}})
	if code != http.StatusTooManyRequests || !strings.Contains(page, "not accepted") || challengeRE.FindStringSubmatch(page)[1] == m[1] {
		t.Fatalf("reused challenge: %d, want 429, refused, with a new challenge:\n%.2000s", code, page)
	}

	// The form shows a submitted login again, but never at its own size.
	huge := strings.Repeat("A", 100_000)
	b = newBrowser(t, s.Server.URL)
	_, body, _ = b.get("/console/login")
	code, page, _ = post(url.Values{"login": {huge}, "password": {"x"}})
	if code != http.StatusUnauthorized || len(page) > 20_000 || !strings.Contains(page, `value="`+strings.Repeat("A", 64)+`"`) {
		t.Fatalf("huge login: %d, %d bytes back, want 401 with the login cut to 64", code, len(page))
	}
}

// In a real browser: the locked owner signs in, the page's script solves
// the challenge, and the second submit enters the console.
func TestBrowserLoginChallenge(t *testing.T) {
	testenv.Chromium(t)
	t.Parallel()
	s := setup(t, teststack.Options{})
	lockFromElsewhere(t, s, "admin1", 2)
	b := testenv.NewBrowser(t, testenv.BrowserOptions{Width: 1000, Height: 800, Timeout: 60 * time.Second})
	ctx, shot := b.Ctx, b.Shot
	fill := func() {
		if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS(`[data-testid=login-name]`), "admin1"),
			chromedp.SetValue(chromedp.CSS(`[data-testid=login-password]`), password)); err != nil {
			t.Fatal(err)
		}
	}
	submit := func() {
		if _, err := chromedp.Run(ctx, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(chromedp.CSS(`[data-testid=login-submit]`)))); err != nil {
			t.Fatal(err)
		}
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(s.Server.URL+"/console/login"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=login]`))); err != nil {
		t.Fatal(err)
	}
	fill()
	submit()
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`[data-testid=challenge]`))); err != nil {
		t.Fatalf("no challenge on the locked account's page: %v", err)
	}
	shot("login-challenge-solving")
	start := time.Now()
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(`[data-challenge][data-solved]`))); err != nil {
		t.Fatalf("the page never solved its challenge: %v", err)
	}
	t.Logf("the browser solved the challenge in %v", time.Since(start).Round(time.Millisecond))
	shot("login-challenge-solved")
	if err := chromedp.Do(ctx, chromedp.SetValue(chromedp.CSS(`[data-testid=login-password]`), password)); err != nil {
		t.Fatal(err)
	}
	submit()
	who, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`[data-testid=whoami]`)))
	if err != nil || !strings.HasPrefix(strings.TrimSpace(who), "admin1") {
		shot("login-challenge-after")
		t.Fatalf("after solving: signed in as %q (%v), want admin1", who, err)
	}
}
