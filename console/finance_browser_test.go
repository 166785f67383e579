package console_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
	"github.com/xuri/excelize/v2"

	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
	"tatkal/recon"
	"tatkal/views"
)

// TestBrowserFinanceClerk drives the finance pages in headless Chromium
// as a clerk at month end: open a run, filter the exceptions, assign one,
// resolve it, upload a corrected settlement file (which supersedes the
// first, both listed), run the day again and download the workbook; then
// an admin sees the money panel on the funnel. Screenshots go to
// $TATKAL_SCREENSHOTS when set.
func TestBrowserFinanceClerk(t *testing.T) {
	testenv.Chromium(t)
	t.Parallel()
	s := setup(t, teststack.Options{})
	financeFixture(t, s)
	dir := t.TempDir()
	b := testenv.NewBrowser(t, testenv.BrowserOptions{Width: 1440, Height: 1000, Timeout: 60 * time.Second})
	ctx := b.Ctx
	base := s.Server.URL
	do, text, count, submit, shot := b.Do, b.Text, b.Count, b.Submit, b.Shot
	login := func(who string) { t.Helper(); signIn(t, b, base, who) }

	// 1. Reconcile the day from the runs page and open the run.
	login("finance1")
	do("finance home", chromedp.Navigate(base+"/console/finance"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=run-form]`)),
		chromedp.SetValue(chromedp.CSS(`[data-testid=run-gateway]`), "swiftpay"),
		chromedp.SetValue(chromedp.CSS(`[data-testid=run-date]`), financeDay))
	submit("run", `[data-testid=run-submit]`)
	if got := text(`[data-testid=notice]`); !strings.Contains(got, "Reconciled swiftpay 2025-06-04") {
		t.Fatalf("after run: %q", got)
	}
	shot("run")
	do("runs list", chromedp.Navigate(base+"/console/finance"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="run-swiftpay-2025-06-04"]`)))
	shot("runs")
	submit("open run", `[data-testid="run-swiftpay-2025-06-04"] [data-testid=run-link]`)

	// 2. Filter: the orphan lines of at least ₹1,500.
	submit("open orphans", `[data-testid="kind-ORPHAN_LINE"] a`)
	if n := count(`[data-kind="ORPHAN_LINE"]`); n != 3 {
		t.Fatalf("orphans listed: %d, want 3", n)
	}
	do("filter", chromedp.SetValue(chromedp.CSS(`[data-testid=filter-min]`), "1,500"))
	submit("filter", `[data-testid=filter-submit]`)
	if n := count(`[data-kind="ORPHAN_LINE"]`); n != 2 {
		t.Fatalf("orphans of at least ₹1,500: %d, want 2", n)
	}
	if got := text(`[data-testid=exceptions-count]`); !strings.Contains(got, "of 2 exceptions") {
		t.Fatalf("count line: %q", got)
	}
	shot("exceptions-filtered")

	// 3. Open one, assign it to me, resolve it.
	submit("open exception", `[data-kind="ORPHAN_LINE"] [data-testid=exception-link]`)
	if got := text(`[data-testid=leg-settlement]`); !strings.Contains(got, "CAPTURE,swp_orphan_") {
		t.Fatalf("settlement leg: %q", got)
	}
	shot("exception")
	submit("assign", `[data-testid=assign-submit]`)
	if got := text(`[data-testid=assignee]`); got != "finance1" {
		t.Fatalf("assignee: %q", got)
	}
	do("resolve form", chromedp.SetValue(chromedp.CSS(`[data-testid=resolve-code]`), "GATEWAY_CORRECTED"),
		chromedp.SetValue(chromedp.CSS(`[data-testid=resolve-note]`), "swiftpay confirmed a test transaction; no money moved"))
	submit("resolve", `[data-testid=resolve-submit]`)
	if got := text(`[data-testid=resolution]`); !strings.Contains(got, "GATEWAY_CORRECTED by finance1") {
		t.Fatalf("resolution: %q", got)
	}
	if got := text(`[data-testid=history]`); !strings.Contains(got, "ASSIGNED") || !strings.Contains(got, "RESOLVED:GATEWAY_CORRECTED") {
		t.Fatalf("history: %q", got)
	}
	shot("exception-resolved")

	// 4. Upload the corrected settlement file.
	corrected := filepath.Join(dir, "swiftpay-20250604-v2.csv")
	if err := os.WriteFile(corrected, []byte(swiftFile(1000, 2000)), 0o644); err != nil {
		t.Fatal(err)
	}
	do("upload form", chromedp.Navigate(base+"/console/finance/files"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=upload-form]`)),
		chromedp.SetValue(chromedp.CSS(`[data-testid=upload-source]`), recon.SourceSettlement),
		chromedp.SetValue(chromedp.CSS(`[data-testid=upload-gateway]`), "swiftpay"),
		chromedp.SetValue(chromedp.CSS(`[data-testid=upload-date]`), financeDay),
		chromedp.SetUploadFiles(chromedp.CSS(`[data-testid=upload-file]`), []string{corrected}))
	submit("upload", `[data-testid=upload-submit]`)
	// Its totals first; nothing is stored until the clerk confirms.
	if got := text(`[data-testid=preview-totals]`); !strings.Contains(got, "CAPTURE") || !strings.Contains(got, "₹3,000.00") {
		t.Fatalf("upload preview: %q", got)
	}
	shot("upload-preview")
	submit("confirm upload", `[data-testid=preview-confirm]`)
	if got := text(`[data-testid=upload-result]`); !strings.Contains(got, "supersedes file #1") {
		t.Fatalf("upload result: %q", got)
	}
	if got := text(`[data-testid=files]`); !strings.Contains(got, "superseded by #") || !strings.Contains(got, "swiftpay-20250604-v2.csv") {
		t.Fatalf("files after upload: %q", got)
	}
	shot("upload")

	// 5. Run the day again, and download its workbook.
	do("runs", chromedp.Navigate(base+"/console/finance"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="run-swiftpay-2025-06-04"]`)))
	submit("open run", `[data-testid="run-swiftpay-2025-06-04"] [data-testid=run-link]`)
	submit("rerun", `[data-testid=rerun]`)
	if got := text(`[data-testid=notice]`); !strings.Contains(got, "1 cleared") {
		t.Fatalf("after rerun: %q", got)
	}
	shot("rerun")
	downloads := filepath.Join(dir, "downloads")
	os.MkdirAll(downloads, 0o755) //nolint:errcheck
	progress := chromedp.Events(ctx, cdpbrowser.DownloadProgress)
	do("download", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{
			Behavior: cdpbrowser.SetDownloadBehaviorBehaviorAllowAndName, DownloadPath: downloads, EventsEnabled: new(true)})
		return err
	}), chromedp.Click(chromedp.CSS(`[data-testid=download-xlsx]`)))
	var file string
	for ev, err := range progress {
		if err != nil {
			t.Fatalf("download: %v", err)
		}
		if ev.State == cdpbrowser.DownloadProgressStateCompleted {
			file = filepath.Join(downloads, ev.GUID)
			break
		}
		if ev.State == cdpbrowser.DownloadProgressStateCanceled {
			t.Fatal("download cancelled")
		}
	}
	wb, err := excelize.OpenFile(file)
	if err != nil {
		t.Fatalf("open the downloaded workbook: %v", err)
	}
	sheets := wb.GetSheetList()
	wb.Close()
	if len(sheets) < 2 || sheets[0] != "Summary" || !strings.Contains(strings.Join(sheets, ","), "PAYOUT_MISMATCH") {
		t.Fatalf("downloaded workbook's sheets: %v", sheets)
	}

	// 6. The day's books, then the admin's money panel.
	do("books", chromedp.Navigate(base+"/console/finance/books?date="+financeDay), chromedp.WaitVisible(chromedp.CSS(`[data-testid=books]`)))
	shot("books")
	do("all exceptions", chromedp.Navigate(base+"/console/finance/exceptions"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=exceptions]`)))
	shot("exceptions-all")
	submit("sign out", `[data-testid=logout]`)
	login("admin1")
	do("funnel", chromedp.Navigate(base+"/console/funnel"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=money-panel]`)))
	var risk int64
	if err := s.Pool.QueryRow(ctx, `SELECT sum(stake_paise) FROM reconciliation_exceptions WHERE state IN ('OPEN', 'INVESTIGATING')`).Scan(&risk); err != nil {
		t.Fatal(err)
	}
	if got := text(`[data-testid=money-at-risk]`); got != views.INR(risk) || risk == 0 {
		t.Fatalf("amount at risk: %q, want %s", got, views.INR(risk))
	}
	shot("funnel-money")
}
