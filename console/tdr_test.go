package console_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"tatkal/booking"
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/teststack"
	"tatkal/booking/payment"
	"tatkal/booking/tdr"
)

// A TDR above the approval limit on the console: finance1's approval is
// the first of two, the page then offers finance1 no approval and refuses
// (and audits) a second one by them; ops may not see the page; finance2's
// approval refunds the whole fare through the refund job. The passengers'
// ID numbers show masked only.
func TestTDRTwoFinancePeopleOnTheConsole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := setup(t, teststack.Options{Work: true})
	_, date := s.DemoShard(t, 4, 0)
	ids, err := seed.Users(ctx, s.Pool, seed.UsersSpec{Count: 1, Prefix: "ctdr", PasswordHash: "x", WalletRupees: 50000})
	teststack.Must(t, err, "seed users")
	var ps []booking.Passenger
	for i := range 4 { // 4 fares of ₹3,052: above the default limit of ₹10,000
		ps = append(ps, booking.Passenger{Name: fmt.Sprintf("Console Tdr %c", 'A'+i), Age: 30 + i, Gender: "M", IDType: "PAN", IDRef: fmt.Sprintf("CTDRP%04dQ", i)})
	}
	h, err := s.Service.Hold(ctx, teststack.Caller(ids[0]), booking.HoldRequest{UserID: ids[0], IdempotencyKey: "ctdr-hold-1", Train: "12951",
		Date: date, Class: "3A", Quota: "TQ", From: "MMCT", To: "NDLS", Passengers: ps})
	if err != nil || h.Status != "HELD" {
		t.Fatalf("hold %+v %v", h, err)
	}
	_, err = s.Payments.Initiate(ctx, teststack.Caller(ids[0]), payment.InitiateRequest{HoldID: h.HoldID, Method: payment.Wallet, IdempotencyKey: "ctdr-pay-1"})
	teststack.Must(t, err, "pay")
	var departs time.Time
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT ($1::date + departs_at) AT TIME ZONE 'Asia/Kolkata' FROM trains WHERE number = '12951'`,
		date.Format(time.DateOnly)).Scan(&departs), "departure")
	filed, err := (&tdr.Service{Pool: s.Pool, Now: func() time.Time { return departs.Add(-time.Hour) }}).File(ctx, ids[0], h.HoldID,
		tdr.Claim{Reason: tdr.TrainNotRun, Note: "cancelled"})
	teststack.Must(t, err, "file")
	row := fmt.Sprintf(`data-testid="tdr-%d"`, filed.ID)
	approve := fmt.Sprintf("/console/finance/tdrs/%d/approve", filed.ID)

	ops := newBrowser(t, s.Server.URL)
	ops.login("ops1")
	if code, _, _ := ops.get("/console/finance/tdrs"); code != http.StatusForbidden {
		t.Fatalf("ops sees the TDRs: %d", code)
	}
	f1 := newBrowser(t, s.Server.URL)
	f1.login("finance1")
	_, page, _ := f1.get("/console/finance/tdrs")
	if !strings.Contains(page, row) || !strings.Contains(page, "••••") || strings.Contains(page, "CTDRP0000Q") {
		t.Fatalf("the TDR list (IDs masked):\n%.3000s", page)
	}
	if code, _, hdr := f1.post(approve, nil); code != http.StatusSeeOther {
		t.Fatalf("first approval: %d %v", code, hdr)
	}
	_, page, _ = f1.get("/console/finance/tdrs")
	if !strings.Contains(page, fmt.Sprintf(`data-testid="tdr-mine-%d"`, filed.ID)) || strings.Contains(page, fmt.Sprintf(`data-testid="tdr-approve-%d"`, filed.ID)) {
		t.Fatalf("after my first approval the page still offers me one:\n%.3000s", page)
	}
	if code, page, _ := f1.post(approve, nil); code != http.StatusForbidden || !strings.Contains(page, "second person") {
		t.Fatalf("own second approval: %d\n%.2000s", code, page)
	}
	var refusedAudit int
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE actor = 'finance1' AND action = 'tdr.approve.refused'`).Scan(&refusedAudit), "audit")
	if refusedAudit != 1 {
		t.Fatalf("the refused approval is audited %d times", refusedAudit)
	}
	f2 := newBrowser(t, s.Server.URL)
	f2.login("finance2")
	if code, _, _ := f2.post(approve, nil); code != http.StatusSeeOther {
		t.Fatalf("second approval: %d", code)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var state, reason string
		var amount int64
		teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT r.state, r.reason, r.amount_paise FROM tdrs t JOIN refunds r ON r.id = t.refund_id WHERE t.id = $1`,
			filed.ID).Scan(&state, &reason, &amount), "refund")
		if reason != booking.RefundTDR || amount != filed.AmountPaise {
			t.Fatalf("refund %s of %d, want TDR of %d", reason, amount, filed.AmountPaise)
		}
		if state == "PROCESSED" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("refund still %s", state)
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, page, _ = f2.get("/console/finance/tdrs")
	if !strings.Contains(page, fmt.Sprintf(`data-testid="tdr-refund-%d"`, filed.ID)) || !strings.Contains(page, "first approval: finance1") {
		t.Fatalf("decided TDR:\n%.3000s", page)
	}
}
