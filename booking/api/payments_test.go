package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"tatkal/booking/payment/pspapi"
	"tatkal/booking/payment/pspsim"
	"tatkal/booking/seed"
	"tatkal/booking/teststack"
)

// A passenger pays over HTTP: the wallet confirms at once (CONFIRMING until
// the core acknowledges, then CONFIRMED); UPI tells them to approve and by
// when they get a ticket or an automatic refund.
func TestPayOverHTTPAndWhatThePassengerIsTold(t *testing.T) {
	t.Parallel()
	var routes []pspapi.RouteConfig
	for _, rc := range pspsim.DefaultRoutes() {
		rc.LatencyP50Ms, rc.LatencyP99Ms, rc.AutoApproveMs = 5, 20, -1
		rc.TimeoutRate, rc.DeclineRate, rc.PendingRate, rc.LateSuccessRate, rc.LostCallbackRate, rc.DuplicateCallbackRate, rc.AbandonRate = 0, 0, 0, 0, 0, 0, 0
		routes = append(routes, rc)
	}
	s := teststack.New(t, teststack.Options{Work: true, Routes: routes})
	_, date := s.DemoShard(t, 8, 0)
	ids, err := seed.Users(context.Background(), s.Pool, seed.UsersSpec{Count: 2, Prefix: "hp", PasswordHash: "x", WalletRupees: 10000})
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(s, ids[0])
	h := c.hold(t, "http-pay-hold-1", holdBody(date, "MMCT", "NDLS", 1))
	holdID := h.body["hold_id"].(string)
	w := c.do(t, "GET", "/v1/wallet", nil, "")
	if w.status != 200 || w.body["balance_paise"].(float64) != 1000000 {
		t.Fatalf("wallet: %s", w.raw)
	}
	bad := c.do(t, "POST", "/v1/payments/initiate", nil, fmt.Sprintf(`{"hold_id":%q,"method":"CHEQUE","idempotency_key":"http-pay-bad-1"}`, holdID))
	if bad.status != 400 || bad.body["reason"] != "BAD_METHOD" {
		t.Fatalf("bad method: %s", bad.raw)
	}
	pay := c.do(t, "POST", "/v1/payments/initiate", nil, fmt.Sprintf(`{"hold_id":%q,"method":"WALLET","idempotency_key":"http-pay-1"}`, holdID))
	if pay.status != 201 || pay.body["state"] != "SUCCESS" {
		t.Fatalf("wallet pay: %d %s", pay.status, pay.raw)
	}
	again := c.do(t, "POST", "/v1/payments/initiate", nil, fmt.Sprintf(`{"hold_id":%q,"method":"WALLET","idempotency_key":"http-pay-1"}`, holdID))
	if again.status != 200 || again.body["payment_id"] != pay.body["payment_id"] || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replayed pay: %d %s", again.status, again.raw)
	}
	deadline := time.Now().Add(20 * time.Second)
	seen := map[string]bool{}
	for {
		st := c.do(t, "GET", "/v1/bookings/"+holdID+"/status", nil, "")
		state, _ := st.body["state"].(string)
		seen[state] = true
		if state == "CONFIRMED" {
			if pnr, _ := st.body["pnr"].(string); len(pnr) != 10 || !strings.Contains(st.body["message"].(string), pnr) {
				t.Fatalf("confirmed status: %s", st.raw)
			}
			break
		}
		if state != "CONFIRMING" && state != "PAYMENT_PENDING" {
			t.Fatalf("status while confirming: %s", st.raw)
		}
		if time.Now().After(deadline) {
			t.Fatalf("never confirmed; saw %v", seen)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// UPI: the customer must approve; the passenger is told by when it ends.
	c2 := newClient(s, ids[1])
	h2 := c2.hold(t, "http-pay-hold-2", holdBody(date, "BVI", "KOTA", 1))
	hold2 := h2.body["hold_id"].(string)
	upi := c2.do(t, "POST", "/v1/payments/initiate", nil, fmt.Sprintf(`{"hold_id":%q,"method":"UPI","vpa":"ravi@okaxis","idempotency_key":"http-pay-2"}`, hold2))
	if upi.status != 201 || upi.body["state"] != "AWAITING_USER" || upi.body["next_action"] == nil {
		t.Fatalf("upi pay: %d %s", upi.status, upi.raw)
	}
	second := c2.do(t, "POST", "/v1/payments/initiate", nil, fmt.Sprintf(`{"hold_id":%q,"method":"CARD","idempotency_key":"http-pay-3"}`, hold2))
	if second.status != 409 || second.body["reason"] != "PAYMENT_IN_PROGRESS" || !strings.Contains(second.body["detail"].(string), "UPI") {
		t.Fatalf("second payment while one is open: %d %s", second.status, second.raw)
	}
	st := c2.do(t, "GET", "/v1/bookings/"+hold2+"/status", nil, "")
	if st.body["state"] != "PAYMENT_PENDING" || !strings.Contains(st.body["message"].(string), "automatic refund by") {
		t.Fatalf("status while waiting for the bank: %s", st.raw)
	}
	// The customer declines on the bank's page: nothing charged, seats back.
	next := upi.body["next_action"].(map[string]any)
	url, _ := next["url"].(string)
	if url == "" {
		url = s.PSP.URL + "/gw/" + upi.body["gateway"].(string) + "/pay/unknown"
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Post(url+"/decline", "application/x-www-form-urlencoded", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Location"), "/payments/return") {
		t.Fatalf("decline: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		st = c2.do(t, "GET", "/v1/bookings/"+hold2+"/status", nil, "")
		if st.body["state"] == "FAILED" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after declining: %s", st.raw)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(st.body["message"].(string), "nothing was charged") {
		t.Fatalf("failed status message: %s", st.raw)
	}
	// The return page the bank sends the browser to says the same.
	page, err := http.Get(s.Server.URL + "/payments/return?payment_id=" + upi.body["payment_id"].(string))
	if err != nil {
		t.Fatal(err)
	}
	defer page.Body.Close()
	var b strings.Builder
	buf := make([]byte, 8192)
	for {
		n, err := page.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	if page.StatusCode != 200 || !strings.Contains(b.String(), "Payment failed") {
		t.Fatalf("return page: %d %s", page.StatusCode, b.String())
	}
}

// A UPI address shared by more accounts than allowed is refused like
// overload, and nothing is charged.
func TestOneUPIAddressForManyAccounts(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{})
	_, date := s.DemoShard(t, 10, 0)
	ids, err := seed.Users(context.Background(), s.Pool, seed.UsersSpec{Count: 5, Prefix: "tout", PasswordHash: "x"})
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	for i, u := range ids {
		c := newClient(s, u)
		h := c.hold(t, fmt.Sprintf("tout-hold-%d", i), holdBody(date, "MMCT", "NDLS", 1))
		r := c.do(t, "POST", "/v1/payments/initiate", nil, fmt.Sprintf(`{"hold_id":%q,"method":"UPI","vpa":"Tout@okbank","idempotency_key":"tout-pay-%d"}`,
			h.body["hold_id"], i))
		switch {
		case i < 3 && r.status == 201:
		case i >= 3 && r.status == 503 && r.body["reason"] == "HIGH_DEMAND":
			refused++
		default:
			t.Fatalf("account %d paying with the shared address: %d %s", i, r.status, r.raw)
		}
	}
	var n int
	s.Pool.QueryRow(context.Background(), `SELECT count(*) FROM payments`).Scan(&n) //nolint:errcheck
	if refused != 2 || n != 3 {
		t.Fatalf("%d refused, %d payments; want 2 and 3", refused, n)
	}
}
