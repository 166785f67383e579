package pspsim

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"tatkal/booking/india"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/payment/pspapi"
)

// browser fetches pages and posts forms without following redirects.
type browser struct {
	t      *testing.T
	client *http.Client
}

func newBrowser(t *testing.T) *browser {
	c := testenv.FormClient()
	c.Timeout = 5 * time.Second
	return &browser{t: t, client: c}
}

func (br *browser) get(u string) (int, string) {
	br.t.Helper()
	r := testenv.Call(br.t, testenv.Request{Method: "GET", URL: u, Client: br.client})
	return r.Status, string(r.Raw)
}

func (br *browser) post(u string, form url.Values) (int, string, string) {
	br.t.Helper()
	r := testenv.Call(br.t, testenv.Request{Method: "POST", URL: u, Client: br.client, Body: form})
	return r.Status, r.Header.Get("Location"), string(r.Raw)
}

// wantRedirect checks a 303 to the merchant's return_url with our query.
func wantRedirect(t *testing.T, code int, loc, pspRef, status string) {
	t.Helper()
	if code != http.StatusSeeOther {
		t.Fatalf("decision answered %d, want 303", code)
	}
	u, err := url.Parse(loc)
	if err != nil || u.Host != "merchant.example" || u.Path != "/pay/return" {
		t.Fatalf("redirect to %q", loc)
	}
	q := u.Query()
	if q.Get("psp_ref") != pspRef || q.Get("status") != status || q.Get("hold") != "h1" {
		t.Fatalf("redirect query = %v, want psp_ref=%s status=%s (and the merchant's hold=h1)", q, pspRef, status)
	}
}

func TestPayPagesApproveDecline(t *testing.T) {
	t.Parallel()
	// The customer acts only through the page.
	b := setup(t, opts{route: func(rc *pspapi.RouteConfig) { rc.AutoApproveMs = -1 }})
	br := newBrowser(t)

	// UPI: the collect request page, approve.
	upi := b.create(t, "swiftpay", b.createReq("pay-page-upi", pspapi.UPI, 123450))
	code, html := br.get(upi.NextAction.URL)
	for _, want := range []string{"<title>Approve UPI collect request", `data-testid="vpa">asha.k@okbank`, "₹1,234.50", `action="/gw/swiftpay/pay/` + upi.PSPRef + `/approve"`} {
		if code != 200 || !strings.Contains(html, want) {
			t.Fatalf("UPI page (%d) lacks %q:\n%s", code, want, html)
		}
	}
	code, loc, _ := br.post(upi.NextAction.URL+"/approve", nil)
	wantRedirect(t, code, loc, upi.PSPRef, pspapi.StatusSuccess)
	b.hooks.waitStatus(t, upi.PSPRef, pspapi.StatusSuccess, 3*time.Second)
	// A second decision changes nothing and says so.
	code, _, html = br.post(upi.NextAction.URL+"/decline", nil)
	if code != http.StatusConflict || !strings.Contains(html, "already complete") || !strings.Contains(html, "Nothing was changed") {
		t.Fatalf("decline after success: %d\n%s", code, html)
	}
	if s := b.dbStatus(t, upi.PSPRef); s != pspapi.StatusSuccess {
		t.Fatalf("status after second decision = %s", s)
	}
	if code, html = br.get(upi.NextAction.URL); code != 200 || strings.Contains(html, `data-testid="approve"`) || !strings.Contains(html, "already complete") {
		t.Fatalf("page of a decided payment offers a decision:\n%s", html)
	}

	// CARD: 3-D Secure; a malformed OTP changes nothing, 000000 fails.
	card := b.create(t, "swiftpay", b.createReq("pay-page-card", pspapi.Card, 99900))
	code, html = br.get(card.NextAction.URL)
	if code != 200 || !strings.Contains(html, "<title>3-D Secure verification") || !strings.Contains(html, `name="otp"`) || !strings.Contains(html, "₹999.00") {
		t.Fatalf("card page (%d):\n%s", code, html)
	}
	code, _, html = br.post(card.NextAction.URL+"/approve", url.Values{"otp": {"12ab56"}})
	if code != http.StatusBadRequest || !strings.Contains(html, "6-digit") || b.dbStatus(t, card.PSPRef) != pspapi.StatusCreated {
		t.Fatalf("bad OTP: %d, status %s", code, b.dbStatus(t, card.PSPRef))
	}
	code, loc, _ = br.post(card.NextAction.URL+"/approve", url.Values{"otp": {"000000"}})
	wantRedirect(t, code, loc, card.PSPRef, pspapi.StatusFailed)
	if h := b.hooks.waitStatus(t, card.PSPRef, pspapi.StatusFailed, 3*time.Second); h.FailureReason != pspapi.ReasonAuthenticationFailed {
		t.Fatalf("reason = %q", h.FailureReason)
	}
	code, _, html = br.post(card.NextAction.URL+"/approve", url.Values{"otp": {"123456"}})
	if code != http.StatusConflict || !strings.Contains(html, "AUTHENTICATION_FAILED") || b.dbStatus(t, card.PSPRef) != pspapi.StatusFailed {
		t.Fatalf("approve after failure: %d\n%s", code, html)
	}

	card2 := b.create(t, "bharatpg", b.createReq("pay-page-card2", pspapi.Card, 500))
	code, loc, _ = br.post(card2.NextAction.URL+"/approve", url.Values{"otp": {"482913"}})
	wantRedirect(t, code, loc, card2.PSPRef, pspapi.StatusSuccess)

	// NETBANKING: bank login, decline.
	nb := b.create(t, "swiftpay", b.createReq("pay-page-nb", pspapi.NetBanking, 250000))
	code, html = br.get(nb.NextAction.URL)
	if code != 200 || !strings.Contains(html, "<title>NetBanking login") || !strings.Contains(html, "State Bank of India") || !strings.Contains(html, `name="user_id"`) {
		t.Fatalf("netbanking page (%d):\n%s", code, html)
	}
	code, loc, _ = br.post(nb.NextAction.URL+"/decline", nil)
	wantRedirect(t, code, loc, nb.PSPRef, pspapi.StatusFailed)
	if got := b.inquire(t, "swiftpay", nb.PSPRef); got.FailureReason != pspapi.ReasonCustomerDeclined {
		t.Fatalf("reason = %q", got.FailureReason)
	}

	// Unknown payments.
	if code, _ := br.get(b.ts.URL + "/gw/swiftpay/pay/pay_nope"); code != http.StatusNotFound {
		t.Fatalf("unknown payment page: %d", code)
	}
	if code, _, _ := br.post(b.ts.URL+"/gw/swiftpay/pay/pay_nope/approve", nil); code != http.StatusNotFound {
		t.Fatalf("unknown payment approve: %d", code)
	}
	// Each payment got exactly one webhook.
	for _, p := range []pspapi.Payment{upi, card, card2, nb} {
		testenv.Eventually(t, 2*time.Second, "webhook of "+p.MerchantRef, func() error { return testenv.Want(len(b.hooks.of(p.PSPRef)) == 1, "not yet") })
	}
}

func TestPayPageAfterExpiry(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{noRun: true, route: func(rc *pspapi.RouteConfig) { rc.AutoApproveMs = -1; rc.ExpireAfterMs = 100 }})
	br := newBrowser(t)
	p := b.create(t, "swiftpay", b.createReq("pay-page-late", pspapi.UPI, 100))
	time.Sleep(150 * time.Millisecond)
	// No background loop runs here: the late click itself finds it expired.
	code, _, html := br.post(p.NextAction.URL+"/approve", nil)
	if code != http.StatusConflict || !strings.Contains(html, "expired") {
		t.Fatalf("approve after expiry: %d\n%s", code, html)
	}
	got := b.inquire(t, "swiftpay", p.PSPRef)
	if got.Status != pspapi.StatusFailed || got.FailureReason != pspapi.ReasonExpired {
		t.Fatalf("payment = %+v", got)
	}
}

func TestRupees(t *testing.T) {
	for paise, want := range map[int64]string{
		5: "₹0.05", 100: "₹1.00", 123450: "₹1,234.50", 12345678: "₹1,23,456.78", 1234567890: "₹1,23,45,678.90",
	} {
		if got := india.Rupees(paise); got != want {
			t.Errorf("india.Rupees(%d) = %s, want %s", paise, got, want)
		}
	}
}
