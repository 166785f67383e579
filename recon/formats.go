package recon

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"tatkal/booking"
	"tatkal/booking/payment/pspapi"
	"tatkal/booking/prs"
)

// Sources of outside records.
const (
	SourceSettlement = "SETTLEMENT"
	SourceBank       = "BANK"
	SourceCore       = "CORE"
)

// Formats we read. Each gateway writes its own settlement layout; the
// column names are theirs.
const (
	FormatSwiftpay = "swiftpay-v1" // signed rupees with decimals, DD/MM/YYYY, IST times
	FormatBharatpg = "bharatpg-v1" // paise, YYYYMMDD, entry types SALE/RFND/CHBK
	FormatBank     = "bank-v1"     // the bank's statement: DD-Mon-YYYY, rupees, narration with the payout id
	FormatCoreCSV  = "prs-csv-v1"  // the reservation core's export, one row per passenger
)

// Line kinds in recon_lines.
const (
	LineCapture    = "CAPTURE"
	LineRefund     = "REFUND"
	LineChargeback = "CHARGEBACK"
	LinePayout     = "PAYOUT"
	LineBooking    = "BOOKING"
)

// Line is one outside record, normalised. Amounts are positive paise with
// the kind giving the direction; Net is signed.
type Line struct {
	LineNo      int
	Gateway     string // set by the bank's lines (the narration names it); else the file's
	Kind        string
	ExtRef      string
	MerchantRef string
	ParentRef   string
	Method      string
	Amount      int64
	Fee         int64
	Tax         int64
	Net         int64
	EventAt     *time.Time
	ValueDate   *time.Time
	PayoutID    string
	Status      string
	Passengers  int
	Raw         string
}

// formatSource says which source a format belongs to.
var formatSource = map[string]string{
	FormatSwiftpay: SourceSettlement, FormatBharatpg: SourceSettlement, FormatBank: SourceBank, FormatCoreCSV: SourceCore,
}

// FormatFor is the settlement format a gateway writes.
func FormatFor(gateway string) string {
	if gateway == "swiftpay" {
		return FormatSwiftpay
	}
	return FormatBharatpg
}

// parser turns a file into lines, one call per line; io.EOF at the end.
type parser interface {
	next() (Line, error)
}

// newParser reads the header and returns the format's parser.
func newParser(format string, r io.Reader) (parser, error) {
	lr := &lineReader{sc: bufio.NewScanner(r)}
	lr.sc.Buffer(make([]byte, 64<<10), 1<<20)
	head, _, err := lr.record()
	if errors.Is(err, io.EOF) {
		return nil, errors.New("empty file, not even a header")
	}
	if err != nil {
		return nil, err
	}
	var cols []string
	switch format {
	case FormatSwiftpay:
		cols = pspapi.SwiftpayColumns
	case FormatBharatpg:
		cols = pspapi.BharatpgColumns
	case FormatBank:
		cols = bankCols
	case FormatCoreCSV:
		cols = prs.CSVHeader()
	default:
		return nil, fmt.Errorf("unknown format %q", format)
	}
	if !slices.Equal(head, cols) {
		return nil, fmt.Errorf("header is %q; a %s file starts %q", strings.Join(head, ","), format, strings.Join(cols, ","))
	}
	switch format {
	case FormatSwiftpay:
		return &swiftpayParser{lr}, nil
	case FormatBharatpg:
		return &bharatpgParser{lr}, nil
	case FormatBank:
		return &bankParser{lr}, nil
	default:
		return &coreParser{lr: lr}, nil
	}
}

// lineReader reads one CSV record per physical line, keeping the line's
// exact bytes as evidence. None of the formats has quoted newlines.
type lineReader struct {
	sc *bufio.Scanner
	n  int
}

func (lr *lineReader) record() ([]string, string, error) {
	for lr.sc.Scan() {
		lr.n++
		raw := strings.TrimSuffix(lr.sc.Text(), "\r")
		if !text(raw) {
			// PostgreSQL stores neither; refused here, the whole file is.
			return nil, "", fmt.Errorf("line %d: holds a NUL byte or invalid UTF-8 (files are UTF-8 text)", lr.n)
		}
		if strings.TrimSpace(raw) == "" {
			continue
		}
		if !strings.ContainsRune(raw, '"') {
			// No quoting: the fields are the commas' pieces, without a
			// reader per line.
			return strings.Split(raw, ","), raw, nil
		}
		rec, err := csv.NewReader(strings.NewReader(raw)).Read()
		if err != nil {
			return nil, raw, fmt.Errorf("line %d: %w", lr.n, err)
		}
		return rec, raw, nil
	}
	if err := lr.sc.Err(); err != nil {
		return nil, "", fmt.Errorf("line %d: %w", lr.n+1, err)
	}
	return nil, "", io.EOF
}

// fieldErrs collects what is wrong with one line.
type fieldErrs struct {
	line int
	errs []string
}

func (f *fieldErrs) add(format string, args ...any) {
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
}

func (f *fieldErrs) err() error {
	if len(f.errs) == 0 {
		return nil
	}
	return fmt.Errorf("line %d: %s", f.line, strings.Join(f.errs, "; "))
}

func (f *fieldErrs) paise(name, v string) int64 {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		f.add("%s %q is not a whole number of paise", name, v)
	}
	return n
}

// rupees parses "-1234.5" or "1234.50" into paise exactly, never through a float.
func (f *fieldErrs) rupees(name, v string) int64 {
	neg := strings.HasPrefix(v, "-")
	whole, frac, _ := strings.Cut(strings.TrimPrefix(v, "-"), ".")
	if len(frac) > 2 || whole == "" {
		f.add("%s %q is not rupees with at most two decimals", name, v)
		return 0
	}
	frac += strings.Repeat("0", 2-len(frac))
	w, err1 := strconv.ParseInt(whole, 10, 64)
	p, err2 := strconv.ParseInt(frac, 10, 64)
	if err1 != nil || err2 != nil || w > 1e15 {
		f.add("%s %q is not rupees with at most two decimals", name, v)
		return 0
	}
	n := w*100 + p
	if neg {
		n = -n
	}
	return n
}

func (f *fieldErrs) time(name, layout, v string, loc *time.Location) *time.Time {
	t, err := time.ParseInLocation(layout, v, loc)
	if err != nil {
		f.add("%s %q is not %s", name, v, layout)
		return nil
	}
	return &t
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

type swiftpayParser struct{ lr *lineReader }

func (p *swiftpayParser) next() (Line, error) {
	rec, raw, err := p.lr.record()
	if err != nil {
		return Line{}, err
	}
	fe := &fieldErrs{line: p.lr.n}
	if len(rec) != len(pspapi.SwiftpayColumns) {
		return Line{}, fmt.Errorf("line %d: %d columns, want %d", p.lr.n, len(rec), len(pspapi.SwiftpayColumns))
	}
	l := Line{LineNo: p.lr.n, Raw: raw, Method: ourMethod(rec[5]), PayoutID: rec[12]}
	gross := fe.rupees("Gross Amount", rec[6])
	l.Amount, l.Fee, l.Tax, l.Net = abs(gross), fe.rupees("MDR", rec[7]), fe.rupees("GST on MDR", rec[8]), fe.rupees("Net Amount", rec[9])
	l.EventAt = fe.time("Txn Date", "02/01/2006 15:04:05", rec[10], booking.IST)
	l.ValueDate = fe.time("Settlement Date", "02/01/2006", rec[11], booking.IST)
	switch rec[0] {
	case "CAPTURE":
		l.Kind, l.ExtRef, l.MerchantRef = LineCapture, rec[1], rec[2]
	case "CHARGEBACK":
		l.Kind, l.ExtRef, l.MerchantRef, l.ParentRef = LineChargeback, rec[1], rec[2], rec[1]
	case "REFUND":
		l.Kind, l.ExtRef, l.MerchantRef, l.ParentRef = LineRefund, rec[3], rec[4], rec[1]
	default:
		fe.add("Txn Type %q is not CAPTURE, REFUND or CHARGEBACK", rec[0])
	}
	if l.ExtRef == "" && len(fe.errs) == 0 {
		fe.add("the line has no gateway reference")
	}
	return l, fe.err()
}

type bharatpgParser struct{ lr *lineReader }

func (p *bharatpgParser) next() (Line, error) {
	rec, raw, err := p.lr.record()
	if err != nil {
		return Line{}, err
	}
	if len(rec) != len(pspapi.BharatpgColumns) {
		return Line{}, fmt.Errorf("line %d: %d columns, want %d", p.lr.n, len(rec), len(pspapi.BharatpgColumns))
	}
	fe := &fieldErrs{line: p.lr.n}
	l := Line{LineNo: p.lr.n, Raw: raw, PayoutID: rec[1], Method: ourMethod(rec[7])}
	l.ValueDate = fe.time("settlement_date", "20060102", rec[0], booking.IST)
	l.Amount, l.Fee, l.Tax, l.Net = fe.paise("txn_amount_paise", rec[8]), fe.paise("commission_paise", rec[9]),
		fe.paise("igst_paise", rec[10]), fe.paise("settled_paise", rec[11])
	if l.Amount < 0 {
		fe.add("txn_amount_paise is negative; entry_type gives the direction")
	}
	l.EventAt = fe.time("txn_timestamp", time.RFC3339, rec[12], time.UTC)
	switch rec[2] {
	case "SALE":
		l.Kind, l.ExtRef, l.MerchantRef = LineCapture, rec[3], rec[4]
	case "CHBK":
		l.Kind, l.ExtRef, l.MerchantRef, l.ParentRef = LineChargeback, rec[3], rec[4], rec[3]
	case "RFND":
		l.Kind, l.ExtRef, l.MerchantRef, l.ParentRef = LineRefund, rec[6], rec[5], rec[3]
	default:
		fe.add("entry_type %q is not SALE, RFND or CHBK", rec[2])
	}
	if l.ExtRef == "" && len(fe.errs) == 0 {
		fe.add("the line has no gateway reference")
	}
	return l, fe.err()
}

// ourMethod maps a gateway's method name to ours.
func ourMethod(m string) string {
	switch strings.ToUpper(m) {
	case "NETBANKING", "NB":
		return "NB"
	case "CARD", "CC", "DC":
		return "CARD"
	case "UPI":
		return "UPI"
	}
	return strings.ToUpper(m)
}

var bankCols = []string{"Txn Date", "Value Date", "Description", "Ref No", "Debit", "Credit"}

// narration finds the gateway and payout id in a credit's description,
// e.g. "NEFT CR-SWIFTPAY SETTLEMENT-SWP20250604".
var narration = regexp.MustCompile(`(?i)CR-([A-Z0-9_-]+) SETTLEMENT-([A-Z0-9-]+)`)

type bankParser struct{ lr *lineReader }

func (p *bankParser) next() (Line, error) {
	rec, raw, err := p.lr.record()
	if err != nil {
		return Line{}, err
	}
	if len(rec) != len(bankCols) {
		return Line{}, fmt.Errorf("line %d: %d columns, want %d", p.lr.n, len(rec), len(bankCols))
	}
	fe := &fieldErrs{line: p.lr.n}
	l := Line{LineNo: p.lr.n, Raw: raw, Kind: LinePayout, ExtRef: rec[3]}
	l.EventAt = fe.time("Txn Date", "02-Jan-2006", rec[0], booking.IST)
	l.ValueDate = fe.time("Value Date", "02-Jan-2006", rec[1], booking.IST)
	switch {
	case rec[4] != "" && rec[5] == "":
		l.Net = -fe.rupees("Debit", rec[4])
	case rec[5] != "" && rec[4] == "":
		l.Net = fe.rupees("Credit", rec[5])
	default:
		fe.add("exactly one of Debit and Credit must be given")
	}
	l.Amount = l.Net
	if m := narration.FindStringSubmatch(rec[2]); m != nil {
		l.Gateway, l.PayoutID = strings.ToLower(m[1]), strings.ToUpper(m[2])
		l.ExtRef = l.PayoutID
	}
	l.MerchantRef = rec[3] // the bank's UTR
	return l, fe.err()
}

// coreParser groups the core export's passenger rows into one line per PNR.
type coreParser struct {
	lr      *lineReader
	pending []string
	raw     []string
	lineNo  int
	done    bool
}

func (p *coreParser) next() (Line, error) {
	for {
		if p.done && p.pending == nil {
			return Line{}, io.EOF
		}
		rec, raw, err := p.lr.record()
		if errors.Is(err, io.EOF) {
			p.done = true
			if p.pending == nil {
				return Line{}, io.EOF
			}
			return p.flush()
		}
		if err != nil {
			return Line{}, err
		}
		if len(rec) != len(prs.CSVHeader()) {
			return Line{}, fmt.Errorf("line %d: %d columns, want %d", p.lr.n, len(rec), len(prs.CSVHeader()))
		}
		if p.pending != nil && rec[0] != p.pending[0] {
			l, err := p.flush()
			p.pending, p.raw, p.lineNo = rec, []string{raw}, p.lr.n
			return l, err
		}
		if p.pending == nil {
			p.pending, p.lineNo = rec, p.lr.n
		}
		p.raw = append(p.raw, raw)
	}
}

// flush turns the rows of one PNR into its line.
func (p *coreParser) flush() (Line, error) {
	rec, raw, n := p.pending, p.raw, p.lineNo
	p.pending, p.raw = nil, nil
	fe := &fieldErrs{line: n}
	if !prs.ValidPNR(rec[0]) {
		fe.add("pnr %q is not 10 digits", rec[0])
	}
	l := Line{LineNo: n, Kind: LineBooking, ExtRef: rec[0], MerchantRef: rec[1], Status: rec[2], Passengers: len(raw),
		Raw: strings.Join(raw, "\n")}
	l.Amount = fe.paise("fare_paise", rec[13])
	l.Net = l.Amount
	l.ValueDate = fe.time("journey_date", time.DateOnly, rec[4], booking.IST)
	l.EventAt = fe.time("accepted_at", time.RFC3339Nano, rec[14], time.UTC)
	return l, fe.err()
}
