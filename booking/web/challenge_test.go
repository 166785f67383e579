package web_test

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

	"tatkal/booking"
	"tatkal/booking/admission"
	"tatkal/booking/admission/token"
	"tatkal/booking/auth"
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/teststack"
)

// lockFromElsewhere locks a passenger account the way a guesser elsewhere
// would: wrong passwords from several addresses, none reaching its own
// allowance, until the account's allowance is spent; its backoff starts
// at ten minutes here. The site's own sign-in (from 127.0.0.1) is then
// refused by the account's lock alone, which a solved puzzle opens.
func lockFromElsewhere(t *testing.T, s *teststack.Stack, login string, net int) {
	t.Helper()
	g := auth.NewGuard(auth.GuardConfig{Pool: s.Pool, Scope: "passenger", BaseDelay: 10 * time.Minute})
	for i := range 20 {
		err := g.Attempt(context.Background(), login, fmt.Sprintf("192.0.%d.%d", net, 1+i/4), auth.Proof{},
			func(context.Context) (bool, error) { return false, nil })
		if err != auth.ErrWrongCredentials {
			t.Fatalf("guess %d: %v", i, err)
		}
	}
}

var loginChallengeRE = regexp.MustCompile(`data-login-challenge="([^"]+)" data-bits="(\d+)"`)

// Past the account's lock the site's sign-in offers the console's
// challenge: the right password alone is refused (429) with a puzzle and
// a no-script explanation; with the puzzle solved it signs in; the same
// solution again is refused with a fresh puzzle.
func TestSignInChallenge(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{})
	s.Users(t, "lk", 1)
	lockFromElsewhere(t, s, "lk00001", 2)
	b := newBrowser(t, s)
	status, _, page := b.post("/signin", "/signin", url.Values{"login": {"lk00001"}, "password": {"pw-lk"}})
	m := loginChallengeRE.FindStringSubmatch(page)
	if status != http.StatusTooManyRequests || m == nil || !strings.Contains(page, `data-testid="challenge-noscript"`) ||
		!strings.Contains(page, "Too many failed sign-ins to this account") || !strings.Contains(page, `value="lk00001"`) {
		t.Fatalf("locked account, right password: %d, want 429 with a challenge, its explanation and the login kept:\n%.3000s", status, page)
	}
	bits, _ := strconv.Atoi(m[2])
	nonce := token.Solve(m[1], bits)
	if status, _, page := b.post("/signin", "/signin", url.Values{"login": {"lk00001"}, "password": {"wrong"}, "challenge": {m[1]}, "nonce": {nonce}}); status != http.StatusUnauthorized {
		t.Fatalf("solved puzzle, wrong password: %d, want 401:\n%.1500s", status, page)
	}
	// A puzzle works once: the next sign-in needs a new one.
	status, _, page = b.post("/signin", "/signin", url.Values{"login": {"lk00001"}, "password": {"pw-lk"}, "challenge": {m[1]}, "nonce": {nonce}})
	m2 := loginChallengeRE.FindStringSubmatch(page)
	if status != http.StatusTooManyRequests || m2 == nil || m2[1] == m[1] || !strings.Contains(page, "not accepted") {
		t.Fatalf("used puzzle again: %d, want 429 refused with a new puzzle:\n%.3000s", status, page)
	}
	bits, _ = strconv.Atoi(m2[2])
	status, loc, page := b.post("/signin", "/signin", url.Values{"login": {"lk00001"}, "password": {"pw-lk"}, "challenge": {m2[1]}, "nonce": {token.Solve(m2[1], bits)}})
	if status != http.StatusSeeOther || loc == "/signin" {
		t.Fatalf("right password with a solved puzzle: %d %q, want 303 signed in:\n%.1500s", status, loc, page)
	}
	if status, _, _ := b.get("/passengers"); status != http.StatusOK {
		t.Fatalf("signed in after the puzzle: /passengers %d", status)
	}
}

// In Chromium: the locked owner signs in, the page's Web Worker solves the
// puzzle (the button unlocks), the password typed again signs in. axe-core
// checks the challenge page.
func TestBrowserSignInChallenge(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{})
	s.Users(t, "lb", 1)
	lockFromElsewhere(t, s, "lb00001", 3)
	ph := newPhone(t)
	ph.do("open sign-in", chromedp.Navigate(s.Server.URL+"/signin"), chromedp.SetValue(chromedp.CSS(`[data-testid=login]`), "lb00001"),
		chromedp.SetValue(chromedp.CSS(`[data-testid=password]`), "pw-lb"))
	ph.submit("sign in", `[data-testid=signin]`)
	ph.do("challenge shown", chromedp.WaitVisible(chromedp.CSS(`[data-testid=challenge]`)))
	if got := ph.text(`[data-testid=error]`); !strings.Contains(got, "Too many failed sign-ins to this account") {
		t.Fatalf("message: %q", got)
	}
	ph.do("puzzle solved", chromedp.WaitVisible(chromedp.CSS(`[data-testid=challenge][data-solved="1"]`)))
	if got := ph.text(`[data-testid=challenge-status]`); !strings.Contains(got, "Puzzle solved") {
		t.Fatalf("status after solving: %q", got)
	}
	ph.shot("s01-signin-challenge")
	ph.accessible("s01-signin-challenge")
	ph.do("password again", chromedp.SetValue(chromedp.CSS(`[data-testid=password]`), "pw-lb"))
	ph.submit("sign in with the puzzle", `[data-testid=signin]`)
	ph.do("signed in", chromedp.WaitVisible(chromedp.CSS(`[data-testid=sitenav]`)))
}

// queueShard seeds the demo and a queue-mode shard of 12951 3A open since
// a minute, loaded; it returns the journey date.
func queueShard(t *testing.T, s *teststack.Stack) time.Time {
	t.Helper()
	ctx := context.Background()
	open := -time.Hour
	_, err := seed.Demo(ctx, s.Pool, seed.DemoOptions{OpensIn: &open})
	teststack.Must(t, err, "seed demo")
	date := time.Now().In(booking.IST).AddDate(0, 0, 6)
	date = time.Date(date.Year(), date.Month(), date.Day(), 0, 0, 0, 0, booking.IST)
	shardID, err := seed.Shard(ctx, s.Pool, seed.ShardSpec{Train: "12951", Date: date, Class: "3A", Berths: 8,
		OpensAt: time.Now().Add(-time.Minute), Mode: "queue"})
	teststack.Must(t, err, "seed queue shard")
	_, err = s.Service.Rebuild(ctx, shardID)
	teststack.Must(t, err, "load shard")
	return date
}

var codeRE = regexp.MustCompile(`\b(\d{6})\b`)

// lastCode is the latest one-time code sent to user (the outbox's body).
func lastCode(t *testing.T, s *teststack.Stack, user int64) string {
	t.Helper()
	var body string
	err := s.Pool.QueryRow(context.Background(), `SELECT body FROM notifications WHERE user_id = $1 AND kind = 'OTP' ORDER BY id DESC LIMIT 1`, user).Scan(&body)
	teststack.Must(t, err, "read the code sent")
	m := codeRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no code in %q", body)
	}
	return m[1]
}

// The booking-time challenge without a Web Worker, in Chromium: admitted
// from the waiting room, the page says the check cannot run here and
// offers a code by SMS; the code sent (through the identity code's path
// and limits) stands in for the puzzle; a wrong code is refused and the
// form kept; the right one holds the seats. axe-core checks both pages.
func TestBrowserBookingChallengeByCode(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{Work: true, ChallengeBits: 8})
	date := queueShard(t, s)
	users := s.Users(t, "oc", 1)
	ph := newPhone(t)
	ph.do("no workers", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument,
			page.AddScriptToEvaluateOnNewDocumentParams{Source: `Object.defineProperty(window, "Worker", {value: undefined})`})
		return err
	}))
	base := s.Server.URL
	ph.do("open sign-in", chromedp.Navigate(base+"/signin"), chromedp.SetValue(chromedp.CSS(`[data-testid=login]`), "oc00001"),
		chromedp.SetValue(chromedp.CSS(`[data-testid=password]`), "pw-oc"))
	ph.submit("sign in", `[data-testid=signin]`)
	ph.do("window", chromedp.Navigate(base+"/book?train=12951&date="+date.Format("2006-01-02")+"&class=3A&from=MMCT&to=NDLS"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=queue-enter]`)))
	ph.submit("enter the queue", `[data-testid=queue-enter]`)
	teststack.Must(t, s.Admission.NewController(admission.ControllerConfig{}).Step(context.Background()), "admit")
	ph.do("admitted", chromedp.WaitVisible(chromedp.CSS(`[data-testid=pow]`)))
	if got := ph.text(`[data-testid=pow-status]`); !strings.Contains(got, "cannot run the check") {
		t.Fatalf("without a worker the page says: %q", got)
	}
	ph.shot("c01-no-worker")
	ph.accessible("c01-no-worker")
	ph.submit("ask for a code", `[data-testid=otp-alt]`)
	ph.do("code asked", chromedp.WaitVisible(chromedp.CSS(`[data-testid=otp-code]`)))
	if got := ph.text(`[data-testid=notice]`); !strings.Contains(got, "code was sent") {
		t.Fatalf("notice after asking: %q", got)
	}
	ph.shot("c02-code")
	ph.accessible("c02-code")
	code := lastCode(t, s, users[0])
	wrong := "000000"
	if code == wrong {
		wrong = "111111"
	}
	ph.choose(ph.attr(`[data-testid=hold-form] [data-testid=pax-option]`, "data-pax-name")) // the account's one saved passenger
	ph.do("wrong code", chromedp.SetValue(chromedp.CSS(`[data-testid=otp-code]`), wrong))
	ph.submit("hold with a wrong code", `[data-testid=hold]`)
	if got := ph.text(`[data-testid=error]`); !strings.Contains(got, "not right") {
		t.Fatalf("wrong code: %q", got)
	}
	ph.do("right code", chromedp.SetValue(chromedp.CSS(`[data-testid=otp-code]`), code))
	ph.submit("hold with the code", `[data-testid=hold]`)
	if got := ph.text(`[data-testid=state]`); got != "Seats held: pay to book" {
		t.Fatalf("after holding with the code: %q (%s)", got, ph.text(`main`))
	}
	ph.shot("c03-held")
}

var admissionRE = regexp.MustCompile(`name="admission" value="([^"]+)"`)

// Without JavaScript at all the code by SMS still books: plain form posts
// ask for it (again too soon is refused with the wait, the puzzle kept)
// and hold with it; the code works once.
func TestBookingChallengeByCodeWithoutJS(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{ChallengeBits: 8})
	date := queueShard(t, s)
	users := s.Users(t, "nj", 1)
	b := newBrowser(t, s)
	b.signIn("nj00001", "pw-nj")
	saved, err := s.Service.SavedPassengers(context.Background(), users[0])
	if err != nil || len(saved) == 0 {
		t.Fatalf("saved passengers: %v %v", saved, err)
	}
	pax := saved[0].ID
	journey := url.Values{"train": {"12951"}, "date": {date.Format("2006-01-02")}, "class": {"3A"}, "from": {"MMCT"}, "to": {"NDLS"}}
	q := "/queue?" + journey.Encode()
	if status, loc, page := b.post("/passengers", "/queue/enter", journey); status != http.StatusSeeOther {
		t.Fatalf("enter the queue: %d %s %.800s", status, loc, page)
	}
	teststack.Must(t, s.Admission.NewController(admission.ControllerConfig{}).Step(context.Background()), "admit")
	_, _, page := b.get(q)
	m := admissionRE.FindStringSubmatch(page)
	if m == nil || !strings.Contains(page, `data-testid="otp-alt"`) {
		t.Fatalf("admitted page lacks the admission token or the code alternative:\n%.3000s", page)
	}
	form := func(extra url.Values) url.Values {
		f := url.Values{"admission": {m[1]}, "pax": {strconv.FormatInt(pax, 10)}, "key": {"web-nojs-" + strconv.FormatInt(time.Now().UnixNano(), 10)}}
		for k, v := range journey {
			f[k] = v
		}
		for k, v := range extra {
			f[k] = v
		}
		return f
	}
	status, _, page := b.post("/passengers", "/book/otp", form(nil))
	if status != http.StatusOK || !strings.Contains(page, `data-testid="otp-code"`) || !strings.Contains(page, `name="otp_mode" value="1"`) {
		t.Fatalf("ask for a code: %d\n%.3000s", status, page)
	}
	if status, _, page := b.post("/passengers", "/book/otp", form(nil)); status != http.StatusTooManyRequests || !strings.Contains(page, "seconds ago") ||
		!strings.Contains(page, `data-testid="pow"`) {
		t.Fatalf("ask again at once: %d, want 429 with the wait and the puzzle kept\n%.3000s", status, page)
	}
	code := lastCode(t, s, users[0])
	status, loc, page := b.post("/passengers", "/book", form(url.Values{"otp_mode": {"1"}, "otp": {code}}))
	if status != http.StatusSeeOther || !strings.HasPrefix(loc, "/bookings/") {
		t.Fatalf("hold with the code: %d %q\n%.3000s", status, loc, page)
	}
	if status, _, page := b.post("/passengers", "/book", form(url.Values{"otp_mode": {"1"}, "otp": {code}})); status != http.StatusConflict ||
		!strings.Contains(page, "no code waiting") {
		t.Fatalf("hold with the same code again: %d, want 409 'no code waiting'\n%.3000s", status, page)
	}
}
