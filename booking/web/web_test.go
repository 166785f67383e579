package web_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"tatkal/booking"
	"tatkal/booking/india"
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/teststack"
	"tatkal/booking/payment"
)

// The page a bank redirects to is reached without a sign-in: it says how
// the payment stands but shows neither the PNR nor the amount.
func TestReturnPageShowsNoPNROrAmount(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{})
	_, date := s.DemoShard(t, 4, 0)
	ctx := context.Background()
	ids, err := seed.Users(ctx, s.Pool, seed.UsersSpec{Count: 1, Prefix: "ret", PasswordHash: "x", WalletRupees: 20000})
	teststack.Must(t, err, "seed users")
	user := ids[0]
	h, err := s.Service.Hold(ctx, teststack.Caller(user), booking.HoldRequest{UserID: user, IdempotencyKey: "ret-hold-1", Train: "12951",
		Date: date, Class: "3A", From: "MMCT", To: "NDLS", Passengers: []booking.Passenger{{Name: "Meera Pillai", Age: 41, Gender: "F",
			IDType: "PAN", IDRef: "ABCDE1234F"}}})
	if err != nil || h.Status != "HELD" {
		t.Fatalf("hold: %+v %v", h, err)
	}
	v, err := s.Payments.Initiate(ctx, teststack.Caller(user), payment.InitiateRequest{HoldID: h.HoldID, Method: payment.Wallet, IdempotencyKey: "ret-pay-1"})
	if err != nil || v.State != payment.Success {
		t.Fatalf("wallet pay: %+v %v", v, err)
	}
	var pnr string
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT pnr FROM bookings WHERE hold_id = $1`, h.HoldID).Scan(&pnr), "read PNR")
	resp, err := http.Get(s.Server.URL + "/payments/return?payment_id=" + v.ID.String())
	teststack.Must(t, err, "GET return page")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(b)
	if resp.StatusCode != 200 || !strings.Contains(page, "Ticket booked") {
		t.Fatalf("return page: %d %.1000s", resp.StatusCode, page)
	}
	if strings.Contains(page, pnr) || strings.Contains(page, india.Decimal(v.AmountPaise)) || strings.Contains(page, `data-testid="pnr"`) {
		t.Fatalf("return page shows the PNR %s or the amount %s to anyone with the link:\n%s", pnr, india.Decimal(v.AmountPaise), page)
	}
}
