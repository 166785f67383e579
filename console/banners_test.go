package console_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"tatkal/booking"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
)

var bannerIDRE = regexp.MustCompile(`data-testid="banner-(\d+)" data-state="([A-Z]+)"`)

// bannerForm is the console's banner form, shown from a minute ago for an hour.
func bannerForm(text, severity, scope string) url.Values {
	now := time.Now().In(booking.IST)
	return url.Values{"text": {text}, "severity": {severity}, "scope": {scope},
		"starts": {now.Add(-time.Minute).Format("2006-01-02T15:04")}, "ends": {now.Add(time.Hour).Format("2006-01-02T15:04")}}
}

// lastBanner is the newest banner's id and state on the banners page.
func lastBanner(t *testing.T, b *browser) (string, string) {
	t.Helper()
	_, page, _ := b.get("/console/banners")
	m := bannerIDRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no banner listed:\n%.3000s", page)
	}
	return m[1], m[2]
}

// TestStatusBanners: a warning banner published by ops shows on the
// passenger pages (role=status, the wrapper in the page's language) and
// as a Tatkal-Notice header on /v1 answers (not on /v1/admin); a site-only
// one stays off the API; a critical one waits for a second person (its
// author may not approve it), then shows as role=alert; a withdrawn one
// goes; bad input changes nothing; every change is audited by name.
func TestStatusBanners(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{})
	ctx := context.Background()
	ops := newBrowser(t, s.Server.URL)
	ops.login("ops1")
	fin := newBrowser(t, s.Server.URL)
	fin.login("finance1")
	if code, _, _ := fin.post("/console/banners", bannerForm("Finance may not", "info", "both")); code != http.StatusForbidden {
		t.Fatalf("finance publishing a banner: %d, want 403", code)
	}
	for _, bad := range []url.Values{bannerForm("x", "info", "both"), bannerForm("Bad severity", "loud", "both"), bannerForm("Bad scope", "info", "tv"),
		func() url.Values {
			f := bannerForm("Ends before it starts", "info", "both")
			f.Set("ends", f.Get("starts"))
			return f
		}(),
		func() url.Values { f := bannerForm("No time", "info", "both"); f.Set("starts", "soon"); return f }()} {
		if code, page, _ := ops.post("/console/banners", bad); code != http.StatusUnprocessableEntity || !strings.Contains(page, `class="error"`) {
			t.Fatalf("bad banner %v: %d\n%.2000s", bad, code, page)
		}
	}
	var n int
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM status_banners`).Scan(&n), "count")
	if n != 0 {
		t.Fatalf("bad input stored %d banners", n)
	}

	// A warning, on both.
	if code, _, _ := ops.post("/console/banners", bannerForm("UPI payments are slow; wallet works", "warning", "both")); code != http.StatusSeeOther {
		t.Fatalf("publish: %d", code)
	}
	warnID, state := lastBanner(t, ops)
	if state != "ACTIVE" {
		t.Fatalf("warning banner %s is %s", warnID, state)
	}
	site := func(lang string) string {
		r := testenv.Call(t, testenv.Request{Method: "GET", URL: s.Server.URL + "/signin", Header: map[string]string{"Cookie": "tk_lang=" + lang}})
		return html.UnescapeString(string(r.Raw))
	}
	page := site("en")
	if !strings.Contains(page, `role="status" data-testid="status-banner" data-severity="warning"`) || !strings.Contains(page, "Service warning:") ||
		!strings.Contains(page, "UPI payments are slow; wallet works") {
		t.Fatalf("passenger page lacks the banner:\n%.3000s", page)
	}
	notice := func(path string) []string {
		r := testenv.Call(t, testenv.Request{Method: "GET", URL: s.Server.URL + path})
		return r.Header.Values("Tatkal-Notice")
	}
	if h := notice("/v1/openapi.json"); len(h) != 1 || !strings.HasPrefix(h[0], "id="+warnID+"; severity=warning; until=") ||
		!strings.HasSuffix(h[0], "; text="+url.PathEscape("UPI payments are slow; wallet works")) {
		t.Fatalf("/v1 notice header: %q", h)
	}
	if h := notice("/v1/admin/levers"); len(h) != 0 {
		t.Fatalf("/v1/admin carries the passengers' notice: %q", h)
	}

	// Site only: on the pages, not in the API.
	if code, _, _ := ops.post("/console/banners", bannerForm("Pages only: maintenance at 23:00", "info", "site")); code != http.StatusSeeOther {
		t.Fatalf("publish site-only: %d", code)
	}
	if h := notice("/v1/openapi.json"); len(h) != 1 {
		t.Fatalf("a site-only banner in the API: %q", h)
	}
	if page := site("en"); !strings.Contains(page, "Pages only: maintenance at 23:00") {
		t.Fatal("site-only banner missing on the site")
	}

	// Critical: waits for a second person.
	if code, _, _ := ops.post("/console/banners", bannerForm("Bookings are failing; do not retry", "critical", "both")); code != http.StatusSeeOther {
		t.Fatalf("propose critical: %d", code)
	}
	critID, state := lastBanner(t, ops)
	if state != "PENDING" || strings.Contains(site("en"), "Bookings are failing") {
		t.Fatalf("critical banner %s is %s and shown before approval", critID, state)
	}
	if code, page, _ := ops.post("/console/banners/"+critID+"/approve", nil); code != http.StatusConflict || !strings.Contains(page, "Someone other than its author") {
		t.Fatalf("author approving: %d\n%.2000s", code, page)
	}
	admin := newBrowser(t, s.Server.URL)
	admin.login("admin1")
	if code, _, _ := admin.post("/console/banners/"+critID+"/approve", nil); code != http.StatusSeeOther {
		t.Fatalf("second person approving: %d", code)
	}
	page = site("hi")
	if !strings.Contains(page, `role="alert" data-testid="status-banner" data-severity="critical"`) || !strings.Contains(page, "सेवा बाधित:") {
		t.Fatalf("critical banner not shown as an alert in Hindi:\n%.3000s", page)
	}
	if h := notice("/v1/openapi.json"); len(h) != 2 || !strings.Contains(h[0], "severity=critical") {
		t.Fatalf("critical first in the API: %q", h)
	}

	// Withdrawn: gone.
	if code, _, _ := admin.post("/console/banners/"+warnID+"/withdraw", nil); code != http.StatusSeeOther {
		t.Fatalf("withdraw: %d", code)
	}
	if strings.Contains(site("en"), "UPI payments are slow") {
		t.Fatal("withdrawn banner still shown")
	}
	var audit string
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT string_agg(actor || ' ' || action || ' ' || subject, ', ' ORDER BY id) FROM audit_log WHERE action LIKE 'banner.%'`).Scan(&audit), "audit")
	want := fmt.Sprintf("ops1 banner.create banner %s, ops1 banner.create banner %d, ops1 banner.create banner %s, admin1 banner.approve banner %s, admin1 banner.withdraw banner %s",
		warnID, atoi(t, warnID)+1, critID, critID, warnID)
	if audit != want {
		t.Fatalf("audit:\n%s\nwant\n%s", audit, want)
	}
}

func atoi(t *testing.T, s string) int {
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestStatusBannerInChromium: a banner published on the console shows at
// the top of the passenger page in a real browser, and a screen reader
// finds it as a status.
func TestStatusBannerInChromium(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{})
	ops := newBrowser(t, s.Server.URL)
	ops.login("ops1")
	if code, _, _ := ops.post("/console/banners", bannerForm("Card payments are down; UPI and wallet work.", "warning", "site")); code != http.StatusSeeOther {
		t.Fatalf("publish: %d", code)
	}
	b := testenv.NewBrowser(t, testenv.BrowserOptions{Width: 390, Height: 844, Timeout: time.Minute})
	b.Do("open the passenger page", chromedp.Navigate(s.Server.URL+"/signin"), chromedp.WaitVisible(`[data-testid=status-banner]`))
	b.Shot("status-banner")
	if got := b.Text(`[data-testid=status-banner]`); got != "Service warning: Card payments are down; UPI and wallet work." {
		t.Fatalf("banner text %q", got)
	}
	if role := b.Attr(`[data-testid=status-banner]`, "role"); role != "status" {
		t.Fatalf("banner role %q", role)
	}
	// Above the page's own content.
	above, err := chromedp.Run(b.Ctx, chromedp.Evaluate[bool](`document.querySelector('[data-testid=status-banner]').getBoundingClientRect().bottom <= document.querySelector('main').getBoundingClientRect().top + 1`))
	if err != nil || !above {
		t.Fatal("the banner is not above the page's content")
	}
}
