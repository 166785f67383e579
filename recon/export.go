package recon

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/xuri/excelize/v2"

	"tatkal/booking"
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
	{"PSP ref", 26}, {"Payout", 16}, {"Amount (₹)", 16}, {"Difference (₹)", 16}, {"Assignee", 14},
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
	header, money, date, datetime, percent, label int
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
	money := `"₹"#,##0.00;-"₹"#,##0.00`
	date, datetime := "yyyy-mm-dd", "yyyy-mm-dd hh:mm"
	st.header = mk(&excelize.Style{
		Font:      &excelize.Font{Bold: true, Color: "FFFFFF"},
		Fill:      excelize.Fill{Type: "pattern", Pattern: 1, Color: []string{"1F4E78"}},
		Alignment: &excelize.Alignment{Vertical: "center"},
		Border:    []excelize.Border{{Type: "bottom", Color: "000000", Style: 1}},
	})
	st.money = mk(&excelize.Style{CustomNumFmt: &money})
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

// runExceptions selects the exceptions a run's workbook shows: those of
// its gateway and day, and any other it touched.
const runExceptions = `SELECT ` + exceptionCols + ` FROM reconciliation_exceptions
	WHERE ((gateway = $1 AND business_date = $2) OR last_run_id = $3)`

// WriteXLSX writes run's workbook to w.
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
	if err := s.summarySheet(ctx, f, run, st, now); err != nil {
		return fmt.Errorf("summary sheet: %w", err)
	}
	var present []string
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT kind FROM (`+runExceptions+`) e`, run.Gateway, pgDate(run.BusinessDate), run.ID)
	if err != nil {
		return fmt.Errorf("workbook: %w", err)
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("workbook: %w", err)
	}
	for _, k := range kinds {
		for _, got := range found {
			if got == k.Kind {
				present = append(present, k.Kind)
			}
		}
	}
	for i, kind := range present {
		if err := s.kindSheet(ctx, f, run, kind, fmt.Sprintf("Kind%d", i+1), st, now); err != nil {
			return fmt.Errorf("%s sheet: %w", kind, err)
		}
	}
	if err := s.matchedSheet(ctx, f, run, st); err != nil {
		return fmt.Errorf("matched sheet: %w", err)
	}
	if _, err := f.WriteTo(w); err != nil {
		return fmt.Errorf("write workbook: %w", err)
	}
	return nil
}

func (s *Service) summarySheet(ctx context.Context, f *excelize.File, run RunSummary, st styles, now time.Time) error {
	sh, err := startSheet(f, "Summary", []column{{"Figure", 28}, {"Value", 22}, {"Open", 10}, {"0-1 d", 10}, {"1-3 d", 10},
		{"3-7 d", 10}, {"over 7 d", 10}, {"Closed", 10}, {"Amount (₹)", 16}}, st)
	if err != nil {
		return err
	}
	label := func(s string) excelize.Cell { return excelize.Cell{StyleID: st.label, Value: s} }
	money := func(p int64) excelize.Cell { return excelize.Cell{StyleID: st.money, Value: rupees(p)} }
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
		{label("Amount unmatched"), money(run.AmountUnmatched)},
		{label("Gateway fees"), money(run.Fees)},
		{label("GST on fees"), money(run.Tax)},
		{label("Net settled"), money(run.Net)},
		{label("Paid out (bank)"), money(run.Payouts)},
		{},
		{label("Exceptions by kind and age"), label("Owner"), label("Open"), label("0-1 d"), label("1-3 d"), label("3-7 d"),
			label("over 7 d"), label("Closed"), label("Amount (₹)")},
	}
	for _, r := range figures {
		if err := sh.add(r); err != nil {
			return err
		}
	}
	type agg struct{ open, b0, b1, b3, b7, closed, amount int64 }
	byKind := map[string]*agg{}
	rows, err := s.pool.Query(ctx, `SELECT kind, state IN ('OPEN', 'INVESTIGATING'), detected_at, abs(amount_paise) FROM (`+runExceptions+`) e`,
		run.Gateway, pgDate(run.BusinessDate), run.ID)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var kind string
		var open bool
		var detected time.Time
		var amount int64
		if err := rows.Scan(&kind, &open, &detected, &amount); err != nil {
			return err
		}
		a := byKind[kind]
		if a == nil {
			a = &agg{}
			byKind[kind] = a
		}
		if !open {
			a.closed++
			continue
		}
		a.open++
		a.amount += amount
		switch AgeBucket(now.Sub(detected)) {
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
	if err := rows.Err(); err != nil {
		return err
	}
	for _, k := range kinds {
		a := byKind[k.Kind]
		if a == nil {
			a = &agg{}
		}
		if err := sh.add([]any{k.Kind, k.Owner, a.open, a.b0, a.b1, a.b3, a.b7, a.closed, money(a.amount)}); err != nil {
			return err
		}
	}
	// The autofilter covers the figures; the table needs unique headers,
	// which the first row has.
	return sh.finish("SummaryTable")
}

func (s *Service) kindSheet(ctx context.Context, f *excelize.File, run RunSummary, kind, table string, st styles, now time.Time) error {
	sh, err := startSheet(f, kind, exceptionColumns, st)
	if err != nil {
		return err
	}
	err = s.eachException(ctx, run, kind, func(e Exception) error { return sh.add(exceptionRow(e, st, now)) })
	if err != nil {
		return err
	}
	return sh.finish(table)
}

func (s *Service) eachException(ctx context.Context, run RunSummary, kind string, fn func(Exception) error) error {
	q := runExceptions + ` AND ($4 = '' OR kind = $4) ORDER BY kind, detected_at, ref`
	rows, err := s.pool.Query(ctx, q, run.Gateway, pgDate(run.BusinessDate), run.ID, kind)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		e, err := scanException(rows)
		if err != nil {
			return err
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	return rows.Err()
}

func exceptionRow(e Exception, st styles, now time.Time) []any {
	opt := func(t *time.Time) any {
		if t == nil {
			return nil
		}
		return excelize.Cell{StyleID: st.datetime, Value: excelTime(*t)}
	}
	payment := ""
	if e.PaymentID != nil {
		payment = e.PaymentID.String()
	}
	return []any{
		e.ID.String(), e.Kind, e.State, e.Owner, e.Path,
		excelize.Cell{StyleID: st.date, Value: calendarDay(e.BusinessDate)},
		excelize.Cell{StyleID: st.datetime, Value: excelTime(e.DetectedAt)},
		excelize.Cell{StyleID: st.datetime, Value: excelTime(e.DueAt)},
		AgeBucket(e.Age(now)), e.Ref, payment, e.PNR, e.PSPRef, e.PayoutID,
		excelize.Cell{StyleID: st.money, Value: rupees(e.AmountPaise)},
		excelize.Cell{StyleID: st.money, Value: rupees(e.DiffPaise)},
		e.Assignee, e.Resolution, opt(e.ResolvedAt),
	}
}

func (s *Service) matchedSheet(ctx context.Context, f *excelize.File, run RunSummary, st styles) error {
	sh, err := startSheet(f, "Matched", matchedColumns, st)
	if err != nil {
		return err
	}
	rows, err := s.pool.Query(ctx, `SELECT rule, our_ref, ext_ref, amount_paise, fee_paise, tax_paise, event_at, value_date
		FROM recon_matches WHERE run_id = $1 ORDER BY rule, our_ref`, run.ID)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var rule, our, ext string
		var amount, fee, tax int64
		var event, value *time.Time
		if err := rows.Scan(&rule, &our, &ext, &amount, &fee, &tax, &event, &value); err != nil {
			return err
		}
		r := []any{rule, our, ext, excelize.Cell{StyleID: st.money, Value: rupees(amount)},
			excelize.Cell{StyleID: st.money, Value: rupees(fee)}, excelize.Cell{StyleID: st.money, Value: rupees(tax)}, nil, nil}
		if event != nil {
			r[6] = excelize.Cell{StyleID: st.datetime, Value: excelTime(*event)}
		}
		if value != nil {
			r[7] = excelize.Cell{StyleID: st.date, Value: calendarDay(*value)}
		}
		if err := sh.add(r); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return sh.finish("MatchedTable")
}

// WriteCSV writes the run's exceptions as CSV, the columns of the
// workbook's kind sheets: amounts in rupees with two decimals, times in
// IST as RFC 3339.
func (s *Service) WriteCSV(ctx context.Context, runID int64, w io.Writer) error {
	run, err := s.RunByID(ctx, runID)
	if err != nil {
		return err
	}
	now := s.cfg.Now()
	cw := csv.NewWriter(w)
	head := make([]string, len(exceptionColumns))
	for i, c := range exceptionColumns {
		head[i] = c.name
	}
	if err := cw.Write(head); err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	ts := func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return t.In(booking.IST).Format(time.RFC3339)
	}
	err = s.eachException(ctx, run, "", func(e Exception) error {
		payment := ""
		if e.PaymentID != nil {
			payment = e.PaymentID.String()
		}
		return cw.Write([]string{e.ID.String(), e.Kind, e.State, e.Owner, e.Path, e.BusinessDate.Format(time.DateOnly),
			ts(&e.DetectedAt), ts(&e.DueAt), AgeBucket(e.Age(now)), e.Ref, payment, e.PNR, e.PSPRef, e.PayoutID,
			rupeeText(e.AmountPaise), rupeeText(e.DiffPaise), e.Assignee, e.Resolution, ts(e.ResolvedAt)})
	})
	if err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	cw.Flush()
	return cw.Error()
}

// rupeeText is signed rupees with two decimals, for CSV.
func rupeeText(paise int64) string {
	sign := ""
	if paise < 0 {
		sign, paise = "-", -paise
	}
	return sign + strconv.FormatInt(paise/100, 10) + "." + fmt.Sprintf("%02d", paise%100)
}
