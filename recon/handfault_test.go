package recon

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"tatkal/booking/india"
)

// A finance analyst's faults: copies of the real files (as the issuers
// serve them) edited line by line and uploaded, not the simulators' fault
// knobs.

// realFile is an issuer's file as our fetch job would download it: the
// gateway's settlement file (SourceSettlement, gw), the bank's statement
// (SourceBank) or the core's export (SourceCore) of day.
func (w *world) realFile(source, gw string, day time.Time) string {
	w.t.Helper()
	d := day.Format(time.DateOnly)
	var url, token string
	switch source {
	case SourceSettlement:
		url, token = fmt.Sprintf("%s/gw/%s/v1/settlements/%s.csv", w.pspURL, gw, d), w.key(gw)
	case SourceBank:
		url, token = fmt.Sprintf("%s/bank/v1/statements/%s.csv", w.pspURL, d), bankCred
	default:
		url, token = fmt.Sprintf("%s/v1/exports/%s?format=csv", w.prsURL, d), prsKey
	}
	req, err := http.NewRequestWithContext(w.ctx, http.MethodGet, url, nil)
	w.must(err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := w.http.Do(req)
	w.must(err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	w.must(err)
	if resp.StatusCode != http.StatusOK {
		w.t.Fatalf("GET %s: %s: %s", url, resp.Status, body)
	}
	return string(body)
}

// editCSV rewrites a file's data rows (the header stays): edit changes a
// row in place and says whether to keep it; more rows are appended.
func (w *world) editCSV(body string, edit func(rec []string) bool, more ...[]string) string {
	w.t.Helper()
	recs, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	w.must(err)
	out := recs[:1]
	for _, r := range recs[1:] {
		if edit == nil || edit(r) {
			out = append(out, r)
		}
	}
	var b bytes.Buffer
	cw := csv.NewWriter(&b)
	w.must(cw.WriteAll(append(out, more...)))
	return b.String()
}

// upload ingests a file as a finance person brings it.
func (w *world) upload(source, gw string, day time.Time, body string) FileInfo {
	w.t.Helper()
	f, err := w.svc.Ingest(w.ctx, FileMeta{Source: source, Gateway: gw, BusinessDate: day, By: "finance1",
		Name: strings.ToLower(source) + "-edited.csv"}, strings.NewReader(body))
	w.must(err)
	if f.Replayed {
		w.t.Fatalf("the edited %s file is the one already ingested", source)
	}
	return f
}

// paiseOf parses a file's rupees ("1234.56", "-12.5") into paise.
func (w *world) paiseOf(rupees string) int64 {
	w.t.Helper()
	return w.parse(func(fe *fieldErrs) int64 { return fe.rupees("amount", rupees) })
}

// paise parses a file's whole number of paise.
func (w *world) paise(v string) int64 {
	w.t.Helper()
	return w.parse(func(fe *fieldErrs) int64 { return fe.paise("amount", v) })
}

// parse reads one field as the parsers do, failing the test on a bad one.
func (w *world) parse(field func(*fieldErrs) int64) int64 {
	w.t.Helper()
	fe := &fieldErrs{}
	p := field(fe)
	w.must(fe.err())
	return p
}

// rupeesOf writes paise as the files do.
func rupeesOf(paise int64) string { return india.Decimal(paise) }
