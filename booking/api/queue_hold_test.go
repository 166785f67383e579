package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"tatkal/booking"
	"tatkal/booking/admission"
	"tatkal/booking/admission/token"
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/teststack"
)

// Through the waiting room to a seat: a queue-mode shard holds only with a
// valid admission token, bound to the session and device, used once even
// when replayed concurrently; a bad token looks like high demand.
func TestQueueModeHoldUsesTheTokenOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{ChallengeBits: 14, RiskyExtraBits: 6}) // production's: the attested client pays 14 bits
	open := -time.Hour
	if _, err := seed.Demo(ctx, s.Pool, seed.DemoOptions{OpensIn: &open}); err != nil {
		t.Fatal(err)
	}
	date := time.Now().In(booking.IST).AddDate(0, 0, 7)
	date = time.Date(date.Year(), date.Month(), date.Day(), 0, 0, 0, 0, booking.IST)
	shardID, err := seed.Shard(ctx, s.Pool, seed.ShardSpec{Train: "12951", Date: date, Class: "3A", Berths: 20,
		OpensAt: time.Now().Add(-time.Minute), Mode: "queue"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Service.Rebuild(ctx, shardID); err != nil {
		t.Fatal(err)
	}
	uid := s.Users(t, "qm", 1)[0]
	c := newClient(s, uid)
	bind := c.do(t, "POST", "/v1/devices/bind", nil, `{"device_token":"phone-qm-0001-abcdef"}`)
	binding, _ := bind.body["device_binding"].(string)
	if bind.status != 200 || binding == "" {
		t.Fatalf("bind: %d %s", bind.status, bind.raw)
	}
	dev := map[string]string{"X-Device-Token": binding}
	// An attested app (as if its platform evidence had been verified at binding).
	att := s.Admission.AttestationKeys().Attest(uid, token.DeviceID("phone-qm-0001-abcdef"), time.Now().Add(time.Hour))
	r := c.do(t, "POST", "/v1/queue/enter", dev, fmt.Sprintf(`{"intent":{"train_no":"12951","journey_date":"%s","class":"3A"}}`, date.Format(time.DateOnly)))
	ticket, _ := r.body["queue_ticket"].(string)
	if r.status != 200 || ticket == "" {
		t.Fatalf("enter: %d %s", r.status, r.raw)
	}
	plain := holdBody(date, "MMCT", "NDLS", 1)
	// solved answers the booking challenge for one attempt.
	solved := func(key string) string {
		ch := c.do(t, "POST", "/v1/challenge", map[string]string{"X-Client-Attestation": att, "X-Device-Token": binding}, fmt.Sprintf(`{"attempt":%q}`, key))
		tok, _ := ch.body["challenge"].(string)
		bits, _ := ch.body["difficulty_bits"].(float64)
		if ch.status != 200 || tok == "" || bits != 14 {
			t.Fatalf("challenge: %d %s", ch.status, ch.raw)
		}
		return strings.TrimSuffix(plain, "}") + fmt.Sprintf(`,"challenge":{"type":"POW_SHA256","token":%q,"nonce":%q}}`, tok, token.Solve(tok, int(bits)))
	}
	hold := func(key string, headers map[string]string) reply {
		h := map[string]string{"Idempotency-Key": key, "X-Client-Attestation": att}
		for k, v := range headers {
			h[k] = v
		}
		body := plain
		if headers["X-Admission-Token"] != "" {
			body = solved(key)
		}
		return c.do(t, "POST", "/v1/bookings/hold", h, body)
	}
	if r := hold("qm-no-token-1", dev); r.status != 403 || r.body["reason"] != "ADMISSION_REQUIRED" {
		t.Fatalf("hold without a token: %d %s", r.status, r.raw)
	}
	if w, a, err := s.Admission.Depth(ctx, shardID); err != nil || w != 1 || a != 0 {
		t.Fatalf("queue depth before admission: %d waiting, %d admitted (%v)", w, a, err)
	}
	if err := s.Admission.NewController(admission.ControllerConfig{}).Step(ctx); err != nil {
		t.Fatal(err)
	}
	if w, a, err := s.Admission.Depth(ctx, shardID); err != nil || w != 0 || a != 1 {
		t.Fatalf("queue depth after admission: %d waiting, %d admitted (%v)", w, a, err)
	}
	time.Sleep(1200 * time.Millisecond) // past the poll time of the cached answer
	r = c.do(t, "GET", "/v1/queue/status?ticket="+ticket, dev, "")
	tok, _ := r.body["admission_token"].(string)
	if r.body["status"] != "ADMITTED" || tok == "" {
		t.Fatalf("not admitted: %s", r.raw)
	}
	withTok := map[string]string{"X-Device-Token": binding, "X-Admission-Token": tok}
	// Without a solved challenge: a clear error; with a wrong answer: high demand.
	if r := c.do(t, "POST", "/v1/bookings/hold", map[string]string{"Idempotency-Key": "qm-no-challenge", "X-Device-Token": binding,
		"X-Admission-Token": tok}, plain); r.status != 400 || r.body["reason"] != "CHALLENGE_REQUIRED" {
		t.Fatalf("hold without a challenge: %d %s", r.status, r.raw)
	}
	bad := strings.Replace(solved("qm-bad-nonce-1"), `","nonce"`, `x","nonce"`, 1) // a forged challenge
	if r := c.do(t, "POST", "/v1/bookings/hold", map[string]string{"Idempotency-Key": "qm-bad-nonce-1", "X-Device-Token": binding,
		"X-Admission-Token": tok}, bad); r.status != 503 || r.body["reason"] != "HIGH_DEMAND" {
		t.Fatalf("hold with a wrong challenge answer: %d %s", r.status, r.raw)
	}
	if r := hold("qm-forged-1", map[string]string{"X-Device-Token": binding, "X-Admission-Token": tok + "x"}); r.status != 503 || r.body["reason"] != "HIGH_DEMAND" {
		t.Fatalf("forged token: %d %s", r.status, r.raw)
	}
	if r := hold("qm-no-device-1", map[string]string{"X-Admission-Token": tok}); r.status != 503 || r.body["reason"] != "HIGH_DEMAND" {
		t.Fatalf("token from another device: %d %s", r.status, r.raw)
	}
	// Twenty replays of one token at once: one seat held, the rest refused.
	var wg sync.WaitGroup
	answers := make([]reply, 20)
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i] = hold(fmt.Sprintf("qm-replay-%02d", i), withTok)
		}()
	}
	wg.Wait()
	held := 0
	for _, a := range answers {
		switch {
		case a.status == http.StatusCreated:
			held++
		case a.status == 503 && a.body["reason"] == "HIGH_DEMAND":
		case a.status == 429 && a.body["reason"] == "LIVE_HOLD_EXISTS":
			t.Errorf("a replay reached the seat script past the token: %s", a.raw)
		default:
			t.Errorf("replay: %d %s", a.status, a.raw)
		}
	}
	if held != 1 {
		t.Fatalf("%d holds from one admission token", held)
	}
	var tokenID string
	if err := s.Pool.QueryRow(ctx, `SELECT coalesce(admission_token_id, '') FROM holds WHERE user_id = $1`, uid).Scan(&tokenID); err != nil || len(tokenID) != 24 {
		t.Fatalf("hold row's admission token id %q (%v)", tokenID, err)
	}
	s.CheckInvariants(t, shardID)
}
