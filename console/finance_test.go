package console_test

import (
	"bytes"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"

	"tatkal/booking"
	"tatkal/booking/lab/teststack"
	"tatkal/recon"
)

const (
	financeDay = "2025-06-04"
	swiftHead  = "Txn Type,SwiftPay Txn ID,Merchant Order ID,Refund ID,Merchant Refund ID,Payment Mode,Gross Amount (INR),MDR (INR),GST on MDR (INR),Net Amount (INR),Txn Date,Settlement Date,Payout Ref\n"
	bankHead   = "Txn Date,Value Date,Description,Ref No,Debit,Credit\n"
)

// swiftFile is a swiftpay settlement file of captures of ₹1000, ₹2000, …
// whose merchant references we never issued (each an ORPHAN_LINE), all
// paid out in one payout.
func swiftFile(rupees ...int) string {
	var b strings.Builder
	b.WriteString(swiftHead)
	for i, r := range rupees {
		fmt.Fprintf(&b, "CAPTURE,swp_orphan_%d,ord-unknown-%d,,,UPI,%d.00,0.00,0.00,%d.00,04/06/2025 12:%02d:00,05/06/2025,SWP20250604\n", i+1, i+1, r, r, i)
	}
	return b.String()
}

// bankFile credits the swiftpay payout with rupees.
func bankFile(rupees int) string {
	return bankHead + fmt.Sprintf("05-Jun-2025,05-Jun-2025,NEFT CR-SWIFTPAY SETTLEMENT-SWP20250604,UTR0001,,%d.00\n", rupees)
}

// financeFixture loads a day with three orphan lines and a payout the
// bank short-paid by ₹10, as the daily fetch would.
func financeFixture(t *testing.T, s *teststack.Stack) {
	t.Helper()
	day, _ := time.ParseInLocation(time.DateOnly, financeDay, booking.IST)
	for _, f := range []struct {
		meta recon.FileMeta
		body string
	}{
		{recon.FileMeta{Source: recon.SourceSettlement, Gateway: "swiftpay", BusinessDate: day, Name: "swiftpay-20250604.csv", By: "job:recon_fetch", Fetched: true},
			swiftFile(1000, 2000, 3000)},
		{recon.FileMeta{Source: recon.SourceBank, BusinessDate: day.AddDate(0, 0, 1), Name: "bank-20250605.csv", By: "job:recon_fetch", Fetched: true},
			bankFile(5990)},
	} {
		if _, err := s.App.Recon.Ingest(t.Context(), f.meta, strings.NewReader(f.body)); err != nil {
			t.Fatalf("ingest %s: %v", f.meta.Name, err)
		}
	}
}

// upload posts a multipart form with one file, as the upload form does,
// and confirms the totals preview it answers with, as the clerk would:
// the answer is the confirmation's (or the refusal's, or the preview of
// bytes ingested already, which offers no confirmation).
func (b *browser) upload(path string, fields url.Values, name, body string) (int, string) {
	b.t.Helper()
	code, page := b.previewUpload(path, fields, name, body)
	m := confirmRE.FindStringSubmatch(page)
	if code != http.StatusOK || m == nil {
		return code, page
	}
	code, page, _ = b.post(m[0], nil)
	return code, page
}

var confirmRE = regexp.MustCompile(`/console/finance/files/previews/[0-9a-f-]{36}/confirm`)

// previewUpload posts the upload form and answers its totals preview.
func (b *browser) previewUpload(path string, fields url.Values, name, body string) (int, string) {
	b.t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	fields.Set("csrf", b.csrf)
	for k, vs := range fields {
		for _, v := range vs {
			mw.WriteField(k, v) //nolint:errcheck
		}
	}
	if name != "" {
		fw, _ := mw.CreateFormFile("file", name)
		io.WriteString(fw, body) //nolint:errcheck
	}
	mw.Close()
	req, _ := http.NewRequest("POST", b.base+path, &buf)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatalf("upload %s: %v", path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

var exceptionLinkRE = regexp.MustCompile(`href="/console/finance/exceptions/([0-9a-f-]{36})"`)

func exceptionState(t *testing.T, s *teststack.Stack, id string) (state, assignee, resolution string) {
	t.Helper()
	if err := s.Pool.QueryRow(t.Context(), `SELECT state, assignee, resolution FROM reconciliation_exceptions WHERE id = $1`, id).
		Scan(&state, &assignee, &resolution); err != nil {
		t.Fatal(err)
	}
	return
}

// TestFinanceBackOffice drives the finance pages over HTTP as a finance
// clerk would: run a day, filter, open an exception with its legs,
// assign, refuse bad input without a change, resolve, write off with a
// second person, upload a corrected file that supersedes the first, rerun,
// download the workbook and read the API.
func TestFinanceBackOffice(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{})
	financeFixture(t, s)
	b := newBrowser(t, s.Server.URL)
	b.login("finance1")

	// Run the day.
	code, body, h := b.post("/console/finance/runs", url.Values{"gateway": {"swiftpay"}, "date": {financeDay}})
	if code != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), "/console/finance/runs/") {
		t.Fatalf("run: %d %s\n%.500s", code, h.Get("Location"), body)
	}
	runPath := h.Get("Location")
	code, body, _ = b.get(runPath)
	if code != http.StatusOK || !strings.Contains(body, `data-testid="kind-ORPHAN_LINE"`) || !strings.Contains(body, `data-testid="kind-PAYOUT_MISMATCH"`) ||
		!strings.Contains(body, "Reconciled swiftpay 2025-06-04") {
		t.Fatalf("run page: %d\n%.3000s", code, body)
	}
	// A bad run request: a clear error, and no run recorded.
	var runs int
	s.Pool.QueryRow(t.Context(), `SELECT count(*) FROM recon_runs`).Scan(&runs) //nolint:errcheck
	for _, form := range []url.Values{{"gateway": {"swiftpay"}, "date": {"04/06/2025"}}, {"gateway": {"Swift Pay"}, "date": {financeDay}},
		{"gateway": {"swiftpay"}, "date": {"2999-01-01"}}} {
		if code, body, _ := b.post("/console/finance/runs", form); code != http.StatusBadRequest || !strings.Contains(body, `data-testid="error"`) {
			t.Errorf("run %v: %d, want 400 with the reason\n%.300s", form, code, body)
		}
	}
	var runsAfter int
	s.Pool.QueryRow(t.Context(), `SELECT count(*) FROM recon_runs`).Scan(&runsAfter) //nolint:errcheck
	if runsAfter != runs {
		t.Fatalf("refused runs recorded runs: %d → %d", runs, runsAfter)
	}

	// The bank's statement of the payout's day, from the same form: its one
	// credit is the payout the swiftpay file announces.
	if _, body, _ = b.get("/console/finance"); !strings.Contains(body, `<option value="bank">bank</option>`) {
		t.Fatalf("the run form does not offer the bank:\n%.4000s", body)
	}
	code, _, h = b.post("/console/finance/runs", url.Values{"gateway": {recon.Bank}, "date": {"2025-06-05"}})
	if _, body, _ = b.get(h.Get("Location")); code != http.StatusSeeOther ||
		!strings.Contains(body, "Reconciled bank 2025-06-05: 1 lines, 1 matched, 0 exceptions") {
		t.Fatalf("bank run: %d\n%.3000s", code, body)
	}

	// The runs list.
	if _, body, _ = b.get("/console/finance"); !strings.Contains(body, `data-testid="run-swiftpay-2025-06-04"`) ||
		!strings.Contains(body, "4 open") || !strings.Contains(body, "₹6,000.00") {
		t.Fatalf("runs list:\n%.4000s", body)
	}

	// The finance home: nothing past its SLA yet; then the payout passes it
	// and is escalated: the home counts it, names it as the oldest, links the
	// filtered list and shows the escalation's message, once however often
	// the job runs.
	if code, body, _ := b.get("/console/"); code != http.StatusOK || !strings.Contains(body, `data-testid="overdue-none"`) ||
		!strings.Contains(body, `data-testid="run-swiftpay-2025-06-04"`) {
		t.Fatalf("finance home: %d\n%.3000s", code, body)
	}
	var late string
	s.Pool.QueryRow(t.Context(), `UPDATE reconciliation_exceptions SET due_at = now() - interval '1 hour'
		WHERE kind = 'PAYOUT_MISMATCH' RETURNING id`).Scan(&late) //nolint:errcheck
	for i, want := range []int{1, 0} {
		if n, err := s.App.Recon.Escalate(t.Context()); err != nil || n != want {
			t.Fatalf("escalation %d: %d, %v", i, n, err)
		}
	}
	overdueHref := `href="/console/finance/exceptions?overdue=1&amp;state=UNRESOLVED"`
	_, body, _ = b.get("/console/")
	if !strings.Contains(body, `data-testid="overdue-count">1<`) || !strings.Contains(body, overdueHref) ||
		!strings.Contains(body, `href="/console/finance/exceptions/`+late+`">PAYOUT_MISMATCH`) ||
		strings.Count(body, "passed their SLA (PAYOUT_MISMATCH)") != 1 {
		t.Fatalf("finance home with one overdue (%s):\n%.5000s", late, body)
	}
	// The message is new until the user marks it read; it stays listed.
	if !strings.Contains(body, `data-testid="messages-unread">1<`) || strings.Count(body, `data-testid="message-unread"`) != 1 {
		t.Fatalf("finance home before reading:\n%.5000s", body)
	}
	newest := regexp.MustCompile(`name="up_to" value="(\d+)"`).FindStringSubmatch(body)
	if newest == nil {
		t.Fatalf("no mark-read form:\n%.5000s", body)
	}
	if code, _, _ := b.post("/console/finance/messages/read", url.Values{"up_to": {"x"}}); code != http.StatusBadRequest {
		t.Fatalf("mark read without a message: %d", code)
	}
	if code, _, _ := b.post("/console/finance/messages/read", url.Values{"up_to": {newest[1]}}); code != http.StatusSeeOther {
		t.Fatalf("mark read: %d", code)
	}
	_, body, _ = b.get("/console/")
	if !strings.Contains(body, `data-testid="messages-unread">0<`) || strings.Contains(body, `data-testid="message-unread"`) ||
		strings.Contains(body, `data-testid="messages-read"`) || strings.Count(body, "passed their SLA (PAYOUT_MISMATCH)") != 1 {
		t.Fatalf("finance home after reading:\n%.5000s", body)
	}
	_, body, _ = b.get("/console/finance/exceptions?overdue=1&state=UNRESOLVED")
	if ids := exceptionLinkRE.FindAllStringSubmatch(body, -1); len(ids) != 1 || ids[0][1] != late || !strings.Contains(body, "of 1 exceptions") {
		t.Fatalf("overdue list: %v\n%.3000s", ids, body)
	}

	// Filters: kind and amount range; a bad amount is an error.
	_, body, _ = b.get("/console/finance/exceptions?kind=ORPHAN_LINE&min=1,500&gateway=swiftpay&date=" + financeDay)
	if n := strings.Count(body, `data-kind="ORPHAN_LINE"`); n != 2 || !strings.Contains(body, "of 2 exceptions") {
		t.Fatalf("orphans of at least ₹1,500: %d rows\n%.3000s", n, body)
	}
	if code, body, _ := b.get("/console/finance/exceptions?min=lots"); code != http.StatusBadRequest || !strings.Contains(body, "Give amounts in rupees") {
		t.Fatalf("bad amount filter: %d %.300s", code, body)
	}
	if code, body, _ := b.get("/console/finance/exceptions?age=ancient"); code != http.StatusBadRequest || !strings.Contains(body, "Unknown age bucket") {
		t.Fatalf("bad age filter: %d %.300s", code, body)
	}
	_, body, _ = b.get("/console/finance/exceptions?state=UNRESOLVED&age=0-1+d&kind=ORPHAN_LINE")
	ids := exceptionLinkRE.FindAllStringSubmatch(body, -1)
	if len(ids) != 3 {
		t.Fatalf("young orphans: %d\n%.3000s", len(ids), body)
	}
	first, second := ids[0][1], ids[1][1]

	// The exception page: the settlement line's raw text as evidence.
	_, body, _ = b.get("/console/finance/exceptions/" + first)
	if !strings.Contains(body, `data-testid="leg-settlement"`) || !strings.Contains(body, "CAPTURE,swp_orphan_1,ord-unknown-1") {
		t.Fatalf("exception page has no raw settlement line:\n%.4000s", body)
	}
	// The payout's page shows the bank's line beside the settlement lines.
	var payout string
	s.Pool.QueryRow(t.Context(), `SELECT id FROM reconciliation_exceptions WHERE kind = 'PAYOUT_MISMATCH'`).Scan(&payout) //nolint:errcheck
	if _, body, _ = b.get("/console/finance/exceptions/" + payout); !strings.Contains(body, "NEFT CR-SWIFTPAY SETTLEMENT-SWP20250604") {
		t.Fatalf("payout page has no bank line:\n%.4000s", body)
	}
	// At stake is the ₹10 the bank paid short; the ₹6,000 payout is the context.
	if !strings.Contains(body, `data-testid="stake">₹10.00<`) || !strings.Contains(body, `data-testid="amount">₹6,000.00<`) {
		t.Fatalf("payout page's stake and amount:\n%.4000s", body)
	}

	// Assign to me; assigning to a stranger is refused and changes nothing.
	if code, body, _ := b.post("/console/finance/exceptions/"+first+"/assign", url.Values{"assignee": {"mallory"}}); code != http.StatusBadRequest ||
		!strings.Contains(body, "not a finance person") {
		t.Fatalf("assign to a stranger: %d %.300s", code, body)
	}
	if st, who, _ := exceptionState(t, s, first); st != recon.StateOpen || who != "" {
		t.Fatalf("refused assignment changed it: %s %s", st, who)
	}
	if code, _, _ := b.post("/console/finance/exceptions/"+first+"/assign", url.Values{"assignee": {"finance1"}}); code != http.StatusSeeOther {
		t.Fatalf("assign: %d", code)
	}
	if st, who, _ := exceptionState(t, s, first); st != recon.StateInvestigating || who != "finance1" {
		t.Fatalf("after assign: %s %s", st, who)
	}
	// Resolve without a note: refused, unchanged; with one: resolved.
	if code, body, _ := b.post("/console/finance/exceptions/"+first+"/resolve", url.Values{"code": {"NO_ACTION_NEEDED"}}); code != http.StatusBadRequest ||
		!strings.Contains(body, "Write a note") {
		t.Fatalf("resolve without a note: %d %.300s", code, body)
	}
	if st, _, _ := exceptionState(t, s, first); st != recon.StateInvestigating {
		t.Fatalf("refused resolve changed it: %s", st)
	}
	if code, _, _ := b.post("/console/finance/exceptions/"+first+"/resolve", url.Values{"code": {"GATEWAY_CORRECTED"},
		"note": {"swiftpay confirmed the line is a test transaction"}}); code != http.StatusSeeOther {
		t.Fatalf("resolve: %d", code)
	}
	if st, _, res := exceptionState(t, s, first); st != recon.StateResolved || res != "GATEWAY_CORRECTED" {
		t.Fatalf("after resolve: %s %s", st, res)
	}
	if _, body, _ = b.get("/console/finance/exceptions/" + first); !strings.Contains(body, "ASSIGNED") || !strings.Contains(body, "GATEWAY_CORRECTED") {
		t.Fatalf("history:\n%.4000s", body)
	}
	// Write-off: proposed by one, the same person cannot approve, a second can.
	if code, _, _ := b.post("/console/finance/exceptions/"+second+"/writeoff", url.Values{"note": {"below the cost of chasing"}}); code != http.StatusSeeOther {
		t.Fatalf("propose write-off: %d", code)
	}
	if code, body, _ := b.post("/console/finance/exceptions/"+second+"/writeoff", url.Values{"approve": {"1"}}); code != http.StatusForbidden ||
		!strings.Contains(body, "second person") {
		t.Fatalf("self-approval: %d %.300s", code, body)
	}
	admin := newBrowser(t, s.Server.URL)
	admin.login("admin1")
	admin.get("/console/finance/exceptions/" + second)
	if code, _, _ := admin.post("/console/finance/exceptions/"+second+"/writeoff", url.Values{"approve": {"1"}, "note": {"agreed"}}); code != http.StatusSeeOther {
		t.Fatalf("second person's approval: %d", code)
	}
	if st, _, _ := exceptionState(t, s, second); st != recon.StateWrittenOff {
		t.Fatalf("after approval: %s", st)
	}
	// A form without the session's token changes nothing.
	if code, _, _ := b.post("/console/finance/exceptions/"+payout+"/note", url.Values{"csrf": {"forged"}, "note": {"x"}}); code != http.StatusForbidden {
		t.Fatalf("forged note: %d", code)
	}

	// Upload a corrected file: the third orphan was the gateway's mistake.
	// A file of the wrong shape is refused whole.
	if code, body := b.upload("/console/finance/files", url.Values{"source": {"SETTLEMENT"}, "gateway": {"swiftpay"}, "date": {financeDay}},
		"wrong.csv", bankFile(1)); code != http.StatusBadRequest || !strings.Contains(body, "header is") {
		t.Fatalf("wrong file: %d %.500s", code, body)
	}
	code, body = b.upload("/console/finance/files", url.Values{"source": {"SETTLEMENT"}, "gateway": {"swiftpay"}, "date": {financeDay}},
		"swiftpay-20250604-v2.csv", swiftFile(1000, 2000))
	if code != http.StatusCreated || !strings.Contains(body, `data-testid="upload-result"`) || !strings.Contains(body, "It supersedes file #1") {
		t.Fatalf("corrected upload: %d\n%.3000s", code, body)
	}
	if !strings.Contains(body, "superseded by #") || !strings.Contains(body, "swiftpay-20250604-v2.csv") {
		t.Fatalf("files page does not show both files:\n%.4000s", body)
	}
	// Rerun: the third orphan no longer reproduces and is cleared, never deleted.
	code, _, h = b.post("/console/finance/runs", url.Values{"gateway": {"swiftpay"}, "date": {financeDay}})
	if code != http.StatusSeeOther {
		t.Fatalf("rerun: %d", code)
	}
	var cleared int
	s.Pool.QueryRow(t.Context(), `SELECT count(*) FROM reconciliation_exceptions WHERE resolution = 'CLEARED_ON_RERUN'`).Scan(&cleared) //nolint:errcheck
	if cleared != 1 {
		t.Fatalf("cleared on rerun: %d, want 1", cleared)
	}

	// The workbook downloads and opens.
	resp, err := b.c.Get(s.Server.URL + h.Get("Location") + "/workbook.xlsx")
	if err != nil {
		t.Fatal(err)
	}
	f, err := excelize.OpenReader(resp.Body)
	resp.Body.Close()
	if err != nil || !strings.Contains(resp.Header.Get("Content-Disposition"), "recon-swiftpay-2025-06-04") {
		t.Fatalf("workbook: %v %s", err, resp.Header.Get("Content-Disposition"))
	}
	if sheets := f.GetSheetList(); len(sheets) == 0 || sheets[0] != "Summary" {
		t.Fatalf("workbook sheets %v", sheets)
	}
	f.Close()

	// The books of a day with no ticket payments balance at zero; the
	// settlement statement (the corrected file's ₹3,000) shows the bank's
	// ₹5,990 off by ₹2,990, linked to the payout's exceptions; the wallets
	// did not move.
	_, body, _ = b.get("/console/finance/books?date=" + financeDay)
	bankRow := regexp.MustCompile(`(?s)data-testid="tie-out-swiftpay-bank credit".*?</tr>`).FindString(body)
	if !strings.Contains(body, `data-testid="balanced"`) || !strings.Contains(body, `data-testid="ties-out-swiftpay">does not tie out`) ||
		!strings.Contains(bankRow, `<span class="pill red" data-testid="difference">₹2,990.00</span>`) || !strings.Contains(bankRow, "kind=PAYOUT_MISMATCH") ||
		!strings.Contains(body, `data-testid="ties-out-wallet">ties out`) {
		t.Fatalf("books:\n%.6000s", body)
	}

	// Every action is a person's, in the audit log, refusals included.
	var actions []string
	rows, _ := s.Pool.Query(t.Context(), `SELECT DISTINCT action FROM audit_log WHERE actor = 'finance1' AND action LIKE 'recon.%' ORDER BY 1`)
	for rows.Next() {
		var a string
		rows.Scan(&a) //nolint:errcheck
		actions = append(actions, a)
	}
	rows.Close()
	for _, want := range []string{"recon.assign", "recon.assigned", "recon.export", "recon.ingest", "recon.resolve", "recon.run", "recon.write_off_proposed"} {
		if !strings.Contains(strings.Join(actions, " "), want) {
			t.Errorf("audit log lacks %s: %v", want, actions)
		}
	}

	// The API, with a finance person's token: the newest run and its exceptions, paged.
	tok := admin.newToken("finance1", "recon api")
	code, out := api(t, s.Server.URL, "GET", "/v1/internal/reconciliation/swiftpay/"+financeDay+"?limit=1", tok, nil)
	exc, _ := out["exceptions"].([]any)
	if code != http.StatusOK || len(exc) != 1 || out["total"].(float64) != 4 || out["next"] == nil || out["run"].(map[string]any)["gateway"] != "swiftpay" {
		t.Fatalf("api: %d %v", code, out)
	}
	for path, want := range map[string]int{
		"/v1/internal/reconciliation/swiftpay/04-06-2025":               http.StatusBadRequest,
		"/v1/internal/reconciliation/swiftpay/2025-06-03":               http.StatusNotFound,
		"/v1/internal/reconciliation/swiftpay/2025-06-04?limit=5000":    http.StatusBadRequest,
		"/v1/internal/reconciliation/swiftpay/2025-06-04?kind=NONSENSE": http.StatusBadRequest,
	} {
		code, out := api(t, s.Server.URL, "GET", path, tok, nil)
		if code != want || out["code"] == nil || out["detail"] == "" {
			t.Errorf("api %s: %d %v, want %d with a problem document", path, code, out, want)
		}
	}
}

// An upload past the reconciliation file limit is refused with 413 and a
// message saying so, and changes nothing: refused before the form is read
// when the request's length says so, and by the file's own size when the
// form's slack let the request through.
func TestFinanceUploadTooLarge(t *testing.T) {
	t.Parallel()
	const limit = 4 << 10
	s := setup(t, teststack.Options{ReconMaxFileBytes: limit})
	b := newBrowser(t, s.Server.URL)
	b.login("finance1")
	b.get("/console/finance/files")
	fields := func() url.Values {
		return url.Values{"source": {"SETTLEMENT"}, "gateway": {"swiftpay"}, "date": {financeDay}}
	}
	files := func() int {
		var n int
		s.Pool.QueryRow(t.Context(), `SELECT count(*) FROM recon_files`).Scan(&n) //nolint:errcheck
		return n
	}
	var big strings.Builder
	for big.Len() <= 256<<10 { // past the form's slack too
		big.WriteString(swiftFile(1000, 2000, 3000))
	}
	// Far past the limit: its Content-Length refuses it unread.
	code, body := b.upload("/console/finance/files", fields(), "huge.csv", big.String())
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(body, `data-testid="file-too-large"`) || !strings.Contains(body, "4.0 KB") {
		t.Fatalf("huge upload: %d\n%.2000s", code, body)
	}
	// Just past it, inside the form's slack: the file's own size refuses it.
	just := swiftFile(1000)
	for len(just) <= limit {
		just += strings.SplitAfterN(swiftFile(1000), "\n", 2)[1]
	}
	code, body = b.upload("/console/finance/files", fields(), "just.csv", just)
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "larger than the limit") || !strings.Contains(body, `data-testid="upload-form"`) {
		t.Fatalf("upload just past the limit: %d\n%.2000s", code, body)
	}
	if n := files(); n != 0 {
		t.Fatalf("refused uploads stored %d files", n)
	}
	// A file within the limit is taken.
	if code, body = b.upload("/console/finance/files", fields(), "ok.csv", swiftFile(1000)); code != http.StatusCreated || files() != 1 {
		t.Fatalf("upload within the limit: %d\n%.1000s", code, body)
	}
}
