package payment_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"tatkal/booking"
	"tatkal/booking/inventory"
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
	"tatkal/booking/payment"
	"tatkal/booking/payment/pspapi"
	"tatkal/booking/prs"
	"tatkal/booking/sim/pspsim"
)

func pax(name string) booking.Passenger {
	return booking.Passenger{Name: name, Age: 35, Gender: "F", IDType: "PAN", IDRef: "ABCDE1234F"}
}

// fastRoutes: every route quick, the customer approving at once.
func fastRoutes(mod func(*pspapi.RouteConfig)) []pspapi.RouteConfig {
	var out []pspapi.RouteConfig
	for _, rc := range pspsim.DefaultRoutes() {
		rc.LatencyP50Ms, rc.LatencyP99Ms = 10, 60
		rc.TimeoutRate, rc.DeclineRate, rc.PendingRate, rc.LateSuccessRate = 0, 0, 0, 0
		rc.LostCallbackRate, rc.DuplicateCallbackRate, rc.CallbackDelayMs = 0, 0, 0
		rc.AutoApproveMs, rc.AbandonRate, rc.CapacityTPS = 100, 0, 0
		if mod != nil {
			mod(&rc)
		}
		out = append(out, rc)
	}
	return out
}

type world struct {
	s      *teststack.Stack
	shard  int64
	date   time.Time
	users  []int64
	counts int
}

func newWorld(t *testing.T, opts teststack.Options, berths, users int) *world {
	t.Helper()
	s := teststack.New(t, opts)
	shard, date := s.DemoShard(t, berths, 0)
	ids, err := seed.Users(context.Background(), s.Pool, seed.UsersSpec{Count: users, Prefix: "pay", PasswordHash: "x", WalletRupees: 20000})
	if err != nil {
		t.Fatal(err)
	}
	return &world{s: s, shard: shard, date: date, users: ids}
}

func (w *world) hold(t *testing.T, user int64, key string) booking.HoldResult {
	t.Helper()
	res, err := w.s.Service.Hold(context.Background(), teststack.Caller(user), booking.HoldRequest{UserID: user, IdempotencyKey: key,
		Train: "12951", Date: w.date, Class: "3A", From: "MMCT", To: "NDLS", Passengers: []booking.Passenger{pax("Meera Pillai")}})
	if err != nil || res.Status != "HELD" {
		t.Fatalf("hold for %d: %+v %v", user, res, err)
	}
	return res
}

func (w *world) pay(t *testing.T, user int64, hold uuid.UUID, method, key string) (payment.View, error) {
	t.Helper()
	req := payment.InitiateRequest{HoldID: hold, Method: method, IdempotencyKey: key}
	switch method {
	case payment.UPI:
		req.VPA = "meera@okbank"
	case payment.NetBanking:
		req.Bank = "SBI"
	}
	return w.s.Payments.Initiate(context.Background(), teststack.Caller(user), req)
}

// drain waits until every payment is resolved, every refund processed and
// no money or hold job is left to run.
func (w *world) drain(t *testing.T, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		var open, refunds, jobs int
		err := w.s.Pool.QueryRow(context.Background(), `SELECT
			(SELECT count(*) FROM payments WHERE state IN ('INITIATED', 'AWAITING_USER', 'PENDING_AT_BANK', 'UNKNOWN')),
			(SELECT count(*) FROM refunds WHERE state <> 'PROCESSED'),
			(SELECT count(*) FROM river_job WHERE state IN ('available', 'running', 'retryable', 'scheduled')
			   AND kind NOT IN ('hold_sweep', 'hold_expire', 'hold_expire_group', 'seat_sync', 'seat_sync_group', 'chart_prepare', 'chart_schedule', 'chart_send', 'notify_relay'))`).Scan(&open, &refunds, &jobs)
		if err != nil {
			t.Fatal(err)
		}
		if open == 0 && refunds == 0 && jobs == 0 {
			return
		}
		if time.Now().After(deadline) {
			rows, _ := w.s.Pool.Query(context.Background(), `SELECT kind, state || ' ' || queue || ' sched ' || scheduled_at::text || ' now ' || now()::text, attempt, coalesce(errors[array_length(errors,1)]->>'error','') FROM river_job
				WHERE state IN ('available', 'running', 'retryable', 'scheduled')`)
			for rows.Next() {
				var k, st, e string
				var a int
				rows.Scan(&k, &st, &a, &e) //nolint:errcheck
				t.Logf("job %s %s attempt %d %s", k, st, a, e)
			}
			rows.Close()
			t.Fatalf("not drained after %s: %d open payments, %d refunds pending, %d jobs", limit, open, refunds, jobs)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkMoney proves the promise: every payment is a ticket, nothing charged,
// or refunded; no hold keeps two charges; wallets balance; seats agree.
func (w *world) checkMoney(t *testing.T) map[string]int {
	t.Helper()
	ctx := context.Background()
	rows, err := w.s.Pool.Query(ctx, `SELECT p.id, p.hold_id, p.method, p.state, p.amount_paise, p.psp,
		coalesce(r.state, ''), coalesce(r.amount_paise, 0),
		(SELECT count(*) FROM bookings b WHERE b.hold_id = p.hold_id AND b.status <> 'CANCELLED'),
		(SELECT count(*) FROM wallet_entries e WHERE e.kind = 'DEBIT' AND e.ref = p.id::text)
		FROM payments p LEFT JOIN refunds r ON r.payment_id = p.id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := map[string]int{}
	for rows.Next() {
		var id, hold uuid.UUID
		var method, state, gw, rstate string
		var amount, ramount int64
		var bookings, debits int
		if err := rows.Scan(&id, &hold, &method, &state, &amount, &gw, &rstate, &ramount, &bookings, &debits); err != nil {
			t.Fatal(err)
		}
		seen[state]++
		switch state {
		case payment.Success:
			if bookings != 1 {
				t.Errorf("payment %s SUCCESS but its hold has %d live bookings", id, bookings)
			}
			if rstate != "" && ramount >= amount {
				t.Errorf("payment %s SUCCESS yet refunded in full", id)
			}
		case payment.Refunded:
			if rstate != "PROCESSED" || ramount != amount {
				t.Errorf("payment %s REFUNDED but refund %s of %d (captured %d)", id, rstate, ramount, amount)
			}
		case payment.Failed:
			if debits != 0 {
				t.Errorf("payment %s FAILED but the wallet was debited", id)
			}
			if gw != "" {
				if p, ok := w.gatewayPayment(t, gw, id); ok && p.Status == pspapi.StatusSuccess {
					t.Errorf("payment %s FAILED here but SUCCESS at %s", id, gw)
				}
			}
		default:
			t.Errorf("payment %s left %s", id, state)
		}
		if method == payment.Wallet && state != payment.Failed && debits != 1 {
			t.Errorf("wallet payment %s has %d debits", id, debits)
		}
	}
	var doubled int
	if err := w.s.Pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT hold_id FROM payments WHERE state = 'SUCCESS'
		GROUP BY hold_id HAVING count(*) > 1) d`).Scan(&doubled); err != nil || doubled != 0 {
		t.Errorf("%d holds keep two charges (%v)", doubled, err)
	}
	if bad, err := payment.CheckLedger(ctx, w.s.Pool); err != nil || len(bad) > 0 {
		t.Errorf("wallet ledger does not balance for users %v (%v)", bad, err)
	}
	// Ordinary faults (declines, timeouts, lost, duplicate and late
	// callbacks) never look like a gateway contradicting itself.
	var reviews int
	if err := w.s.Pool.QueryRow(ctx, `SELECT count(*) FROM payment_reviews WHERE resolved_at IS NULL`).Scan(&reviews); err != nil || reviews != 0 {
		t.Errorf("%d payments in review (%v)", reviews, err)
	}
	rep, err := inventory.Check(ctx, w.s.Pool, w.s.Store, w.shard, w.s.Service.Rules().HoldWindow)
	if err != nil || !rep.OK() {
		t.Errorf("seat invariants: %v\n%s", err, rep)
	}
	return seen
}

func (w *world) gatewayPayment(t *testing.T, gw string, id uuid.UUID) (pspapi.Payment, bool) {
	t.Helper()
	var key string
	for _, g := range w.s.Gateways {
		if g.ID == gw {
			key = g.APIKey
		}
	}
	req, _ := http.NewRequest("GET", w.s.PSP.URL+"/gw/"+gw+"/v1/payments?merchant_ref="+id.String(), nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == 404 {
		return pspapi.Payment{}, false
	}
	var p pspapi.Payment
	json.NewDecoder(resp.Body).Decode(&p) //nolint:errcheck
	return p, true
}

// Many bookings through every method while the gateways decline, time out,
// lose and duplicate callbacks and succeed late: after the jobs drain each
// payment is a ticket, a failure with nothing charged, or a refund.
func TestEveryPaymentEndsAsTicketOrRefund(t *testing.T) {
	testenv.EachRedis(t, testEveryPaymentEndsAsTicketOrRefund)
}

func testEveryPaymentEndsAsTicketOrRefund(t *testing.T, redisURL string) {
	routes := fastRoutes(func(rc *pspapi.RouteConfig) {
		rc.LatencyP50Ms, rc.LatencyP99Ms = 20, 300
		rc.DeclineRate = 0.25
		rc.PendingRate, rc.PendingResolveMs = 0.2, 1500
		rc.TimeoutRate = 0.1
		rc.LostCallbackRate, rc.DuplicateCallbackRate = 0.25, 0.3
		rc.LateSuccessRate, rc.LateSuccessMs = 0.12, 7000
		rc.AutoApproveMs = 200
	})
	windows := map[string]time.Duration{payment.Wallet: 4 * time.Second, payment.UPI: 4 * time.Second, payment.Card: 4 * time.Second, payment.NetBanking: 4 * time.Second}
	rules := booking.DefaultRules()
	rules.HoldWindow = 4 * time.Second
	w := newWorld(t, teststack.Options{Work: true, Rules: &rules, Routes: routes, HoldWindows: windows, Extension: 2 * time.Second,
		ResolutionDeadline: 40 * time.Second, LateGrace: time.Minute, CreateTimeout: 800 * time.Millisecond, SweepInterval: 2 * time.Second,
		// Under a loaded machine a create can give up before it reaches the
		// gateway; its inquiry then finds nothing, and must settle it as
		// failed well inside the drain (production waits two minutes).
		NotCreatedAfter: 10 * time.Second, RedisURL: redisURL}, 40, 60)
	methods := []string{payment.Wallet, payment.UPI, payment.Card, payment.NetBanking}
	var wg sync.WaitGroup
	var mu sync.Mutex
	refused := 0
	for i, u := range w.users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := w.s.Service.Hold(context.Background(), teststack.Caller(u), booking.HoldRequest{UserID: u,
				IdempotencyKey: fmt.Sprintf("mix-hold-%03d", i), Train: "12951", Date: w.date, Class: "3A",
				From: teststack.Stations12951[i%3], To: "NDLS", Passengers: []booking.Passenger{pax("Meera Pillai")}})
			if err != nil || h.Status != "HELD" {
				return // sold out: fine, nothing to pay
			}
			m := methods[i%len(methods)]
			key := fmt.Sprintf("mix-pay-%03d", i)
			v, err := w.pay(t, u, h.HoldID, m, key)
			if err != nil {
				t.Errorf("initiate %s: %v", m, err)
				return
			}
			// The same key again is the same payment.
			if again, err := w.pay(t, u, h.HoldID, m, key); err != nil || again.ID != v.ID || !again.Replayed {
				t.Errorf("replayed initiate: %+v %v", again, err)
			}
			// A second payment while one is unresolved is refused.
			if m != payment.Wallet && !resolvedState(v.State) {
				_, err := w.pay(t, u, h.HoldID, payment.UPI, key+"-second")
				if r := booking.ErrorReason(err); r == "PAYMENT_IN_PROGRESS" {
					mu.Lock()
					refused++
					mu.Unlock()
				} else if r != "HOLD_RELEASED" && r != "HOLD_CONFIRMED" && r != "HOLD_EXPIRED" && r != "ALREADY_PAID" && r != "METHOD_UNAVAILABLE" {
					t.Errorf("second payment while one is open: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	w.drain(t, 90*time.Second)
	seen := w.checkMoney(t)
	t.Logf("payment outcomes %v; %d second payments refused while one was open", seen, refused)
	if seen[payment.Success] == 0 || seen[payment.Failed] == 0 {
		t.Errorf("the faults did not produce both outcomes: %v", seen)
	}
	var synced, confirmed int
	if err := w.s.Pool.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE prs_state = 'SYNCED'), count(*) FROM bookings WHERE status <> 'CANCELLED'`).
		Scan(&synced, &confirmed); err != nil || synced != confirmed {
		t.Errorf("%d of %d bookings synced to the core (%v)", synced, confirmed, err)
	}
}

func resolvedState(s string) bool {
	return s == payment.Success || s == payment.Failed || s == payment.Refunded
}

func TestWalletPaysAndConfirmsInOneTransaction(t *testing.T) {
	t.Parallel()
	w := newWorld(t, teststack.Options{Routes: fastRoutes(nil)}, 4, 2)
	ctx := context.Background()
	h := w.hold(t, w.users[0], "wallet-hold-1")
	v, err := w.pay(t, w.users[0], h.HoldID, payment.Wallet, "wallet-pay-1")
	if err != nil || v.State != payment.Success {
		t.Fatalf("wallet pay: %+v %v", v, err)
	}
	st, err := w.s.Service.Status(ctx, w.users[0], h.HoldID)
	if err != nil || st.BookingStat != booking.BookingConfirmed || st.PNR == "" {
		t.Fatalf("after wallet pay the hold is %+v (%v)", st, err)
	}
	// The answer is the payment as committed, not read back: the same as
	// reading it.
	if got, err := w.s.Payments.Get(ctx, w.users[0], v.ID); err != nil || !reflect.DeepEqual(got, v) {
		t.Fatalf("wallet pay answered %+v, the payment reads %+v (%v)", v, got, err)
	}
	bal, entries, err := w.s.Payments.Wallet(ctx, w.users[0], 5)
	if err != nil || bal != 20000*100-h.Fare.TotalPaise || len(entries) != 2 || entries[0].Kind != "DEBIT" {
		t.Fatalf("wallet after paying %d: balance %d entries %+v (%v)", h.Fare.TotalPaise, bal, entries, err)
	}
	if _, err := w.pay(t, w.users[0], h.HoldID, payment.Wallet, "wallet-pay-2"); booking.ErrorReason(err) != "HOLD_CONFIRMED" {
		t.Fatalf("paying a confirmed hold again: %v", err)
	}
	// Not enough money: refused, nothing changes.
	if _, err := w.s.Pool.Exec(ctx, `UPDATE wallet_accounts SET balance_paise = 100 WHERE user_id = $1`, w.users[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := w.s.Pool.Exec(ctx, `INSERT INTO wallet_entries (user_id, kind, ref, amount_paise, balance_after) VALUES ($1, 'DEBIT', 'test-drain', $2, 100)`,
		w.users[1], 100-20000*100); err != nil {
		t.Fatal(err)
	}
	h2 := w.hold(t, w.users[1], "wallet-hold-2")
	if _, err := w.pay(t, w.users[1], h2.HoldID, payment.Wallet, "wallet-pay-3"); booking.ErrorReason(err) != "INSUFFICIENT_BALANCE" {
		t.Fatalf("paying with too little: %v", err)
	}
	var n int
	w.s.Pool.QueryRow(ctx, `SELECT count(*) FROM payments WHERE hold_id = $1`, h2.HoldID).Scan(&n) //nolint:errcheck
	if n != 0 {
		t.Fatalf("a refused wallet payment left %d rows", n)
	}
	if bad, err := payment.CheckLedger(ctx, w.s.Pool); err != nil || len(bad) > 0 {
		t.Fatalf("ledger: %v %v", bad, err)
	}
	// Bad inputs change nothing.
	for _, req := range []payment.InitiateRequest{
		{HoldID: h2.HoldID, Method: "BITCOIN", IdempotencyKey: "bad-method-1"},
		{HoldID: h2.HoldID, Method: payment.UPI, VPA: "not a vpa", IdempotencyKey: "bad-vpa-1"},
		{HoldID: h2.HoldID, Method: payment.NetBanking, Bank: "NOPE", IdempotencyKey: "bad-bank-1"},
		{HoldID: h2.HoldID, Method: payment.Card, IdempotencyKey: "short"},
		{HoldID: uuid.New(), Method: payment.Card, IdempotencyKey: "no-such-hold-1"},
		{HoldID: h.HoldID, Method: payment.Card, IdempotencyKey: "not-my-hold-1"},
	} {
		if _, err := w.s.Payments.Initiate(ctx, teststack.Caller(w.users[1]), req); booking.ErrorCode(err) == "" || booking.ErrorCode(err) == booking.EINTERNAL {
			t.Errorf("%+v: %v, want a clear refusal", req, err)
		}
	}
	w.s.Pool.QueryRow(ctx, `SELECT count(*) FROM payments`).Scan(&n) //nolint:errcheck
	if n != 1 {
		t.Fatalf("%d payments after bad inputs, want 1", n)
	}
}

// A webhook with a bad signature, an old timestamp, a changed amount, an
// unknown gateway or a malformed body is refused and changes nothing; the
// genuine one confirms; its duplicate changes nothing.
// Wallet payments for one hold sent at once, with one key and with several:
// one debit, one ticket; every other answer is the same payment replayed
// or a refusal, and the ledger adds up.
func TestConcurrentWalletPaymentsDebitOnce(t *testing.T) {
	t.Parallel()
	w := newWorld(t, teststack.Options{Routes: fastRoutes(nil)}, 4, 1)
	ctx := context.Background()
	h := w.hold(t, w.users[0], "wallet-race-hold")
	keys := []string{"wallet-race-a", "wallet-race-a", "wallet-race-a", "wallet-race-b", "wallet-race-c", "wallet-race-d"}
	views := make([]payment.View, len(keys))
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	for i, k := range keys {
		wg.Go(func() {
			views[i], errs[i] = w.s.Payments.Initiate(ctx, teststack.Caller(w.users[0]),
				payment.InitiateRequest{HoldID: h.HoldID, Method: payment.Wallet, IdempotencyKey: k})
		})
	}
	wg.Wait()
	paid := map[uuid.UUID]bool{}
	for i, err := range errs {
		switch r := booking.ErrorReason(err); {
		case err == nil && views[i].State == payment.Success:
			paid[views[i].ID] = true
		case r == "HOLD_CONFIRMED" || r == "ALREADY_PAID":
		default:
			t.Errorf("payment %d (key %s): %+v %v", i, keys[i], views[i], err)
		}
	}
	var debits, bookings, payments int
	if err := w.s.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM wallet_entries WHERE user_id = $1 AND kind = 'DEBIT'),
		(SELECT count(*) FROM bookings WHERE hold_id = $2), (SELECT count(*) FROM payments WHERE hold_id = $2)`, w.users[0], h.HoldID).
		Scan(&debits, &bookings, &payments); err != nil {
		t.Fatal(err)
	}
	if len(paid) != 1 || debits != 1 || bookings != 1 || payments != 1 {
		t.Fatalf("%d payments answered SUCCESS, %d debits, %d bookings, %d payment rows; want one of each", len(paid), debits, bookings, payments)
	}
	if bad, err := payment.CheckLedger(ctx, w.s.Pool); err != nil || len(bad) > 0 {
		t.Fatalf("ledger: %v %v", bad, err)
	}
}

func TestTamperedCallbacksChangeNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t, teststack.Options{Routes: fastRoutes(func(rc *pspapi.RouteConfig) { rc.AutoApproveMs = -1 })}, 4, 1)
	ctx := context.Background()
	h := w.hold(t, w.users[0], "cb-hold-1")
	v, err := w.pay(t, w.users[0], h.HoldID, payment.UPI, "cb-pay-1")
	if err != nil || v.State != payment.AwaitingUser {
		t.Fatalf("upi pay: %+v %v", v, err)
	}
	var pspRef string
	w.s.Pool.QueryRow(ctx, `SELECT psp_ref FROM payments WHERE id = $1`, v.ID).Scan(&pspRef) //nolint:errcheck
	var secret, otherSecret []byte
	other := ""
	for _, g := range w.s.Gateways {
		if g.ID == v.Gateway {
			secret = g.WebhookSecrets[0]
		} else if other == "" {
			other, otherSecret = g.ID, g.WebhookSecrets[0]
		}
	}
	if other == "" {
		t.Fatal("the test stack has one gateway; this test needs two")
	}
	genuine := pspapi.Webhook{EventID: "evt-genuine-1", PSPRef: pspRef, MerchantRef: v.ID.String(), Gateway: v.Gateway, Method: "UPI",
		Status: pspapi.StatusSuccess, AmountPaise: v.AmountPaise, BankEventTime: time.Now()}
	send := func(gw string, ts time.Time, body []byte, sig string) (int, string) {
		req, _ := http.NewRequest("POST", w.s.Server.URL+"/v1/internal/payments/callback", bytes.NewReader(body))
		req.Header.Set(pspapi.HeaderGateway, gw)
		req.Header.Set(pspapi.HeaderTimestamp, fmt.Sprint(ts.Unix()))
		req.Header.Set(pspapi.HeaderSignature, sig)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	state := func() string {
		var s string
		var events, bookings, hooks int
		w.s.Pool.QueryRow(ctx, `SELECT p.state, (SELECT count(*) FROM payment_events WHERE payment_id = p.id), (SELECT count(*) FROM bookings),
			(SELECT count(*) FROM webhook_events WHERE payment_id = p.id)
			FROM payments p WHERE p.id = $1`, v.ID).Scan(&s, &events, &bookings, &hooks) //nolint:errcheck
		return fmt.Sprintf("%s events=%d hooks=%d bookings=%d", s, events, hooks, bookings)
	}
	before := state()
	body, _ := json.Marshal(genuine)
	altered := genuine
	altered.AmountPaise = 100
	alteredBody, _ := json.Marshal(altered)
	otherRef := genuine
	otherRef.PSPRef += "x"
	otherRefBody, _ := json.Marshal(otherRef)
	notOurs := genuine
	notOurs.MerchantRef = uuid.NewString()
	notOursBody, _ := json.Marshal(notOurs)
	old := time.Now().Add(-10 * time.Minute)
	cases := []struct {
		name   string
		gw     string
		ts     time.Time
		body   []byte
		sig    string
		reason string
	}{
		{"bad signature", v.Gateway, time.Now(), body, "v1=" + strings.Repeat("ab", 32), "BAD_SIGNATURE"},
		{"signed with another key", v.Gateway, time.Now(), body, pspapi.Sign([]byte("wrong-secret"), time.Now(), body), "BAD_SIGNATURE"},
		{"replayed timestamp", v.Gateway, old, body, pspapi.Sign(secret, old, body), "REPLAYED"},
		{"body changed after signing", v.Gateway, time.Now(), alteredBody, pspapi.Sign(secret, time.Now(), body), "BAD_SIGNATURE"},
		{"amount altered (re-signed)", v.Gateway, time.Now(), alteredBody, pspapi.Sign(secret, time.Now(), alteredBody), "AMOUNT_MISMATCH"},
		{"unknown gateway", "evilpay", time.Now(), body, pspapi.Sign(secret, time.Now(), body), "UNKNOWN_GATEWAY"},
		// Genuinely signed, but by a gateway the payment is not with.
		{"another gateway's callback", other, time.Now(), body, pspapi.Sign(otherSecret, time.Now(), body), "UNKNOWN_PAYMENT"},
		{"gateway reference changed (re-signed)", v.Gateway, time.Now(), otherRefBody, pspapi.Sign(secret, time.Now(), otherRefBody), "REF_MISMATCH"},
		{"no payment of ours", v.Gateway, time.Now(), notOursBody, pspapi.Sign(secret, time.Now(), notOursBody), "UNKNOWN_PAYMENT"},
		{"malformed body", v.Gateway, time.Now(), []byte(`{"event_id":`), pspapi.Sign(secret, time.Now(), []byte(`{"event_id":`)), "MALFORMED_CALLBACK"},
	}
	for _, tc := range cases {
		code, resp := send(tc.gw, tc.ts, tc.body, tc.sig)
		if code < 400 || code >= 500 || !strings.Contains(resp, tc.reason) {
			t.Errorf("%s: %d %s, want 4xx %s", tc.name, code, resp, tc.reason)
		}
		if after := state(); after != before {
			t.Fatalf("%s changed state: %s -> %s", tc.name, before, after)
		}
	}
	// The genuine event, delivered several times at once (a gateway
	// retrying on a slow answer): one confirmation, one recorded event,
	// recorded in the transaction that applied it.
	var wg sync.WaitGroup
	codes := make([]int, 6)
	for i := range codes {
		wg.Go(func() { codes[i], _ = send(v.Gateway, time.Now(), body, pspapi.Sign(secret, time.Now(), body)) })
	}
	wg.Wait()
	for i, code := range codes {
		if code != 200 {
			t.Fatalf("genuine callback, delivery %d: %d", i, code)
		}
	}
	after := state()
	if !strings.HasPrefix(after, "SUCCESS") || !strings.HasSuffix(after, "hooks=1 bookings=1") {
		t.Fatalf("after the genuine callback: %s", after)
	}
	if code, _ := send(v.Gateway, time.Now(), body, pspapi.Sign(secret, time.Now(), body)); code != 200 {
		t.Fatalf("duplicate callback not acknowledged: %d", code)
	}
	if again := state(); again != after {
		t.Fatalf("duplicate callback changed state: %s -> %s", after, again)
	}
	// Another process, or this one restarted, has not seen the event: it is
	// found recorded under the payment's lock and acknowledged, changing
	// nothing, even when it now says otherwise (a gateway reusing an event
	// id would otherwise raise a review of a FAILED after SUCCESS).
	failedLater := genuine
	failedLater.Status, failedLater.FailureReason = pspapi.StatusFailed, "USER_DECLINED"
	failedBody, _ := json.Marshal(failedLater)
	for _, b := range [][]byte{body, failedBody} {
		payment.ForgetSeenEvents(w.s.Payments)
		if code, resp := send(v.Gateway, time.Now(), b, pspapi.Sign(secret, time.Now(), b)); code != 200 {
			t.Fatalf("a recorded event, delivered to a process that had not seen it: %d %s", code, resp)
		}
		if again := state(); again != after {
			t.Fatalf("a recorded event changed state: %s -> %s", after, again)
		}
	}
}

// The reservation core is down: confirmations wait (CONFIRMING), then sync
// exactly once per PNR when it returns. A rejection is compensated.
func TestCoreOutageThenSyncOncePerPNR(t *testing.T) {
	t.Parallel()
	w := newWorld(t, teststack.Options{Work: true, Routes: fastRoutes(nil)}, 10, 6)
	ctx := context.Background()
	w.s.SetCoreFaults(t, prs.Faults{Outage: true})
	var holds []booking.HoldResult
	for i, u := range w.users[:5] {
		h := w.hold(t, u, fmt.Sprintf("core-hold-%d", i))
		if _, err := w.pay(t, u, h.HoldID, payment.Wallet, fmt.Sprintf("core-pay-%d", i)); err != nil {
			t.Fatal(err)
		}
		holds = append(holds, h)
	}
	time.Sleep(3 * time.Second)
	var pending int
	w.s.Pool.QueryRow(ctx, `SELECT count(*) FROM bookings WHERE prs_state = 'PENDING'`).Scan(&pending) //nolint:errcheck
	if pending != 5 {
		t.Fatalf("%d bookings pending during the outage, want 5", pending)
	}
	if st, _ := w.s.Service.Status(ctx, w.users[0], holds[0].HoldID); st.CoreState != "PENDING" {
		t.Fatalf("during the outage the booking's core state is %q", st.CoreState)
	}
	w.s.SetCoreFaults(t, prs.Faults{})
	w.drain(t, 60*time.Second)
	rows, err := w.s.Pool.Query(ctx, `SELECT pnr, prs_state FROM bookings`)
	if err != nil {
		t.Fatal(err)
	}
	pnrs := map[string]bool{}
	for rows.Next() {
		var pnr, state string
		rows.Scan(&pnr, &state) //nolint:errcheck
		if state != "SYNCED" {
			t.Errorf("PNR %s is %s after the core returned", pnr, state)
		}
		pnrs[pnr] = true
	}
	rows.Close()
	core := prs.NewClient(w.s.Core.URL, w.s.CoreKey, nil)
	exported, err := core.Export(ctx, w.date)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, b := range exported {
		counts[b.PNR]++
	}
	if len(counts) != 5 {
		t.Errorf("the core holds %d PNRs, want 5", len(counts))
	}
	for pnr, n := range counts {
		if n != 1 || !pnrs[pnr] {
			t.Errorf("PNR %s at the core %d times (ours: %v)", pnr, n, pnrs[pnr])
		}
	}

	// The core refuses the next one: the booking is cancelled, seats freed,
	// the fare refunded to the wallet, the passenger told.
	w.s.SetCoreFaults(t, prs.Faults{RejectRate: 1})
	u := w.users[5]
	h := w.hold(t, u, "core-hold-rejected")
	if _, err := w.pay(t, u, h.HoldID, payment.Wallet, "core-pay-rejected"); err != nil {
		t.Fatal(err)
	}
	w.drain(t, 30*time.Second)
	st, err := w.s.Service.Status(ctx, u, h.HoldID)
	if err != nil || st.BookingStat != booking.BookingCancelled || st.CoreState != "REJECTED" {
		t.Fatalf("rejected booking: %+v %v", st, err)
	}
	bal, _, _ := w.s.Payments.Wallet(ctx, u, 0)
	if bal != 20000*100 {
		t.Fatalf("wallet after the compensating refund: %d, want %d", bal, 20000*100)
	}
	var msgs int
	w.s.Pool.QueryRow(ctx, `SELECT count(*) FROM notifications WHERE user_id = $1 AND kind IN ('CORE_REJECTED', 'REFUND_DONE')`, u).Scan(&msgs) //nolint:errcheck
	if msgs != 4 {
		t.Errorf("%d rejection/refund messages (SMS and email each), want 4", msgs)
	}
	w.checkMoney(t)
}

// A success after the hold lapsed gets the seats back if they are free and
// is refunded in full if they are not; a second charge on one hold is
// refunded automatically.
func TestLateSuccessAndDuplicateCharge(t *testing.T) {
	t.Parallel()
	rules := booking.DefaultRules()
	rules.HoldWindow = 2 * time.Second
	windows := map[string]time.Duration{payment.Wallet: 2 * time.Second, payment.UPI: 2 * time.Second, payment.Card: 2 * time.Second, payment.NetBanking: 2 * time.Second}
	w := newWorld(t, teststack.Options{Work: true, Rules: &rules, HoldWindows: windows, Extension: time.Second,
		Routes: fastRoutes(func(rc *pspapi.RouteConfig) { rc.AutoApproveMs = -1 }), SweepInterval: time.Second}, 2, 4)
	ctx := context.Background()
	waitHold := func(user int64, id uuid.UUID, state string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			v, err := w.s.Service.Status(ctx, user, id)
			if err == nil && v.State == state {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("hold %s is %s, want %s", id, v.State, state)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// A UPI payment left waiting on the customer until its hold lapses; the
	// customer approves late, the berth is free: same journey, same fare.
	h1 := w.hold(t, w.users[0], "late-hold-1")
	p1, err := w.pay(t, w.users[0], h1.HoldID, payment.UPI, "late-pay-1")
	if err != nil {
		t.Fatal(err)
	}
	waitHold(w.users[0], h1.HoldID, booking.HoldExpired)
	approve(t, w, p1.ID)
	w.drain(t, 30*time.Second)
	st, _ := w.s.Service.Status(ctx, w.users[0], h1.HoldID)
	if st.BookingStat != booking.BookingConfirmed || st.Fare.TotalPaise != h1.Fare.TotalPaise {
		t.Fatalf("late success with a free seat: %+v", st)
	}

	// Again, but this time someone else takes the last berth meanwhile: the
	// late payment is refunded in full.
	h2 := w.hold(t, w.users[1], "late-hold-2")
	p2, err := w.pay(t, w.users[1], h2.HoldID, payment.UPI, "late-pay-2")
	if err != nil {
		t.Fatal(err)
	}
	waitHold(w.users[1], h2.HoldID, booking.HoldExpired)
	// The berth comes back to Redis just after the expiry commits (its
	// after-commit release, or the seat sync): hold it once it is back.
	var h3 booking.HoldResult
	for n, deadline := 0, time.Now().Add(30*time.Second); ; n++ {
		h3, err = w.s.Service.Hold(ctx, teststack.Caller(w.users[2]), booking.HoldRequest{UserID: w.users[2],
			IdempotencyKey: fmt.Sprintf("late-hold-3-%d", n), Train: "12951", Date: w.date, Class: "3A", From: "MMCT", To: "NDLS",
			Passengers: []booking.Passenger{pax("Meera Pillai")}})
		if err != nil || h3.Status == "HELD" {
			break
		}
		if h3.Status != "SOLD_OUT" || time.Now().After(deadline) {
			t.Fatalf("hold for 3 after the berth's hold expired: %+v", h3)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.pay(t, w.users[2], h3.HoldID, payment.Wallet, "late-pay-3"); err != nil {
		t.Fatal(err)
	}
	approve(t, w, p2.ID)
	w.drain(t, 30*time.Second)
	v2, err := w.s.Payments.Get(ctx, w.users[1], p2.ID)
	if err != nil || v2.State != payment.Refunded || v2.Refund == nil || v2.Refund.Reason != booking.RefundLateSuccessNoSeat || v2.Refund.GatewayRef == "" {
		t.Fatalf("late success with no seat: %+v %v", v2, err)
	}
	if gp, _ := w.gatewayPayment(t, v2.Gateway, p2.ID); gp.Status != pspapi.StatusSuccess {
		t.Fatalf("at the gateway the late payment is %s", gp.Status)
	}

	// A second charge for an already-paid hold (a stray payment the gateway
	// completes) is refunded automatically.
	stray := uuid.New()
	if _, err := w.s.Pool.Exec(ctx, `INSERT INTO payments (id, hold_id, user_id, psp, route, method, amount_paise, state, idempotency_key, deadline)
		VALUES ($1, $2, $3, 'swiftpay', 'UPI', 'UPI', $4, 'UNKNOWN', 'stray-payment-1', now() + interval '1 minute')`,
		stray, h3.HoldID, w.users[2], h3.Fare.TotalPaise); err != nil {
		t.Fatal(err)
	}
	createAtGateway(t, w, stray, h3.Fare.TotalPaise)
	approve(t, w, stray)
	w.drain(t, 30*time.Second)
	vs, err := w.s.Payments.Get(ctx, w.users[2], stray)
	if err != nil || vs.State != payment.Refunded || vs.Refund == nil || vs.Refund.Reason != booking.RefundDuplicateCharge {
		t.Fatalf("second charge: %+v %v", vs, err)
	}
	var bookings int
	w.s.Pool.QueryRow(ctx, `SELECT count(*) FROM bookings WHERE hold_id = $1`, h3.HoldID).Scan(&bookings) //nolint:errcheck
	if bookings != 1 {
		t.Fatalf("%d bookings for a hold paid twice", bookings)
	}
	w.checkMoney(t)
}

// createAtGateway creates a payment at swiftpay directly, as a stray
// second charge would be.
func createAtGateway(t *testing.T, w *world, id uuid.UUID, amount int64) {
	t.Helper()
	var key string
	for _, g := range w.s.Gateways {
		if g.ID == "swiftpay" {
			key = g.APIKey
		}
	}
	body, _ := json.Marshal(pspapi.CreatePayment{MerchantRef: id.String(), AmountPaise: amount, Currency: "INR", Method: pspapi.UPI,
		VPA: "stray@okbank", CallbackURL: w.s.Server.URL + "/v1/internal/payments/callback", ReturnURL: w.s.Server.URL + "/payments/return?payment_id=" + id.String()})
	req, _ := http.NewRequest("POST", w.s.PSP.URL+"/gw/swiftpay/v1/payments", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Idempotency-Key", id.String())
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p pspapi.Payment
	json.NewDecoder(resp.Body).Decode(&p) //nolint:errcheck
	if resp.StatusCode >= 300 {
		t.Fatalf("create at gateway: %d", resp.StatusCode)
	}
	if _, err := w.s.Pool.Exec(context.Background(), `UPDATE payments SET psp_ref = $2 WHERE id = $1`, id, p.PSPRef); err != nil {
		t.Fatal(err)
	}
}

// approve plays the customer on the gateway's page.
func approve(t *testing.T, w *world, id uuid.UUID) {
	t.Helper()
	var gw, ref, method string
	w.s.Pool.QueryRow(context.Background(), `SELECT psp, psp_ref, method FROM payments WHERE id = $1`, id).Scan(&gw, &ref, &method) //nolint:errcheck
	form := "otp=123456"
	resp, err := http.Post(w.s.PSP.URL+"/gw/"+gw+"/pay/"+ref+"/approve", "application/x-www-form-urlencoded", strings.NewReader(form))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("approve %s at %s: %d %s", ref, gw, resp.StatusCode, b)
	}
}

// A create whose answer is lost leaves the payment UNKNOWN and the
// passenger without the bank's page. The gateway has it, so a prompt
// inquiry finds it and the page appears within seconds, long before the
// payment's own inquiry (15 s after it started) would have asked.
func TestLostCreateAnswerShowsThePageSoon(t *testing.T) {
	t.Parallel()
	w := newWorld(t, teststack.Options{Work: true, CreateTimeout: 500 * time.Millisecond,
		Routes: fastRoutes(func(rc *pspapi.RouteConfig) { rc.AutoApproveMs, rc.TimeoutRate = -1, 1 })}, 4, 1)
	h := w.hold(t, w.users[0], "lost-create-hold")
	v, err := w.pay(t, w.users[0], h.HoldID, payment.UPI, "lost-create-pay")
	if err != nil || v.State != payment.Unknown || v.NextAction != nil {
		t.Fatalf("pay through a gateway that never answers: %+v %v; want UNKNOWN without a page", v, err)
	}
	started := time.Now()
	for v.NextAction == nil || v.NextAction.URL == "" {
		if time.Since(started) > 10*time.Second {
			t.Fatalf("after %s the payment is %s, still without the bank's page", time.Since(started).Round(time.Second), v.State)
		}
		time.Sleep(100 * time.Millisecond)
		if v, err = w.s.Payments.Get(context.Background(), w.users[0], v.ID); err != nil {
			t.Fatal(err)
		}
	}
	if v.State != payment.AwaitingUser {
		t.Errorf("with the page found the payment is %s, want %s", v.State, payment.AwaitingUser)
	}
	t.Logf("the bank's page after %s", time.Since(started).Round(100*time.Millisecond))
}

// A passenger whose connection drops once the payment is recorded (the
// phone losing signal at the bank's button): the gateway still gets the
// create, so the payment shows the bank's page at once and can resolve,
// instead of waiting minutes for the gateway's "no such payment" with the
// seats held for it. Forced: the caller hangs up between the payment's
// commit and the call to the gateway.
func TestCallerHangingUpStillCreatesAtTheGateway(t *testing.T) {
	t.Parallel()
	callerCtx, hangUp := context.WithCancel(context.Background())
	defer hangUp()
	w := newWorld(t, teststack.Options{Work: true, Routes: fastRoutes(func(rc *pspapi.RouteConfig) { rc.AutoApproveMs = -1 }),
		Pause: func(_ context.Context, point string) {
			if point == "pay.before-gateway" {
				hangUp()
			}
		}}, 4, 1)
	h := w.hold(t, w.users[0], "hang-up-hold")
	_, err := w.s.Payments.Initiate(callerCtx, teststack.Caller(w.users[0]),
		payment.InitiateRequest{HoldID: h.HoldID, Method: payment.UPI, VPA: "meera@okbank", IdempotencyKey: "hang-up-pay"})
	if callerCtx.Err() == nil {
		t.Fatal("the caller never hung up: the pause point was not reached")
	}
	t.Logf("the caller, gone, was answered %v", err)
	var id uuid.UUID
	var state, gw string
	if err := w.s.Pool.QueryRow(context.Background(), `SELECT id, state, psp FROM payments WHERE hold_id = $1`, h.HoldID).Scan(&id, &state, &gw); err != nil {
		t.Fatalf("the payment recorded before the hang-up: %v", err)
	}
	if state != payment.AwaitingUser {
		t.Errorf("after the caller hung up the payment is %s, want %s (the gateway created it)", state, payment.AwaitingUser)
	}
	if p, ok := w.gatewayPayment(t, gw, id); !ok {
		t.Error("the gateway never heard of the payment")
	} else if p.Status != pspapi.StatusCreated {
		t.Errorf("at the gateway the payment is %s, want %s", p.Status, pspapi.StatusCreated)
	}
}
