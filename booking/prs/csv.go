package prs

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"
)

// csvHeader is the header row of a CSV export. The export has one row per
// passenger, booking columns repeated, in PNR then seq order: the shape a
// charting clerk and a spreadsheet both expect.
var csvHeader = [...]string{
	"pnr", "core_ref", "state", "train", "journey_date", "class", "quota", "from", "to",
	"from_seq", "to_seq", "status", "waitlist_no", "fare_paise", "accepted_at", "cancelled_at",
	"seq", "name", "age", "gender", "coach", "berth_no", "berth_type",
}

// CSVHeader returns the header row of a CSV export.
func CSVHeader() []string { return slices.Clone(csvHeader[:]) }

// CSVRows is one booking as export rows, one per passenger.
func CSVRows(b Booking) [][]string {
	cancelled := ""
	if b.CancelledAt != nil {
		cancelled = b.CancelledAt.UTC().Format(time.RFC3339Nano)
	}
	rows := make([][]string, 0, len(b.Passengers))
	for _, p := range b.Passengers {
		berth := ""
		if p.BerthNo != 0 {
			berth = strconv.Itoa(p.BerthNo)
		}
		rows = append(rows, []string{
			b.PNR, b.CoreRef, b.State, b.Train, b.JourneyDate, b.Class, b.Quota, b.From, b.To,
			strconv.Itoa(b.FromSeq), strconv.Itoa(b.ToSeq), b.Status, strconv.Itoa(b.WaitlistNo),
			strconv.FormatInt(b.FarePaise, 10), b.AcceptedAt.UTC().Format(time.RFC3339Nano), cancelled,
			strconv.Itoa(p.Seq), p.Name, strconv.Itoa(p.Age), p.Gender, p.Coach, berth, p.BerthType,
		})
	}
	return rows
}

// ReadCSV parses a CSV export back into bookings, so reconciliation can
// work from a downloaded file as well as from the JSON export.
func ReadCSV(r io.Reader) ([]Booking, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = len(csvHeader)
	head, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, errors.New("prs csv: empty file, not even a header")
	}
	if err != nil {
		return nil, fmt.Errorf("prs csv header: %w", err)
	}
	for i, h := range csvHeader {
		if head[i] != h {
			return nil, fmt.Errorf("prs csv header: column %d is %q, want %q", i+1, head[i], h)
		}
	}
	out := []Booking{}
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("prs csv line %d: %w", line, err)
		}
		b, p, err := parseCSVRow(rec)
		if err != nil {
			return nil, fmt.Errorf("prs csv line %d: %w", line, err)
		}
		if n := len(out); n > 0 && out[n-1].PNR == b.PNR {
			out[n-1].Passengers = append(out[n-1].Passengers, p)
			continue
		}
		b.Passengers = []Passenger{p}
		out = append(out, b)
	}
}

func parseCSVRow(rec []string) (Booking, Passenger, error) {
	var errs []error
	num := func(col int) int {
		if rec[col] == "" && (csvHeader[col] == "berth_no" || csvHeader[col] == "waitlist_no") {
			return 0
		}
		n, err := strconv.Atoi(rec[col])
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %q is not a number", csvHeader[col], rec[col]))
		}
		return n
	}
	b := Booking{
		PNR: rec[0], CoreRef: rec[1], State: rec[2], Train: rec[3], JourneyDate: rec[4], Class: rec[5], Quota: rec[6],
		From: rec[7], To: rec[8], FromSeq: num(9), ToSeq: num(10), Status: rec[11], WaitlistNo: num(12),
	}
	fare, err := strconv.ParseInt(rec[13], 10, 64)
	if err != nil {
		errs = append(errs, fmt.Errorf("fare_paise %q is not a number", rec[13]))
	}
	b.FarePaise = fare
	if b.AcceptedAt, err = time.Parse(time.RFC3339Nano, rec[14]); err != nil {
		errs = append(errs, fmt.Errorf("accepted_at %q: %w", rec[14], err))
	}
	if rec[15] != "" {
		t, err := time.Parse(time.RFC3339Nano, rec[15])
		if err != nil {
			errs = append(errs, fmt.Errorf("cancelled_at %q: %w", rec[15], err))
		}
		b.CancelledAt = &t
	}
	p := Passenger{Seq: num(16), Name: rec[17], Age: num(18), Gender: rec[19], Coach: rec[20], BerthNo: num(21), BerthType: rec[22]}
	return b, p, errors.Join(errs...)
}
