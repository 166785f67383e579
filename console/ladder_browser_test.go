package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"tatkal/booking"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
	"tatkal/console/levers"
)

// TestBrowserSingleStepForm: with light_form on, a passenger on a phone
// books in one step (tick the traveller, choose UPI, one button) and lands
// on the gateway's page with the seats held and the payment started;
// axe-core finds nothing on the form. With NON_ESSENTIAL on, the booking
// history says plainly that it is switched off.
func TestBrowserSingleStepForm(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{Work: true, Routes: teststack.QuietRoutes()})
	ctx := context.Background()
	_, date := s.DemoShard(t, 8, 0)
	uid := s.Users(t, "lf", 1)[0]
	_, err := s.Service.SavePassenger(ctx, uid, booking.Passenger{Name: "Kavya Raman", Age: 34, Gender: "F", IDType: "PASSPORT", IDRef: "K1234567"})
	teststack.Must(t, err, "save passenger")
	ops := actor(t, s, "ops1")
	for _, p := range []levers.Proposal{propose(levers.LightForm, "global", "on"), propose(levers.KillSwitch, "NON_ESSENTIAL", "on")} {
		_, err := s.Console.Levers().Propose(ctx, ops, p)
		teststack.Must(t, err, "lever %s", p.Name)
	}
	s.Levers.Refresh(ctx)

	b := testenv.NewBrowser(t, testenv.BrowserOptions{Width: 390, Height: 844, Timeout: 2 * time.Minute})
	base := s.Server.URL
	b.Do("open sign-in", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=login]`)),
		chromedp.SetValue(chromedp.CSS(`[data-testid=login]`), "lf00001"), chromedp.SetValue(chromedp.CSS(`[data-testid=password]`), "pw-lf"))
	b.Submit("sign in", `[data-testid=signin]`)
	b.Do("signed in", chromedp.WaitVisible(chromedp.CSS(`[data-testid=sitenav]`)))

	b.Do("window", chromedp.Navigate(base+"/book?train=12951&class=3A&from=MMCT&to=NDLS&date="+date.Format(time.DateOnly)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=light-note]`)))
	if got := b.Text(`[data-testid=hold]`); got != "Hold seats and pay" {
		t.Fatalf("the single-step button says %q", got)
	}
	if n := b.Count(`[data-testid=hold-form] input[name=method]`); n != 4 {
		t.Fatalf("the single-step form offers %d payment methods, want 4", n)
	}
	b.Do("tick and choose UPI", chromedp.Click(chromedp.CSS(`[data-pax-name="Kavya Raman"] label`)), chromedp.Click(chromedp.CSS(`#light-upi`)),
		chromedp.SetValue(chromedp.CSS(`[data-testid=light-vpa]`), "kavya@upi"),
		// Every hold carries the booking check: Hold opens once it is solved.
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=pow][data-solved="1"]`)))
	b.Shot("ladder-01-single-step")
	b.Accessible("single-step form")
	b.Submit("hold and pay", `[data-testid=hold]`)
	b.Do("gateway page", chromedp.WaitVisible(chromedp.CSS(`body`)))
	if body := b.Text(`body`); !strings.Contains(body, "Approve in your UPI app") || !strings.Contains(body, "kavya@upi") {
		t.Fatalf("after one step the phone shows:\n%.1500s", body)
	}
	b.Shot("ladder-02-gateway")
	var holds, pays int
	if err := s.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM holds WHERE user_id = $1), (SELECT count(*) FROM payments p JOIN holds h ON h.id = p.hold_id WHERE h.user_id = $1 AND p.method = 'UPI')`,
		uid).Scan(&holds, &pays); err != nil || holds != 1 || pays != 1 {
		t.Fatalf("one step made %d holds and %d UPI payments (%v), want 1 and 1", holds, pays, err)
	}

	b.Do("history", chromedp.Navigate(base+"/bookings"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=switched-off]`)))
	if got := b.Text(`[data-testid=switched-off]`); !strings.Contains(got, "Switched off during peak booking") || !strings.Contains(got, "try again later") {
		t.Fatalf("the switched-off history says %q", got)
	}
	b.Shot("ladder-03-history-off")
	b.Accessible("history switched off")
}
