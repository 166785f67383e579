package web_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"tatkal/booking"
	"tatkal/booking/auth"
	"tatkal/booking/i18n"
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/teststack"
)

// On a phone, a waitlist place's pay form says what is held, what
// happens at charting and what is refunded, above the pay button, in
// English and after a tap on the language switch in Hindi; axe-core finds
// nothing serious on either page. Screenshots: warn-waitlist-{en,hi}.png.
func TestBrowserWaitlistWarning(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{Routes: teststack.QuietRoutes()})
	_, date := s.DemoShard(t, 1, 5)
	hash, err := auth.HashPassword("pw-bwarn", auth.Argon2Params{MemoryKiB: 64, Time: 1, Threads: 1})
	teststack.Must(t, err, "hash")
	ids, err := seed.Users(ctx, s.Pool, seed.UsersSpec{Count: 2, Prefix: "bwn", PasswordHash: hash, WalletRupees: 20000})
	teststack.Must(t, err, "seed users")
	var holdID string
	for i, id := range ids {
		h, err := s.Service.Hold(ctx, teststack.Caller(id), booking.HoldRequest{UserID: id, IdempotencyKey: "bwn-hold-" + string(rune('a'+i)),
			Train: "12951", Date: date, Class: "3A", Quota: "TQ", From: "MMCT", To: "NDLS", Passengers: []booking.Passenger{{Name: "Browser Warn",
				Age: 33, Gender: "F", IDType: "PAN", IDRef: "BWARN1234K"}}})
		teststack.Must(t, err, "hold")
		holdID = h.HoldID.String()
		if i == 1 && h.Status != "WAITLIST_OFFERED" {
			t.Fatalf("second hold %s", h.Status)
		}
	}
	var login string
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT login FROM users WHERE id = $1`, ids[1]).Scan(&login), "login")
	ph := newPhone(t)
	base := s.Server.URL
	ph.do("sign in page", chromedp.Navigate(base+"/signin?next=/bookings/"+holdID))
	ph.do("type", chromedp.SendKeys(`[data-testid=login]`, login), chromedp.SendKeys(`[data-testid=password]`, "pw-bwarn"))
	ph.submit("sign in", `form[action="/signin"] button[type=submit]`)
	ph.do("booking", chromedp.Navigate(base+"/bookings/"+holdID))
	got := ph.text(`[data-testid=warn-waitlist]`)
	if got != i18n.Text("en", "warn.waitlist") {
		t.Fatalf("waitlist warning %q", got)
	}
	ys, err := chromedp.Run(ph.ctx, chromedp.Evaluate[[]float64](`[document.querySelector('[data-testid=warn-waitlist]').getBoundingClientRect().top,
		document.querySelector('[data-testid=pay]').getBoundingClientRect().top]`))
	if err != nil || len(ys) != 2 || ys[0] >= ys[1] {
		t.Fatalf("the warning is not before the pay button: %v %v", ys, err)
	}
	ph.shot("warn-waitlist-en")
	ph.accessible("warn-waitlist-en")
	ph.do("hindi", chromedp.SetValue(`[data-testid=lang]`, "hi"))
	ph.submit("switch language", `form.lang button[type=submit]`)
	if got := ph.text(`[data-testid=warn-waitlist]`); got != i18n.Text("hi", "warn.waitlist") {
		t.Fatalf("Hindi waitlist warning %q", got)
	}
	if got := ph.text(`[data-testid=late-success]`); !strings.HasPrefix(got, i18n.Text("hi", "rule.latesuccess")) {
		t.Fatalf("Hindi late-success rule %q", got)
	}
	ph.shot("warn-waitlist-hi")
	ph.accessible("warn-waitlist-hi")
}
