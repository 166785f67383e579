package prssim_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"net/http"
	"slices"
	"testing"
	"time"

	"tatkal/booking/prs"
)

func TestExportByDate(t *testing.T) {
	t.Parallel()
	st := newStack(t)
	ctx := context.Background()
	mustSync(t, st.client, confirmed("4300000003", 0, 2, berth{"B1", 1}, berth{"B1", 2}))
	mustSync(t, st.client, confirmed("4300000001", 1, 4, berth{"B1", 3}))
	mustSync(t, st.client, waitlisted("4300000002", 4))
	if err := st.client.Cancel(ctx, "4300000001"); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	other := confirmed("4300000004", 0, 2, berth{"B1", 1})
	other.JourneyDate = day2
	mustSync(t, st.client, other)

	// The date's calendar day counts, whatever its location.
	ist := time.FixedZone("IST", 5*3600+1800)
	got, err := st.client.Export(ctx, time.Date(2026, 3, 10, 0, 0, 0, 0, ist))
	if err != nil {
		t.Fatalf("export: %v", err)
	}
	var pnrs, states []string
	for _, b := range got {
		pnrs = append(pnrs, b.PNR)
		states = append(states, b.State)
		if b.JourneyDate != day1 || b.CoreRef == "" || b.AcceptedAt.IsZero() {
			t.Errorf("exported booking incomplete: %+v", b)
		}
	}
	if want := []string{"4300000001", "4300000002", "4300000003"}; !slices.Equal(pnrs, want) {
		t.Fatalf("exported PNRs %v, want %v", pnrs, want)
	}
	if want := []string{prs.StateCancelled, prs.StatusWaitlisted, prs.StatusConfirmed}; !slices.Equal(states, want) {
		t.Fatalf("exported states %v, want %v", states, want)
	}
	if got[0].CancelledAt == nil || got[1].WaitlistNo != 4 || len(got[2].Passengers) != 2 || got[2].Passengers[1].BerthNo != 2 {
		t.Fatalf("exported details wrong: %+v", got)
	}

	// CSV: a header, then one row per passenger, same content as JSON.
	status, data := st.raw(t, http.MethodGet, "/v1/exports/"+day1+"?format=csv", apiKey, nil)
	if status != http.StatusOK {
		t.Fatalf("csv export: %d %s", status, data)
	}
	rows, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil {
		t.Fatalf("csv: %v", err)
	}
	if len(rows) != 1+4 || !slices.Equal(rows[0], prs.CSVHeader()) {
		t.Fatalf("csv has %d rows, header %v:\n%s", len(rows), rows[0], data)
	}
	fromCSV, err := prs.ReadCSV(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("ReadCSV: %v", err)
	}
	if a, b := mustJSON(t, fromCSV), mustJSON(t, got); a != b {
		t.Fatalf("CSV and JSON exports differ:\n csv  %s\n json %s", a, b)
	}

	// An empty day is an empty list in both forms.
	if status, data := st.raw(t, http.MethodGet, "/v1/exports/2026-04-01", apiKey, nil); status != http.StatusOK || string(bytes.TrimSpace(data)) != "[]" {
		t.Fatalf("empty day json: %d %q", status, data)
	}
	status, data = st.raw(t, http.MethodGet, "/v1/exports/2026-04-01?format=csv", apiKey, nil)
	if empty, err := prs.ReadCSV(bytes.NewReader(data)); status != http.StatusOK || err != nil || len(empty) != 0 {
		t.Fatalf("empty day csv: %d %q %v", status, data, err)
	}

	for _, path := range []string{"/v1/exports/2026-13-01", "/v1/exports/yesterday", "/v1/exports/" + day1 + "?format=xml"} {
		if status, body := st.raw(t, http.MethodGet, path, apiKey, nil); status != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", path, status, body)
		}
	}
}

func TestReadCSVRefusesGarbage(t *testing.T) {
	t.Parallel()
	for name, in := range map[string]string{
		"empty":       "",
		"bad header":  "pnr,core_ref\n",
		"short row":   joinCSV(prs.CSVHeader()) + "4300000001,CR1\n",
		"bad numbers": joinCSV(prs.CSVHeader()) + "4300000001,CR1,CONFIRMED,12951,2026-03-10,3A,TQ,NDLS,MMCT,x,2,CONFIRMED,0,100,2026-03-01T00:00:00Z,,1,A,30,F,B1,1,LB\n",
	} {
		if _, err := prs.ReadCSV(bytes.NewReader([]byte(in))); err == nil {
			t.Errorf("%s: ReadCSV accepted %q", name, in)
		}
	}
}

func joinCSV(row []string) string {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.Write(row) //nolint:errcheck
	w.Flush()
	return b.String()
}
