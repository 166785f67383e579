package api_test

import (
	"context"
	"net/http"
	"testing"

	"tatkal/booking"
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
	"tatkal/booking/payment"
)

// /v1 TDR: a bad claim and one five days before the train are refused with
// their reasons and record nothing; another account's booking is not
// found; no TDR reads 404 NO_TDR.
func TestTDRRefusedByTheAPI(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{})
	_, date := s.DemoShard(t, 2, 0)
	ids, err := seed.Users(ctx, s.Pool, seed.UsersSpec{Count: 2, Prefix: "atdr", PasswordHash: "x", WalletRupees: 20000})
	teststack.Must(t, err, "seed users")
	h, err := s.Service.Hold(ctx, teststack.Caller(ids[0]), booking.HoldRequest{UserID: ids[0], IdempotencyKey: "atdr-hold-1", Train: "12951",
		Date: date, Class: "3A", Quota: "TQ", From: "MMCT", To: "NDLS", Passengers: []booking.Passenger{{Name: "Api Tdr", Age: 50, Gender: "M", IDType: "PAN", IDRef: "APITD1234R"}}})
	if err != nil || h.Status != "HELD" {
		t.Fatalf("hold %+v %v", h, err)
	}
	_, err = s.Payments.Initiate(ctx, teststack.Caller(ids[0]), payment.InitiateRequest{HoldID: h.HoldID, Method: payment.Wallet, IdempotencyKey: "atdr-pay-1"})
	teststack.Must(t, err, "pay")
	url := s.Server.URL + "/v1/bookings/" + h.HoldID.String() + "/tdr"
	for _, c := range []struct {
		user   int64
		body   any
		status int
		reason string
	}{
		{ids[0], map[string]any{"reason": "TRAIN_LATE", "late_minutes": 90}, http.StatusBadRequest, "BAD_TDR_DELAY"},
		{ids[0], map[string]any{"reason": "LATE"}, http.StatusBadRequest, "BAD_TDR_REASON"},
		{ids[0], map[string]any{"reason": "TRAIN_NOT_RUN", "refund": 1}, http.StatusBadRequest, "UNKNOWN_FIELD"},
		{ids[0], map[string]any{"reason": "TRAIN_NOT_RUN"}, http.StatusConflict, "TDR_TOO_EARLY"},
		{ids[1], map[string]any{"reason": "TRAIN_NOT_RUN"}, http.StatusNotFound, "NO_SUCH_BOOKING"},
	} {
		r := testenv.Call(t, testenv.Request{Method: "POST", URL: url, Token: s.Token(c.user), Body: c.body})
		if r.Status != c.status || r.JSON["reason"] != c.reason {
			t.Fatalf("%v: %d %s; want %d %s", c.body, r.Status, r.Raw, c.status, c.reason)
		}
	}
	r := testenv.Call(t, testenv.Request{Method: "GET", URL: url, Token: s.Token(ids[0])})
	if r.Status != http.StatusNotFound || r.JSON["reason"] != "NO_TDR" {
		t.Fatalf("get: %d %s", r.Status, r.Raw)
	}
	var n int
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM tdrs`).Scan(&n), "count")
	if n != 0 {
		t.Fatalf("%d TDRs recorded by refused claims", n)
	}
}
