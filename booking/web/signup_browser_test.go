package web_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"tatkal/booking/kyc"
	"tatkal/booking/lab/teststack"
)

// TestBrowserSignupVerifyBook: a first-time passenger on a phone opens an
// account by tapping and typing only (the code read from the SMS
// simulator, as from their handset), meets the identity service's outage
// (a clear message, nothing changed), verifies their identity when it is
// back, saves a passenger and books a ticket on a direct shard, whose hold
// form solves the booking check every hold now carries.
func TestBrowserSignupVerifyBook(t *testing.T) {
	t.Parallel()
	core := newCoreGate(t)
	s := teststack.New(t, teststack.Options{Work: true, Routes: teststack.QuietRoutes(), Pause: core.pause})
	t.Cleanup(core.open)
	_, date := s.DemoShard(t, 8, 0)
	ctx := context.Background()
	ph := newPhone(t)
	base := s.Server.URL
	mobile := "98" + time.Now().Format("15040500")[:8]

	ph.do("open the site", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=to-signup]`)))
	ph.submit("to sign-up", `[data-testid=to-signup]`)
	ph.shot("s01-signup")
	ph.accessible("s01-signup")
	ph.do("number and e-mail", chromedp.SendKeys(chromedp.CSS(`[data-testid=signup-phone]`), mobile),
		chromedp.SendKeys(chromedp.CSS(`[data-testid=signup-email]`), "kavya@example.com"))
	since := time.Now()
	ph.submit("send the code", `[data-testid=signup-send]`)
	ph.do("code form", chromedp.WaitVisible(chromedp.CSS(`[data-testid=signup-code]`)))
	ph.shot("s02-code")
	ph.accessible("s02-code")
	sms := s.LastSMS(t, mobile, since, regexp.MustCompile(`\b[0-9]{6}\b`))
	code := regexp.MustCompile(`\b([0-9]{6})\b`).FindStringSubmatch(sms)[1]

	// A wrong code first: the error under the field, the number kept.
	wrong := []byte(code)
	wrong[0] = '0' + (wrong[0]-'0'+1)%10
	ph.do("wrong code", chromedp.SendKeys(chromedp.CSS(`[data-testid=signup-code]`), string(wrong)),
		chromedp.SendKeys(chromedp.CSS(`[data-testid=signup-password]`), "a long passphrase 7"))
	ph.submit("open with a wrong code", `[data-testid=signup-open]`)
	if got := ph.text(`[data-testid=code-error]`); !strings.Contains(got, "not right") {
		t.Fatalf("a wrong code says %q", got)
	}
	if inv := ph.attr(`[data-testid=signup-code]`, "aria-invalid"); inv != "true" {
		t.Fatalf("the code field is not marked invalid: %q", inv)
	}
	ph.shot("s03-wrong-code")
	ph.accessible("s03-wrong-code")
	ph.do("right code", chromedp.SendKeys(chromedp.CSS(`[data-testid=signup-code]`), code),
		chromedp.SendKeys(chromedp.CSS(`[data-testid=signup-password]`), "a long passphrase 7"))
	ph.submit("open the account", `[data-testid=signup-open]`)
	ph.do("identity page", chromedp.WaitVisible(chromedp.CSS(`[data-testid=kyc-form]`)))
	if got := ph.text(`[data-testid=notice]`); !strings.Contains(got, "account is open") {
		t.Fatalf("after sign-up: %q", got)
	}
	ph.shot("s04-identity")
	ph.accessible("s04-identity")

	// The identity service is down: a clear message, the account unchanged.
	s.SetKYCFaults(t, kyc.Faults{FailRate: 1})
	number := "23456789012" + string(kyc.CheckDigit("23456789012"))
	ph.do("identity", chromedp.SendKeys(chromedp.CSS(`[data-testid=kyc-number]`), number[:4]+" "+number[4:8]+" "+number[8:]),
		chromedp.SendKeys(chromedp.CSS(`[data-testid=kyc-name]`), "Kavya Raman"), chromedp.SendKeys(chromedp.CSS(`[data-testid=kyc-year]`), "1991"),
		chromedp.Click(chromedp.CSS(`[data-testid=kyc-consent]`)))
	ph.submit("verify while the service is down", `[data-testid=kyc-submit]`)
	if got := ph.text(`[data-testid=error]`); !strings.Contains(got, "not answering") || !strings.Contains(got, "Nothing was changed") {
		t.Fatalf("the outage says %q", got)
	}
	var status string
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT id_verification_status FROM users WHERE login = $1`, mobile).Scan(&status), "status")
	if status != "UNVERIFIED" {
		t.Fatalf("after the outage the account is %s", status)
	}
	ph.shot("s05-kyc-down")
	ph.accessible("s05-kyc-down")
	s.SetKYCFaults(t, kyc.Faults{LatencyMs: 200})
	ph.do("consent again", chromedp.Click(chromedp.CSS(`[data-testid=kyc-consent]`)))
	ph.submit("verify", `[data-testid=kyc-submit]`)
	ph.do("verified", chromedp.WaitVisible(chromedp.CSS(`[data-testid=kyc-verified]`)))
	ph.shot("s06-verified")
	ph.accessible("s06-verified")

	// A passenger, then the journey.
	ph.submit("to passengers", `[data-testid=kyc-next]`)
	ph.do("save a passenger", chromedp.WaitVisible(chromedp.CSS(`[data-testid=pax-name]`)),
		chromedp.SendKeys(chromedp.CSS(`[data-testid=pax-name]`), "Kavya Raman"), chromedp.SendKeys(chromedp.CSS(`[data-testid=pax-age]`), "34"),
		chromedp.Click(chromedp.CSS(`#gF`)), chromedp.SetValue(chromedp.CSS(`[data-testid=pax-idtype]`), "PASSPORT"),
		chromedp.SendKeys(chromedp.CSS(`[data-testid=pax-idref]`), "K1234567"))
	ph.submit("save passenger", `[data-testid=pax-save]`)
	ph.do("search", chromedp.Navigate(base+"/search"), chromedp.SetValue(chromedp.CSS(`[data-testid=from]`), "MMCT"),
		chromedp.SetValue(chromedp.CSS(`[data-testid=to]`), "NDLS"), chromedp.SetValue(chromedp.CSS(`[data-testid=date]`), date.Format("2006-01-02")))
	ph.submit("search", `[data-testid=search]`)
	ph.submit("book", `[data-testid=result-12951-3A] [data-testid=book]`)
	ph.choose("Kavya Raman")
	ph.do("booking check solved", chromedp.WaitVisible(chromedp.CSS(`[data-testid=pow][data-solved="1"]`)))
	ph.shot("s07-window")
	ph.accessible("s07-window")
	ph.submit("hold", `[data-testid=hold]`)
	ph.payAndTicket(s, core, "s")
}
