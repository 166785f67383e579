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
	stmt := string(b.must(t, "GET", "/bank/v1/statements/2025-06-05.csv", bankToken, "", nil).body)
	if !strings.Contains(stmt, "SETTLEMENT-SWP20250604,HDFCN") || !strings.HasSuffix(strings.TrimSpace(stmt), ","+india.Decimal(net-300)) {
		t.Fatalf("statement (net %d, short 300):\n%s", net, stmt)
	}
	b.must(t, "PUT", path, adminToken, "", SettlementFaults{})
	if n := strings.Count(file(), "\n") - 1; n != 12 {
		t.Fatalf("cleared faults: %d lines", n)
	}
}

// A stray credit (a NEFT nobody announced) is set with the settlement
// faults, validated like them, and listed on the statement of its date
// only, after the payouts, with a UTR of its own that repeats across
// fetches; cleared, it is gone.
func TestStrayCreditsOnTheStatement(t *testing.T) {
	t.Parallel()
	base := time.Date(2025, 6, 4, 12, 0, 0, 0, india.IST) // a Wednesday
	start := time.Now()
	b := setup(t, opts{now: func() time.Time { return base.Add(time.Since(start)) }})
	b.captured(t, "swiftpay", "pay-stray-a", 25000)
	path := "/admin/settlement-faults/swiftpay"
	for name, bad := range map[string]StrayCredit{
		"no date":          {Paise: 100},
		"a date of no day": {Date: "2025-02-30", Paise: 100},
		"nothing credited": {Date: "2025-06-05"},
		"a debit":          {Date: "2025-06-05", Paise: -100},
		"beyond any limit": {Date: "2025-06-05", Paise: maxAmountPaise + 1},
		"a line break":     {Date: "2025-06-05", Paise: 100, Narration: "NEFT CR-ACME\nTRAVELS"},
		"too long":         {Date: "2025-06-05", Paise: 100, Narration: strings.Repeat("X", maxNarration+1)},
	} {
		r := b.must(t, "PUT", path, adminToken, "", SettlementFaults{StrayCredits: []StrayCredit{bad}})
		r.wantError(t, 400, pspapi.CodeInvalid)
		if !strings.Contains(string(r.body), "stray_credits[0]") {
			t.Fatalf("%s: the refusal does not name the credit: %s", name, r.body)
		}
	}
	b.must(t, "PUT", path, adminToken, "", SettlementFaults{StrayCredits: make([]StrayCredit, maxStrayCredits+1)}).
		wantError(t, 400, pspapi.CodeInvalid)
	statement := func(date string) string {
		t.Helper()
		return string(b.must(t, "GET", "/bank/v1/statements/"+date+".csv", bankToken, "", nil).body)
	}
	clean := statement("2025-06-05")
	if strings.Count(clean, "\n") != 2 || !strings.Contains(clean, "SETTLEMENT-SWP20250604") {
		t.Fatalf("the refused settings changed the statement:\n%s", clean)
	}

	f := SettlementFaults{StrayCredits: []StrayCredit{
		{Date: "2025-06-05", Paise: 77700, Narration: "NEFT CR-ACME TRAVELS-INV 4411"},
		{Date: "2025-06-05", Paise: 12345},
		{Date: "2025-06-06", Paise: 50000},
	}}
	if r := b.must(t, "PUT", path, adminToken, "", f); r.status != http.StatusOK {
		t.Fatalf("put: %d %s", r.status, r.body)
	}
	if got := decodeAs[SettlementFaults](t, b.must(t, "GET", path, adminToken, "", nil), 200); len(got.StrayCredits) != 3 ||
		got.StrayCredits[0] != f.StrayCredits[0] {
		t.Fatalf("read back %+v", got)
	}
	withStray := statement("2025-06-05")
	if statement("2025-06-05") != withStray {
		t.Fatal("the same statement differs between fetches")
	}
	lines := strings.Split(strings.TrimSpace(withStray), "\n")
	if len(lines) != 4 || lines[1] != strings.Split(strings.TrimSpace(clean), "\n")[1] {
		t.Fatalf("the payout and two stray credits, payout first:\n%s", withStray)
	}
	acme, unknown := strings.Split(lines[2], ","), strings.Split(lines[3], ",")
	if acme[0] != "05-Jun-2025" || acme[2] != "NEFT CR-ACME TRAVELS-INV 4411" || acme[4] != "" || acme[5] != "777.00" ||
		unknown[2] != "NEFT CR-UNKNOWN REMITTER" || unknown[5] != "123.45" {
		t.Fatalf("stray credits:\n%s", withStray)
	}
	payoutUTR := strings.Split(lines[1], ",")[3]
	if !strings.HasPrefix(acme[3], "HDFCN") || acme[3] == unknown[3] || acme[3] == payoutUTR {
		t.Fatalf("UTRs: payout %s, stray %s and %s", payoutUTR, acme[3], unknown[3])
	}
	if next := statement("2025-06-06"); strings.Count(next, "\n") != 2 || !strings.Contains(next, ",500.00") {
		t.Fatalf("the statement of the next day has its own stray credit only:\n%s", next)
	}
	b.must(t, "PUT", path, adminToken, "", SettlementFaults{})
	if got := statement("2025-06-05"); got != clean {
		t.Fatalf("cleared faults: the statement is\n%s", got)
	}
}
