package pspsim

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/csv"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"tatkal/booking/india"
)

// The bank statement: every gateway pays each day's net settlement into
// the merchant's account as one credit (a payout), narrated with the
// payout reference, on the file's settlement date. The simulator plays
// the bank too, so the payout leg can be reconciled against the files.
// Credits no payout explains are set with the settlement faults
// (SettlementFaults.StrayCredits).
//
//	GET /bank/v1/statements/{date}.csv   (Authorization: Bearer <admin token>)
//
// Columns: Txn Date, Value Date (DD-Mon-YYYY), Description
// ("NEFT CR-<GATEWAY> SETTLEMENT-<payout id>"), Ref No (the bank's UTR),
// Debit, Credit (rupees with two decimals; one of them empty).

// BankColumns is the header row of a bank statement.
var BankColumns = []string{"Txn Date", "Value Date", "Description", "Ref No", "Debit", "Credit"}

// payout is one bank movement.
type payout struct {
	narration string
	utr       string // the bank's reference
	paise     int64  // signed: negative is the gateway taking money back
}

// handleBankStatement is GET /bank/v1/statements/{file}.
func (s *Server) handleBankStatement(w http.ResponseWriter, r *http.Request) error {
	file := chiParam(r, "file")
	date, ok := strings.CutSuffix(file, ".csv")
	if !ok {
		return notFound("statements are named YYYY-MM-DD.csv, not %q", file)
	}
	day, err := time.ParseInLocation(time.DateOnly, date, india.IST)
	if err != nil {
		return invalid("statement date %q is not YYYY-MM-DD", date)
	}
	payouts, err := s.payoutsOn(r.Context(), day)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="statement-%s.csv"`, date))
	cw := csv.NewWriter(w)
	cw.Write(BankColumns) //nolint:errcheck // the error sticks; checked at Flush
	d := day.Format("02-Jan-2006")
	for _, p := range payouts {
		debit, credit := "", india.Decimal(p.paise)
		if p.paise < 0 {
			debit, credit = india.Decimal(-p.paise), ""
		}
		cw.Write([]string{d, d, p.narration, p.utr, debit, credit}) //nolint:errcheck
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("write statement: %w", err)
	}
	return nil
}

// payoutsOn is every movement on day: for each gateway, the net of each
// file whose settlement date is day, less any short-payment fault, then
// the stray credits of its faults dated day.
func (s *Server) payoutsOn(ctx context.Context, day time.Time) ([]payout, error) {
	gws := make([]string, 0, len(s.gateways))
	for id := range s.gateways {
		gws = append(gws, id)
	}
	slices.Sort(gws)
	var out []payout
	for _, gw := range gws {
		faults, err := s.settlementFaults(ctx, gw)
		if err != nil {
			return nil, err
		}
		// The files settled today: yesterday's, and Saturday's and Sunday's on a Monday.
		for back := 3; back >= 1; back-- {
			fileDay := day.AddDate(0, 0, -back)
			if !nextBusinessDay(fileDay).Equal(day) {
				continue
			}
			lines, err := s.settlementFile(ctx, gw, fileDay)
			if err != nil {
				return nil, err
			}
			var net int64
			for _, l := range lines {
				net += l.net()
			}
			id := payoutID(gw, fileDay)
			if s.hits(faults.ShortPay, "short_pay", gw, id) {
				net -= cmp(faults.ShortPay.Paise, 100)
			}
			if net != 0 {
				out = append(out, payout{narration: "NEFT CR-" + strings.ToUpper(gw) + " SETTLEMENT-" + id, utr: s.utr(id), paise: net})
			}
		}
		date, n := day.Format(time.DateOnly), 0
		for _, c := range faults.StrayCredits {
			if c.Date == date {
				out = append(out, payout{narration: c.narration(), utr: s.utr(fmt.Sprintf("stray|%s|%s|%d", gw, date, n)), paise: c.Paise})
				n++
			}
		}
	}
	return out, nil
}

// utr is the bank's own reference for a movement (a payout's id), stable
// across fetches.
func (s *Server) utr(key string) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%d|utr|%s", s.seed, key))
	return fmt.Sprintf("HDFCN%012d", binary.BigEndian.Uint64(sum[:8])%1_000_000_000_000)
}
