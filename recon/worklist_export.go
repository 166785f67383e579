package recon

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"time"

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
	n, _, err := s.CountExceptions(ctx, f)
	if err != nil {
		return err
	}
	if n > ExportLimit {
		return booking.Errorf(booking.EINVALID, "TOO_MANY_ROWS", "%d exceptions match; export at most %d at once: narrow the filter.", n, ExportLimit)
	}
	if _, err := orderBy(sort); err != nil {
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
