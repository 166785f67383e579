package pspsim

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"tatkal/booking/payment/pspapi"
)

// ist is the zone settlement days are counted in.
func ist() *time.Location { return time.FixedZone("IST", 19800) }

// nextBusinessDay is T+1, skipping Sunday (banks settle on Saturdays).
func nextBusinessDay(day time.Time) time.Time {
	d := day.AddDate(0, 0, 1)
	if d.Weekday() == time.Sunday {
		d = d.AddDate(0, 0, 1)
	}
	return d
}

// addBusinessDays is t plus n days in IST, each skipping Sunday.
func addBusinessDays(t time.Time, n int) time.Time {
	t = t.In(ist())
	for range n {
		t = nextBusinessDay(t)
	}
	return t.UTC()
}

// settlementRow is one line of the file.
type settlementRow struct {
	Type        string    `db:"type"`
	PSPRef      string    `db:"psp_ref"`
	MerchantRef string    `db:"merchant_ref"`
	RefundRef   string    `db:"refund_ref"`
	AmountPaise int64     `db:"amount_paise"`
	FeeBps      int       `db:"fee_bps"`
	EventTime   time.Time `db:"event_time"`
}

// fee is bps of amount, rounded half up to the paisa.
func fee(amount int64, bps int) int64 {
	return (amount*int64(bps) + 5000) / 10000
}

// handleSettlement is GET /gw/{gw}/v1/settlements/{date}.csv.
func (s *Server) handleSettlement(w http.ResponseWriter, r *http.Request) error {
	gw := chiParam(r, "gw")
	file := chiParam(r, "file")
	date, ok := strings.CutSuffix(file, ".csv")
	if !ok {
		return notFound("settlement files are named YYYY-MM-DD.csv, not %q", file)
	}
	day, err := time.ParseInLocation(time.DateOnly, date, ist())
	if err != nil {
		return invalid("settlement date %q is not YYYY-MM-DD", date)
	}
	rows, err := s.settlementRows(r.Context(), gw, day)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s-%s.csv"`, gw, date))
	return writeSettlement(w, rows, nextBusinessDay(day))
}

// settlementRows reads the captures and processed refunds of one IST day.
func (s *Server) settlementRows(ctx context.Context, gw string, day time.Time) ([]settlementRow, error) {
	from, to := day, day.AddDate(0, 0, 1)
	rows, err := s.pool.Query(ctx, s.q(`
		SELECT 'PAYMENT' AS type, psp_ref, merchant_ref, '' AS refund_ref, amount_paise, fee_bps, captured_at AS event_time
		FROM {s}.payments WHERE gateway = $1 AND captured_at >= $2 AND captured_at < $3
		UNION ALL
		SELECT 'REFUND', psp_ref, merchant_ref, refund_ref, -amount_paise, 0, processed_at
		FROM {s}.refunds WHERE gateway = $1 AND processed_at >= $2 AND processed_at < $3
		ORDER BY event_time, type, psp_ref, refund_ref`), gw, from, to)
	if err != nil {
		return nil, fmt.Errorf("read settlement of %s for %s: %w", gw, day.Format(time.DateOnly), err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[settlementRow])
	if err != nil {
		return nil, fmt.Errorf("read settlement of %s for %s: %w", gw, day.Format(time.DateOnly), err)
	}
	return out, nil
}

// writeSettlement encodes rows as the settlement CSV.
func writeSettlement(w io.Writer, rows []settlementRow, settleOn time.Time) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(pspapi.SettlementColumns); err != nil {
		return fmt.Errorf("write settlement: %w", err)
	}
	date := settleOn.Format(time.DateOnly)
	for _, r := range rows {
		f := fee(r.AmountPaise, r.FeeBps)
		if err := cw.Write([]string{
			r.Type, r.PSPRef, r.MerchantRef, r.RefundRef,
			strconv.FormatInt(r.AmountPaise, 10), strconv.FormatInt(f, 10), strconv.FormatInt(r.AmountPaise-f, 10),
			r.EventTime.In(ist()).Format(time.RFC3339), date,
		}); err != nil {
			return fmt.Errorf("write settlement: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("write settlement: %w", err)
	}
	return nil
}
