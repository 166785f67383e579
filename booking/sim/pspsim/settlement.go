package pspsim

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"tatkal/booking/india"

	"github.com/jackc/pgx/v5"
)

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
	t = t.In(india.IST)
	for range n {
		t = nextBusinessDay(t)
	}
	return t.UTC()
}

// Settlement line types, as the simulator thinks of them; each gateway's
// file spells them its own way.
const (
	lineCapture    = "CAPTURE"
	lineRefund     = "REFUND"
	lineChargeback = "CHARGEBACK"
)

// gstBps is the GST charged on the gateway's fee (18%).
const gstBps = 1800

// settlementLine is one line of a day's settlement, before it is written
// in its gateway's own format. Amounts are positive paise; the type says
// which way the money goes.
type settlementLine struct {
	Type              string    `db:"type"`
	PSPRef            string    `db:"psp_ref"`
	MerchantRef       string    `db:"merchant_ref"` // the payment's
	RefundRef         string    `db:"refund_ref"`
	RefundMerchantRef string    `db:"refund_merchant_ref"`
	Method            string    `db:"method"`
	AmountPaise       int64     `db:"amount_paise"`
	FeeBps            int       `db:"fee_bps"`
	EventTime         time.Time `db:"event_time"`
	FeePaise          int64     `db:"-"`
	GSTPaise          int64     `db:"-"`
}

// key names the line for fault picks: a refund by its refund_ref, anything
// else by the payment's psp_ref.
func (l settlementLine) key() string {
	if l.Type == lineRefund {
		return l.RefundRef
	}
	return l.PSPRef
}

// net is what the line adds to the payout: captures less fee and GST,
// refunds and chargebacks taken back.
func (l settlementLine) net() int64 {
	if l.Type == lineCapture {
		return l.AmountPaise - l.FeePaise - l.GSTPaise
	}
	return -l.AmountPaise - l.FeePaise - l.GSTPaise
}

// price sets the fee and its GST from the contracted rate.
func (l *settlementLine) price() {
	l.FeePaise, l.GSTPaise = 0, 0
	if l.Type == lineCapture {
		l.FeePaise = fee(l.AmountPaise, l.FeeBps)
		l.GSTPaise = fee(l.FeePaise, gstBps)
	}
}

// fee is bps of amount, rounded half up to the paisa.
func fee(amount int64, bps int) int64 {
	return (amount*int64(bps) + 5000) / 10000
}

// payoutID is the reference of the one bank payout that settles a day's
// file: a readable gateway prefix and the business date.
func payoutID(gw string, day time.Time) string {
	prefix := map[string]string{"swiftpay": "SWP", "bharatpg": "BPGUTR"}[gw]
	if prefix == "" {
		prefix = strings.ToUpper(gw) + "-"
	}
	return prefix + day.Format("20060102")
}

// handleSettlement is GET /gw/{gw}/v1/settlements/{date}.csv: the day's
// captures, refunds and chargebacks with fee, GST and net, in the
// gateway's own format (see settlement_formats.go), faults applied.
func (s *Server) handleSettlement(w http.ResponseWriter, r *http.Request) error {
	gw := chiParam(r, "gw")
	file := chiParam(r, "file")
	date, ok := strings.CutSuffix(file, ".csv")
	if !ok {
		return notFound("settlement files are named YYYY-MM-DD.csv, not %q", file)
	}
	day, err := time.ParseInLocation(time.DateOnly, date, india.IST)
	if err != nil {
		return invalid("settlement date %q is not YYYY-MM-DD", date)
	}
	lines, err := s.settlementFile(r.Context(), gw, day)
	if err != nil {
		return err
	}
	f := formatOf(gw)
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s-%s.csv"`, gw, date))
	w.Header().Set(HeaderSettlementFormat, f.name)
	return writeSettlement(w, f, lines, day, nextBusinessDay(day), payoutID(gw, day))
}

// settlementFile is the day's file as the gateway publishes it: the day's
// lines with the configured faults applied.
func (s *Server) settlementFile(ctx context.Context, gw string, day time.Time) ([]settlementLine, error) {
	faults, err := s.settlementFaults(ctx, gw)
	if err != nil {
		return nil, err
	}
	today, err := s.settlementLines(ctx, gw, day)
	if err != nil {
		return nil, err
	}
	var yesterday []settlementLine
	if faults.NextDay.active() {
		if yesterday, err = s.settlementLines(ctx, gw, day.AddDate(0, 0, -1)); err != nil {
			return nil, err
		}
	}
	return s.applyFaults(faults, gw, day, today, yesterday), nil
}

// settlementLines reads the captures and processed refunds of one IST day.
func (s *Server) settlementLines(ctx context.Context, gw string, day time.Time) ([]settlementLine, error) {
	from, to := day, day.AddDate(0, 0, 1)
	rows, err := s.pool.Query(ctx, s.q(`
		SELECT 'CAPTURE' AS type, psp_ref, merchant_ref, '' AS refund_ref, '' AS refund_merchant_ref, method,
		       amount_paise, fee_bps, captured_at AS event_time
		FROM {s}.payments WHERE gateway = $1 AND captured_at >= $2 AND captured_at < $3
		UNION ALL
		SELECT 'REFUND', r.psp_ref, p.merchant_ref, r.refund_ref, r.merchant_ref, p.method, r.amount_paise, 0, r.processed_at
		FROM {s}.refunds r JOIN {s}.payments p ON p.psp_ref = r.psp_ref
		WHERE r.gateway = $1 AND r.processed_at >= $2 AND r.processed_at < $3
		ORDER BY event_time, type, psp_ref, refund_ref`), gw, from, to)
	if err != nil {
		return nil, fmt.Errorf("read settlement of %s for %s: %w", gw, day.Format(time.DateOnly), err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[settlementLine])
	if err != nil {
		return nil, fmt.Errorf("read settlement of %s for %s: %w", gw, day.Format(time.DateOnly), err)
	}
	for i := range out {
		out[i].price()
	}
	return out, nil
}

// writeSettlement encodes lines in format f.
func writeSettlement(w io.Writer, f settlementFormat, lines []settlementLine, day, settleOn time.Time, payout string) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(f.header); err != nil {
		return fmt.Errorf("write settlement: %w", err)
	}
	for _, l := range lines {
		if err := cw.Write(f.row(l, settleOn, payout)); err != nil {
			return fmt.Errorf("write settlement: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("write settlement: %w", err)
	}
	return nil
}

// sortLines puts a file in the order a gateway writes it: by time.
func sortLines(lines []settlementLine) {
	slices.SortStableFunc(lines, func(a, b settlementLine) int {
		if c := a.EventTime.Compare(b.EventTime); c != 0 {
			return c
		}
		if c := strings.Compare(a.Type, b.Type); c != 0 {
			return c
		}
		return strings.Compare(a.key(), b.key())
	})
}
