package fraud_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"tatkal/booking"
	"tatkal/booking/fraud"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
	"tatkal/booking/payment"
)

// TestSharedCardLinksAccounts pays five accounts' holds through the
// gateway simulator, the customer typing the card or net-banking login on
// the gateway's page as a person would: two accounts with one card, one
// with another card, two with one net-banking login. The gateway answers a
// fingerprint (never the number), the payment path records it as the
// holds' instrument signal, and clustering links exactly the accounts that
// shared a card or a bank account by a shared-instrument edge.
func TestSharedCardLinksAccounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// The customers pay on the gateway's page, and no callback is lost (a
	// lost one waited 15 s for the payment's inquiry).
	s := teststack.New(t, teststack.Options{Work: true, Routes: teststack.QuietRoutes()})
	shardID, date := s.DemoShard(t, 20, 0)
	users := s.Users(t, "cardfp", 5)
	const cardA, cardB = "4111 1111 1111 1111", "5555-5555-5555-4444"
	pays := []struct{ method, form string }{
		{"CARD", url.Values{"card_number": {cardA}, "otp": {"123456"}}.Encode()},
		{"CARD", url.Values{"card_number": {strings.ReplaceAll(cardA, " ", "")}, "otp": {"654321"}}.Encode()},
		{"CARD", url.Values{"card_number": {cardB}, "otp": {"123456"}}.Encode()},
		{"NB", url.Values{"user_id": {"asha.k"}, "password": {"x"}}.Encode()},
		{"NB", url.Values{"user_id": {"ASHA.K"}, "password": {"y"}}.Encode()},
	}
	noRedirect := testenv.FormClient()
	holds := make([]uuid.UUID, len(users))
	for i, u := range users {
		res, err := s.Service.Hold(ctx, teststack.Caller(u), booking.HoldRequest{UserID: u, IdempotencyKey: fmt.Sprintf("card-hold-%04d", i),
			Train: "12951", Date: date, Class: "3A", Quota: "TQ", From: "MMCT", To: "NDLS",
			Passengers: []booking.Passenger{{Name: "Card Passenger " + string(rune('A'+i)), Age: 30 + i, Gender: "F", IDType: "PAN", IDRef: fmt.Sprintf("CARDP%04dK", i)}}})
		teststack.Must(t, err, "hold %d", i)
		holds[i] = res.HoldID
		v, err := s.Payments.Initiate(ctx, teststack.Caller(u), payment.InitiateRequest{HoldID: res.HoldID, Method: pays[i].method,
			Bank: "SBI", IdempotencyKey: fmt.Sprintf("card-pay-%04d", i)})
		teststack.Must(t, err, "pay %d", i)
		// A create slower than its timeout on a loaded machine leaves the
		// payment UNKNOWN for a moment: the prompt inquiry finds its page.
		testenv.Eventually(t, 20*time.Second, fmt.Sprintf("payment %d's page to pay on", i), func() error {
			if v.NextAction != nil && v.NextAction.URL != "" {
				return nil
			}
			v, err = s.Payments.Get(ctx, u, v.ID)
			teststack.Must(t, err, "read payment %d", i)
			return fmt.Errorf("%+v", v)
		})
		resp, err := noRedirect.Post(v.NextAction.URL+"/approve", "application/x-www-form-urlencoded", strings.NewReader(pays[i].form))
		teststack.Must(t, err, "approve %d", i)
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("approve %d: %d", i, resp.StatusCode)
		}
	}
	// The gateway's callbacks confirm the bookings; each confirmation
	// records its instrument.
	fps := make([]string, len(users))
	testenv.Eventually(t, 60*time.Second, "every booking confirmed with its signal", func() error {
		_, err := fraud.Drain(ctx, s.Pool)
		teststack.Must(t, err, "drain signals")
		rows, err := s.Pool.Query(ctx, `SELECT hold_id, instrument_fp FROM fraud_signals WHERE hold_id = ANY($1) AND booking_id IS NOT NULL`, holds)
		teststack.Must(t, err, "read signals")
		n := 0
		for rows.Next() {
			var h uuid.UUID
			var fp string
			teststack.Must(t, rows.Scan(&h, &fp), "scan")
			for i := range holds {
				if holds[i] == h {
					fps[i] = fp
					n++
				}
			}
		}
		rows.Close()
		return testenv.Want(n == len(holds), "%d of %d", n, len(holds))
	})
	t.Logf("instrument hashes: %q", fps)
	for i, fp := range fps {
		if fp == "" {
			t.Fatalf("account %d's booking has no instrument signal", i)
		}
	}
	if fps[0] != fps[1] || fps[0] == fps[2] || fps[3] != fps[4] || fps[3] == fps[0] || fps[3] == fps[2] {
		t.Fatalf("instrument hashes %q: want accounts 0 and 1 alike (one card), 2 apart, 3 and 4 alike (one bank login)", fps)
	}
	// The gateway named the card by its fingerprint, never its number.
	var refs []string
	rows, err := s.Pool.Query(ctx, `SELECT instrument_ref FROM payments WHERE hold_id = ANY($1) ORDER BY initiated_at`, holds)
	teststack.Must(t, err, "read payments")
	for rows.Next() {
		var r string
		teststack.Must(t, rows.Scan(&r), "scan")
		refs = append(refs, r)
	}
	rows.Close()
	// Not "4111" alone: a random fingerprint holds it one run in a thousand.
	for i, r := range refs {
		if want := map[bool]string{true: "card:cfp_", false: "nb:nba_"}[i < 3]; !strings.HasPrefix(r, want) || strings.Contains(r, "41111111") || strings.Contains(r, "55555555") ||
			strings.Contains(r, "4111 1111") || strings.Contains(r, "5555-5555") {
			t.Fatalf("payment %d's instrument_ref %q, want %s…", i, r, want)
		}
	}

	// Clustering on the instrument alone (families share cards too, so by
	// default it needs a second link; here it is the one measured).
	var window time.Time
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT window_opens_at FROM inventory_shards WHERE id = $1`, shardID).Scan(&window), "window")
	cfg := fraud.DefaultConfig()
	cfg.Weights = map[string]float64{fraud.KindInstrument: cfg.Weights[fraud.KindInstrument]}
	cfg.EdgeThreshold = cfg.Weights[fraud.KindInstrument]
	svc := &fraud.Service{Pool: s.Pool, Clusterer: fraud.Clusterer{Config: cfg}}
	if _, err := svc.ClusterWindow(ctx, window); err != nil {
		t.Fatal(err)
	}
	type pair struct{ a, b int64 }
	edges := map[pair]string{}
	rows, err = s.Pool.Query(ctx, `SELECT user_a, user_b, evidence::text FROM fraud_edges WHERE window_opens_at = $1`, window)
	teststack.Must(t, err, "read edges")
	for rows.Next() {
		var p pair
		var ev string
		teststack.Must(t, rows.Scan(&p.a, &p.b, &ev), "scan")
		edges[p] = ev
	}
	rows.Close()
	want := map[pair]bool{{users[0], users[1]}: true, {users[3], users[4]}: true}
	for p, ev := range edges {
		if !want[p] {
			t.Errorf("edge %d-%d (%s): those accounts paid with different instruments", p.a, p.b, ev)
		}
	}
	for p := range want {
		if ev, ok := edges[p]; !ok || !strings.Contains(ev, `"kind": "instrument"`) {
			t.Errorf("accounts %d and %d shared an instrument: edge %q", p.a, p.b, ev)
		}
	}
}
