package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"tatkal/booking"
	"tatkal/booking/india"
	"tatkal/booking/lab/teststack"
	"tatkal/booking/payment"
)

// The bank's return page shows the PNR and the amount to the signed-in
// owner of the payment only: not to another signed-in passenger, not to
// anyone holding the link.
func TestReturnPageShowsPNROnlyToOwner(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{})
	_, date := s.DemoShard(t, 4, 0)
	ctx := context.Background()
	users := s.Users(t, "own", 2)
	owner := users[0]
	h, err := s.Service.Hold(ctx, teststack.Caller(owner), booking.HoldRequest{UserID: owner, IdempotencyKey: "own-hold-1", Train: "12951",
		Date: date, Class: "3A", From: "MMCT", To: "NDLS", Passengers: []booking.Passenger{{Name: "Meera Pillai", Age: 41, Gender: "F",
			IDType: "PAN", IDRef: "ABCDE1234F"}}})
	if err != nil || h.Status != "HELD" {
		t.Fatalf("hold: %+v %v", h, err)
	}
	v, err := s.Payments.Initiate(ctx, teststack.Caller(owner), payment.InitiateRequest{HoldID: h.HoldID, Method: payment.UPI, VPA: "meera@okbank", IdempotencyKey: "own-pay-1"})
	if err != nil {
		t.Fatalf("UPI pay: %+v %v", v, err)
	}
	amount := india.Rupees(v.AmountPaise) // Indian digit grouping, ₹3,052.00
	path := "/payments/return?payment_id=" + v.ID.String()

	anon := newBrowser(t, s)
	if status, _, page := anon.get(path); status != 200 || strings.Contains(page, amount) || strings.Contains(page, `data-testid="booking-link"`) {
		t.Fatalf("anonymous return page: %d, shows the amount %s or a booking link:\n%s", status, amount, page)
	}
	other := newBrowser(t, s)
	other.signIn("own00002", "pw-own")
	if status, _, page := other.get(path); status != 200 || strings.Contains(page, amount) || strings.Contains(page, h.HoldID.String()) {
		t.Fatalf("another passenger's return page: %d, shows the amount %s or the hold:\n%s", status, amount, page)
	}
	me := newBrowser(t, s)
	me.signIn("own00001", "pw-own")
	status, _, page := me.get(path)
	if status != 200 || !strings.Contains(page, amount) || !strings.Contains(page, "/bookings/"+h.HoldID.String()) {
		t.Fatalf("owner's return page: %d, lacks the amount %s or the booking link:\n%s", status, amount, page)
	}
}

// Signing in goes through the API's login guard: wrong passwords are
// refused, and a session signed out on the site is dead for the API too.
func TestSignInOutAndCSRF(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{})
	s.Users(t, "sio", 1)
	b := newBrowser(t, s)
	if status, _, page := b.post("/signin", "/signin", url.Values{"login": {"sio00001"}, "password": {"wrong"}}); status != http.StatusUnauthorized ||
		!strings.Contains(page, "Wrong user ID or password") {
		t.Fatalf("wrong password: %d %.400s", status, page)
	}
	b.signIn("sio00001", "pw-sio")
	if status, _, page := b.get("/passengers"); status != 200 || !strings.Contains(page, "sio00001") {
		t.Fatalf("signed-in page: %d %.400s", status, page)
	}
	// A form posted without this session's token changes nothing.
	req, _ := http.NewRequest(http.MethodPost, s.Server.URL+"/passengers", strings.NewReader(url.Values{"csrf": {"forged"}, "name": {"Ravi Kumar"},
		"age": {"30"}, "gender": {"M"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := b.c.Do(req)
	teststack.Must(t, err, "forged post")
	resp.Body.Close()
	var n int
	teststack.Must(t, s.Pool.QueryRow(context.Background(), `SELECT count(*) FROM passenger_master WHERE name = 'Ravi Kumar'`).Scan(&n), "count")
	if resp.StatusCode != http.StatusForbidden || n != 0 {
		t.Fatalf("forged form: %d, %d passengers saved", resp.StatusCode, n)
	}
	u, _ := url.Parse(s.Server.URL)
	var token string
	for _, c := range b.c.Jar.Cookies(u) {
		if c.Name == "tk_session" {
			token = c.Value
		}
	}
	if status, loc, _ := b.post("/passengers", "/signout", url.Values{}); status != http.StatusSeeOther || loc != "/signin" {
		t.Fatalf("sign out: %d %s", status, loc)
	}
	req, _ = http.NewRequest(http.MethodGet, s.Server.URL+"/v1/wallet", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	// The revocation list is reloaded about once a second.
	for i := 0; ; i++ {
		resp, err := http.DefaultClient.Do(req)
		teststack.Must(t, err, "API with the old token")
		resp.Body.Close()
		if resp.StatusCode == http.StatusUnauthorized {
			break
		}
		if i > 50 {
			t.Fatalf("the signed-out token still works on the API: %d", resp.StatusCode)
		}
		sleep()
	}
}
