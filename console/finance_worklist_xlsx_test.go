package console_test

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/xuri/excelize/v2"

	"tatkal/booking/lab/teststack"
	"tatkal/recon"
)

// The filtered list as a workbook, opened back: the rows the filter
// selects, sorted as shown, the gateway's transaction id and PNR, amounts
// as numbers in the console's lakh grouping (recon.MoneyFormat), a text
// that looks like a formula kept as text; a bad filter is refused before
// anything is written; and the bulk outcome names each row by the
// gateway's transaction id.
func TestWorklistWorkbookAndBulkOutcomeRefs(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{Routes: teststack.QuietRoutes()})
	d := seedWorklistDay(t, s)
	clerk := newBrowser(t, s.Server.URL)
	clerk.login("finance1")
	if code, body, _ := clerk.post("/console/finance/runs", url.Values{"gateway": {"swiftpay"}, "date": {financeDay}}); code != http.StatusSeeOther {
		t.Fatalf("run: %d\n%.1000s", code, body)
	}
	ex := exceptionsOf(t, s)
	// A big one, to see the lakh grouping: ₹12,34,567.89 at stake.
	teststack.Must(t, exec(s, `UPDATE reconciliation_exceptions SET stake_paise = 123456789 WHERE id = $1`, ex["swp_orphan_1"]), "stake")

	code, body, _ := clerk.get("/console/finance/exceptions?state=UNRESOLVED&sort=-stake")
	if code != 200 || !strings.Contains(body, `href="/console/finance/exceptions.xlsx?sort=-stake&amp;state=UNRESOLVED"`) {
		t.Fatalf("the list offers no workbook of the filtered list: %d", code)
	}
	want := listed(body)
	code, raw, h := clerk.get("/console/finance/exceptions.xlsx?sort=-stake&state=UNRESOLVED")
	if code != 200 || h.Get("Content-Type") != "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet" ||
		!regexp.MustCompile(`attachment; filename="exceptions-\d{8}-\d{4}\.xlsx"`).MatchString(h.Get("Content-Disposition")) {
		t.Fatalf("workbook: %d %v", code, h)
	}
	f, err := excelize.OpenReader(bytes.NewReader([]byte(raw)))
	if err != nil {
		t.Fatalf("open the workbook: %v", err)
	}
	defer f.Close()
	if sheets := f.GetSheetList(); len(sheets) != 1 || sheets[0] != "Exceptions" {
		t.Fatalf("sheets: %v", sheets)
	}
	rows, err := f.GetRows("Exceptions")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(want)+1 || rows[0][0] != "Exception ID" || rows[0][2] != "Gateway txn id" || rows[0][6] != "At stake (₹)" {
		t.Fatalf("rows: %d (want %d and a header): %v", len(rows), len(want)+1, rows[0])
	}
	for i, id := range want {
		if rows[i+1][0] != id {
			t.Fatalf("row %d is %s, the list shows %s: not sorted as shown", i+1, rows[i+1][0], id)
		}
	}
	// The biggest first: a number, in the format that shows it with the
	// lakh grouping (recon's own tests render that format).
	if v, _ := f.GetCellValue("Exceptions", "G2", excelize.Options{RawCellValue: true}); v != "1234567.89" {
		t.Fatalf("the stake is not the number 1234567.89: %q", v)
	}
	style, _ := f.GetCellStyle("Exceptions", "G2")
	if st, err := f.GetStyle(style); err != nil || st.CustomNumFmt == nil || *st.CustomNumFmt != recon.MoneyFormat(123456789) {
		t.Fatalf("the stake's format: %v %v", st, err)
	}
	// The formula-looking transaction id is text, not a formula.
	found := false
	for i, r := range rows {
		if len(r) > 2 && r[2] == formulaRef {
			found = true
			cell, _ := excelize.CoordinatesToCellName(3, i+1)
			if fm, _ := f.GetCellFormula("Exceptions", cell); fm != "" {
				t.Fatalf("%s is a formula: %q", cell, fm)
			}
		}
	}
	if !found {
		t.Fatalf("the formula-looking transaction id is missing: %v", rows)
	}
	// A bad filter is refused before any byte of a workbook.
	if code, body, h := clerk.get("/console/finance/exceptions.xlsx?sort=amount"); code != http.StatusBadRequest || strings.Contains(h.Get("Content-Type"), "spreadsheet") ||
		!strings.Contains(body, "Sort by one of") {
		t.Fatalf("bad sort: %d %s", code, h.Get("Content-Type"))
	}
	var audits int
	teststack.Must(t, s.Pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE action = 'recon.export' AND actor = 'finance1'
		AND detail->>'format' = 'xlsx'`).Scan(&audits), "audit")
	if audits != 1 {
		t.Fatalf("%d workbook exports audited, want 1", audits)
	}

	// The bulk outcome names the gateway's transaction id (and the PNR),
	// not our internal id.
	code, body, _ = clerk.post("/console/finance/exceptions/bulk", url.Values{"action": {"assign"}, "assignee": {"finance1"},
		"id": {ex[d.unpaid.String()], ex[recon.PayoutMismatch]}, "back": {"state=UNRESOLVED"}})
	if code != 200 || !strings.Contains(body, "2 done, 0 refused") {
		t.Fatalf("bulk assign: %d\n%.2000s", code, body)
	}
	m := regexp.MustCompile(`data-testid="outcome-` + ex[d.unpaid.String()] + `"(?s:(.*?))</tr>`).FindStringSubmatch(body)
	if m == nil || !strings.Contains(m[1], `data-testid="outcome-gateway-ref">swp_forged_1<`) {
		t.Fatalf("the outcome of the unpaid payment's row does not name the gateway's transaction id:\n%.3000s", body)
	}
}

func exec(s *teststack.Stack, q string, args ...any) error {
	_, err := s.Pool.Exec(context.Background(), q, args...)
	return err
}

// The month page narrowed to a gateway: only that gateway's exceptions
// count, the links carry the gateway, no sign-off is offered on a part of
// the month, and an unknown gateway is refused.
func TestMonthPageGatewayFilter(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{Routes: teststack.QuietRoutes()})
	seedWorklistDay(t, s)
	clerk := newBrowser(t, s.Server.URL)
	clerk.login("finance1")
	if code, body, _ := clerk.post("/console/finance/runs", url.Values{"gateway": {"swiftpay"}, "date": {financeDay}}); code != http.StatusSeeOther {
		t.Fatalf("run: %d\n%.1000s", code, body)
	}
	ex := exceptionsOf(t, s)
	// One orphan line is bharatpg's.
	teststack.Must(t, exec(s, `UPDATE reconciliation_exceptions SET gateway = 'bharatpg' WHERE id = $1`, ex["swp_orphan_2"]), "gateway")
	var all, swift int
	teststack.Must(t, s.Pool.QueryRow(context.Background(), `SELECT count(*), count(*) FILTER (WHERE gateway = 'swiftpay') FROM reconciliation_exceptions`).
		Scan(&all, &swift), "count")
	foundRE := regexp.MustCompile(`data-testid="period-kind-total">\s*<td>all</td><td class="n">\d+</td><td class="n">[^<]*</td><td class="n">(\d+)</td>`)
	found := func(body string) string {
		t.Helper()
		m := foundRE.FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no total row:\n%.5000s", body)
		}
		return m[1]
	}
	_, body, _ := clerk.get("/console/finance/month")
	if got := found(body); got != strconv.Itoa(all) {
		t.Fatalf("all gateways: %s found, want %d", got, all)
	}
	code, body, _ := clerk.get("/console/finance/month?gateway=swiftpay")
	if code != 200 || found(body) != strconv.Itoa(swift) || !strings.Contains(body, `data-testid="month-gateway"`) {
		t.Fatalf("swiftpay: %d, %s found, want %d", code, found(body), swift)
	}
	if !strings.Contains(body, `<option value="swiftpay" selected>`) || !strings.Contains(body, "gateway=swiftpay&amp;kind=ORPHAN_LINE") {
		t.Fatalf("the filter is not kept in the form and the links:\n%.5000s", body)
	}
	_, body, _ = clerk.get("/console/finance/month?gateway=bharatpg")
	if found(body) != "1" {
		t.Fatalf("bharatpg: %s found, want 1", found(body))
	}
	if code, body, _ := clerk.get("/console/finance/month?gateway=nopay"); code != http.StatusBadRequest || !strings.Contains(body, "Choose a gateway among") {
		t.Fatalf("unknown gateway: %d", code)
	}
}
