package console_test

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/xuri/excelize/v2"

	"tatkal/booking"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
	"tatkal/recon"
)

// The files page's versions over HTTP: an upload's totals first (cancel
// keeps nothing, confirm stores it), the diff between versions, an
// earlier version made current by a person with a reason (refused
// without one, audited either way), and its bytes sent again said to be
// an earlier version; then the month-end page, its sign-off by a finance
// lead only once the month is over, and the month's workbook.
func TestFinanceVersionsAndMonth(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{})
	financeFixture(t, s) // file 1: the gateway's swiftpay file; file 2: the bank's
	ctx := t.Context()
	if _, err := s.Pool.Exec(ctx, `UPDATE console_users SET finance_lead = (login = 'finance1')`); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, s.Server.URL)
	b.login("finance1")
	other := newBrowser(t, s.Server.URL)
	other.login("finance2")
	stored := func() string {
		var n string
		if err := s.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM recon_files) || '/' || (SELECT count(*) FROM recon_lines) || '/' ||
			(SELECT count(*) FROM recon_upload_previews)`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	fields := url.Values{"source": {"SETTLEMENT"}, "gateway": {"swiftpay"}, "date": {financeDay}}

	// Preview, then cancel: nothing stays.
	before := stored()
	code, body := b.previewUpload("/console/finance/files", fields, "v2.csv", swiftFile(1000, 2000))
	if code != http.StatusOK || !strings.Contains(body, `data-testid="preview-totals-CAPTURE"`) || !strings.Contains(body, "₹3,000.00") ||
		!strings.Contains(body, `data-testid="current-totals"`) {
		t.Fatalf("preview: %d\n%.3000s", code, body)
	}
	cancel := strings.Replace(confirmRE.FindString(body), "/confirm", "/cancel", 1)
	if code, _, _ := other.post(cancel, nil); code != http.StatusForbidden {
		t.Fatalf("another person cancelled: %d", code)
	}
	if code, _, h := b.post(cancel, nil); code != http.StatusSeeOther || h.Get("Location") != "/console/finance/files" {
		t.Fatalf("cancel: %d %s", code, h.Get("Location"))
	}
	if after := stored(); after != before {
		t.Fatalf("a cancelled upload left %s, was %s", after, before)
	}
	// Preview and confirm: file 3 supersedes file 1.
	code, body = b.upload("/console/finance/files", fields, "v2.csv", swiftFile(1000, 2000))
	if code != http.StatusCreated || !strings.Contains(body, "It supersedes file #1") {
		t.Fatalf("confirmed upload: %d\n%.3000s", code, body)
	}
	if !strings.Contains(body, `data-testid="file-1-current"`) || !strings.Contains(body, `data-testid="file-1-diff"`) {
		t.Fatalf("the superseded file offers no version actions:\n%.5000s", body)
	}

	// The diff: the third capture removed, nothing else.
	code, body, _ = b.get("/console/finance/files/diff?old=1&new=3")
	if code != http.StatusOK || !strings.Contains(body, "0 added, 1 removed, 0 changed") || strings.Count(body, `data-testid="diff-removed"`) != 1 ||
		!strings.Contains(body, "swp_orphan_3") || !strings.Contains(body, "₹3,000.00") {
		t.Fatalf("diff: %d\n%.4000s", code, body)
	}
	if code, _, _ := b.get("/console/finance/files/diff?old=1&new=2"); code != http.StatusBadRequest {
		t.Fatalf("a settlement file against a bank statement: %d", code)
	}

	// File 1 made current again: a reason is needed; then it is.
	audits := func(action string) int {
		var n int
		s.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action = $1`, action).Scan(&n) //nolint:errcheck
		return n
	}
	if code, body, _ := other.post("/console/finance/files/1/current", url.Values{"note": {" "}}); code != http.StatusBadRequest ||
		!strings.Contains(body, "Write a note") {
		t.Fatalf("made current without a reason: %d\n%.1000s", code, body)
	}
	if n := audits("recon.file_make_current"); n != 1 {
		t.Fatalf("%d audit rows after the refusal, want the refusal's", n)
	}
	code, _, h := other.post("/console/finance/files/1/current", url.Values{"note": {"the correction was premature"}})
	if code != http.StatusSeeOther {
		t.Fatalf("make current: %d", code)
	}
	_, body, _ = other.get(h.Get("Location"))
	if !strings.Contains(body, "File 1 is the current version") || !strings.Contains(body, "superseding #3") {
		t.Fatalf("after making file 1 current:\n%.3000s", body)
	}
	var current int64
	if err := s.Pool.QueryRow(ctx, `SELECT id FROM recon_files WHERE source = 'SETTLEMENT' AND superseded_by IS NULL`).Scan(&current); err != nil || current != 1 {
		t.Fatalf("current settlement file %d (%v), want 1", current, err)
	}
	// File 3's bytes again: an earlier version, said so, nothing stored.
	before = stored()
	code, body = b.upload("/console/finance/files", fields, "v2-again.csv", swiftFile(1000, 2000))
	if code != http.StatusOK || !strings.Contains(body, `data-testid="upload-identical"`) || !strings.Contains(body, "earlier version") ||
		!strings.Contains(body, "These bytes are file #3") {
		t.Fatalf("earlier version again: %d\n%.3000s", code, body)
	}
	if after := stored(); after != before {
		t.Fatalf("an earlier version sent again left %s, was %s", after, before)
	}

	// Month end: this month has the day's run; the last month is over.
	if code, _, _ := b.post("/console/finance/runs", url.Values{"gateway": {"swiftpay"}, "date": {financeDay}}); code != http.StatusSeeOther {
		t.Fatalf("run: %d", code)
	}
	code, body, _ = b.get("/console/finance/month")
	if code != http.StatusOK || !strings.Contains(body, `data-testid="period-kind-ORPHAN_LINE"`) || !strings.Contains(body, `data-testid="month-ageing"`) ||
		!strings.Contains(body, "ties out") || strings.Contains(body, `data-testid="month-sign"`) {
		t.Fatalf("this month: %d\n%.4000s", code, body)
	}
	now := time.Now().In(booking.IST)
	this := recon.MonthStart(now).Format("2006-01")
	last := recon.MonthStart(now).AddDate(0, -1, 0).Format("2006-01")
	if code, body, _ := b.post("/console/finance/month/"+this+"/sign", nil); code != http.StatusBadRequest || !strings.Contains(body, "is not over yet") {
		t.Fatalf("this month signed: %d\n%.2000s", code, body)
	}
	if code, _, _ := other.post("/console/finance/month/"+last+"/sign", nil); code != http.StatusForbidden {
		t.Fatalf("signed by a clerk: %d", code)
	}
	if _, body, _ := b.get("/console/finance/month?month=" + last); !strings.Contains(body, `data-testid="month-sign"`) {
		t.Fatalf("the lead is not offered the sign-off:\n%.3000s", body)
	}
	code, _, h = b.post("/console/finance/month/"+last+"/sign", nil)
	if code != http.StatusSeeOther {
		t.Fatalf("sign: %d", code)
	}
	if _, body, _ := b.get(h.Get("Location")); !strings.Contains(body, "Signed off by finance1") || strings.Contains(body, `data-testid="month-sign"`) {
		t.Fatalf("after signing:\n%.3000s", body)
	}
	if code, _, _ := b.post("/console/finance/month/"+last+"/sign", nil); code != http.StatusConflict {
		t.Fatalf("signed twice: %d", code)
	}
	if n := audits("recon.month_signoff"); n != 4 { // this month's, the clerk's and the second refusals, and the signature
		t.Fatalf("%d sign-off audit rows, want 4", n)
	}
	r := testenv.Call(t, testenv.Request{Method: "GET", URL: s.Server.URL + "/console/finance/month/" + this + "/workbook.xlsx", Client: b.c})
	if r.Status != http.StatusOK {
		t.Fatalf("month workbook: %d", r.Status)
	}
	f, err := excelize.OpenReader(bytes.NewReader(r.Raw))
	if err != nil {
		t.Fatalf("month workbook: %v", err)
	}
	defer f.Close()
	if tables, _ := f.GetTables("Period"); len(tables) != 2 {
		t.Fatalf("period tables: %+v", tables)
	}
}

// TestBrowserMonthEnd looks at the month-end page and its ageing report
// in Chromium, as a finance lead signing last month; screenshots in
// $TATKAL_SCREENSHOTS.
func TestBrowserMonthEnd(t *testing.T) {
	testenv.Chromium(t)
	t.Parallel()
	s := setup(t, teststack.Options{})
	financeFixture(t, s)
	ctx := t.Context()
	if _, err := s.Pool.Exec(ctx, `UPDATE console_users SET finance_lead = (login = 'finance1')`); err != nil {
		t.Fatal(err)
	}
	// Last month left two exceptions open (aged 5 and 40 days at its end).
	now := time.Now().In(booking.IST)
	start := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, booking.IST)
	for i, age := range []int{5, 40} {
		detected := start.AddDate(0, 0, -age)
		if _, err := s.Pool.Exec(ctx, `WITH e AS (INSERT INTO reconciliation_exceptions (id, kind, ref, gateway, business_date, amount_paise,
				stake_paise, owner_team, path, detected_at, due_at, first_run_id, last_run_id)
				VALUES (gen_random_uuid(), $1, $2, 'swiftpay', ($3::timestamptz AT TIME ZONE 'Asia/Kolkata')::date, $4, $4, $5, 'MANUAL', $3, $3,
				0, 0) RETURNING id)
			INSERT INTO reconciliation_exception_events (exception_id, at, actor, action, to_state) SELECT id, $3, 'run:0', 'DETECTED', 'OPEN' FROM e`,
			[]string{recon.UnexplainedCredit, recon.PayoutMismatch}[i], "past-"+string(rune('a'+i)), detected, []int64{777_00, 1_49_452_04}[i],
			[]string{"treasury", "treasury"}[i]); err != nil {
			t.Fatal(err)
		}
	}
	b := testenv.NewBrowser(t, testenv.BrowserOptions{Width: 1440, Height: 1000, Timeout: 60 * time.Second})
	base := s.Server.URL
	do, text, submit, shot := b.Do, b.Text, b.Submit, b.Shot
	signIn(t, b, base, "finance1")
	do("run", chromedp.Navigate(base+"/console/finance"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=run-form]`)),
		chromedp.SetValue(chromedp.CSS(`[data-testid=run-gateway]`), "swiftpay"),
		chromedp.SetValue(chromedp.CSS(`[data-testid=run-date]`), financeDay))
	submit("run", `[data-testid=run-submit]`)

	do("this month", chromedp.Navigate(base+"/console/finance/month"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=finance-month]`)))
	if got := text(`[data-testid=period-kind-total]`); !strings.Contains(got, "₹1,50,229.04") {
		t.Fatalf("this month's totals: %q", got)
	}
	shot("month-end-this-month")
	last := recon.MonthStart(now).AddDate(0, -1, 0).Format("2006-01")
	do("last month", chromedp.Navigate(base+"/console/finance/month?month="+last), chromedp.WaitVisible(chromedp.CSS(`[data-testid=month-sign]`)))
	if got := text(`[data-testid=month-age-total]`); !strings.Contains(got, "₹1,49,452.04") || !strings.Contains(got, "₹777.00") {
		t.Fatalf("last month's ageing: %q", got)
	}
	submit("sign", `[data-testid=month-sign]`)
	if got := text(`[data-testid=month-signoff]`); !strings.Contains(got, "Signed off by finance1") {
		t.Fatalf("after signing: %q", got)
	}
	shot("month-end-signed")
	// The printable report: the page as it prints, without the console's chrome.
	do("print media", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{Media: "print"})
		return err
	}))
	shown, err := chromedp.Run(b.Ctx, chromedp.Evaluate[bool](`getComputedStyle(document.querySelector('header.cbar')).display !== 'none'`))
	if err != nil || shown {
		t.Fatal("the console's header prints with the report")
	}
	shot("month-end-print")
}
