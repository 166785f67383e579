package pspsim

import (
	"encoding/csv"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"tatkal/booking/payment/pspapi"
)

func TestSettlementFile(t *testing.T) {
	t.Parallel()
	// The simulator's clock runs from Saturday noon IST, so T+1 skips Sunday.
	base := time.Date(2025, 6, 7, 12, 0, 0, 0, ist())
	start := time.Now()
	clock := func() time.Time { return base.Add(time.Since(start)) }
	b := setup(t, opts{now: clock})

	card := b.captured(t, "swiftpay", "pay-s-card", 12345)
	nb := b.create(t, "swiftpay", b.createReq("pay-s-nb", pspapi.NetBanking, 100000))
	upi := b.create(t, "swiftpay", b.createReq("pay-s-upi", pspapi.UPI, 5000))
	b.hooks.waitStatus(t, nb.PSPRef, pspapi.StatusSuccess, 3*time.Second)
	b.hooks.waitStatus(t, upi.PSPRef, pspapi.StatusSuccess, 3*time.Second)
	other := b.captured(t, "bharatpg", "pay-s-other", 777)
	b.putRoute(t, "swiftpay", pspapi.UPI, func(rc *pspapi.RouteConfig) { rc.DeclineRate = 1 })
	failed := b.create(t, "swiftpay", b.createReq("pay-s-failed", pspapi.UPI, 999))
	b.hooks.waitStatus(t, failed.PSPRef, pspapi.StatusFailed, 3*time.Second)
	rf := decodeAs[pspapi.Refund](t, b.refund(t, "swiftpay", "rk-s", pspapi.CreateRefund{PSPRef: nb.PSPRef, AmountPaise: 5000, MerchantRef: "rf-s"}), http.StatusCreated)
	eventually(t, 3*time.Second, "refund processed", func() bool {
		return decodeAs[pspapi.Refund](t, b.must(t, "GET", "/gw/swiftpay/v1/refunds/"+rf.RefundRef, apiKey("swiftpay"), "", nil), 200).Status == pspapi.RefundProcessed
	})
	// The fee is the one in force at capture, whatever changes later.
	b.putRoute(t, "swiftpay", pspapi.Card, func(rc *pspapi.RouteConfig) { rc.FeeBps = 500 })

	r := b.must(t, "GET", "/gw/swiftpay/v1/settlements/2025-06-07.csv", apiKey("swiftpay"), "", nil)
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/csv") {
		t.Fatalf("settlement: %d %s %s", r.status, r.header.Get("Content-Type"), r.body)
	}
	rows, err := csv.NewReader(strings.NewReader(string(r.body))).ReadAll()
	if err != nil {
		t.Fatalf("parse CSV: %v\n%s", err, r.body)
	}
	if !slices.Equal(rows[0], pspapi.SettlementColumns) {
		t.Fatalf("header = %v", rows[0])
	}
	type line struct {
		typ, psp, merchant, refund string
		amount, fee, net           int64
	}
	var got []line
	var sumAmount, sumFee, sumNet int64
	for _, row := range rows[1:] {
		n := func(i int) int64 {
			v, err := strconv.ParseInt(row[i], 10, 64)
			if err != nil {
				t.Fatalf("column %s = %q", pspapi.SettlementColumns[i], row[i])
			}
			return v
		}
		got = append(got, line{row[0], row[1], row[2], row[3], n(4), n(5), n(6)})
		sumAmount, sumFee, sumNet = sumAmount+n(4), sumFee+n(5), sumNet+n(6)
		if row[8] != "2025-06-09" {
			t.Errorf("settlement_date = %s, want 2025-06-09 (Saturday's T+1 skips Sunday)", row[8])
		}
		et, err := time.Parse(time.RFC3339, row[7])
		if err != nil || et.Format(time.DateOnly) != "2025-06-07" || !strings.HasSuffix(row[7], "+05:30") {
			t.Errorf("event_time = %q", row[7])
		}
	}
	want := []line{
		{"PAYMENT", card.PSPRef, "pay-s-card", "", 12345, 222, 12123}, // 1.8% of 123.45 is 2.2221
		{"PAYMENT", nb.PSPRef, "pay-s-nb", "", 100000, 1500, 98500},
		{"PAYMENT", upi.PSPRef, "pay-s-upi", "", 5000, 0, 5000},
		{"REFUND", nb.PSPRef, "rf-s", rf.RefundRef, -5000, 0, -5000},
	}
	byRef := func(a, b line) int { return strings.Compare(a.typ+a.psp, b.typ+b.psp) }
	slices.SortFunc(got, byRef)
	slices.SortFunc(want, byRef)
	if !slices.Equal(got, want) {
		t.Fatalf("rows:\n got %+v\nwant %+v", got, want)
	}
	if sumAmount != 112345 || sumFee != 1722 || sumNet != 110623 || sumAmount-sumFee != sumNet {
		t.Fatalf("sums amount %d fee %d net %d", sumAmount, sumFee, sumNet)
	}
	if strings.Contains(string(r.body), other.PSPRef) || strings.Contains(string(r.body), failed.PSPRef) {
		t.Fatal("the file carries another gateway's or a failed payment")
	}

	// bharatpg's file has its own payment; the day before is empty.
	r = b.must(t, "GET", "/gw/bharatpg/v1/settlements/2025-06-07.csv", apiKey("bharatpg"), "", nil)
	if lines := strings.Split(strings.TrimSpace(string(r.body)), "\n"); len(lines) != 2 || !strings.Contains(lines[1], other.PSPRef) {
		t.Fatalf("bharatpg file:\n%s", r.body)
	}
	r = b.must(t, "GET", "/gw/swiftpay/v1/settlements/2025-06-06.csv", apiKey("swiftpay"), "", nil)
	if strings.TrimSpace(string(r.body)) != strings.Join(pspapi.SettlementColumns, ",") {
		t.Fatalf("empty day:\n%s", r.body)
	}
	b.must(t, "GET", "/gw/swiftpay/v1/settlements/2025-13-01.csv", apiKey("swiftpay"), "", nil).wantError(t, 400, pspapi.CodeInvalid)
	b.must(t, "GET", "/gw/swiftpay/v1/settlements/2025-06-07", apiKey("swiftpay"), "", nil).wantError(t, 404, pspapi.CodeNotFound)
	b.must(t, "GET", "/gw/swiftpay/v1/settlements/2025-06-07.csv", "", "", nil).wantError(t, 401, pspapi.CodeUnauthorized)
}

func TestNextBusinessDay(t *testing.T) {
	for in, want := range map[string]string{
		"2025-06-06": "2025-06-07", // Friday → Saturday
		"2025-06-07": "2025-06-09", // Saturday → Monday
		"2025-06-08": "2025-06-09", // Sunday → Monday
		"2025-12-31": "2026-01-01",
	} {
		d, _ := time.ParseInLocation(time.DateOnly, in, ist())
		if got := nextBusinessDay(d).Format(time.DateOnly); got != want {
			t.Errorf("nextBusinessDay(%s) = %s, want %s", in, got, want)
		}
	}
	if got := fee(12345, 180); got != 222 {
		t.Errorf("fee(12345, 180) = %d", got)
	}
	if got := fee(250, 200); got != 5 {
		t.Errorf("fee(250, 200) = %d", got)
	}
	if got := fee(25, 200); got != 1 { // 0.5 paise rounds up
		t.Errorf("fee(25, 200) = %d", got)
	}
}
