package pspsim

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"tatkal/booking/india"
)

// SettlementFaults are the mistakes a gateway's settlement makes, set per
// gateway at PUT /admin/settlement-faults/{gw}. Each pick hits the lines
// named in Refs (a payment's psp_ref, a refund's refund_ref, a payout id
// for ShortPay) and, with probability Rate, any other; the draw is a hash
// of the simulator's seed and the line, so a file is the same every time
// it is fetched.
type SettlementFaults struct {
	Drop          FaultPick `json:"drop"`           // the line is missing
	Duplicate     FaultPick `json:"duplicate"`      // the line is written twice
	ChangeAmount  FaultPick `json:"change_amount"`  // Paise added to the amount (default 100)
	OverchargeFee FaultPick `json:"overcharge_fee"` // Bps added to the fee (default 50)
	NextDay       FaultPick `json:"next_day"`       // the line is in the next day's file instead
	OmitRefund    FaultPick `json:"omit_refund"`    // a refund line is missing
	Chargeback    FaultPick `json:"chargeback"`     // a capture gets a chargeback line beside it
	ShortPay      FaultPick `json:"short_pay"`      // the payout credit is Paise short (default 100)
	// PhantomLines adds that many capture lines for payments the merchant
	// never made (unknown merchant references) to every file.
	PhantomLines int `json:"phantom_lines"`
	// StrayCredits are credits on the bank statement of their date that
	// no payout explains (a customer's NEFT straight to the account, a
	// gateway's transfer it never announced), as a real statement has.
	// The bank is the simulator's one; they are kept with a gateway's
	// faults and listed after its payouts.
	StrayCredits []StrayCredit `json:"stray_credits,omitempty"`
}

// StrayCredit is one credit nobody announced, on the statement of Date
// (YYYY-MM-DD), narrated as Narration (default "NEFT CR-UNKNOWN
// REMITTER"). Its UTR is derived from the seed, the gateway, the date and
// its place among that date's stray credits, so it repeats across fetches.
type StrayCredit struct {
	Date      string `json:"date"`
	Paise     int64  `json:"paise"`
	Narration string `json:"narration,omitempty"`
}

// maxStrayCredits and maxNarration bound a fault setting's stray credits.
const (
	maxStrayCredits = 100
	maxNarration    = 140
)

func (c StrayCredit) validate(i int) error {
	name := fmt.Sprintf("stray_credits[%d]", i)
	if _, err := time.ParseInLocation(time.DateOnly, c.Date, india.IST); err != nil {
		return fmt.Errorf("%s.date %q is not YYYY-MM-DD", name, c.Date)
	}
	if c.Paise <= 0 || c.Paise > maxAmountPaise {
		return fmt.Errorf("%s.paise must be 1..%d", name, int64(maxAmountPaise))
	}
	if len(c.Narration) > maxNarration || strings.IndexFunc(c.Narration, func(r rune) bool { return r < ' ' || r == 0x7f }) >= 0 ||
		!utf8.ValidString(c.Narration) {
		return fmt.Errorf("%s.narration: at most %d printable characters", name, maxNarration)
	}
	return nil
}

// narration is what the statement says of the credit.
func (c StrayCredit) narration() string {
	if c.Narration == "" {
		return "NEFT CR-UNKNOWN REMITTER"
	}
	return c.Narration
}

// FaultPick chooses the lines one fault hits.
type FaultPick struct {
	Rate  float64  `json:"rate,omitempty"`
	Refs  []string `json:"refs,omitempty"`
	Paise int64    `json:"paise,omitempty"`
	Bps   int      `json:"bps,omitempty"`
}

func (p FaultPick) active() bool { return p.Rate > 0 || len(p.Refs) > 0 }

func (p FaultPick) validate(name string) error {
	switch {
	case !(p.Rate >= 0 && p.Rate <= 1):
		return fmt.Errorf("%s.rate must be in [0,1]", name)
	case len(p.Refs) > 10000:
		return fmt.Errorf("%s.refs: at most 10000", name)
	case p.Paise < 0 || p.Paise > maxAmountPaise:
		return fmt.Errorf("%s.paise must be 0..%d", name, int64(maxAmountPaise))
	case p.Bps < 0 || p.Bps > 10000:
		return fmt.Errorf("%s.bps must be 0..10000", name)
	}
	return nil
}

// Validate says what is wrong with a fault setting, or nil.
func (f SettlementFaults) Validate() error {
	var errs []error
	for name, p := range map[string]FaultPick{"drop": f.Drop, "duplicate": f.Duplicate, "change_amount": f.ChangeAmount,
		"overcharge_fee": f.OverchargeFee, "next_day": f.NextDay, "omit_refund": f.OmitRefund,
		"chargeback": f.Chargeback, "short_pay": f.ShortPay} {
		errs = append(errs, p.validate(name))
	}
	if f.PhantomLines < 0 || f.PhantomLines > 1000 {
		errs = append(errs, errors.New("phantom_lines must be 0..1000"))
	}
	if len(f.StrayCredits) > maxStrayCredits {
		errs = append(errs, fmt.Errorf("stray_credits: at most %d", maxStrayCredits))
	}
	for i, c := range f.StrayCredits {
		errs = append(errs, c.validate(i))
	}
	return errors.Join(errs...)
}

// hits says whether pick p of fault name hits ref.
func (s *Server) hits(p FaultPick, name, gw, ref string) bool {
	return slices.Contains(p.Refs, ref) || s.chance(p.Rate, "settlement", name, gw, ref)
}

// applyFaults turns a day's true lines (and the day before's, for lines
// moved forward) into the file the gateway publishes.
func (s *Server) applyFaults(f SettlementFaults, gw string, day time.Time, today, yesterday []settlementLine) []settlementLine {
	kept := func(l settlementLine) bool {
		if l.Type == lineRefund && s.hits(f.OmitRefund, "omit_refund", gw, l.key()) {
			return false
		}
		return !s.hits(f.Drop, "drop", gw, l.key())
	}
	var out []settlementLine
	for _, l := range today {
		if kept(l) && !s.hits(f.NextDay, "next_day", gw, l.key()) {
			out = append(out, l)
		}
	}
	for _, l := range yesterday {
		if kept(l) && s.hits(f.NextDay, "next_day", gw, l.key()) {
			out = append(out, l)
		}
	}
	for _, l := range slices.Clone(out) {
		if l.Type == lineCapture && s.hits(f.Chargeback, "chargeback", gw, l.key()) {
			cb := l
			cb.Type = lineChargeback
			cb.price()
			out = append(out, cb)
		}
	}
	for i := range f.PhantomLines {
		out = append(out, s.phantomLine(gw, day, i))
	}
	final := make([]settlementLine, 0, len(out))
	for _, l := range out {
		if s.hits(f.ChangeAmount, "change_amount", gw, l.key()) {
			l.AmountPaise += cmp(f.ChangeAmount.Paise, 100)
			l.price()
		}
		if l.Type == lineCapture && s.hits(f.OverchargeFee, "overcharge_fee", gw, l.key()) {
			l.FeePaise += fee(l.AmountPaise, int(cmp(int64(f.OverchargeFee.Bps), 50)))
			l.GSTPaise = fee(l.FeePaise, gstBps)
		}
		final = append(final, l)
		if s.hits(f.Duplicate, "duplicate", gw, l.key()) {
			final = append(final, l)
		}
	}
	sortLines(final)
	return final
}

// cmp is v, or def when v is zero.
func cmp(v, def int64) int64 {
	if v == 0 {
		return def
	}
	return v
}

// phantomLine is a capture of a payment the merchant never made: the
// references are derived from the seed, so they look real and repeat.
func (s *Server) phantomLine(gw string, day time.Time, i int) settlementLine {
	h := sha256.New()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], s.seed)
	h.Write(b[:])
	fmt.Fprintf(h, "phantom|%s|%s|%d", gw, day.Format(time.DateOnly), i)
	sum := h.Sum(nil)
	id := hex.EncodeToString(sum[:16])
	merchant := id[0:8] + "-" + id[8:12] + "-7" + id[13:16] + "-8" + id[17:20] + "-" + id[20:32]
	amount := 50000 + int64(binary.BigEndian.Uint32(sum[16:20])%400000)
	l := settlementLine{
		Type: lineCapture, PSPRef: "pay_PH" + id[:20], MerchantRef: merchant, Method: "UPI",
		AmountPaise: amount, EventTime: day.Add(time.Duration(12*3600+i) * time.Second),
	}
	l.price()
	return l
}

// settlementFaultsDDL keeps the fault settings beside the routes, so they
// survive a restart; created on first use.
const settlementFaultsDDL = `CREATE TABLE IF NOT EXISTS {s}.settlement_faults (
	gateway    text PRIMARY KEY,
	config     jsonb NOT NULL,
	updated_at timestamptz NOT NULL
)`

// settlementFaults reads a gateway's settlement faults (none if unset).
func (s *Server) settlementFaults(ctx context.Context, gw string) (SettlementFaults, error) {
	var f SettlementFaults
	var raw []byte
	err := s.pool.QueryRow(ctx, s.q(`SELECT config FROM {s}.settlement_faults WHERE gateway = $1`), gw).Scan(&raw)
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, pgx.ErrNoRows), errors.As(err, &pgErr) && pgErr.Code == "42P01": // never set
		return f, nil
	case err != nil:
		return f, fmt.Errorf("read settlement faults of %s: %w", gw, err)
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return f, fmt.Errorf("read settlement faults of %s: %w", gw, err)
	}
	return f, nil
}

// loadSettlementFaults is GET /admin/settlement-faults/{gw}.
func (s *Server) loadSettlementFaults(r *http.Request) (SettlementFaults, error) {
	gw := chiParam(r, "gw")
	if _, ok := s.gateways[gw]; !ok {
		return SettlementFaults{}, notFound("unknown gateway %q", gw)
	}
	return s.settlementFaults(r.Context(), gw)
}

// saveSettlementFaults is PUT /admin/settlement-faults/{gw}: replace the
// gateway's settlement faults; {} clears them.
func (s *Server) saveSettlementFaults(r *http.Request, f SettlementFaults) error {
	gw := chiParam(r, "gw")
	if _, ok := s.gateways[gw]; !ok {
		return notFound("unknown gateway %q", gw)
	}
	raw, _ := json.Marshal(f) //nolint:errchkjson // plain struct
	err := s.transact(r.Context(), func(tx pgx.Tx) error {
		if _, err := tx.Exec(r.Context(), "SELECT pg_advisory_xact_lock(hashtextextended($1, 7461240))", s.schema); err != nil {
			return err
		}
		if _, err := tx.Exec(r.Context(), s.q(settlementFaultsDDL)); err != nil {
			return err
		}
		_, err := tx.Exec(r.Context(), s.q(`INSERT INTO {s}.settlement_faults (gateway, config, updated_at) VALUES ($1, $2, $3)
			ON CONFLICT (gateway) DO UPDATE SET config = excluded.config, updated_at = excluded.updated_at`), gw, raw, s.now())
		return err
	})
	if err != nil {
		return fmt.Errorf("save settlement faults of %s: %w", gw, err)
	}
	return nil
}
