package web_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"tatkal/booking"
	"tatkal/booking/admission"
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
)

// shotsDir is where screenshots go: $TATKAL_SCREENSHOTS, else /tmp/shots/site.
func shotsDir() string {
	if d := os.Getenv("TATKAL_SCREENSHOTS"); d != "" {
		return d
	}
	return filepath.Join(os.TempDir(), "shots", "site")
}

// phone is a headless Chromium the size of a phone (390 × 844 CSS pixels).
type phone struct {
	t     *testing.T
	ctx   context.Context
	start time.Time
}

// mark logs how far into the journey a step ended (seen with -v or on failure).
func (p *phone) mark(what string) { p.t.Logf("%5.1fs %s", time.Since(p.start).Seconds(), what) }

func newPhone(t *testing.T) *phone {
	ctx := testenv.NewBrowser(t, testenv.BrowserOptions{Width: 390, Height: 844}).Ctx
	// The first Run starts the browser for the context's life; steps then
	// run with their own short timeouts (a timeout here would stop it).
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844)); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return &phone{t: t, ctx: ctx, start: time.Now()}
}

// stepTimeout bounds one step: a stall fails in seconds, with a screenshot
// and the page's address and text.
const stepTimeout = 30 * time.Second

func (p *phone) step() (context.Context, context.CancelFunc) {
	return context.WithTimeout(p.ctx, stepTimeout)
}

// stalled fails the test with what the phone shows.
func (p *phone) stalled(what string, err error) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	loc, _ := chromedp.Run(ctx, chromedp.Location())
	txt, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	name := "stall-" + strings.NewReplacer(" ", "-", "/", "-").Replace(p.t.Name()+"-"+what)
	testenv.SaveShot(ctx, shotsDir(), name)
	p.t.Fatalf("%s: %v\nat %s (screenshot %s.png)\n%.2000s", what, err, loc, name, txt)
}

func (p *phone) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := p.step()
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		p.stalled(what, err)
	}
	p.mark(what)
}

func (p *phone) text(sel string) string {
	p.t.Helper()
	ctx, cancel := p.step()
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		p.stalled("text of "+sel, err)
	}
	return strings.TrimSpace(v)
}

// submit clicks sel and waits for the page it loads. A page that refreshes
// itself (data-refresh) may swap the node out between finding and clicking
// it: the click is tried again on the node swapped in.
func (p *phone) submit(what, sel string) {
	p.t.Helper()
	ctx, cancel := p.step()
	defer cancel()
	for try := 1; ; try++ {
		_, err := chromedp.Run(ctx, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(chromedp.CSS(sel))))
		if err == nil {
			break
		}
		if try == 3 || !strings.Contains(err.Error(), "Could not find node with given id") {
			p.stalled(what, err)
		}
	}
	p.mark(what)
}

func (p *phone) shot(name string) { testenv.SaveShot(p.ctx, shotsDir(), name) }

// coreGate holds every booking's sync to the reservation core at
// coresync.before-send until the test opens it, so the phone sees
// CONFIRMING for as long as the test looks (a slow core raced the checks).
type coreGate struct {
	ch   chan struct{}
	once sync.Once
}

func newCoreGate(t *testing.T) *coreGate { return &coreGate{ch: make(chan struct{})} }

func (g *coreGate) pause(ctx context.Context, point string) {
	if point != "coresync.before-send" {
		return
	}
	select {
	case <-g.ch:
	case <-ctx.Done():
	}
}

func (g *coreGate) open() { g.once.Do(func() { close(g.ch) }) }

// The journeys run on teststack.QuietRoutes: the passenger decides on the
// gateway's page, fast and without random faults. The simulator's default
// customer approves a UPI collect by itself 1.5 s after it is created (as
// if in their UPI app), so by the time a phone opened the gateway's page
// the payment was already SUCCESS and there was no button to press: the
// journeys waited for [data-testid=approve] (direct) or, when the phone was
// quicker than the simulated customer, for a return page that the 409
// "already complete" answer never redirects to (queue).

// TestBrowserJourneyDirect books a ticket on a direct-mode shard the way a
// passenger on a phone does: sign in, save a passenger, search, hold, pay
// by UPI on the gateway's page, watch CONFIRMING become CONFIRMED, open the
// e-ticket and download its PDF, whose text shows the PNR and the berths.
// axe-core checks every page on the way.
func TestBrowserJourneyDirect(t *testing.T) {
	t.Parallel()
	core := newCoreGate(t)
	s := teststack.New(t, teststack.Options{Work: true, Routes: teststack.QuietRoutes(), Pause: core.pause})
	t.Cleanup(core.open)
	_, date := s.DemoShard(t, 8, 0)
	s.Users(t, "jd", 1)
	ph := newPhone(t)
	base := s.Server.URL
	ph.signInAndSave(base, "jd00001", "pw-jd", "")

	// Search, then book the train.
	ph.do("search", chromedp.Navigate(base+"/search"), chromedp.SetValue(chromedp.CSS(`[data-testid=from]`), "MMCT"),
		chromedp.SetValue(chromedp.CSS(`[data-testid=to]`), "NDLS"), chromedp.SetValue(chromedp.CSS(`[data-testid=date]`), date.Format("2006-01-02")))
	ph.submit("search", `[data-testid=search]`)
	if got := ph.text(`[data-testid=result-12951-3A] [data-testid=band]`); !strings.Contains(got, "Available") && !strings.Contains(got, "Few") {
		t.Fatalf("band of 12951 3A: %q", got)
	}
	ph.shot("03-search")
	ph.accessible("03-search")
	ph.submit("book", `[data-testid=result-12951-3A] [data-testid=book]`)
	// Every hold carries the booking check: Hold opens once it is solved.
	ph.do("booking check solved", chromedp.WaitVisible(chromedp.CSS(`[data-testid=pow][data-solved="1"]`)))
	ph.holdWithNobody()
	ph.choose("Kavya Raman")
	ph.shot("04-window")
	ph.accessible("04-window")
	ph.submit("hold", `[data-testid=hold]`)
	ph.payAndTicket(s, core, "")
}

// TestBrowserJourneyQueue is the same journey on a waiting-room shard:
// enter the queue, wait (the page reloads itself at the server's pace)
// until admitted, let the Web Worker solve the booking challenge, hold,
// pay, ticket.
func TestBrowserJourneyQueue(t *testing.T) {
	t.Parallel()
	core := newCoreGate(t)
	s := teststack.New(t, teststack.Options{Work: true, ChallengeBits: 8, RiskyExtraBits: 4, Routes: teststack.QuietRoutes(), Pause: core.pause})
	t.Cleanup(core.open)
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
	s.Users(t, "jq", 1)
	ph := newPhone(t)
	base := s.Server.URL
	ph.signInAndSave(base, "jq00001", "pw-jq", "q")

	ph.do("window", chromedp.Navigate(base+"/book?train=12951&date="+date.Format("2006-01-02")+"&class=3A&from=MMCT&to=NDLS"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=queue-enter]`)))
	ph.shot("q04-prequeue")
	ph.accessible("q04-prequeue")
	ph.submit("enter the queue", `[data-testid=queue-enter]`)
	if st := ph.attr(`[data-testid=queue]`, "data-status"); st != "WAITING" {
		t.Fatalf("after entering: %q", st)
	}
	ph.shot("q05-waiting")
	ph.accessible("q05-waiting")
	teststack.Must(t, s.Admission.NewController(admission.ControllerConfig{}).Step(ctx), "admit")
	// The page updates itself at the server's pace until the hold form appears.
	ph.do("admitted", chromedp.WaitVisible(chromedp.CSS(`[data-testid=pow]`)))
	ph.choose("Kavya Raman")
	ph.do("challenge solved", chromedp.WaitVisible(chromedp.CSS(`[data-testid=pow][data-solved="1"]`)))
	ph.shot("q06-admitted")
	ph.accessible("q06-admitted")
	ph.submit("hold", `[data-testid=hold]`)
	ph.payAndTicket(s, core, "q")
}

func (ph *phone) attr(sel, name string) string {
	ph.t.Helper()
	ctx, cancel := ph.step()
	defer cancel()
	a, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(sel), name))
	if err != nil {
		ph.stalled(name+" of "+sel, err)
	}
	return a.Value
}

// holdWithNobody presses Hold on a fresh hold form, which ticks nobody:
// the form says on the spot that a passenger must be chosen and moves
// focus to the first one; nothing is posted.
func (ph *phone) holdWithNobody() {
	t := ph.t
	t.Helper()
	if n := ph.count(`[data-testid=hold-form] input[name=pax]:checked`); n != 0 {
		t.Fatalf("the fresh hold form ticks %d passengers, want none", n)
	}
	if n := ph.count(`[data-testid=pax-none]:not([hidden])`); n != 0 {
		t.Fatal("the fresh hold form already says to choose a passenger")
	}
	ph.do("hold with nobody ticked", chromedp.Click(chromedp.CSS(`[data-testid=hold]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=pax-none]`)))
	if got := ph.text(`[data-testid=pax-none]`); !strings.Contains(got, "Choose at least one passenger") {
		t.Fatalf("the form says %q", got)
	}
	ctx, cancel := ph.step()
	defer cancel()
	where, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[location.pathname, document.activeElement.name || "", document.activeElement.id || ""]`))
	if err != nil {
		ph.stalled("after hold with nobody", err)
	}
	if where[0] != "/book" || where[1] != "pax" {
		t.Fatalf("after holding with nobody ticked: page %s, focus on %s (%s); want the window page, focus on a passenger", where[0], where[1], where[2])
	}
	ph.shot("04a-nobody")
	ph.accessible("04a-nobody")
}

// choose ticks exactly the saved passengers named on the hold form, as a
// person does: clicking each one whose tick is wrong, then checks the
// ticks and the count the page shows.
func (ph *phone) choose(names ...string) {
	t := ph.t
	t.Helper()
	opts := ph.count(`[data-testid=hold-form] [data-testid=pax-option]`)
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	for i := 1; i <= opts; i++ {
		sel := fmt.Sprintf(`[data-testid=hold-form] [data-testid=pax-option]:nth-of-type(%d)`, i)
		name := ph.attr(sel, "data-pax-name")
		ctx, cancel := ph.step()
		checked, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(`document.querySelector(%q).querySelector("input").checked`, sel)))
		cancel()
		if err != nil {
			ph.stalled("tick of "+name, err)
		}
		if checked != want[name] {
			// Scrolled to the middle first, as a thumb does: the bottom of a
			// phone's screen is the Hold bar.
			ph.eval(fmt.Sprintf(`[String(document.querySelector(%q).scrollIntoView({block: "center"}))]`, sel))
			ph.do("tick "+name, chromedp.Click(chromedp.CSS(sel+` label`)))
		}
		delete(want, name)
	}
	if len(want) > 0 {
		t.Fatalf("the hold form does not offer %v", want)
	}
	ctx, cancel := ph.step()
	defer cancel()
	ticked, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("[data-testid=hold-form] [data-testid=pax-option]")).filter(o => o.querySelector("input").checked).map(o => o.dataset.paxName)`))
	if err != nil {
		ph.stalled("ticks", err)
	}
	if !slices.Equal(ticked, names) {
		t.Fatalf("ticked %v, want %v", ticked, names)
	}
	if got, want := ph.text(`[data-pax-count]`), fmt.Sprintf(" %d/4", len(names)); !strings.HasSuffix(got, want) {
		t.Fatalf("the form counts %q, want %q", got, want)
	}
}

// count is how many elements match sel.
func (ph *phone) count(sel string) int {
	ph.t.Helper()
	ctx, cancel := ph.step()
	defer cancel()
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, sel)))
	if err != nil {
		ph.stalled("count "+sel, err)
	}
	return n
}

// signInAndSave signs in on the phone and saves a passenger with a photo ID.
func (ph *phone) signInAndSave(base, login, password, prefix string) {
	t := ph.t
	t.Helper()
	ph.do("open sign-in", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=login]`)),
		chromedp.SetValue(chromedp.CSS(`[data-testid=login]`), login), chromedp.SetValue(chromedp.CSS(`[data-testid=password]`), password))
	ph.shot(prefix + "01-signin")
	ph.accessible(prefix + "01-signin")
	ph.submit("sign in", `[data-testid=signin]`)
	ph.do("signed in", chromedp.WaitVisible(chromedp.CSS(`[data-testid=sitenav]`)))
	ph.do("open passengers", chromedp.Navigate(base+"/passengers"),
		chromedp.SetValue(chromedp.CSS(`[data-testid=pax-name]`), "Kavya Raman"), chromedp.SetValue(chromedp.CSS(`[data-testid=pax-age]`), "34"),
		chromedp.Click(chromedp.CSS(`#gF`)), chromedp.SetValue(chromedp.CSS(`[data-testid=pax-idtype]`), "PASSPORT"),
		chromedp.SetValue(chromedp.CSS(`[data-testid=pax-idref]`), "K1234567"))
	ph.submit("save passenger", `[data-testid=pax-save]`)
	if got := ph.text(`[data-testid=pax-list]`); !strings.Contains(got, "Kavya Raman") {
		t.Fatalf("saved passengers: %q", got)
	}
	ph.shot(prefix + "02-passengers")
	ph.accessible(prefix + "02-passengers")
	// Before the window the tab has learnt the server's clock (prefetch:
	// the first page asked POST /v1/session/prepare and kept the offset).
	ctx, cancel := ph.step()
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`sessionStorage.getItem("tk_offset") !== null`)); err != nil {
		ph.stalled("clock offset kept", err)
	}
}

// prepareCalls is how many POST /v1/session/prepare the page shown made.
func (ph *phone) prepareCalls() int {
	ph.t.Helper()
	ctx, cancel := ph.step()
	defer cancel()
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`performance.getEntriesByType("resource").filter(e => e.name.includes("/v1/session/prepare")).length`))
	if err != nil {
		ph.stalled("count prepare calls", err)
	}
	return n
}

// payAndTicket pays for the hold on screen by UPI on the gateway's page,
// waits for CONFIRMING then CONFIRMED, opens the e-ticket and reads its
// PDF back.
func (ph *phone) payAndTicket(s *teststack.Stack, core *coreGate, prefix string) {
	t := ph.t
	t.Helper()
	base := s.Server.URL
	if got := ph.text(`[data-testid=state]`); got != "Seats held: pay to book" {
		t.Fatalf("after hold: %q (%s)", got, ph.text(`main`))
	}
	ph.shot(prefix + "05-held")
	ph.accessible(prefix + "05-held")
	// The hold's countdown uses the offset learnt before: no clock call in
	// the critical minute.
	if n := ph.prepareCalls(); n != 0 {
		t.Fatalf("the held page asked for the clock %d times; the offset was prefetched", n)
	}
	ph.do("choose UPI", chromedp.Click(chromedp.CSS(`#pay-upi`)), chromedp.SetValue(chromedp.CSS(`[data-testid=pay-vpa]`), "kavya@okbank"))
	ph.submit("pay", `[data-testid=pay]`)
	ph.shot(prefix + "06-to-gateway")
	ph.accessible(prefix + "06-to-gateway")
	ph.submit("to the gateway", `[data-testid=to-gateway]`)
	ph.do("gateway page", chromedp.WaitVisible(chromedp.CSS(`[data-testid=approve]`)))
	ph.shot(prefix + "07-gateway")
	ph.submit("approve", `[data-testid=approve]`) // the gateway sends the browser back to our return page
	ph.do("return page", chromedp.WaitVisible(chromedp.CSS(`[data-testid=payment-return]`)))
	ph.shot(prefix + "08-return")
	ph.accessible(prefix + "08-return")
	ph.submit("see booking", `[data-testid=booking-link]`)
	// The gateway's webhook may land after the browser: until it does the
	// page says "Waiting for your bank" and refreshes itself, as the
	// passenger sees it.
	ph.do("the bank's answer", chromedp.WaitVisible(chromedp.CSS(`[data-testid=booking][data-state=CONFIRMING]`)))

	// The core has not answered yet (held at coresync.before-send), so the
	// ticket is CONFIRMING; once it answers, the page updates itself.
	if got := ph.text(`[data-testid=state]`); got != "Confirming your ticket" {
		t.Fatalf("before the core answers: %q (%s)", got, ph.text(`main`))
	}
	ph.shot(prefix + "08-confirming")
	ph.accessible(prefix + "08-confirming")
	core.open()
	ph.do("confirmed", chromedp.WaitVisible(chromedp.CSS(`[data-testid=booking][data-state=CONFIRMED]`)))
	if got := ph.text(`[data-testid=state]`); got != "Ticket confirmed" {
		t.Fatalf("after the core answered: %q", got)
	}
	pnr := ph.text(`[data-testid=pnr]`)
	ph.shot(prefix + "09-confirmed")
	ph.accessible(prefix + "09-confirmed")

	ph.submit("open e-ticket", `[data-testid=ticket-link]`)
	berths := ph.text(`[data-testid=eticket] ~ section table.pax tbody`)
	if got := ph.text(`[data-testid=eticket] [data-testid=pnr]`); got != pnr || !strings.Contains(berths, "Kavya Raman") || !strings.Contains(berths, "B") {
		t.Fatalf("e-ticket: PNR %q (want %s), passengers %q", got, pnr, berths)
	}
	if n := ph.count(`[data-testid=eticket] ~ section table.pax tbody tr`); n != 1 {
		t.Fatalf("e-ticket carries %d passengers (%q), want Kavya alone, as chosen", n, berths)
	}
	ph.shot(prefix + "10-eticket")
	ph.accessible(prefix + "10-eticket")
	berth := ph.text(`[data-testid=berth]`)

	// Download the PDF with the browser's session and read its text back.
	attr, err := chromedp.Run(ph.ctx, chromedp.AttributeValue(chromedp.CSS(`[data-testid=pdf-link]`), "href"))
	teststack.Must(t, err, "PDF link")
	href := attr.Value
	got, err := chromedp.Call(ph.ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{base}})
	teststack.Must(t, err, "cookies")
	cookies := got.Cookies
	req, _ := http.NewRequest(http.MethodGet, base+href, nil)
	for _, c := range cookies {
		req.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value})
	}
	resp, err := http.DefaultClient.Do(req)
	teststack.Must(t, err, "download PDF")
	pdf, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/pdf" {
		t.Fatalf("PDF: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	text := pdfText(t, pdf)
	if !strings.Contains(text, pnr) || !strings.Contains(text, strings.TrimSpace(berth)) || !strings.Contains(text, "Kavya Raman") {
		t.Fatalf("PDF text lacks PNR %s or berth %q:\n%s", pnr, berth, text)
	}
}

// pdfText reads a PDF's text with poppler's pdftotext, a reader that is not ours.
func pdfText(t *testing.T, pdf []byte) string {
	t.Helper()
	exe, err := exec.LookPath("pdftotext")
	if err != nil {
		t.Skip("pdftotext not installed (apt-get install -y poppler-utils; .ci/run does)")
	}
	f := filepath.Join(t.TempDir(), "ticket.pdf")
	teststack.Must(t, os.WriteFile(f, pdf, 0o644), "write PDF")
	out, err := exec.Command(exe, "-layout", f, "-").Output()
	teststack.Must(t, err, "pdftotext")
	return string(out)
}
