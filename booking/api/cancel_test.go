package api_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/teststack"
	"tatkal/booking/payment"
)

// Sixty passengers each pay for a hold from the wallet and cancel the same
// hold at the same moment, as people do. Whichever wins, every passenger
// ends with a ticket paid once, or a cancelled hold and their money: never
// debited without a ticket. A hold-cancel that loses to the payment is
// refused (409 ALREADY_CONFIRMED), not turned into a ticket cancellation.
func TestPayAndCancelTheSameHoldAtOnce(t *testing.T) {
	t.Parallel()
	const n = 60
	const wallet = 10000 * 100
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{})
	shardID, date := s.DemoShard(t, n, 0)
	ids, err := seed.Users(ctx, s.Pool, seed.UsersSpec{Count: n, Prefix: "pc", PasswordHash: "x", WalletRupees: wallet / 100})
	if err != nil {
		t.Fatal(err)
	}
	holds := make([]string, n)
	for i, u := range ids {
		h := newClient(s, u).hold(t, fmt.Sprintf("paycancel-hold-%02d", i), holdBody(date, "MMCT", "NDLS", 1))
		if h.status != 201 {
			t.Fatalf("hold %d: %d %s", i, h.status, h.raw)
		}
		holds[i] = h.body["hold_id"].(string)
	}
	start := make(chan struct{})
	pays, cancels := make([]reply, n), make([]reply, n)
	var wg sync.WaitGroup
	for i, u := range ids {
		c := newClient(s, u)
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			pays[i] = c.do(t, "POST", "/v1/payments/initiate", nil,
				fmt.Sprintf(`{"hold_id":%q,"method":"WALLET","idempotency_key":"paycancel-pay-%02d"}`, holds[i], i))
		}()
		go func() {
			defer wg.Done()
			<-start
			cancels[i] = c.do(t, "POST", "/v1/bookings/"+holds[i]+"/cancel", nil, "")
		}()
	}
	close(start)
	wg.Wait()

	tickets, released := 0, 0
	for i, u := range ids {
		var bstatus, hstate string
		var fare, balance, refunded int64
		if err := s.Pool.QueryRow(ctx, `SELECT h.state, coalesce(b.status, ''), h.fare_paise,
				(SELECT balance_paise FROM wallet_accounts WHERE user_id = h.user_id),
				(SELECT coalesce(sum(r.amount_paise), 0) FROM refunds r JOIN payments p ON p.id = r.payment_id WHERE p.hold_id = h.id)
			FROM holds h LEFT JOIN bookings b ON b.hold_id = h.id WHERE h.id = $1 AND h.user_id = $2`, holds[i], u).
			Scan(&hstate, &bstatus, &fare, &balance, &refunded); err != nil {
			t.Fatal(err)
		}
		switch {
		case bstatus == "CONFIRMED" && balance == wallet-fare:
			tickets++
			if cancels[i].status != 409 || cancels[i].body["reason"] != "ALREADY_CONFIRMED" {
				t.Errorf("passenger %d got a ticket; the cancel answered %d %s, want 409 ALREADY_CONFIRMED", i, cancels[i].status, cancels[i].raw)
			}
		case bstatus == "" && hstate == "CANCELLED" && balance == wallet:
			released++
			if pays[i].status != 409 {
				t.Errorf("passenger %d's hold was cancelled; the payment answered %d %s, want 409", i, pays[i].status, pays[i].raw)
			}
		default:
			t.Errorf("passenger %d: hold %s, booking %q, wallet %d of %d, refunds %d (fare %d): neither a ticket nor their money",
				i, hstate, bstatus, balance, wallet, refunded, fare)
		}
	}
	t.Logf("%d tickets, %d holds cancelled", tickets, released)
	if bad, err := payment.CheckLedger(ctx, s.Pool); err != nil || len(bad) > 0 {
		t.Fatalf("wallet ledger: %v %v", bad, err)
	}
	s.CheckInvariants(t, shardID)

	// A replay of each hold's Idempotency-Key answers what became of it.
	for i, u := range ids {
		c := newClient(s, u)
		r := c.hold(t, fmt.Sprintf("paycancel-hold-%02d", i), holdBody(date, "MMCT", "NDLS", 1))
		pnr, _ := r.body["pnr"].(string)
		switch cancels[i].status {
		case 409:
			if r.status != 200 || r.body["status"] != "CONFIRMED" || len(pnr) != 10 || r.header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("replay of paid hold %d: %d %s, want 200 CONFIRMED with its PNR", i, r.status, r.raw)
			}
		default:
			if r.status != 200 || r.body["status"] != "CANCELLED" || pnr != "" {
				t.Fatalf("replay of cancelled hold %d: %d %s, want 200 CANCELLED", i, r.status, r.raw)
			}
		}
	}

	// Cancelling a ticket is explicit, after a preview of the refund.
	for i, u := range ids {
		if cancels[i].status != 409 {
			continue
		}
		c := newClient(s, u)
		path := "/v1/bookings/" + holds[i] + "/cancel"
		syncToCore(t, s, holds[i]) // no workers here: CONFIRMING until the core records it
		pv := c.do(t, "GET", path, nil, "")
		if pv.status != 200 || pv.body["cancel"] != "booking" || pv.body["allowed"] != true || pv.body["refund_paise"] != 0.0 {
			t.Fatalf("preview: %d %s", pv.status, pv.raw)
		}
		if r := c.do(t, "POST", path, nil, `{"cancel":"ticket"}`); r.status != 400 || r.body["reason"] != "BAD_CANCEL" {
			t.Fatalf("cancel of an unknown kind: %d %s", r.status, r.raw)
		}
		if r := c.do(t, "POST", path, nil, `{"cancel":"booking","expect_refund_paise":100}`); r.status != 409 || r.body["reason"] != "REFUND_CHANGED" {
			t.Fatalf("cancel expecting another refund: %d %s", r.status, r.raw)
		}
		r := c.do(t, "POST", path, nil, `{"cancel":"booking","expect_refund_paise":0}`)
		if r.status != 200 || r.body["state"] != "CANCELLED" {
			t.Fatalf("booking cancel: %d %s", r.status, r.raw)
		}
		s.CheckInvariants(t, shardID)
		break
	}
}

// syncToCore does what the core-sync job would: the ticket of hold leaves
// CONFIRMING.
func syncToCore(t *testing.T, s *teststack.Stack, hold string) {
	t.Helper()
	var bookingID int64
	teststack.Must(t, s.Pool.QueryRow(context.Background(), `SELECT id FROM bookings WHERE hold_id = $1`, hold).Scan(&bookingID), "booking")
	teststack.Must(t, s.Service.SyncToCore(context.Background(), bookingID), "sync to core")
}

// The API refuses to cancel a ticket while it is CONFIRMING (the core is
// still recording it) and once the chart is prepared, with the same rule
// as the site: the preview says so, the cancel answers 409 with the
// reason, and nothing changes (the booking, its refunds, the jobs, the
// seat state). Between the two, the same request would cancel it: the
// test refuses for the reasons it names, not for another.
func TestCancelRefusedWhileConfirmingOrCharted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{})
	shardID, date := s.DemoShard(t, 4, 0)
	ids, err := seed.Users(ctx, s.Pool, seed.UsersSpec{Count: 2, Prefix: "cx", PasswordHash: "x", WalletRupees: 20000})
	teststack.Must(t, err, "users")
	var holds []string
	for i, u := range ids {
		c := newClient(s, u)
		h := c.hold(t, fmt.Sprintf("cx-hold-%d", i), holdBody(date, "MMCT", "NDLS", 1))
		if h.status != 201 {
			t.Fatalf("hold %d: %d %s", i, h.status, h.raw)
		}
		hold := h.body["hold_id"].(string)
		holds = append(holds, hold)
		if p := c.do(t, "POST", "/v1/payments/initiate", nil, fmt.Sprintf(`{"hold_id":%q,"method":"WALLET","idempotency_key":"cx-pay-%d"}`, hold, i)); p.status >= 300 {
			t.Fatalf("pay %d: %d %s", i, p.status, p.raw)
		}
	}
	refused := func(c *client, hold, reason string) {
		t.Helper()
		path := "/v1/bookings/" + hold + "/cancel"
		st := c.do(t, "GET", "/v1/bookings/"+hold+"/status", nil, "")
		pv := c.do(t, "GET", path, nil, "")
		if pv.status != 200 || pv.body["allowed"] != false || pv.body["reason"] != reason {
			t.Fatalf("preview (%s): %d %s, want not allowed, %s", st.body["state"], pv.status, pv.raw, reason)
		}
		before := stateOf(t, s, shardID)
		for _, body := range []string{`{"cancel":"booking","expect_refund_paise":0}`, `{"cancel":"booking"}`} {
			r := c.do(t, "POST", path, nil, body)
			if r.status != 409 || r.body["code"] != "conflict" || r.body["reason"] != reason || r.body["detail"] == "" ||
				!strings.Contains(r.header.Get("Content-Type"), "problem+json") {
				t.Fatalf("cancel %s: %d %s %s, want a 409 problem %s", body, r.status, r.header.Get("Content-Type"), r.raw, reason)
			}
		}
		if after := stateOf(t, s, shardID); after != before {
			t.Fatalf("a refused cancel changed something:\n before %s\n after  %s", before, after)
		}
		var status string
		var refunds int
		teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT b.status, (SELECT count(*) FROM refunds r JOIN payments p ON p.id = r.payment_id WHERE p.hold_id = b.hold_id)
			FROM bookings b WHERE b.hold_id = $1`, hold).Scan(&status, &refunds), "booking")
		if status != "CONFIRMED" || refunds != 0 {
			t.Fatalf("after a refused cancel: booking %s, %d refunds", status, refunds)
		}
	}
	c0, c1 := newClient(s, ids[0]), newClient(s, ids[1])
	if st := c0.do(t, "GET", "/v1/bookings/"+holds[0]+"/status", nil, ""); st.body["state"] != "CONFIRMING" {
		t.Fatalf("status before the core records it: %s", st.raw)
	}
	refused(c0, holds[0], "CONFIRMING")

	// Recorded by the core, the same request cancels (the second ticket).
	syncToCore(t, s, holds[0])
	syncToCore(t, s, holds[1])
	if r := c1.do(t, "POST", "/v1/bookings/"+holds[1]+"/cancel", nil, `{"cancel":"booking","expect_refund_paise":0}`); r.status != 200 || r.body["state"] != "CANCELLED" {
		t.Fatalf("cancel once CONFIRMED: %d %s", r.status, r.raw)
	}

	_, err = s.Service.Chart(ctx, shardID)
	teststack.Must(t, err, "chart")
	refused(c0, holds[0], "CHARTED")
	s.CheckInvariants(t, shardID)
}
