package api_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"tatkal/booking"
	"tatkal/booking/admission"
	"tatkal/booking/admission/token"
	"tatkal/booking/api"
	"tatkal/booking/auth"
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
)

// queueStack is a test stack with the waiting room mounted, on clock.
func queueStack(t *testing.T, clock *testenv.Clock) (*teststack.Stack, *admission.Service, string) {
	t.Helper()
	s := teststack.New(t, teststack.Options{})
	adm, err := admission.New(admission.Config{Pool: s.Pool, Redis: s.Redis, Prefix: s.KeyPrefix, Store: s.Store, Now: clock.Now,
		Catalog: s.Service.Catalog(), Funnel: s.Funnel, Secret: []byte(strings.Repeat("q", 32)), IdentityKey: []byte(teststack.FraudKey),
		// Stands in for the platform's integrity verdict service.
		VerifyPlatform: func(_ context.Context, _ int64, _, evidence string) (bool, error) {
			return evidence == "genuine-platform-evidence", nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	r := chi.NewRouter()
	api.New(api.Config{Service: s.Service, Payments: s.Payments, Pool: s.Pool, Signer: s.Signer, Admission: adm}).Routes(r)
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return s, adm, srv.URL
}

func TestQueueOverHTTP(t *testing.T) {
	t.Parallel()
	clock := &testenv.Clock{}
	s, adm, base := queueStack(t, clock)
	ctx := context.Background()
	open := -time.Hour
	if _, err := seed.Demo(ctx, s.Pool, seed.DemoOptions{OpensIn: &open}); err != nil {
		t.Fatal(err)
	}
	date := time.Now().In(booking.IST).AddDate(0, 0, 6)
	date = time.Date(date.Year(), date.Month(), date.Day(), 0, 0, 0, 0, booking.IST)
	shardID, err := seed.Shard(ctx, s.Pool, seed.ShardSpec{Train: "12951", Date: date, Class: "3A", OpensAt: time.Now().Add(-time.Minute), Mode: "queue"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Service.Rebuild(ctx, shardID); err != nil {
		t.Fatal(err)
	}
	uid := s.Users(t, "qh", 1)[0]
	c := &client{base: base, token: s.Token(uid), http: http.DefaultClient}

	bind := c.do(t, "POST", "/v1/devices/bind", nil, `{"device_token":"phone-0001-abcdefgh"}`)
	binding, _ := bind.body["device_binding"].(string)
	if bind.status != 200 || binding == "" {
		t.Fatalf("bind: %d %s", bind.status, bind.raw)
	}
	enter := fmt.Sprintf(`{"intent":{"train_no":"12951","journey_date":"%s","class":"3A"}}`, date.Format(time.DateOnly))

	// No device binding: the uniform high-demand answer.
	r := c.do(t, "POST", "/v1/queue/enter", nil, enter)
	if r.status != 503 || r.body["reason"] != "HIGH_DEMAND" || r.header.Get("Retry-After") == "" {
		t.Fatalf("enter without device: %d %s", r.status, r.raw)
	}
	dev := map[string]string{"X-Device-Token": binding}
	r = c.do(t, "POST", "/v1/queue/enter", dev, enter)
	ticket, _ := r.body["queue_ticket"].(string)
	if r.status != 200 || r.body["status"] != "WAITING" || ticket == "" || r.header.Get("Retry-After") == "" {
		t.Fatalf("enter: %d %s", r.status, r.raw)
	}
	if r2 := c.do(t, "POST", "/v1/queue/enter", dev, enter); r2.body["queue_ticket"] != ticket {
		t.Fatalf("second entry: %s, first ticket %s", r2.raw, ticket)
	}
	r = c.do(t, "GET", "/v1/queue/status?ticket="+ticket, dev, "")
	if r.status != 200 || r.body["status"] != "WAITING" || r.body["position_hint"] != float64(1) || r.body["poll_after_ms"] == nil {
		t.Fatalf("status: %d %s", r.status, r.raw)
	}

	// Before the controller has admitted anyone the seed is secret.
	f := c.do(t, "GET", fmt.Sprintf("/v1/windows/%d/fairness", shardID), nil, "")
	commitment, _ := f.body["seed_sha256"].(string)
	if f.status != 200 || len(commitment) != 64 || f.body["seed"] != nil {
		t.Fatalf("fairness before the draw closed: %s", f.raw)
	}

	ctl := adm.NewController(admission.ControllerConfig{})
	if err := ctl.Step(ctx); err != nil {
		t.Fatal(err)
	}
	clock.Advance(1200 * time.Millisecond) // past the cached answer's poll time
	r = c.do(t, "GET", "/v1/queue/status?ticket="+ticket, dev, "")
	tok, _ := r.body["admission_token"].(string)
	if r.body["status"] != "ADMITTED" || tok == "" {
		t.Fatalf("after admission: %s", r.raw)
	}
	if _, err := adm.Verifier().Verify(tok, token.SessionInfo{UserID: uid, SessionToken: c.token, DeviceToken: binding}, token.Intent{ShardID: shardID}, time.Now()); err != nil {
		t.Fatalf("the admission token does not verify: %v", err)
	}
	f = c.do(t, "GET", fmt.Sprintf("/v1/windows/%d/fairness?entrants=1", shardID), nil, "")
	seedHex, _ := f.body["seed"].(string)
	raw, _ := hex.DecodeString(seedHex)
	sum := sha256.Sum256(raw)
	if hex.EncodeToString(sum[:]) != commitment {
		t.Fatalf("revealed seed %q does not match the commitment %s", seedHex, commitment)
	}
	if r := c.do(t, "GET", "/v1/windows/abc/fairness", nil, ""); r.status != 400 {
		t.Fatalf("bad window id: %d", r.status)
	}

	// Someone else's ticket is not theirs to read.
	other := &client{base: base, token: s.Token(uid + 1000), http: http.DefaultClient}
	if r := other.do(t, "GET", "/v1/queue/status?ticket="+ticket, dev, ""); r.status != 404 {
		t.Fatalf("another account reading the ticket: %d %s", r.status, r.raw)
	}
}

func TestOTPAndChallengeOverHTTP(t *testing.T) {
	t.Parallel()
	s, _, base := queueStack(t, &testenv.Clock{})
	ctx := context.Background()
	uid := s.Users(t, "otp", 1)[0]
	unverified := s.Signer.Sign(auth.Session{UserID: uid, CreatedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour)})
	c := &client{base: base, token: unverified, http: http.DefaultClient}
	// Verification needs the mobile number the code goes to.
	if r := c.do(t, "POST", "/v1/auth/otp/request", nil, ""); r.status != 400 || r.body["reason"] != "PHONE_REQUIRED" {
		t.Fatalf("otp request without a phone: %d %s, want 400 PHONE_REQUIRED", r.status, r.raw)
	}
	if r := c.do(t, "POST", "/v1/auth/otp/request", nil, `{"phone":"9876501234"}`); r.status != 200 {
		t.Fatalf("otp request: %d %s", r.status, r.raw)
	}
	var body string
	if err := s.Pool.QueryRow(ctx, `SELECT body FROM notifications WHERE user_id = $1 AND kind = 'OTP' AND channel = 'SMS'`, uid).Scan(&body); err != nil {
		t.Fatal(err)
	}
	code := regexp.MustCompile(`\d{6}`).FindString(body)
	r := c.do(t, "POST", "/v1/auth/otp/verify", nil, `{"code":"`+code+`"}`)
	newTok, _ := r.body["token"].(string)
	if r.status != 200 || r.body["verified"] != true || newTok == "" {
		t.Fatalf("otp verify: %d %s", r.status, r.raw)
	}
	if sess, err := s.Signer.Verify(newTok, time.Now()); err != nil || !sess.Verified {
		t.Fatalf("new session: %+v %v", sess, err)
	}
	c.token = newTok
	// Any attestation value the client makes up counts as none: 20 bits.
	plain := c.do(t, "POST", "/v1/challenge", nil, `{"attempt":"attempt-0001"}`)
	madeUp := c.do(t, "POST", "/v1/challenge", map[string]string{"X-Client-Attestation": "app-integrity"}, `{"attempt":"attempt-0001"}`)
	if plain.body["difficulty_bits"] != 20.0 || madeUp.body["difficulty_bits"] != 20.0 {
		t.Fatalf("challenges without a verified attestation: %s / %s", plain.raw, madeUp.raw)
	}
	// The attestation issued at device binding for verified evidence: 14 bits.
	bind := c.do(t, "POST", "/v1/devices/bind", nil, `{"device_token":"phone-otp-0001-abcdef","client_attestation":"genuine-platform-evidence"}`)
	binding, _ := bind.body["device_binding"].(string)
	att, _ := bind.body["client_attestation"].(string)
	if bind.status != 200 || binding == "" || att == "" {
		t.Fatalf("bind with platform evidence: %d %s", bind.status, bind.raw)
	}
	issued := c.do(t, "POST", "/v1/challenge", map[string]string{"X-Client-Attestation": att, "X-Device-Token": binding}, `{"attempt":"attempt-0001"}`)
	if issued.status != 200 || issued.body["difficulty_bits"] != 14.0 {
		t.Fatalf("challenge with the issued attestation: %d %s", issued.status, issued.raw)
	}
	if r := c.do(t, "POST", "/v1/devices/bind", nil, `{"device_token":"phone-otp-0002-abcdef","client_attestation":"made-up"}`); r.status != 200 || r.body["client_attestation"] != nil {
		t.Fatalf("bind with made-up evidence: %d %s", r.status, r.raw)
	}
}
