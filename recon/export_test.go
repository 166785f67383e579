package recon

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/xuri/excelize/v2"

	"tatkal/booking/csvx"

	"tatkal/booking/sim/pspsim"
)

// The workbook read back with excelize: its sheets, styled and frozen
// header rows with autofilters, amounts as numbers in rupees with two
// decimals, dates as real dates; the CSV carries the same rows.
func TestWorkbook(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	const gw = "bharatpg"
	m := w.make(append(cleanSet(gw, 6), clean(gw, "UPI", 150000), clean(gw, "CARD", 123456))...)
	dropped, changed := m[6], m[7]
	w.settlementFaults(gw, pspsim.SettlementFaults{
		Drop: pspsim.FaultPick{Refs: []string{dropped.PSPRef}}, ChangeAmount: pspsim.FaultPick{Refs: []string{changed.PSPRef}, Paise: 1234}})
	w.ingestDay(gw)
	run := w.run(gw)

	var buf bytes.Buffer
	w.must(w.svc.WriteXLSX(w.ctx, run.ID, &buf))
	f, err := excelize.OpenReader(&buf)
	w.must(err)
	defer f.Close()
	if got, want := f.GetSheetList(), []string{"Summary", TiesOutSheet, AmountMismatch, MissingInSettlement, "Matched"}; !slices.Equal(got, want) {
		t.Fatalf("sheets %v, want %v", got, want)
	}
	for _, name := range f.GetSheetList() {
		panes, err := f.GetPanes(name)
		w.must(err)
		if !panes.Freeze || panes.YSplit != 1 || panes.TopLeftCell != "A2" {
			t.Errorf("%s: panes %+v, want the first row frozen", name, panes)
		}
		tables, err := f.GetTables(name)
		w.must(err)
		want := 1
		if name == "Summary" {
			want = 2 // the figures, and the exceptions by kind: each sorts alone
		}
		if len(tables) != want || !strings.HasPrefix(tables[0].Range, "A1:") {
			t.Errorf("%s: tables %+v, want %d autofilter tables from A1", name, tables, want)
		}
		style, err := f.GetCellStyle(name, "A1")
		w.must(err)
		st, err := f.GetStyle(style)
		w.must(err)
		if st.Font == nil || !st.Font.Bold || len(st.Fill.Color) == 0 {
			t.Errorf("%s: header style %+v", name, st)
		}
		if width, _ := f.GetColWidth(name, "B"); width < 10 {
			t.Errorf("%s: column B width %v", name, width)
		}
	}
	rows, err := f.GetRows(AmountMismatch)
	w.must(err)
	head := make([]string, len(exceptionColumns))
	for i, c := range exceptionColumns {
		head[i] = c.name
	}
	if len(rows) != 2 || !slices.Equal(rows[0], head) {
		t.Fatalf("%s rows %q", AmountMismatch, rows)
	}
	col := func(name string) string {
		i := slices.Index(head, name)
		c, _ := excelize.ColumnNumberToName(i + 1)
		return c
	}
	// Amount: the number 1234.56 (rupees) shown as ₹1,234.56.
	cell := col("Amount (₹)") + "2"
	raw, err := f.GetCellValue(AmountMismatch, cell, excelize.Options{RawCellValue: true})
	w.must(err)
	if v, err := strconv.ParseFloat(raw, 64); err != nil || v != 1234.56 {
		t.Fatalf("amount cell %s raw %q, want the number 1234.56", cell, raw)
	}
	// Shown in the Indian grouping (excelize renders no conditional
	// sections, so the format itself is checked; showMoney applies it).
	if got := numFmt(t, f, AmountMismatch, cell); got != MoneyFormat(123456) || showMoney(got, 1234.56) != "₹1,234.56" {
		t.Fatalf("amount's format %q", got)
	}
	diffCell, stakeCell := col("Difference (₹)")+"2", col("At stake (₹)")+"2"
	for _, c := range []string{diffCell, stakeCell} {
		raw, _ := f.GetCellValue(AmountMismatch, c, excelize.Options{RawCellValue: true})
		if raw != "12.34" || numFmt(t, f, AmountMismatch, c) != MoneyFormat(1234) {
			t.Fatalf("%s: %q in %q, want 12.34 shown as ₹12.34", c, raw, numFmt(t, f, AmountMismatch, c))
		}
	}
	// Dates: serial numbers styled as dates.
	dcell := col("Business date") + "2"
	raw, _ = f.GetCellValue(AmountMismatch, dcell, excelize.Options{RawCellValue: true})
	if v, err := strconv.ParseFloat(raw, 64); err != nil || v != 45812 { // 2025-06-04
		t.Fatalf("business date raw %q, want the serial 45812", raw)
	}
	if shown, _ := f.GetCellValue(AmountMismatch, dcell); shown != "2025-06-04" {
		t.Fatalf("business date shown as %q", shown)
	}
	raw, _ = f.GetCellValue(AmountMismatch, col("Detected (IST)")+"2", excelize.Options{RawCellValue: true})
	if v, err := strconv.ParseFloat(raw, 64); err != nil || v < 45812 {
		t.Fatalf("detected raw %q is not a date serial", raw)
	}
	// Summary: figures and the kinds table, two tables with a blank row
	// between; Matched: every match.
	sum, _ := f.GetRows("Summary")
	if sum[1][0] != "Gateway" || sum[1][1] != gw || sum[2][1] != "2025-06-04" {
		t.Fatalf("summary %q", sum[:3])
	}
	if v, _ := f.GetCellValue("Summary", "B10", excelize.Options{RawCellValue: true}); v != strconv.Itoa(run.Matched) {
		t.Fatalf("summary matched %q, run %d", v, run.Matched)
	}
	tables, _ := f.GetTables("Summary")
	if len(tables) != 2 || tables[0].Range != "A1:B18" || tables[1].Range != fmt.Sprintf("A20:I%d", 20+len(kinds)) ||
		len(sum) < 20 || len(sum[18]) != 0 || sum[19][0] != "Exceptions by kind" || sum[20][0] != kinds[0].Kind {
		t.Fatalf("summary tables %+v, rows 19-21 %q", tables, sum[18:min(len(sum), 21)])
	}
	if got := numFmt(t, f, "Summary", "B13"); got != MoneyFormat(run.AmountMatched) || run.AmountMatched < 1000_00 {
		t.Fatalf("summary amount's format %q", got)
	}
	matched, _ := f.GetRows("Matched")
	if len(matched)-1 != run.Matched {
		t.Fatalf("matched sheet has %d rows, run matched %d", len(matched)-1, run.Matched)
	}
	formulas := 0
	for _, name := range f.GetSheetList() {
		rows, _ := f.GetRows(name)
		for r := range rows {
			for c := range rows[r] {
				cn, _ := excelize.CoordinatesToCellName(c+1, r+1)
				if fm, _ := f.GetCellFormula(name, cn); fm != "" {
					formulas++
				}
			}
		}
	}
	if formulas != 0 {
		t.Fatalf("%d formulas in the workbook", formulas)
	}

	var cbuf bytes.Buffer
	w.must(w.svc.WriteCSV(w.ctx, run.ID, &cbuf))
	// UTF-8 with its BOM, so Excel reads the rupee sign.
	body, ok := strings.CutPrefix(cbuf.String(), csvx.BOM)
	if !ok {
		t.Fatalf("the CSV does not start with the UTF-8 BOM: %.20q", cbuf.String())
	}
	recs, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	w.must(err)
	if len(recs) != 3 || !slices.Equal(recs[0], head) {
		t.Fatalf("csv %q", recs)
	}
	for _, r := range recs[1:] {
		if r[1] == AmountMismatch && (r[slices.Index(head, "Amount (₹)")] != "1234.56" || r[slices.Index(head, "Difference (₹)")] != "12.34" ||
			r[slices.Index(head, "At stake (₹)")] != "12.34" || r[5] != "2025-06-04") {
			t.Fatalf("csv row %q", r)
		}
	}
}

// Matches beyond a sheet's rows (Excel's 1,048,576; here a few) go on
// "Matched 2" and after, each a table with the frozen header, and no row
// is lost or written twice.
func TestWorkbookSplitsMatched(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	const gw = "swiftpay"
	w.make(cleanSet(gw, 6)...)
	w.ingestDay(gw)
	run := w.run(gw)
	svc := New(Config{Pool: w.env.Pool})
	svc.sheetRows = 5
	var buf bytes.Buffer
	w.must(svc.WriteXLSX(w.ctx, run.ID, &buf))
	f, err := excelize.OpenReader(&buf)
	w.must(err)
	defer f.Close()
	parts := (run.Matched + 4) / 5
	want := []string{"Summary", TiesOutSheet, "Matched"}
	for i := 2; i <= parts; i++ {
		want = append(want, "Matched "+strconv.Itoa(i))
	}
	if got := f.GetSheetList(); parts < 3 || !slices.Equal(got, want) {
		t.Fatalf("%d matches: sheets %v, want %v", run.Matched, got, want)
	}
	seen := map[string]bool{}
	for _, name := range want[2:] {
		rows, err := f.GetRows(name)
		w.must(err)
		if len(rows) < 2 || len(rows) > 6 || rows[0][0] != "Rule" {
			t.Fatalf("%s: %d rows, header %v", name, len(rows), rows[0])
		}
		if tables, _ := f.GetTables(name); len(tables) != 1 {
			t.Errorf("%s: %d tables", name, len(tables))
		}
		for _, r := range rows[1:] {
			key := r[0] + "|" + r[1] + "|" + r[2]
			if seen[key] {
				t.Errorf("%s: %s twice", name, key)
			}
			seen[key] = true
		}
	}
	if len(seen) != run.Matched {
		t.Fatalf("%d distinct matched rows in the workbook, run matched %d", len(seen), run.Matched)
	}
}
