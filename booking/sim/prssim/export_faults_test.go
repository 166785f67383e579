package prssim_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"tatkal/booking/prs"
)

// The export faults drop a booking, change a fare and add PNRs we never
// made, the same way on every fetch; clearing them restores the truth.
func TestExportFaults(t *testing.T) {
	t.Parallel()
	st := newStack(t)
	ctx := context.Background()
	mustSync(t, st.client, confirmed("4300000011", 0, 2, berth{"B1", 1}))
	mustSync(t, st.client, confirmed("4300000012", 0, 2, berth{"B1", 2}))
	mustSync(t, st.client, confirmed("4300000013", 0, 2, berth{"B1", 3}))
	day, _ := time.Parse(time.DateOnly, day1)
	f := prs.ExportFaults{Seed: 7, Drop: prs.ExportPick{PNRs: []string{"4300000011"}},
		ChangeFare: prs.ExportPick{PNRs: []string{"4300000012"}, Paise: 2500}, UnknownPNRs: 2}
	if status, body := st.raw(t, http.MethodPut, "/admin/export-faults", adminToken, f); status != http.StatusOK {
		t.Fatalf("put export faults: %d %s", status, body)
	}
	if status, _ := st.raw(t, http.MethodPut, "/admin/export-faults", adminToken, prs.ExportFaults{UnknownPNRs: -1}); status != http.StatusBadRequest {
		t.Fatalf("a bad setting answered %d", status)
	}
	if status, _ := st.raw(t, http.MethodPut, "/admin/export-faults", apiKey, f); status != http.StatusUnauthorized {
		t.Fatalf("the API key set export faults: %d", status)
	}
	first, err := st.client.Export(ctx, day)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := st.client.Export(ctx, day)
	pnrs := func(bs []prs.Booking) (out []string) {
		for _, b := range bs {
			out = append(out, b.PNR)
		}
		return out
	}
	if !slices.Equal(pnrs(first), pnrs(again)) || len(first) != 4 || slices.Contains(pnrs(first), "4300000011") {
		t.Fatalf("faulty export %v then %v", pnrs(first), pnrs(again))
	}
	base := confirmed("4300000012", 0, 2).FarePaise
	for _, b := range first {
		if b.PNR == "4300000012" && b.FarePaise != base+2500 {
			t.Fatalf("fare %d, want %d", b.FarePaise, base+2500)
		}
	}
	st.raw(t, http.MethodPut, "/admin/export-faults", adminToken, prs.ExportFaults{})
	clean, _ := st.client.Export(ctx, day)
	if want := []string{"4300000011", "4300000012", "4300000013"}; !slices.Equal(pnrs(clean), want) {
		t.Fatalf("clean export %v", pnrs(clean))
	}
}
