package admission

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"tatkal/booking"
)

func (b *bundle) user(t *testing.T, login, userType string) int64 {
	t.Helper()
	var id int64
	if err := b.env.Pool.QueryRow(context.Background(), `INSERT INTO users (login, password_hash, user_type) VALUES ($1, 'x', $2) RETURNING id`,
		login, userType).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

func TestOTPVerifiesIdentity(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	uid := b.user(t, "otp1", "INDIVIDUAL")
	sent, err := b.svc.RequestOTP(ctx, uid)
	if err != nil || sent.ExpiresInS != 300 {
		t.Fatalf("request: %+v %v", sent, err)
	}
	if _, err := b.svc.RequestOTP(ctx, uid); booking.ErrorReason(err) != "OTP_TOO_SOON" {
		t.Fatalf("second request at once: %v", err)
	}
	var body string
	if err := b.env.Pool.QueryRow(ctx, `SELECT body FROM notifications WHERE user_id = $1 AND kind = 'OTP' AND channel = 'SMS'`, uid).Scan(&body); err != nil {
		t.Fatalf("no code in the outbox: %v", err)
	}
	code := regexp.MustCompile(`\d{6}`).FindString(body)
	wrong := "000000"
	if code == wrong {
		wrong = "111111"
	}
	if _, err := b.svc.VerifyOTP(ctx, uid, wrong); booking.ErrorReason(err) != "OTP_WRONG" {
		t.Fatalf("wrong code: %v", err)
	}
	acct, err := b.svc.VerifyOTP(ctx, uid, code)
	if err != nil || !acct.Verified {
		t.Fatalf("right code: %+v %v", acct, err)
	}
	var status string
	b.env.Pool.QueryRow(ctx, `SELECT id_verification_status FROM users WHERE id = $1`, uid).Scan(&status) //nolint:errcheck
	if status != "VERIFIED" {
		t.Fatalf("status %s", status)
	}
	if _, err := b.svc.VerifyOTP(ctx, uid, code); booking.ErrorReason(err) != "OTP_NONE" {
		t.Fatalf("code reused: %v", err)
	}

	// Five wrong answers kill a code.
	uid2 := b.user(t, "otp2", "INDIVIDUAL")
	if _, err := b.svc.RequestOTP(ctx, uid2); err != nil {
		t.Fatal(err)
	}
	b.env.Pool.QueryRow(ctx, `SELECT body FROM notifications WHERE user_id = $1 AND kind = 'OTP' AND channel = 'SMS'`, uid2).Scan(&body) //nolint:errcheck
	code = regexp.MustCompile(`\d{6}`).FindString(body)
	bad := "123456"
	if bad == code {
		bad = "654321"
	}
	for range 5 {
		b.svc.VerifyOTP(ctx, uid2, bad) //nolint:errcheck
	}
	if _, err := b.svc.VerifyOTP(ctx, uid2, code); booking.ErrorReason(err) != "OTP_LOCKED" {
		t.Fatalf("after five wrong codes: %v", err)
	}
}

func TestDeviceLimitAndRules(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.AccountsPerDevice = 2 })
	ctx := context.Background()
	ids := []int64{b.user(t, "d1", "INDIVIDUAL"), b.user(t, "d2", "INDIVIDUAL"), b.user(t, "d3", "INDIVIDUAL")}
	const dev = "device-token-shared-0001"
	for _, id := range ids[:2] {
		if _, err := b.svc.BindDevice(ctx, id, dev, ""); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.svc.BindDevice(ctx, ids[0], dev, ""); err != nil {
		t.Fatalf("binding again: %v", err)
	}
	if _, err := b.svc.BindDevice(ctx, ids[2], dev, ""); booking.ErrorReason(err) != "DEVICE_LIMIT" {
		t.Fatalf("third account on one device: %v", err)
	}

	shard := b.shard(t, "3A", 0, time.Now().Add(-time.Minute), "queue")
	c := b.caller(ids[0])
	c.Verified = false
	if _, err := b.svc.Enter(ctx, c, intentOf(shard)); booking.ErrorReason(err) != "NOT_VERIFIED" {
		t.Fatalf("unverified: %v", err)
	}
	c = b.caller(ids[0])
	c.Agent = true
	if _, err := b.svc.Enter(ctx, c, intentOf(shard)); booking.ErrorReason(err) != "AGENT_BARRED" {
		t.Fatalf("agent in the first 30 minutes: %v", err)
	}
	// No or forged device binding: the same answer as overload.
	c = b.caller(ids[0])
	c.DeviceToken = ""
	_, err1 := b.svc.Enter(ctx, c, intentOf(shard))
	c.DeviceToken = b.svc.devices.BindDevice(ids[1], "x", time.Now())
	_, err2 := b.svc.Enter(ctx, c, intentOf(shard))
	if !IsHighDemand(err1) || !IsHighDemand(err2) || err1.Error() != highDemand().Error() {
		t.Fatalf("bot-like entries: %v / %v", err1, err2)
	}
}

func TestRateLimitLooksLikeOverload(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.LimitAccount = 3 })
	ctx := context.Background()
	shard := b.shard(t, "3A", 0, time.Now().Add(-time.Minute), "queue")
	c := b.caller(42)
	var limited error
	for range 10 {
		if _, err := b.svc.Enter(ctx, c, intentOf(shard)); err != nil {
			limited = err
			break
		}
	}
	if !IsHighDemand(limited) {
		t.Fatalf("an account entering 10 times a second: %v", limited)
	}
}

func TestEarlyPollsGetTheCachedAnswer(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	shard := b.shard(t, "3A", 0, time.Now().Add(-time.Minute), "queue")
	c := b.caller(7)
	v, err := b.svc.Enter(ctx, c, intentOf(shard))
	if err != nil {
		t.Fatal(err)
	}
	first, err := b.svc.Status(ctx, c, v.Ticket)
	if err != nil || first.PollAfterMs < 500 {
		t.Fatalf("status: %+v %v", first, err)
	}
	before := b.svc.EarlyPolls.Load()
	for range 5 {
		again, err := b.svc.Status(ctx, c, v.Ticket)
		if err != nil || again.PollAfterMs != first.PollAfterMs {
			t.Fatalf("early poll: %+v %v", again, err)
		}
	}
	if b.svc.EarlyPolls.Load()-before != 5 {
		t.Fatalf("early polls counted %d, want 5", b.svc.EarlyPolls.Load()-before)
	}
	if _, err := b.svc.Status(ctx, b.caller(8), v.Ticket); booking.ErrorReason(err) != "NO_SUCH_TICKET" {
		t.Fatalf("someone else's ticket: %v", err)
	}
}

// Only an attestation this server issued (at device binding, for platform
// evidence it verified) lowers the challenge; any other X-Client-Attestation
// value counts as none.
func TestOnlyIssuedAttestationsLowerTheChallenge(t *testing.T) {
	t.Parallel()
	// The platform's verifier (Play Integrity, App Attest) stands outside;
	// here it accepts one piece of evidence.
	b := setup(t, func(c *Config) {
		c.VerifyPlatform = func(_ context.Context, _ int64, _, evidence string) (bool, error) {
			return evidence == "genuine-platform-evidence", nil
		}
	})
	ctx := context.Background()
	uid := b.user(t, "att1", "INDIVIDUAL")
	other := b.user(t, "att2", "INDIVIDUAL")
	bits := func(c Caller) int {
		t.Helper()
		ch, err := b.svc.Challenge(ctx, c, "attempt-0001")
		if err != nil {
			t.Fatal(err)
		}
		return ch.Bits
	}
	forged, err := b.svc.BindDevice(ctx, uid, "phone-att-0001-abcdef", "made-up-evidence")
	if err != nil || forged.Attestation != "" {
		t.Fatalf("binding with unverifiable evidence: %+v %v", forged, err)
	}
	caller := Caller{UserID: uid, Verified: true, SessionToken: "st_att", DeviceToken: forged.DeviceToken}
	for _, att := range []string{"", "app-integrity", "at_a1.eyJ4Ijo.x", strings.Repeat("A", 300)} {
		caller.Attestation = att
		if n := bits(caller); n != 20 {
			t.Fatalf("attestation %.20q: %d bits, want 20", att, n)
		}
	}
	var attested bool
	b.env.Pool.QueryRow(ctx, `SELECT attested FROM devices WHERE user_id = $1`, uid).Scan(&attested) //nolint:errcheck
	if attested {
		t.Fatal("device recorded attested on unverifiable evidence")
	}

	good, err := b.svc.BindDevice(ctx, uid, "phone-att-0001-abcdef", "genuine-platform-evidence")
	if err != nil || good.Attestation == "" || good.AttestationExpiresAt == nil {
		t.Fatalf("binding with verified evidence: %+v %v", good, err)
	}
	b.env.Pool.QueryRow(ctx, `SELECT attested FROM devices WHERE user_id = $1`, uid).Scan(&attested) //nolint:errcheck
	if !attested {
		t.Fatal("device not recorded as attested")
	}
	caller.DeviceToken, caller.Attestation = good.DeviceToken, good.Attestation
	if n := bits(caller); n != 14 {
		t.Fatalf("issued attestation: %d bits, want 14", n)
	}
	// Bound to the account, the device and a time.
	thief := Caller{UserID: other, Verified: true, SessionToken: "st_att2", Attestation: good.Attestation}
	thiefDev, _ := b.svc.BindDevice(ctx, other, "phone-att-0002-abcdef", "")
	thief.DeviceToken = thiefDev.DeviceToken
	if n := bits(thief); n != 20 {
		t.Fatalf("another account's attestation: %d bits", n)
	}
	otherDevice, _ := b.svc.BindDevice(ctx, uid, "tablet-att-0003-abcdef", "")
	if n := bits(Caller{UserID: uid, SessionToken: "st_att", DeviceToken: otherDevice.DeviceToken, Attestation: good.Attestation}); n != 20 {
		t.Fatalf("attestation of another device: %d bits", n)
	}
	b.clock.Set(time.Now().Add(AttestationTTL + time.Minute))
	if n := bits(caller); n != 20 {
		t.Fatalf("expired attestation: %d bits", n)
	}
}

// The booking check's code (the proof of work's accessible alternative)
// goes the identity code's path: the same limits, one use, and using it
// changes nothing about the account.
func TestChallengeOTP(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	uid := b.user(t, "otp3", "INDIVIDUAL")
	if _, err := b.svc.RequestChallengeOTP(ctx, uid); err != nil {
		t.Fatalf("request: %v", err)
	}
	if _, err := b.svc.RequestOTP(ctx, uid); booking.ErrorReason(err) != "OTP_TOO_SOON" {
		t.Fatalf("an identity code at once after a booking code: %v, want OTP_TOO_SOON (one limit)", err)
	}
	var body string
	if err := b.env.Pool.QueryRow(ctx, `SELECT body FROM notifications WHERE user_id = $1 AND kind = 'OTP' AND channel = 'SMS'`, uid).Scan(&body); err != nil {
		t.Fatalf("no code in the outbox: %v", err)
	}
	if !strings.Contains(body, "booking check code") {
		t.Fatalf("message: %q", body)
	}
	code := regexp.MustCompile(`\d{6}`).FindString(body)
	wrong := "000000"
	if code == wrong {
		wrong = "111111"
	}
	if err := b.svc.UseOTP(ctx, uid, wrong); booking.ErrorReason(err) != "OTP_WRONG" {
		t.Fatalf("wrong code: %v", err)
	}
	if err := b.svc.UseOTP(ctx, uid, code); err != nil {
		t.Fatalf("right code: %v", err)
	}
	if err := b.svc.UseOTP(ctx, uid, code); booking.ErrorReason(err) != "OTP_NONE" {
		t.Fatalf("code reused: %v", err)
	}
	var status string
	b.env.Pool.QueryRow(ctx, `SELECT id_verification_status FROM users WHERE id = $1`, uid).Scan(&status) //nolint:errcheck
	if status == "VERIFIED" {
		t.Fatal("a booking check code verified the account's identity")
	}
}
