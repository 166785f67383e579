package recon

import (
	"archive/zip"
	"compress/flate"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/xuri/excelize/v2"

	"tatkal/booking"
	"tatkal/booking/csvx"
	"tatkal/booking/india"
)

// The workbook of a run: a Summary sheet (totals, match rate, exceptions
// by kind and age, amounts), one sheet per exception kind found, and a
// Matched sheet. Every sheet has a styled, frozen header row with an
// autofilter (an Excel table), set column widths, amounts as numbers shown
// in rupees with two decimals and dates as real dates; no formulas. Rows
// stream from PostgreSQL into excelize's StreamWriter, so a run of a
// million lines is written in bounded memory. CSV carries the same
// exception rows.

// exceptionColumns are the columns of a kind's sheet and of the CSV.
var exceptionColumns = []column{
	{"Exception ID", 38}, {"Kind", 24}, {"State", 14}, {"Owner", 18}, {"Path", 10}, {"Business date", 13},
	{"Detected (IST)", 18}, {"Due (IST)", 18}, {"Age", 10}, {"Reference", 40}, {"Payment", 38}, {"PNR", 12},
	{"PSP ref", 26}, {"Payout", 16}, {"At stake (₹)", 16}, {"Amount (₹)", 16}, {"Difference (₹)", 16}, {"Assignee", 14},
	{"Resolution", 22}, {"Resolved (IST)", 18},
}

var matchedColumns = []column{
	{"Rule", 28}, {"Our ref", 38}, {"Their ref", 28}, {"Amount (₹)", 16}, {"Fee (₹)", 12}, {"GST (₹)", 12},
	{"Event (IST)", 18}, {"Value date", 13},
}

type column struct {
	name  string
	width float64
}

// styles are the workbook's cell styles.
type styles struct {
	header, date, datetime, percent, label int
	money                                  [moneyStyles]int // by moneyGroups
}

// MoneyFormat is the number format of an amount's cell: rupees grouped as
// the console groups them (india.Rupees: ₹12,34,567.00, -₹50.00), in a
// cell that stays a number. Excel groups by thousands only, and its
// conditional sections sign negatives differently from LibreOffice, so
// the lakh and crore commas are literal ones in a plain positive;negative
// format whose groups are as many as the amount's digits need: each cell
// gets the format of its own amount (an amount typed over it later keeps
// its grouping, not the new amount's).
func MoneyFormat(paise int64) string {
	return moneyFormat(moneyGroups(paise))
}

// moneyGroups is how many two-digit groups stand before an amount's last
// three rupee digits.
func moneyGroups(paise int64) int {
	if paise < 0 {
		paise = -paise
	}
	digits := len(strconv.FormatInt(paise/100, 10))
	return max(0, (digits-2)/2)
}

func moneyFormat(groups int) string {
	n := strings.Repeat(`##\,`, groups) + "##0.00"
	return `"₹"` + n + `;"-₹"` + n
}

// moneyStyles is how many grouping styles a workbook has: enough for any
// int64 of paise.
const moneyStyles = 9

// rupeeCell is an amount as a number cell in its own money format.
func (st styles) rupeeCell(paise int64) excelize.Cell {
	return excelize.Cell{StyleID: st.money[moneyGroups(paise)], Value: rupees(paise)}
}

func newStyles(f *excelize.File) (styles, error) {
	var st styles
	var err error
	mk := func(s *excelize.Style) int {
		if err != nil {
			return 0
		}
		var id int
		id, err = f.NewStyle(s)
		return id
	}
	date, datetime := "yyyy-mm-dd", "yyyy-mm-dd hh:mm"
	st.header = mk(&excelize.Style{
		Font:      &excelize.Font{Bold: true, Color: "FFFFFF"},
		Fill:      excelize.Fill{Type: "pattern", Pattern: 1, Color: []string{"1F4E78"}},
		Alignment: &excelize.Alignment{Vertical: "center"},
		Border:    []excelize.Border{{Type: "bottom", Color: "000000", Style: 1}},
	})
	for g := range st.money {
		format := moneyFormat(g)
		st.money[g] = mk(&excelize.Style{CustomNumFmt: &format})
	}
	st.date = mk(&excelize.Style{CustomNumFmt: &date})
	st.datetime = mk(&excelize.Style{CustomNumFmt: &datetime})
	st.percent = mk(&excelize.Style{NumFmt: 10}) // 0.00%
	st.label = mk(&excelize.Style{Font: &excelize.Font{Bold: true}})
	return st, err
}

// sheet is one streamed sheet with its header row written.
type sheet struct {
	sw   *excelize.StreamWriter
	cols int
	row  int
}

func startSheet(f *excelize.File, name string, cols []column, st styles) (*sheet, error) {
	if i, _ := f.GetSheetIndex(name); i < 0 {
		if _, err := f.NewSheet(name); err != nil {
			return nil, err
		}
	}
	sw, err := f.NewStreamWriter(name)
	if err != nil {
		return nil, err
	}
	for i, c := range cols {
		if err := sw.SetColWidth(i+1, i+1, c.width); err != nil {
			return nil, err
		}
	}
	if err := sw.SetPanes(&excelize.Panes{Freeze: true, YSplit: 1, TopLeftCell: "A2", ActivePane: "bottomLeft"}); err != nil {
		return nil, err
	}
	head := make([]any, len(cols))
	for i, c := range cols {
		head[i] = excelize.Cell{StyleID: st.header, Value: c.name}
	}
	if err := sw.SetRow("A1", head, excelize.RowOpts{Height: 20}); err != nil {
		return nil, err
	}
	return &sheet{sw: sw, cols: len(cols), row: 1}, nil
}

func (s *sheet) add(values []any) error {
	s.row++
	cell, _ := excelize.CoordinatesToCellName(1, s.row)
	return s.sw.SetRow(cell, values)
}

// finish puts the autofilter (an Excel table over the header and rows) in
// place and flushes the sheet.
func (s *sheet) finish(name string) error {
	last, _ := excelize.CoordinatesToCellName(s.cols, max(s.row, 2))
	stripes := true
	if err := s.sw.AddTable(&excelize.Table{Range: "A1:" + last, Name: name, StyleName: "TableStyleLight9", ShowRowStripes: &stripes}); err != nil {
		return err
	}
	return s.sw.Flush()
}

func rupees(paise int64) float64 { return float64(paise) / 100 }

// calendarDay is a date column's day as a midnight excelize writes as that day.
func calendarDay(d time.Time) time.Time {
	return time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, time.UTC)
}

// excelTime is t's wall clock in IST, which excelize writes as a serial date.
func excelTime(t time.Time) time.Time { return t.In(booking.IST) }

// sheetExceptions selects the exceptions a run's workbook shows (those
// of its gateway and day, and any other it touched), with only the columns a sheet or the
// CSV shows (not the evidence, the widest), in the workbook's order: kind
// by kind as the kinds table lists them ($4), then as detected.
const sheetExceptions = `SELECT id, kind, state, owner_team, path, business_date, detected_at, due_at, ref, payment_id, pnr, psp_ref,
		payout_id, stake_paise, amount_paise, diff_paise, assignee, resolution, resolved_at
	FROM reconciliation_exceptions WHERE ((gateway = $1 AND business_date = $2) OR last_run_id = $3)
	ORDER BY array_position($4::text[], kind), detected_at, ref`

// sheetRow is one exception as a sheet or the CSV shows it.
type sheetRow struct {
	ID                              uuid.UUID
	Kind, State, Owner, Path        string
	BusinessDate, DetectedAt, DueAt time.Time
	Ref                             string
	PaymentID                       pgtype.UUID
	PNR, PSPRef, PayoutID           string
	StakePaise, AmountPaise         int64
	DiffPaise                       int64
	Assignee, Resolution            string
	ResolvedAt                      pgtype.Timestamptz
}

// age is how long the exception has been (or was) open.
func (e *sheetRow) age(now time.Time) time.Duration {
	if e.ResolvedAt.Valid {
		return e.ResolvedAt.Time.Sub(e.DetectedAt)
	}
	return now.Sub(e.DetectedAt)
}

// eachSheetRow streams the run's exceptions from one cursor into fn, the
// same row value each time.
func (s *Service) eachSheetRow(ctx context.Context, run RunSummary, fn func(*sheetRow) error) error {
	order := make([]string, len(kinds))
	for i, k := range kinds {
		order[i] = k.Kind
	}
	rows, err := s.pool.Query(ctx, sheetExceptions, run.Gateway, pgDate(run.BusinessDate), run.ID, order)
	if err != nil {
		return err
	}
	defer rows.Close()
	var e sheetRow
	for rows.Next() {
		if err := rows.Scan(&e.ID, &e.Kind, &e.State, &e.Owner, &e.Path, &e.BusinessDate, &e.DetectedAt, &e.DueAt, &e.Ref,
			&e.PaymentID, &e.PNR, &e.PSPRef, &e.PayoutID, &e.StakePaise, &e.AmountPaise, &e.DiffPaise, &e.Assignee, &e.Resolution,
			&e.ResolvedAt); err != nil {
			return err
		}
		if err := fn(&e); err != nil {
			return err
		}
	}
	return rows.Err()
}

// WriteXLSX writes run's workbook to w. Every row streams: the
// exceptions from one cursor, kind after kind, each kind's sheet written
// as its rows come (the Summary's counts gathered on the way and written
// last, though it stays the first sheet), then the matches from another.
// A row's cells are one reused array, so a row allocates next to nothing
// beyond what excelize itself does per cell.
func (s *Service) WriteXLSX(ctx context.Context, runID int64, w io.Writer) error {
	run, err := s.RunByID(ctx, runID)
	if err != nil {
		return err
	}
	now := s.cfg.Now()
	f := excelize.NewFile()
	defer f.Close()
	st, err := newStyles(f)
	if err != nil {
		return fmt.Errorf("workbook styles: %w", err)
	}
	// Renamed, not added and deleted: deleting or activating a sheet makes
	// excelize parse every streamed sheet back into memory.
	if err := f.SetSheetName("Sheet1", "Summary"); err != nil {
		return err
	}
	if err := s.tiesOutSheet(ctx, f, run, st); err != nil {
		return fmt.Errorf("ties-out sheet: %w", err)
	}
	byKind := map[string]*kindAgg{}
	var sh *sheet
	var kind string
	present := 0
	var cells [20]excelize.Cell
	row := make([]any, len(cells))
	err = s.eachSheetRow(ctx, run, func(e *sheetRow) error {
		if e.Kind != kind {
			if sh != nil {
				if err := sh.finish(fmt.Sprintf("Kind%d", present)); err != nil {
					return fmt.Errorf("%s sheet: %w", kind, err)
				}
			}
			present++
			kind = e.Kind
			if sh, err = startSheet(f, kind, exceptionColumns, st); err != nil {
				return fmt.Errorf("%s sheet: %w", kind, err)
			}
			byKind[kind] = &kindAgg{}
		}
		byKind[kind].add(e, now)
		exceptionRow(&cells, row, e, st, now)
		return sh.add(row)
	})
	if err != nil {
		return fmt.Errorf("workbook: %w", err)
	}
	if sh != nil {
		if err := sh.finish(fmt.Sprintf("Kind%d", present)); err != nil {
			return fmt.Errorf("%s sheet: %w", kind, err)
		}
	}
	if err := s.summarySheet(f, run, st, byKind); err != nil {
		return fmt.Errorf("summary sheet: %w", err)
	}
	if err := s.matchedSheet(ctx, f, run, st); err != nil {
		return fmt.Errorf("matched sheet: %w", err)
	}
	return writeWorkbook(f, w)
}

// writeWorkbook writes a workbook of streamed sheets to w. File.WriteTo
// would build the whole zip in memory first (hundreds of MB for a million
// matches); the zip writer excelize asks for writes straight to w
// instead, deflating at best speed: the sheets are most of the time and
// the file stays a few times smaller than its XML.
func writeWorkbook(f *excelize.File, w io.Writer) error {
	f.SetZipWriter(func(io.Writer) excelize.ZipWriter {
		zw := zip.NewWriter(w)
		zw.RegisterCompressor(zip.Deflate, func(out io.Writer) (io.WriteCloser, error) {
			return flate.NewWriter(out, flate.BestSpeed)
		})
		return zw
	})
	if _, err := f.WriteToBuffer(); err != nil {
		return fmt.Errorf("write workbook: %w", err)
	}
	return nil
}

// kindAgg is one kind's line of the Summary: open by age, closed, the stake open.
type kindAgg struct{ open, b0, b1, b3, b7, closed, amount int64 }

func (a *kindAgg) add(e *sheetRow, now time.Time) {
	if e.State != StateOpen && e.State != StateInvestigating {
		a.closed++
		return
	}
	a.open++
	a.amount += e.StakePaise
	switch AgeBucket(now.Sub(e.DetectedAt)) {
	case "0-1 d":
		a.b0++
	case "1-3 d":
		a.b1++
	case "3-7 d":
		a.b3++
	default:
		a.b7++
	}
}

// summarySheet writes the Summary: the run's figures and the exceptions by
// kind and age as two Excel tables, one above the other with a blank row
// between, so that sorting or filtering one leaves the other alone. It is
// small and written cell by cell (a streamed sheet holds one table only).
func (s *Service) summarySheet(f *excelize.File, run RunSummary, st styles, byKind map[string]*kindAgg) error {
	label := func(s string) excelize.Cell { return excelize.Cell{StyleID: st.label, Value: s} }
	money := st.rupeeCell
	figures := [][]any{
		{label("Gateway"), run.Gateway},
		{label("Business date"), excelize.Cell{StyleID: st.date, Value: calendarDay(run.BusinessDate)}},
		{label("Run"), run.ID},
		{label("Run at (IST)"), excelize.Cell{StyleID: st.datetime, Value: excelTime(run.StartedAt)}},
		{label("Judged as of (IST)"), excelize.Cell{StyleID: st.datetime, Value: excelTime(run.AsOf)}},
		{label("Run by"), run.RunBy},
		{label("Our items"), run.OurItems},
		{label("Settlement lines"), run.Lines},
		{label("Matched"), run.Matched},
		{label("Exceptions"), run.Exceptions},
		{label("Match rate"), excelize.Cell{StyleID: st.percent, Value: run.MatchRate()}},
		{label("Amount matched"), money(run.AmountMatched)},
		{label("At stake, unmatched"), money(run.AmountUnmatched)},
		{label("Gateway fees"), money(run.Fees)},
		{label("GST on fees"), money(run.Tax)},
		{label("Net settled"), money(run.Net)},
		{label("Paid out (bank)"), money(run.Payouts)},
	}
	var byKindRows [][]any
	for _, k := range kinds {
		a := byKind[k.Kind]
		if a == nil {
			a = &kindAgg{}
		}
		byKindRows = append(byKindRows, []any{k.Kind, k.Owner, a.open, a.b0, a.b1, a.b3, a.b7, a.closed, money(a.amount)})
	}
	return writeTables(f, "Summary", st, []column{{"Figure", 28}, {"Value", 22}, {"", 10}, {"", 10}, {"", 10}, {"", 10}, {"", 10},
		{"", 10}, {"", 16}}, []table{
		{Name: "SummaryFigures", Head: []string{"Figure", "Value"}, Rows: figures},
		{Name: "SummaryByKind", Head: []string{"Exceptions by kind", "Owner", "Open", "0-1 d", "1-3 d", "3-7 d", "over 7 d", "Closed",
			"At stake (₹)"}, Rows: byKindRows},
	})
}

// table is one Excel table of a small sheet: its header and rows, and a
// row under it outside the table (a total, which sorting must not move).
type table struct {
	Name  string
	Head  []string
	Rows  [][]any
	After []any
}

// writeTables writes a small sheet, cell by cell, as tables one under the
// other with a blank row between: each its own autofilter, sorted alone.
// The first table's header row is frozen; columns get their widths.
func writeTables(f *excelize.File, name string, st styles, cols []column, tables []table) error {
	if i, _ := f.GetSheetIndex(name); i < 0 {
		if _, err := f.NewSheet(name); err != nil {
			return err
		}
	}
	for i, c := range cols {
		col, _ := excelize.ColumnNumberToName(i + 1)
		if err := f.SetColWidth(name, col, col, c.width); err != nil {
			return err
		}
	}
	if err := f.SetPanes(name, &excelize.Panes{Freeze: true, YSplit: 1, TopLeftCell: "A2", ActivePane: "bottomLeft"}); err != nil {
		return err
	}
	put := func(row, col int, v any) error {
		cell, _ := excelize.CoordinatesToCellName(col, row)
		style := 0
		if c, ok := v.(excelize.Cell); ok {
			v, style = c.Value, c.StyleID
		}
		if v == nil {
			return nil
		}
		if err := f.SetCellValue(name, cell, v); err != nil {
			return err
		}
		if style != 0 {
			return f.SetCellStyle(name, cell, cell, style)
		}
		return nil
	}
	row := 1
	stripes := true
	for _, t := range tables {
		top := row
		for i, h := range t.Head {
			if err := put(row, i+1, excelize.Cell{StyleID: st.header, Value: h}); err != nil {
				return err
			}
		}
		for _, r := range t.Rows {
			row++
			for i, v := range r {
				if err := put(row, i+1, v); err != nil {
					return err
				}
			}
		}
		if len(t.Rows) == 0 {
			row++ // a table has a row under its header
		}
		first, _ := excelize.CoordinatesToCellName(1, top)
		last, _ := excelize.CoordinatesToCellName(len(t.Head), row)
		if err := f.AddTable(name, &excelize.Table{Range: first + ":" + last, Name: t.Name, StyleName: "TableStyleLight9",
			ShowRowStripes: &stripes}); err != nil {
			return fmt.Errorf("%s table %s: %w", name, t.Name, err)
		}
		if t.After != nil {
			row++
			for i, v := range t.After {
				if err := put(row, i+1, v); err != nil {
					return err
				}
			}
		}
		row += 2
	}
	return nil
}

// TiesOutSheet is the workbook's sheet of the day's books to the paisa:
// a gateway run's settlement statement, the wallet run's roll-forward.
const TiesOutSheet = "Ties out"

var tiesOutColumns = []column{{"Term", 34}, {"Amount (₹)", 18}, {"Against (₹)", 18}, {"Difference (₹)", 16}, {"Records", 10}, {"Against what", 48}}

// tiesOutSheet writes the sheet for a gateway's or the wallet's run (the
// core's and the bank's runs have none): each term a row, each check its
// amount, what it is checked against, and the difference.
func (s *Service) tiesOutSheet(ctx context.Context, f *excelize.File, run RunSummary, st styles) error {
	money := st.rupeeCell
	label := func(s string) excelize.Cell { return excelize.Cell{StyleID: st.label, Value: s} }
	var rows [][]any
	switch run.Gateway {
	case Core, Bank:
		return nil
	case Wallet:
		r, err := s.WalletRollForward(ctx, run.BusinessDate)
		if err != nil {
			return err
		}
		rows = [][]any{
			{"Opening (the ledger's balances)", money(r.Opening)},
			{"+ Top-ups", money(r.TopUps), money(r.OurTopUps), money(r.TopUps - r.OurTopUps), r.Count[TermTopUps], "top-up payments that succeeded"},
			{"+ Refunds in", money(r.RefundsIn), money(r.OurRefundsIn), money(r.RefundsIn - r.OurRefundsIn), r.Count[TermRefundsIn],
				"refunds of wallet payments processed"},
			{"− Spends", money(r.Spends), money(r.OurSpends), money(r.Spends - r.OurSpends), r.Count[TermSpends], "wallet payments made"},
			{"− Withdrawals", money(r.Withdrawals), nil, nil, r.Count[TermWithdrawals]},
			{label("= Closing"), money(r.Closing()), money(r.LedgerClosing), money(r.LedgerClosing - r.Closing()), nil,
				"the ledger's balances at the day's end"},
		}
	default:
		sm, err := s.Settlement(ctx, run.Gateway, run.BusinessDate)
		if err != nil {
			return err
		}
		rows = [][]any{
			{"Captures", money(sm.Captures)},
			{"− Refunds", money(sm.Refunds)},
			{"− Chargebacks", money(sm.Chargebacks)},
			{"− Fees", money(sm.Fees)},
			{"− GST on fees", money(sm.GST)},
			{label("= Net of the terms"), money(sm.Net()), nil, nil, sm.Lines, "the settlement file's lines"},
			{"Payout (the lines' net)", money(sm.Payout), money(sm.Net()), money(sm.PayoutDifference()), nil, "the net of the terms"},
			{label("Bank credit"), money(sm.Bank), money(sm.Payout), money(sm.BankDifference()), nil,
				"the payout; on the bank's statement of " + dates(sm.BankDays)},
		}
	}
	sh, err := startSheet(f, TiesOutSheet, tiesOutColumns, st)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if err := sh.add(r); err != nil {
			return err
		}
	}
	return sh.finish("TiesOutTable")
}

// dates lists days for a note.
func dates(days []time.Time) string {
	if len(days) == 0 {
		return "no date yet"
	}
	out := make([]string, len(days))
	for i, d := range days {
		out[i] = d.Format(time.DateOnly)
	}
	return strings.Join(out, ", ")
}

// exceptionRow fills row (pointers into cells, set once) with e's cells.
func exceptionRow(cells *[20]excelize.Cell, row []any, e *sheetRow, st styles, now time.Time) {
	plain := func(i int, v any) { cells[i] = excelize.Cell{Value: v} }
	styled := func(i, style int, v any) { cells[i] = excelize.Cell{StyleID: style, Value: v} }
	plain(0, e.ID.String())
	plain(1, e.Kind)
	plain(2, e.State)
	plain(3, e.Owner)
	plain(4, e.Path)
	styled(5, st.date, calendarDay(e.BusinessDate))
	styled(6, st.datetime, excelTime(e.DetectedAt))
	styled(7, st.datetime, excelTime(e.DueAt))
	plain(8, AgeBucket(e.age(now)))
	plain(9, e.Ref)
	plain(10, "")
	if e.PaymentID.Valid {
		plain(10, uuid.UUID(e.PaymentID.Bytes).String())
	}
	plain(11, e.PNR)
	plain(12, e.PSPRef)
	plain(13, e.PayoutID)
	cells[14], cells[15], cells[16] = st.rupeeCell(e.StakePaise), st.rupeeCell(e.AmountPaise), st.rupeeCell(e.DiffPaise)
	plain(17, e.Assignee)
	plain(18, e.Resolution)
	plain(19, nil)
	if e.ResolvedAt.Valid {
		styled(19, st.datetime, excelTime(e.ResolvedAt.Time))
	}
	for i := range cells {
		if cells[i].Value == nil {
			row[i] = nil
		} else {
			row[i] = &cells[i]
		}
	}
}

func (s *Service) matchedSheet(ctx context.Context, f *excelize.File, run RunSummary, st styles) error {
	part := 1
	start := func() (*sheet, error) {
		name := "Matched"
		if part > 1 {
			name = fmt.Sprintf("Matched %d", part)
		}
		return startSheet(f, name, matchedColumns, st)
	}
	table := func() string {
		if part > 1 {
			return fmt.Sprintf("MatchedTable%d", part)
		}
		return "MatchedTable"
	}
	sh, err := start()
	if err != nil {
		return err
	}
	// In the order the run recorded them (rule by rule, as its statements
	// ran): sorting a million matches cost more than writing them, and the
	// sheet's autofilter sorts for whoever wants another order.
	rows, err := s.pool.Query(ctx, `SELECT rule, our_ref, ext_ref, amount_paise, fee_paise, tax_paise, event_at, value_date
		FROM recon_matches WHERE run_id = $1`, run.ID)
	if err != nil {
		return err
	}
	defer rows.Close()
	var rule, our, ext string
	var amount, fee, tax int64
	var event pgtype.Timestamptz
	var value pgtype.Date
	var cells [8]excelize.Cell
	r := make([]any, len(cells))
	for i := range cells {
		r[i] = &cells[i]
	}
	for rows.Next() {
		if err := rows.Scan(&rule, &our, &ext, &amount, &fee, &tax, &event, &value); err != nil {
			return err
		}
		// A day's matches can be more than Excel's 1,048,576 rows: they go
		// on "Matched", "Matched 2", and so on.
		if sh.row-1 == s.sheetRows {
			if err := sh.finish(table()); err != nil {
				return err
			}
			part++
			if sh, err = start(); err != nil {
				return err
			}
		}
		cells[0] = excelize.Cell{Value: rule}
		cells[1] = excelize.Cell{Value: our}
		cells[2] = excelize.Cell{Value: ext}
		cells[3], cells[4], cells[5] = st.rupeeCell(amount), st.rupeeCell(fee), st.rupeeCell(tax)
		r[6], r[7] = nil, nil
		if event.Valid {
			cells[6] = excelize.Cell{StyleID: st.datetime, Value: excelTime(event.Time)}
			r[6] = &cells[6]
		}
		if value.Valid {
			cells[7] = excelize.Cell{StyleID: st.date, Value: calendarDay(value.Time)}
			r[7] = &cells[7]
		}
		if err := sh.add(r); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return sh.finish(table())
}

// WriteCSV writes the run's exceptions as CSV (UTF-8 with its BOM, so
// Excel reads the rupee sign), the columns of the workbook's kind sheets: amounts in rupees with two decimals, times in
// IST as RFC 3339. Every text cell goes through csvx.Text, since
// references come from outside files and notes from people, and a
// spreadsheet would run "=HYPERLINK(...)" in one; the amounts, which we
// format ourselves and may be negative, stay numbers.
func (s *Service) WriteCSV(ctx context.Context, runID int64, w io.Writer) error {
	run, err := s.RunByID(ctx, runID)
	if err != nil {
		return err
	}
	now := s.cfg.Now()
	if _, err := io.WriteString(w, csvx.BOM); err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	cw := csv.NewWriter(w)
	head := make([]string, len(exceptionColumns))
	for i, c := range exceptionColumns {
		head[i] = c.name
	}
	if err := cw.Write(head); err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	ts := func(t time.Time) string { return t.In(booking.IST).Format(time.RFC3339) }
	rec := make([]string, len(exceptionColumns))
	err = s.eachSheetRow(ctx, run, func(e *sheetRow) error {
		payment, resolved := "", ""
		if e.PaymentID.Valid {
			payment = uuid.UUID(e.PaymentID.Bytes).String()
		}
		if e.ResolvedAt.Valid {
			resolved = ts(e.ResolvedAt.Time)
		}
		rec = append(rec[:0], e.ID.String(), e.Kind, e.State, e.Owner, e.Path, e.BusinessDate.Format(time.DateOnly),
			ts(e.DetectedAt), ts(e.DueAt), AgeBucket(e.age(now)), e.Ref, payment, e.PNR, e.PSPRef, e.PayoutID,
			rupeeText(e.StakePaise), rupeeText(e.AmountPaise), rupeeText(e.DiffPaise), e.Assignee, e.Resolution, resolved)
		for i := range rec {
			if !csvNumeric[i] {
				rec[i] = csvx.Text(rec[i])
			}
		}
		return cw.Write(rec)
	})
	if err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	cw.Flush()
	return cw.Error()
}

// csvNumeric marks the CSV's columns of numbers we format ourselves (the
// stake, the amount and the difference, by their index in exceptionColumns), which
// are written as they are.
var csvNumeric = func() []bool {
	m := make([]bool, len(exceptionColumns))
	for i, c := range exceptionColumns {
		m[i] = c.name == "At stake (₹)" || c.name == "Amount (₹)" || c.name == "Difference (₹)"
	}
	return m
}()

// rupeeText is signed rupees with two decimals, for CSV.
func rupeeText(paise int64) string { return india.Decimal(paise) }
