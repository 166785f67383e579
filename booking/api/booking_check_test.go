package api_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"tatkal/booking/auth"
	"tatkal/booking/lab/teststack"
)

// TestDirectShardHoldCarriesTheBookingCheck: on a direct shard (no waiting
// room, no admission token) a hold without the booking check is refused
// and holds nothing; with a solved challenge it holds; with the code sent
// by SMS in its place (the accessible alternative) it holds too, once.
func TestDirectShardHoldCarriesTheBookingCheck(t *testing.T) {
	s := teststack.New(t, teststack.Options{})
	shardID, date := s.DemoShard(t, 8, 0)
	users := s.Users(t, "chk", 2)
	ctx := context.Background()
	var mode string
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT mode FROM inventory_shards WHERE id = $1`, shardID).Scan(&mode), "mode")
	if mode != "direct" {
		t.Fatalf("the shard is %s, want direct", mode)
	}
	c := newClient(s, users[0])
	body := holdBody(date, "MMCT", "NDLS", 1)
	before := stateOf(t, s, shardID)
	r := c.do(t, "POST", "/v1/bookings/hold", map[string]string{"Idempotency-Key": "chk-00000001"}, body)
	wantProblem(t, r, http.StatusBadRequest, "CHALLENGE_REQUIRED")
	if after := stateOf(t, s, shardID); after != before {
		t.Fatalf("a refused hold changed the shard: %v -> %v", before, after)
	}
	// A challenge solved for another attempt is not this one's.
	other := teststack.WithChallenge(t, c.base, c.token, "chk-other-attempt", body, nil)
	if r := c.do(t, "POST", "/v1/bookings/hold", map[string]string{"Idempotency-Key": "chk-00000002"}, other); r.status != http.StatusServiceUnavailable {
		t.Fatalf("a challenge of another attempt: %d %s", r.status, r.raw)
	}
	if r := c.hold(t, "chk-00000003", body); r.status != http.StatusCreated {
		t.Fatalf("with the challenge: %d %s", r.status, r.raw)
	}

	// The SMS alternative, for a client that cannot run the puzzle.
	sms := newClient(s, users[1])
	if r := sms.do(t, "POST", "/v1/challenge/otp", nil, ""); r.status != http.StatusOK {
		t.Fatalf("code by SMS: %d %s", r.status, r.raw)
	}
	var text string
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT body FROM notifications WHERE user_id = $1 AND kind = 'OTP' AND channel = 'SMS'`, users[1]).Scan(&text), "code")
	code := regexp.MustCompile(`\d{6}`).FindString(text)
	withCode := strings.TrimSuffix(body, "}") + fmt.Sprintf(`,"challenge":{"type":"OTP","code":%q}}`, code)
	wrong := strings.TrimSuffix(body, "}") + fmt.Sprintf(`,"challenge":{"type":"OTP","code":"%06d"}}`, (atoi(code)+1)%1_000_000)
	wantProblem(t, sms.do(t, "POST", "/v1/bookings/hold", map[string]string{"Idempotency-Key": "chk-sms-00001"}, wrong), http.StatusBadRequest, "OTP_WRONG")
	if r := sms.do(t, "POST", "/v1/bookings/hold", map[string]string{"Idempotency-Key": "chk-sms-00002"}, withCode); r.status != http.StatusCreated {
		t.Fatalf("with the SMS code: %d %s", r.status, r.raw)
	}
	wantProblem(t, sms.do(t, "POST", "/v1/bookings/hold", map[string]string{"Idempotency-Key": "chk-sms-00003"}, withCode), http.StatusBadRequest, "OTP_NONE")
	s.CheckInvariants(t, shardID)
}

// TestOneBookingSessionPerAccount: two sessions of one account at the
// opening. The one that asked for its booking check last is the account's
// booking session; the other's hold, though its challenge is solved, is
// refused with SESSION_SUPERSEDED and holds nothing, until it asks again
// (which ends the first in turn).
func TestOneBookingSessionPerAccount(t *testing.T) {
	s := teststack.New(t, teststack.Options{})
	shardID, date := s.DemoShard(t, 8, 0)
	u := s.Users(t, "one", 1)[0]
	session := func(id string) *client {
		tok := s.Signer.Sign(auth.Session{UserID: u, Verified: true, ID: id, CreatedAt: time.Now().Add(-30 * 24 * time.Hour), ExpiresAt: time.Now().Add(time.Hour)})
		return &client{base: s.Server.URL, token: tok, device: s.DeviceBinding(u), http: &http.Client{Timeout: 30 * time.Second}}
	}
	phone, laptop := session("phone"), session("laptop")
	body := holdBody(date, "MMCT", "NDLS", 1)
	// The phone solves its check first, then the laptop asks for its own.
	onPhone := teststack.WithChallenge(t, phone.base, phone.token, "one-phone-0001", body, nil)
	onLaptop := teststack.WithChallenge(t, laptop.base, laptop.token, "one-laptop-001", body, nil)
	before := stateOf(t, s, shardID)
	wantProblem(t, phone.do(t, "POST", "/v1/bookings/hold", map[string]string{"Idempotency-Key": "one-phone-0001"}, onPhone), http.StatusForbidden, "SESSION_SUPERSEDED")
	if after := stateOf(t, s, shardID); after != before {
		t.Fatal("a superseded session's hold changed the shard")
	}
	if r := laptop.do(t, "POST", "/v1/bookings/hold", map[string]string{"Idempotency-Key": "one-laptop-001"}, onLaptop); r.status != http.StatusCreated {
		t.Fatalf("the booking session's hold: %d %s", r.status, r.raw)
	}
	// The phone asks again: it is the booking session now, and the laptop's
	// next check is refused; the account's own limit still holds.
	if r := phone.hold(t, "one-phone-0002", body); r.status != http.StatusTooManyRequests || r.body["reason"] != "LIVE_HOLD_EXISTS" {
		t.Fatalf("the phone, booking session again: %d %s", r.status, r.raw)
	}
	stale := teststack.WithChallenge(t, laptop.base, laptop.token, "one-laptop-002", body, nil)
	phone.hold(t, "one-phone-0003", body) // the phone asks last
	wantProblem(t, laptop.do(t, "POST", "/v1/bookings/hold", map[string]string{"Idempotency-Key": "one-laptop-002"}, stale), http.StatusForbidden, "SESSION_SUPERSEDED")
	s.CheckInvariants(t, shardID)
}
