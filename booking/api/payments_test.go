package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
	"tatkal/booking/payment"
	"tatkal/booking/payment/pspapi"
)

// A passenger pays over HTTP: the wallet confirms at once (CONFIRMING until
// the core acknowledges, then CONFIRMED); UPI tells them to approve and by
// when they get a ticket or an automatic refund.
func TestPayOverHTTPAndWhatThePassengerIsTold(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{Work: true, Routes: teststack.QuietRoutes()})
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
	seen := map[string]bool{}
	testenv.Eventually(t, 20*time.Second, "the booking confirmed", func() error {
		st := c.do(t, "GET", "/v1/bookings/"+holdID+"/status", nil, "")
		state, _ := st.body["state"].(string)
		seen[state] = true
		if state == "CONFIRMED" {
			if pnr, _ := st.body["pnr"].(string); len(pnr) != 10 || !strings.Contains(st.body["message"].(string), pnr) {
				t.Fatalf("confirmed status: %s", st.raw)
			}
			return nil
		}
		if state != "CONFIRMING" && state != "PAYMENT_PENDING" {
			t.Fatalf("status while confirming: %s", st.raw)
		}
		return fmt.Errorf("saw %v", seen)
	})

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
	noRedirect := testenv.FormClient()
	resp, err := noRedirect.Post(url+"/decline", "application/x-www-form-urlencoded", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Location"), "/payments/return") {
		t.Fatalf("decline: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	testenv.Eventually(t, 20*time.Second, "the payment failed after declining", func() error {
		st = c2.do(t, "GET", "/v1/bookings/"+hold2+"/status", nil, "")
		return testenv.Want(st.body["state"] == "FAILED", "%s", st.raw)
	})
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

func (c *client) balance(t *testing.T) float64 {
	t.Helper()
	w := c.do(t, "GET", "/v1/wallet", nil, "")
	if w.status != 200 {
		t.Fatalf("wallet: %s", w.raw)
	}
	return w.body["balance_paise"].(float64)
}

// pollPayment asks GET /v1/payments/{id} until the payment is in state.
func (c *client) pollPayment(t *testing.T, id, state string) reply {
	t.Helper()
	var r reply
	testenv.Eventually(t, 30*time.Second, "payment "+id+" "+state, func() error {
		r = c.do(t, "GET", "/v1/payments/"+id, nil, "")
		return testenv.Want(r.body["state"] == state, "%s", r.raw)
	})
	return r
}

// A top-up is a payment through a gateway: nothing is credited by asking,
// nor by a success callback the gateway does not confirm; the wallet is
// credited once the customer has paid, and a declined top-up credits
// nothing. Issue 8 (1).
func TestTopUpCreditsOnlyMoneyThatArrived(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{Work: true, Routes: teststack.QuietRoutes()})
	ids, err := seed.Users(context.Background(), s.Pool, seed.UsersSpec{Count: 1, Prefix: "topup", PasswordHash: "x", WalletRupees: 5000})
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(s, ids[0])
	start := c.balance(t)
	// The old free top-up: an amount and a key, no payment.
	free := c.do(t, "POST", "/v1/wallet/topup", map[string]string{"Idempotency-Key": "free-money-1"}, `{"amount_paise":500000}`)
	if free.status != 400 || c.balance(t) != start {
		t.Fatalf("a top-up with no payment: %d %s, balance %v", free.status, free.raw, c.balance(t))
	}
	for _, body := range []string{
		`{"amount_paise":50000,"method":"WALLET","idempotency_key":"topup-bad-1"}`,
		`{"amount_paise":50,"method":"CARD","idempotency_key":"topup-bad-2"}`,
		`{"amount_paise":999999999999,"method":"CARD","idempotency_key":"topup-bad-3"}`,
		`{"amount_paise":50000,"method":"UPI","vpa":"nope","idempotency_key":"topup-bad-4"}`,
	} {
		if r := c.do(t, "POST", "/v1/wallet/topup", nil, body); r.status != 400 {
			t.Errorf("%s: %d %s, want 400", body, r.status, r.raw)
		}
	}
	pay := c.do(t, "POST", "/v1/wallet/topup", nil, `{"amount_paise":250000,"method":"UPI","vpa":"asha@okbank","idempotency_key":"topup-key-1"}`)
	if pay.status != 201 || pay.body["state"] != "AWAITING_USER" || pay.body["purpose"] != "TOPUP" || pay.body["next_action"] == nil {
		t.Fatalf("top-up: %d %s", pay.status, pay.raw)
	}
	id := pay.body["payment_id"].(string)
	if again := c.do(t, "POST", "/v1/wallet/topup", nil, `{"amount_paise":250000,"method":"UPI","vpa":"asha@okbank","idempotency_key":"topup-key-1"}`); again.status != 200 || again.body["payment_id"] != id {
		t.Fatalf("replayed top-up: %d %s", again.status, again.raw)
	}
	if other := c.do(t, "POST", "/v1/wallet/topup", nil, `{"amount_paise":9900000,"method":"UPI","vpa":"asha@okbank","idempotency_key":"topup-key-1"}`); other.status != 422 || other.body["reason"] != "IDEMPOTENCY_KEY_REUSED" {
		t.Fatalf("the key with another amount: %d %s", other.status, other.raw)
	}
	// A success callback signed with the gateway's secret, before the
	// customer paid: the gateway, asked, says it waits; nothing credited.
	gw := pay.body["gateway"].(string)
	var pspRef string
	s.Pool.QueryRow(context.Background(), `SELECT psp_ref FROM payments WHERE id = $1`, id).Scan(&pspRef) //nolint:errcheck
	var secret []byte
	for _, g := range s.Gateways {
		if g.ID == gw {
			secret = g.WebhookSecrets[0]
		}
	}
	body, _ := json.Marshal(pspapi.Webhook{EventID: "evt-topup-forged", PSPRef: pspRef, MerchantRef: id, Gateway: gw, Method: "UPI",
		Status: pspapi.StatusSuccess, AmountPaise: 250000, Currency: "INR", BankEventTime: time.Now()})
	req, _ := http.NewRequest("POST", s.Server.URL+"/v1/internal/payments/callback", bytes.NewReader(body))
	now := time.Now()
	req.Header.Set(pspapi.HeaderGateway, gw)
	req.Header.Set(pspapi.HeaderTimestamp, fmt.Sprint(now.Unix()))
	req.Header.Set(pspapi.HeaderSignature, pspapi.Sign(secret, now, body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// The inquiry it prompts has asked the gateway and ended.
	testenv.Eventually(t, 15*time.Second, "the inquiry the callback prompted", func() error {
		var asked bool
		err := s.Pool.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM river_job WHERE kind = 'payment_inquiry'
			AND args->>'payment_id' = $1 AND attempted_at IS NOT NULL AND state <> 'running')`, id).Scan(&asked)
		return testenv.Want(err == nil && asked, "no inquiry of %s has run (%v)", id, err)
	})
	if got := c.do(t, "GET", "/v1/payments/"+id, nil, ""); got.body["state"] != "AWAITING_USER" || c.balance(t) != start {
		t.Fatalf("after an unconfirmed success callback: %s, balance %v", got.raw, c.balance(t))
	}
	// The customer pays: the wallet is credited, once.
	next := pay.body["next_action"].(map[string]any)
	url, _ := next["url"].(string)
	if url == "" {
		url = s.PSP.URL + "/gw/" + gw + "/pay/" + pspRef
	}
	approveResp, err := http.Post(url+"/approve", "application/x-www-form-urlencoded", strings.NewReader("otp=123456"))
	if err != nil {
		t.Fatal(err)
	}
	approveResp.Body.Close()
	done := c.pollPayment(t, id, "SUCCESS")
	if !strings.Contains(done.body["message"].(string), "added to your wallet") || c.balance(t) != start+250000 {
		t.Fatalf("after paying: %s, balance %v", done.raw, c.balance(t))
	}
	var entries int
	s.Pool.QueryRow(context.Background(), `SELECT count(*) FROM wallet_entries WHERE kind = 'TOPUP' AND ref = $1`, id).Scan(&entries) //nolint:errcheck
	if entries != 1 {
		t.Fatalf("%d TOPUP ledger entries for one payment", entries)
	}
	// A declined top-up credits nothing.
	card := c.do(t, "POST", "/v1/wallet/topup", map[string]string{"Idempotency-Key": "topup-key-2"}, `{"amount_paise":100000,"method":"CARD"}`)
	if card.status != 201 {
		t.Fatalf("card top-up: %d %s", card.status, card.raw)
	}
	cardURL, _ := card.body["next_action"].(map[string]any)["url"].(string)
	noRedirect := testenv.FormClient()
	declined, err := noRedirect.Post(cardURL+"/decline", "application/x-www-form-urlencoded", nil)
	if err != nil {
		t.Fatal(err)
	}
	declined.Body.Close()
	c.pollPayment(t, card.body["payment_id"].(string), "FAILED")
	if c.balance(t) != start+250000 {
		t.Fatalf("a declined top-up moved the balance to %v", c.balance(t))
	}
	if bad, err := payment.CheckLedger(context.Background(), s.Pool); err != nil || len(bad) > 0 {
		t.Fatalf("ledger: %v %v", bad, err)
	}
}

// An idempotency key is bound to its request: sent again with another hold
// and method it is refused with 422, and nothing changes. Issue 8 (10).
func TestPaymentKeyReusedForAnotherRequestIsRefused(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{Routes: teststack.QuietRoutes()})
	_, date := s.DemoShard(t, 8, 0)
	ids, err := seed.Users(context.Background(), s.Pool, seed.UsersSpec{Count: 2, Prefix: "idem", PasswordHash: "x", WalletRupees: 10000})
	if err != nil {
		t.Fatal(err)
	}
	c := newClient(s, ids[0])
	holdA := c.hold(t, "idem-hold-a", holdBody(date, "MMCT", "NDLS", 1)).body["hold_id"].(string)
	first := c.do(t, "POST", "/v1/payments/initiate", nil, fmt.Sprintf(`{"hold_id":%q,"method":"UPI","vpa":"asha@okbank","idempotency_key":"idem-pay-1"}`, holdA))
	if first.status != 201 {
		t.Fatalf("first payment: %d %s", first.status, first.raw)
	}
	// The same key with another method, then with another hold.
	other := c.do(t, "POST", "/v1/payments/initiate", nil, fmt.Sprintf(`{"hold_id":%q,"method":"CARD","idempotency_key":"idem-pay-1"}`, holdA))
	if other.status != 422 || other.body["reason"] != "IDEMPOTENCY_KEY_REUSED" {
		t.Fatalf("key reused with another method: %d %s", other.status, other.raw)
	}
	c2 := newClient(s, ids[1])
	holdB := c2.hold(t, "idem-hold-b", holdBody(date, "BVI", "KOTA", 1)).body["hold_id"].(string)
	if r := c.do(t, "POST", "/v1/payments/initiate", nil, fmt.Sprintf(`{"hold_id":%q,"method":"WALLET","idempotency_key":"idem-pay-1"}`, holdB)); r.status != 422 {
		t.Fatalf("key reused with another hold: %d %s", r.status, r.raw)
	}
	same := c.do(t, "POST", "/v1/payments/initiate", nil, fmt.Sprintf(`{"hold_id":%q,"method":"UPI","vpa":"asha@okbank","idempotency_key":"idem-pay-1"}`, holdA))
	if same.status != 200 || same.body["payment_id"] != first.body["payment_id"] {
		t.Fatalf("the same request again: %d %s", same.status, same.raw)
	}
	var n int
	s.Pool.QueryRow(context.Background(), `SELECT count(*) FROM payments`).Scan(&n) //nolint:errcheck
	if n != 1 {
		t.Fatalf("%d payments, want 1", n)
	}
}

// Accounts naming a hold that is not theirs (or none) with a victim's UPI
// address count nothing against it: the victim still pays. Issue 8 (5).
func TestVictimsUPIAddressCannotBeBlockedWithOthersHolds(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{Routes: teststack.QuietRoutes()})
	_, date := s.DemoShard(t, 8, 0)
	ids, err := seed.Users(context.Background(), s.Pool, seed.UsersSpec{Count: 4, Prefix: "vpa", PasswordHash: "x"})
	if err != nil {
		t.Fatal(err)
	}
	victim := newClient(s, ids[0])
	hold := victim.hold(t, "victim-hold", holdBody(date, "MMCT", "NDLS", 1)).body["hold_id"].(string)
	for i, u := range ids[1:] {
		a := newClient(s, u)
		for j, h := range []string{"0190a0b0-0000-7000-8000-00000000000" + fmt.Sprint(i), hold} {
			r := a.do(t, "POST", "/v1/payments/initiate", nil,
				fmt.Sprintf(`{"hold_id":%q,"method":"UPI","vpa":"Victim@okbank","idempotency_key":"attack-%d-%d"}`, h, i, j))
			if r.status != 404 {
				t.Fatalf("attacker %d naming hold %s: %d %s", i, h, r.status, r.raw)
			}
		}
	}
	r := victim.do(t, "POST", "/v1/payments/initiate", nil, fmt.Sprintf(`{"hold_id":%q,"method":"UPI","vpa":"victim@okbank","idempotency_key":"victim-pay"}`, hold))
	if r.status != 201 {
		t.Fatalf("the victim paying with their own address: %d %s", r.status, r.raw)
	}
}
