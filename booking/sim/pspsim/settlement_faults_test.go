package pspsim

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"tatkal/booking/india"
	"tatkal/booking/payment/pspapi"
)

// Settlement faults are validated, kept, and deterministic: a file fetched
// twice is the same file; a fault by rate hits some lines, not all; the
// bank's payout follows the faulty file, less any short payment.
func TestSettlementFaults(t *testing.T) {
	t.Parallel()
	base := time.Date(2025, 6, 4, 12, 0, 0, 0, india.IST) // a Wednesday
	start := time.Now()
	b := setup(t, opts{now: func() time.Time { return base.Add(time.Since(start)) }})
	var refs []string
	for i := range 12 {
		refs = append(refs, b.captured(t, "swiftpay", "pay-f-"+string(rune('a'+i)), 10000+int64(i)).PSPRef)
	}
	path := "/admin/settlement-faults/swiftpay"
	b.must(t, "PUT", path, adminToken, "", map[string]any{"drop": map[string]any{"rate": 2}}).wantError(t, 400, pspapi.CodeInvalid)
	b.must(t, "PUT", "/admin/settlement-faults/nopay", adminToken, "", map[string]any{}).wantError(t, 404, pspapi.CodeNotFound)
	b.must(t, "PUT", path, apiKey("swiftpay"), "", map[string]any{}).wantError(t, 401, pspapi.CodeUnauthorized)
	f := SettlementFaults{Drop: FaultPick{Rate: 0.5}, Duplicate: FaultPick{Refs: []string{refs[0]}}, ShortPay: FaultPick{Rate: 1, Paise: 300}}
	if r := b.must(t, "PUT", path, adminToken, "", f); r.status != http.StatusOK {
		t.Fatalf("put: %d %s", r.status, r.body)
	}
	if got := decodeAs[SettlementFaults](t, b.must(t, "GET", path, adminToken, "", nil), 200); got.Drop.Rate != 0.5 || got.ShortPay.Paise != 300 {
		t.Fatalf("read back %+v", got)
	}
	file := func() string {
		return string(b.must(t, "GET", "/gw/swiftpay/v1/settlements/2025-06-04.csv", apiKey("swiftpay"), "", nil).body)
	}
	first := file()
	if file() != first {
		t.Fatal("the same day's file differs between fetches")
	}
	lines := strings.Count(first, "\n") - 1
	if lines < 2 || lines >= 12 {
		t.Fatalf("half dropped by rate: %d lines left of 12\n%s", lines, first)
	}
	if strings.Contains(first, refs[0]) && strings.Count(first, refs[0]) != 2 {
		t.Fatalf("the duplicated line appears %d times", strings.Count(first, refs[0]))
	}
	var net int64
	lns, err := b.srv.settlementFile(t.Context(), "swiftpay", time.Date(2025, 6, 4, 0, 0, 0, 0, india.IST))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lns {
		net += l.net()
	}
	stmt := string(b.must(t, "GET", "/bank/v1/statements/2025-06-05.csv", adminToken, "", nil).body)
	if !strings.Contains(stmt, "SETTLEMENT-SWP20250604,HDFCN") || !strings.HasSuffix(strings.TrimSpace(stmt), ","+india.Decimal(net-300)) {
		t.Fatalf("statement (net %d, short 300):\n%s", net, stmt)
	}
	b.must(t, "PUT", path, adminToken, "", SettlementFaults{})
	if n := strings.Count(file(), "\n") - 1; n != 12 {
		t.Fatalf("cleared faults: %d lines", n)
	}
}
