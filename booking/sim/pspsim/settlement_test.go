package pspsim

import (
	"encoding/csv"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"tatkal/booking/india"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/payment/pspapi"
)

func TestSettlementFile(t *testing.T) {
	t.Parallel()
	// The simulator's clock runs from Saturday noon IST, so T+1 skips Sunday.
	base := time.Date(2025, 6, 7, 12, 0, 0, 0, india.IST)
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
	testenv.Eventually(t, 3*time.Second, "refund processed", func() error {
		return testenv.Want(decodeAs[pspapi.Refund](t, b.must(t, "GET", "/gw/swiftpay/v1/refunds/"+rf.RefundRef, apiKey("swiftpay"), "", nil), 200).Status == pspapi.RefundProcessed, "not yet")
	})
	// The fee is the one in force at capture, whatever changes later.
	b.putRoute(t, "swiftpay", pspapi.Card, func(rc *pspapi.RouteConfig) { rc.FeeBps = 500 })

	r := b.must(t, "GET", "/gw/swiftpay/v1/settlements/2025-06-07.csv", apiKey("swiftpay"), "", nil)
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/csv") || r.header.Get(HeaderSettlementFormat) != FormatSwiftpay {
		t.Fatalf("settlement: %d %s %s", r.status, r.header, r.body)
	}
	rows, err := csv.NewReader(strings.NewReader(string(r.body))).ReadAll()
	if err != nil {
		t.Fatalf("parse CSV: %v\n%s", err, r.body)
	}
	if !slices.Equal(rows[0], pspapi.SwiftpayColumns) {
		t.Fatalf("header = %v", rows[0])
	}
	// swiftpay writes signed rupees with two decimals and DD/MM/YYYY dates.
	type line struct {
		typ, psp, merchant, refund, refundMerchant, method string
		gross, mdr, gst, net                               string
	}
	var got []line
	for _, row := range rows[1:] {
		got = append(got, line{row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7], row[8], row[9]})
		if row[11] != "09/06/2025" || row[12] != "SWP20250607" {
			t.Errorf("settlement date, payout = %s, %s; want 09/06/2025 (Saturday's T+1 skips Sunday), SWP20250607", row[11], row[12])
		}
		if et, err := time.ParseInLocation("02/01/2006 15:04:05", row[10], india.IST); err != nil || et.Format(time.DateOnly) != "2025-06-07" {
			t.Errorf("txn date = %q", row[10])
		}
	}
	want := []line{
		// 1.8% of 123.45 is 2.2221 → 2.22; GST 18% of it 0.3996 → 0.40
		{"CAPTURE", card.PSPRef, "pay-s-card", "", "", pspapi.Card, "123.45", "2.22", "0.40", "120.83"},
		{"CAPTURE", nb.PSPRef, "pay-s-nb", "", "", pspapi.NetBanking, "1000.00", "15.00", "2.70", "982.30"},
		{"CAPTURE", upi.PSPRef, "pay-s-upi", "", "", pspapi.UPI, "50.00", "0.00", "0.00", "50.00"},
		{"REFUND", nb.PSPRef, "pay-s-nb", rf.RefundRef, "rf-s", pspapi.NetBanking, "-50.00", "0.00", "0.00", "-50.00"},
	}
	byRef := func(a, b line) int { return strings.Compare(a.typ+a.psp, b.typ+b.psp) }
	slices.SortFunc(got, byRef)
	slices.SortFunc(want, byRef)
	if !slices.Equal(got, want) {
		t.Fatalf("rows:\n got %+v\nwant %+v", got, want)
	}
	if strings.Contains(string(r.body), other.PSPRef) || strings.Contains(string(r.body), failed.PSPRef) {
		t.Fatal("the file carries another gateway's or a failed payment")
	}

	// bharatpg's file has its own payment, in its own format: paise, YYYYMMDD, SALE.
	r = b.must(t, "GET", "/gw/bharatpg/v1/settlements/2025-06-07.csv", apiKey("bharatpg"), "", nil)
	rows, err = csv.NewReader(strings.NewReader(string(r.body))).ReadAll()
	if err != nil || len(rows) != 2 || !slices.Equal(rows[0], pspapi.BharatpgColumns) || r.header.Get(HeaderSettlementFormat) != FormatBharatpg {
		t.Fatalf("bharatpg file (%v):\n%s", err, r.body)
	}
	if g := rows[1]; g[0] != "20250609" || g[1] != "BPGUTR20250607" || g[2] != "SALE" || g[3] != other.PSPRef || g[4] != "pay-s-other" ||
		g[8] != "777" || g[9] != "14" || g[10] != "3" || g[11] != "760" {
		t.Fatalf("bharatpg line = %v", g)
	}

	// The bank credits each file's net on its settlement date.
	r = b.must(t, "GET", "/bank/v1/statements/2025-06-09.csv", bankToken, "", nil)
	rows, err = csv.NewReader(strings.NewReader(string(r.body))).ReadAll()
	if err != nil || r.status != 200 || !slices.Equal(rows[0], BankColumns) || len(rows) != 3 {
		t.Fatalf("bank statement (%v):\n%s", err, r.body)
	}
	if rows[1][2] != "NEFT CR-BHARATPG SETTLEMENT-BPGUTR20250607" || rows[1][5] != "7.60" ||
		rows[2][2] != "NEFT CR-SWIFTPAY SETTLEMENT-SWP20250607" || rows[2][5] != "1103.13" || rows[2][4] != "" || rows[2][0] != "09-Jun-2025" {
		t.Fatalf("bank statement:\n%s", r.body)
	}
	b.must(t, "GET", "/bank/v1/statements/2025-06-09.csv", apiKey("swiftpay"), "", nil).wantError(t, 401, pspapi.CodeUnauthorized)
	// The simulator's admin token is no bank credential.
	b.must(t, "GET", "/bank/v1/statements/2025-06-09.csv", adminToken, "", nil).wantError(t, 401, pspapi.CodeUnauthorized)

	r = b.must(t, "GET", "/gw/swiftpay/v1/settlements/2025-06-06.csv", apiKey("swiftpay"), "", nil)
	if strings.TrimSpace(string(r.body)) != strings.Join(pspapi.SwiftpayColumns, ",") {
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
		d, _ := time.ParseInLocation(time.DateOnly, in, india.IST)
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
