package web_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"tatkal/booking"
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/teststack"
)

// TestBrowserPhoneOpening is the 10:00 minute on a phone (390 × 844), in
// English and in Hindi, by tapping and typing only: the window page before
// the opening (tickets left today, Hold locked by the script, no sideways
// scrolling at 390 or 320 px), the opening itself (the page says it is
// open, Hold is in view and enabled without scrolling), a tap on Hold that
// answers within 100 ms, a passenger form checked in the browser with the
// message under its field, and a waitlist hold paid by UPI that is never
// called a seat. On the Hindi run no page of ours shows an English word.
func TestBrowserPhoneOpening(t *testing.T) {
	for _, lang := range []string{"en", "hi"} {
		t.Run(lang, func(t *testing.T) { phoneOpening(t, lang) })
	}
}

func phoneOpening(t *testing.T, lang string) {
	s := teststack.New(t, teststack.Options{Work: true, Routes: teststack.QuietRoutes()})
	ctx := context.Background()
	open := -time.Hour
	_, err := seed.Demo(ctx, s.Pool, seed.DemoOptions{OpensIn: &open})
	teststack.Must(t, err, "seed demo")
	date := time.Now().In(booking.IST).AddDate(0, 0, 5)
	date = time.Date(date.Year(), date.Month(), date.Day(), 0, 0, 0, 0, booking.IST)
	// The window of 3A opens while the phone looks at it; 2A, open already,
	// has one berth and a waitlist, so two travellers get waitlist places.
	opensAt := time.Now().Add(25 * time.Second)
	wl := 4
	a, err := seed.Shard(ctx, s.Pool, seed.ShardSpec{Train: "12951", Date: date, Class: "3A", Berths: 8, OpensAt: opensAt})
	teststack.Must(t, err, "seed 3A")
	b, err := seed.Shard(ctx, s.Pool, seed.ShardSpec{Train: "12951", Date: date, Class: "2A", Berths: 1, OpensAt: time.Now().Add(-time.Minute), WaitlistCap: &wl})
	teststack.Must(t, err, "seed 2A")
	for _, id := range []int64{a, b} {
		_, err := s.Service.Rebuild(ctx, id)
		teststack.Must(t, err, "load shard")
	}
	prefix := "o" + lang
	s.Users(t, prefix, 1)
	ph := newPhone(t)
	base := s.Server.URL
	login := prefix + "00001"
	ph.signInAndSave(base, login, "pw-"+prefix, lang+"-")
	if lang == "hi" {
		ph.do("choose Hindi", chromedp.SetValue(chromedp.CSS(`[data-testid=lang]`), "hi"))
		ph.submit("switch to Hindi", `.lang button`)
	}
	allowed := ph.dataWords(s, "Kavya Raman", "Arjun Mehta", login)
	hindi := func(page string) {
		t.Helper()
		if lang == "hi" {
			ph.noEnglish(page, allowed)
		}
	}
	hindi("passengers")

	// A second passenger, typed with a passport number of the wrong shape:
	// the browser says so under the field before anything is sent.
	ph.do("type a second passenger", chromedp.Navigate(base+"/passengers"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=pax-name]`)),
		chromedp.SendKeys(chromedp.CSS(`[data-testid=pax-name]`), "Arjun Mehta"), chromedp.SendKeys(chromedp.CSS(`[data-testid=pax-age]`), "41"),
		chromedp.SetValue(chromedp.CSS(`[data-testid=pax-idtype]`), "PASSPORT"), chromedp.SendKeys(chromedp.CSS(`[data-testid=pax-idref]`), "12345"))
	if ph.count(`#gM:checked, #gF:checked, #gT:checked`) != 0 {
		t.Fatal("the passenger form presets a gender")
	}
	ph.do("save with mistakes", chromedp.Click(chromedp.CSS(`[data-testid=pax-save]`)), chromedp.WaitVisible(chromedp.CSS(`[data-testid=err-id_ref]`)))
	where := ph.eval(`[location.pathname, document.activeElement.id, document.querySelector("#pidref").getAttribute("aria-invalid"),
		document.querySelector("#pidref").getAttribute("aria-describedby"), document.querySelector("#pname").value,
		String(!document.querySelector("[data-testid=err-gender]").hidden)]`)
	// Gender comes first among the bad fields, so it has the focus.
	if where[0] != "/passengers" || where[1] != "gM" {
		t.Fatalf("after a bad form: page %s, focus on %q; want the passengers page, focus on the gender", where[0], where[1])
	}
	if ph.attr(`#pidref`, "aria-invalid") != "true" || !strings.Contains(where[3], "pidref-err") || where[4] != "Arjun Mehta" || where[5] != "true" {
		t.Fatalf("the bad fields are not marked or the input was lost: %v", where)
	}
	ph.shot(lang + "-02a-pax-errors")
	hindi("passenger errors")
	ph.do("correct it", chromedp.Click(chromedp.CSS(`label[for=gM]`)), ph.clear(`[data-testid=pax-idref]`),
		chromedp.SendKeys(chromedp.CSS(`[data-testid=pax-idref]`), "K7654321"))
	ph.submit("save the second passenger", `[data-testid=pax-save]`)
	if got := ph.text(`[data-testid=pax-list]`); !strings.Contains(got, "Arjun Mehta") {
		t.Fatalf("saved passengers: %q", got)
	}

	// Before the opening.
	ph.do("window before the opening", chromedp.Navigate(base+"/book?train=12951&date="+date.Format("2006-01-02")+"&class=3A&from=MMCT&to=NDLS"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=countdown]`)))
	left := ph.text(`[data-testid=tatkal-left]`)
	if want := map[string]string{"en": "Tatkal tickets left today: 2 of 2", "hi": "आज बचे तत्काल टिकट: 2 में से 2"}[lang]; left != want {
		t.Fatalf("before the opening the page says %q, want %q", left, want)
	}
	if !ph.evalBool(`document.querySelector("[data-testid=hold]").disabled`) {
		t.Fatal("Hold is enabled before the opening (with the script running)")
	}
	ph.noOverflow("window")
	ph.shot(lang + "-03-before")
	ph.accessible(lang + "-03-before")
	hindi("window before the opening")
	ph.choose("Kavya Raman")

	// The opening: the page says so, Hold is in view and enabled.
	wctx, cancel := context.WithTimeout(ph.ctx, time.Until(opensAt)+20*time.Second)
	_, err = chromedp.Run(wctx, chromedp.Poll[bool](`!document.querySelector("[data-testid=hold]").disabled`))
	cancel()
	if err != nil {
		ph.stalled("Hold unlocks at the opening", err)
	}
	ph.mark("opened")
	state := ph.eval(`(() => {
		const b = document.querySelector("[data-testid=hold]"), r = b.getBoundingClientRect();
		const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
		return [String(r.top >= 0 && r.bottom <= innerHeight), String(hit === b || b.contains(hit)),
			document.querySelector("[data-testid=opens]").textContent, String(document.querySelector("[data-testid=countdown-box]").getClientRects().length === 0),
			String(document.querySelector("[data-testid=open-now]").getClientRects().length > 0), String(scrollY)];
	})()`)
	if state[0] != "true" || state[1] != "true" {
		t.Fatalf("at the opening Hold is not in view and tappable: in view %s, on top %s (scrolled %s px)", state[0], state[1], state[5])
	}
	if state[3] != "true" || state[4] != "true" || !strings.Contains(state[2], map[string]string{"en": "Open now", "hi": "अभी खुली है"}[lang]) {
		t.Fatalf("at the opening the page still says %q (countdown hidden %s, open notice shown %s)", state[2], state[3], state[4])
	}
	ph.shot(lang + "-04-open")
	ph.accessible(lang + "-04-open")
	hindi("window at the opening")

	// A tap on Hold shows at once that the work started.
	ph.watchBusy(`[data-testid=hold]`)
	ph.submit("hold", `[data-testid=hold]`)
	ph.checkBusy("Hold", map[string]string{"en": "Holding…", "hi": "रोका जा रहा है…"}[lang])
	if got := ph.attr(`[data-testid=booking]`, "data-state"); got != "HELD" {
		t.Fatalf("after hold: %q", got)
	}
	ph.noOverflow("held")
	ph.shot(lang + "-05-held")
	hindi("seats held")
	ph.submit("release the seats", `[data-testid=release]`)

	// A waitlist hold: two travellers, one berth left on 2A.
	ph.do("window of 2A", chromedp.Navigate(base+"/book?train=12951&date="+date.Format("2006-01-02")+"&class=2A&from=MMCT&to=NDLS"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=hold]`)))
	ph.choose("Kavya Raman", "Arjun Mehta")
	ph.submit("hold two", `[data-testid=hold]`)
	ph.notASeat("waitlist hold")
	if ph.count(`[data-testid=wl-warning]`) != 1 {
		t.Fatal("the waitlist hold's pay form does not warn that it pays for a waitlist place")
	}
	ph.shot(lang + "-06-wl-held")
	ph.accessible(lang + "-06-wl-held")
	ph.noOverflow("waitlist hold")
	hindi("waitlist hold")

	// Pay by UPI; a UPI ID of the wrong shape is caught in the browser,
	// under its field, the input kept.
	ph.do("choose UPI", chromedp.Click(chromedp.CSS(`label[for=pay-upi]`)), ph.clear(`[data-testid=pay-vpa]`),
		chromedp.SendKeys(chromedp.CSS(`[data-testid=pay-vpa]`), "kavya"))
	ph.do("pay with a bad UPI ID", chromedp.Click(chromedp.CSS(`[data-testid=pay]`)), chromedp.WaitVisible(chromedp.CSS(`[data-testid=err-vpa]`)))
	if got := ph.eval(`[document.activeElement.id, document.querySelector("#pay-vpa").value, document.querySelector("#pay-vpa").getAttribute("aria-invalid")]`); got[0] != "pay-vpa" || got[1] != "kavya" || got[2] != "true" {
		t.Fatalf("after a bad UPI ID: focus, value, aria-invalid = %v", got)
	}
	ph.shot(lang + "-06a-vpa-error")
	hindi("UPI error")
	ph.do("correct the UPI ID", chromedp.SendKeys(chromedp.CSS(`[data-testid=pay-vpa]`), "@okbank"))
	ph.watchBusy(`[data-testid=pay]`)
	ph.submit("pay", `[data-testid=pay]`)
	ph.checkBusy("Pay", map[string]string{"en": "Starting the payment…", "hi": "भुगतान शुरू हो रहा है…"}[lang])
	ph.shot(lang + "-07-to-gateway")
	hindi("to the gateway")
	ph.submit("to the gateway", `[data-testid=to-gateway]`)
	ph.do("gateway page", chromedp.WaitVisible(chromedp.CSS(`[data-testid=approve]`)))
	ph.submit("approve", `[data-testid=approve]`)
	ph.do("return page", chromedp.WaitVisible(chromedp.CSS(`[data-testid=payment-return]`)))
	ph.shot(lang + "-08-return")
	hindi("back from the bank")
	ph.submit("see booking", `[data-testid=booking-link]`)
	ph.do("waitlisted", chromedp.WaitVisible(chromedp.CSS(`[data-testid=booking][data-state=WAITLISTED]`)))
	ph.notASeat("waitlisted ticket")
	ph.noOverflow("waitlisted")
	ph.shot(lang + "-09-waitlisted")
	ph.accessible(lang + "-09-waitlisted")
	hindi("waitlisted ticket")
	ph.do("wallet", chromedp.Navigate(base+"/wallet"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=ledger]`)))
	ph.noOverflow("wallet")
	hindi("wallet")
}

// clear empties a text field as a person does: to its end, then
// backspace over what is there.
func (ph *phone) clear(sel string) chromedp.Action[chromedp.Void] {
	ph.t.Helper()
	n := len(ph.eval(fmt.Sprintf(`[document.querySelector(%q).value]`, sel))[0])
	return chromedp.SendKeys(chromedp.CSS(sel), kb.End+strings.Repeat(kb.Backspace, n))
}

// watchBusy records, in the tab's session storage (which outlives the
// page the tap leaves), when the next tap on sel starts and when the
// button first shows that work started (aria-busy) and is disabled.
func (ph *phone) watchBusy(sel string) {
	ph.t.Helper()
	ph.eval(fmt.Sprintf(`(() => {
		const b = document.querySelector(%q);
		sessionStorage.removeItem("tk_busy");
		const rec = {};
		const save = () => sessionStorage.setItem("tk_busy", JSON.stringify(rec));
		b.addEventListener("pointerdown", () => { rec.tap = performance.now(); save(); }, { capture: true, once: true });
		new MutationObserver(() => {
			if (rec.tap == null) return;
			if (rec.busy == null && b.getAttribute("aria-busy") === "true") { rec.busy = performance.now(); rec.text = b.textContent.trim(); }
			if (rec.disabled == null && b.disabled) rec.disabled = performance.now();
			save();
		}).observe(b, { attributes: true, childList: true, subtree: true, characterData: true });
		return [];
	})()`, sel))
}

// checkBusy fails unless the watched tap showed its work within 100 ms.
func (ph *phone) checkBusy(what, want string) {
	ph.t.Helper()
	got := ph.eval(`(() => { const r = JSON.parse(sessionStorage.getItem("tk_busy") || "{}");
		return [String(r.tap), String(r.busy), String(r.disabled), r.text || ""]; })()`)
	var tap, busy float64
	fmt.Sscan(got[0], &tap)
	fmt.Sscan(got[1], &busy)
	if got[0] == "undefined" || got[1] == "undefined" {
		ph.t.Fatalf("%s: no sign of work after the tap (tap %s, busy %s)", what, got[0], got[1])
	}
	ph.t.Logf("%s: busy %.1f ms after the tap (disabled at %s, tap at %s)", what, busy-tap, got[2], got[0])
	if busy-tap > 100 || got[3] != want {
		ph.t.Fatalf("%s: the button said %q %.1f ms after the tap; want %q within 100 ms", what, got[3], busy-tap, want)
	}
}

// eval runs a script returning an array of strings.
func (ph *phone) eval(js string) []string {
	ph.t.Helper()
	ctx, cancel := ph.step()
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](js))
	if err != nil {
		ph.stalled("script", err)
	}
	return v
}

func (ph *phone) evalBool(js string) bool {
	ph.t.Helper()
	ctx, cancel := ph.step()
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js))
	if err != nil {
		ph.stalled("script", err)
	}
	return v
}

// noOverflow fails when the page scrolls sideways at 390 px or at 320 px.
func (ph *phone) noOverflow(page string) {
	ph.t.Helper()
	for _, w := range []int64{320, 390} {
		ph.do(fmt.Sprintf("%d px wide", w), chromedp.EmulateViewport(w, 844))
		if wide := ph.eval(`[String(document.documentElement.scrollWidth), String(innerWidth)]`); wide[0] != wide[1] {
			ph.shot(fmt.Sprintf("overflow-%s-%d", strings.ReplaceAll(page, " ", "-"), w))
			ph.t.Errorf("%s at %d px: the page is %s px wide", page, w, wide[0])
		}
	}
}

// notASeat fails when the booking's headline or message calls a waitlist
// place a seat or berth held.
func (ph *phone) notASeat(page string) {
	ph.t.Helper()
	head, msg := ph.text(`[data-testid=state]`), ph.text(`[data-testid=message]`)
	for _, bad := range []string{"Seats held", "seats held", "सीटें रोकी", "सीट रोकी"} {
		if strings.Contains(head, bad) || strings.Contains(msg, bad) {
			ph.t.Fatalf("%s called a seat: %q / %q", page, head, msg)
		}
	}
	if !strings.Contains(head+msg, "TQWL") && !strings.Contains(strings.ToLower(head+msg), "waitlist") && !strings.Contains(head+msg, "प्रतीक्षा सूची") {
		ph.t.Fatalf("%s does not say it is a waitlist place: %q / %q", page, head, msg)
	}
}

// dataWords are the English words that are data, not sentences: station
// and train names from the database, the passengers' names, the login.
func (ph *phone) dataWords(s *teststack.Stack, extra ...string) map[string]bool {
	ph.t.Helper()
	ok := map[string]bool{"tatkal": true}
	rows, err := s.Pool.Query(context.Background(), `SELECT name FROM stations UNION ALL SELECT name FROM trains UNION ALL SELECT name FROM passenger_master`)
	teststack.Must(ph.t, err, "names")
	defer rows.Close()
	for rows.Next() {
		var n string
		teststack.Must(ph.t, rows.Scan(&n), "name")
		extra = append(extra, n)
	}
	for _, e := range extra {
		for _, w := range latinWord.FindAllString(e, -1) {
			ok[strings.ToLower(w)] = true
		}
	}
	return ok
}

var latinWord = regexp.MustCompile(`[A-Za-z][A-Za-z'-]+`)

// noEnglish fails when the page's visible text (outside elements in
// another language, such as the language switch's "English") has an
// English word: a Latin word with a small letter that is not data. Codes
// in capitals (PNR, TQWL, IST, UPI, MMCT) and addresses with @ pass.
func (ph *phone) noEnglish(page string, allowed map[string]bool) {
	ph.t.Helper()
	texts := ph.eval(`(() => {
		const out = [], w = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
		for (let n; (n = w.nextNode()); ) {
			const el = n.parentElement;
			if (!el || el.closest("[lang]:not([lang=hi]), code, script, style, [hidden]") || !el.getClientRects().length) continue;
			if (n.textContent.trim()) out.push(n.textContent.trim());
		}
		return out;
	})()`)
	var bad []string
	for _, t := range texts {
		for _, tok := range strings.Fields(t) {
			if strings.Contains(tok, "@") {
				continue
			}
			for _, w := range latinWord.FindAllString(tok, -1) {
				if w == strings.ToUpper(w) || allowed[strings.ToLower(w)] {
					continue
				}
				bad = append(bad, w)
			}
		}
	}
	if len(bad) > 0 {
		ph.shot("english-on-hindi-" + strings.ReplaceAll(page, " ", "-"))
		ph.t.Errorf("the Hindi %s page shows English words %q in:\n%s", page, bad, strings.Join(texts, " | "))
	}
}
