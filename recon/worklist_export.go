package recon

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/xuri/excelize/v2"

	"tatkal/booking"
	"tatkal/booking/csvx"
	"tatkal/booking/india"
)

// ExportLimit is the most exceptions one export of the list writes.
const ExportLimit = 100_000

// WorklistHeader is the export's header row.
var WorklistHeader = []string{"exception id", "kind", "gateway txn id", "PNR", "gateway", "business date", "at stake (INR)", "amount (INR)",
	"difference (INR)", "state", "team", "assigned to", "path", "transaction at (IST)", "transaction age (h)", "detected at (IST)", "age (h)",
	"due (IST)", "resolution", "reference"}

// WriteWorklistCSV writes every exception a filter selects (its page
// ignored), sorted as the list is, as CSV a spreadsheet opens safely:
// text that comes from outside (references, names) cannot start a
// formula; amounts are plain numbers a spreadsheet adds up. A filter
// selecting more than ExportLimit rows is refused before anything is written.
func (s *Service) WriteWorklistCSV(ctx context.Context, f Filter, sort string, w io.Writer) error {
	n, err := s.exportable(ctx, f, sort)
	if err != nil {
		return err
	}
	cw := csv.NewWriter(w)
	if err := cw.Write(WorklistHeader); err != nil {
		return fmt.Errorf("export exceptions: %w", err)
	}
	now := s.cfg.Now()
	ts := func(t time.Time) string { return t.In(booking.IST).Format("2006-01-02 15:04:05") }
	hours := func(d time.Duration) string { return fmt.Sprintf("%.1f", d.Hours()) }
	f.Limit = 1000
	for f.Offset = 0; f.Offset < n; f.Offset += f.Limit {
		rows, err := s.WorkRows(ctx, f, sort)
		if err != nil {
			return err
		}
		for _, r := range rows {
			due := ts(r.DueAt)
			rec := []string{r.ID.String(), r.Kind, csvx.Text(r.GatewayRef), csvx.Text(r.BookingPNR), csvx.Text(r.Gateway),
				r.BusinessDate.Format(time.DateOnly), india.Decimal(r.StakePaise), india.Decimal(r.AmountPaise), india.Decimal(r.DiffPaise),
				r.State, csvx.Text(r.Owner), csvx.Text(r.Assignee), r.Path, ts(r.TxnAt), hours(r.TxnAge(now)), ts(r.DetectedAt),
				hours(r.Age(now)), due, csvx.Text(r.Resolution), csvx.Text(r.Ref)}
			if err := cw.Write(rec); err != nil {
				return fmt.Errorf("export exceptions: %w", err)
			}
		}
		if len(rows) < f.Limit {
			break
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("export exceptions: %w", err)
	}
	return nil
}

// exportable counts what an export of the list would write, refusing a
// bad sort or more than ExportLimit rows before anything is written.
func (s *Service) exportable(ctx context.Context, f Filter, sort string) (int, error) {
	n, _, err := s.CountExceptions(ctx, f)
	if err != nil {
		return 0, err
	}
	if n > ExportLimit {
		return 0, booking.Errorf(booking.EINVALID, "TOO_MANY_ROWS", "%d exceptions match; export at most %d at once: narrow the filter.", n, ExportLimit)
	}
	if _, err := orderBy(sort); err != nil {
		return 0, err
	}
	return n, nil
}

// worklistColumns are the workbook's columns: the CSV's, amounts as
// numbers in the console's money format, times as real dates.
var worklistColumns = []column{
	{"Exception ID", 38}, {"Kind", 24}, {"Gateway txn id", 26}, {"PNR", 12}, {"Gateway", 12}, {"Business date", 13},
	{"At stake (₹)", 16}, {"Amount (₹)", 16}, {"Difference (₹)", 16}, {"State", 14}, {"Team", 18}, {"Assigned to", 14},
	{"Path", 10}, {"Transaction (IST)", 18}, {"Transaction age (h)", 12}, {"Detected (IST)", 18}, {"Age (h)", 10},
	{"Due (IST)", 18}, {"Resolution", 22}, {"Reference", 40},
}

// WriteWorklistXLSX writes the same rows as WriteWorklistCSV as a
// workbook of one sheet, Exceptions: a styled, frozen header with an
// Excel table over it, amounts as numbers shown as the console shows them
// (MoneyFormat: ₹12,34,567.00), times as dates in IST. Text is never a
// formula in a workbook (excelize writes strings as strings). Rows stream
// a page at a time, so the memory stays bounded up to ExportLimit.
func (s *Service) WriteWorklistXLSX(ctx context.Context, f Filter, sort string, w io.Writer) error {
	n, err := s.exportable(ctx, f, sort)
	if err != nil {
		return err
	}
	book := excelize.NewFile()
	defer book.Close()
	st, err := newStyles(book)
	if err != nil {
		return fmt.Errorf("workbook styles: %w", err)
	}
	// Renamed, not added and deleted (see WriteXLSX).
	if err := book.SetSheetName("Sheet1", "Exceptions"); err != nil {
		return err
	}
	sh, err := startSheet(book, "Exceptions", worklistColumns, st)
	if err != nil {
		return fmt.Errorf("exceptions sheet: %w", err)
	}
	now := s.cfg.Now()
	hours := func(d time.Duration) float64 { return math.Round(d.Hours()*10) / 10 }
	at := func(t time.Time) excelize.Cell { return excelize.Cell{StyleID: st.datetime, Value: excelTime(t)} }
	f.Limit = 1000
	for f.Offset = 0; f.Offset < n; f.Offset += f.Limit {
		rows, err := s.WorkRows(ctx, f, sort)
		if err != nil {
			return err
		}
		for _, r := range rows {
			if err := sh.add([]any{r.ID.String(), r.Kind, r.GatewayRef, r.BookingPNR, r.Gateway,
				excelize.Cell{StyleID: st.date, Value: calendarDay(r.BusinessDate)},
				st.rupeeCell(r.StakePaise), st.rupeeCell(r.AmountPaise), st.rupeeCell(r.DiffPaise),
				r.State, r.Owner, r.Assignee, r.Path, at(r.TxnAt), hours(r.TxnAge(now)), at(r.DetectedAt), hours(r.Age(now)),
				at(r.DueAt), r.Resolution, r.Ref}); err != nil {
				return fmt.Errorf("exceptions sheet: %w", err)
			}
		}
		if len(rows) < f.Limit {
			break
		}
	}
	if err := sh.finish("Exceptions"); err != nil {
		return fmt.Errorf("exceptions sheet: %w", err)
	}
	return writeWorkbook(book, w)
}
