package admission

import (
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"tatkal/booking"
	"tatkal/booking/admission/token"
	"tatkal/booking/fraud"
)

// TestFlaggedAccountHarderChallenge: the graduated response. An account a
// fraud decision flagged (risk_score >= 1) gets FlaggedExtraBits more on
// top of what its client earns; the account next to it does not; the
// harder challenge is what the hold then checks (an easier answer fails).
func TestFlaggedAccountHarderChallenge(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.ChallengeBits, c.RiskyExtraBits, c.FlaggedExtraBits = 6, 3, 5 })
	ctx := context.Background()
	flagged := b.user(t, "fl-flagged", "INDIVIDUAL")
	plain := b.user(t, "fl-plain", "INDIVIDUAL")
	bits := func(uid int64, attested bool) ChallengeView {
		t.Helper()
		c := b.caller(uid)
		if attested {
			c.Attestation = b.svc.attest.Attest(uid, "dev"+itoa(uid), time.Now().Add(time.Hour))
		}
		ch, err := b.svc.Challenge(ctx, c, "attempt-0001")
		if err != nil {
			t.Fatal(err)
		}
		return ch
	}
	if n := bits(flagged, true).Bits; n != 6 {
		t.Fatalf("before the decision: %d bits, want 6", n)
	}
	if _, err := b.env.Pool.Exec(ctx, `UPDATE users SET risk_score = 1 WHERE id = $1`, flagged); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		uid      int64
		attested bool
		want     int
	}{{flagged, true, 11}, {flagged, false, 14}, {plain, true, 6}, {plain, false, 9}} {
		if n := bits(tc.uid, tc.attested).Bits; n != tc.want {
			t.Errorf("user %d attested %v: %d bits, want %d", tc.uid, tc.attested, n, tc.want)
		}
	}
	// An answer good enough for the old difficulty is not enough now.
	c := b.caller(flagged)
	c.Attestation = b.svc.attest.Attest(flagged, "dev"+itoa(flagged), time.Now().Add(time.Hour))
	ch, err := b.svc.Challenge(ctx, c, "attempt-0002")
	if err != nil {
		t.Fatal(err)
	}
	weak := ""
	for i := 0; ; i++ {
		n := "w" + itoa(int64(i))
		if z := leadingZeros(ch.Challenge, n); z >= 6 && z < 11 {
			weak = n
			break
		}
	}
	if err := b.svc.CheckChallenge(ctx, c, ch.Challenge, weak, "attempt-0002"); !IsHighDemand(err) {
		t.Fatalf("an answer of the unflagged difficulty passed: %v", err)
	}
	// An upheld appeal (risk_score back to 0) lifts it.
	if _, err := b.env.Pool.Exec(ctx, `UPDATE users SET risk_score = 0 WHERE id = $1`, flagged); err != nil {
		t.Fatal(err)
	}
	if n := bits(flagged, true).Bits; n != 6 {
		t.Errorf("after restoring: %d bits, want 6", n)
	}
}

// TestOTPBindsPhone: a code asked for with a phone number goes by SMS to
// that number only; the right code records the phone's keyed hash as the
// account's identity (the same for every spelling of the number, never the
// number itself); a bad number is refused; without the key there is no
// phone verification.
func TestOTPBindsPhone(t *testing.T) {
	t.Parallel()
	key := []byte("fraud-key-for-the-identity-test-0123")
	b := setup(t, func(c *Config) { c.IdentityKey = key })
	ctx := context.Background()
	a1 := b.user(t, "ph-1", "INDIVIDUAL")
	a2 := b.user(t, "ph-2", "INDIVIDUAL")
	if _, err := b.svc.RequestOTPTo(ctx, a1, "12345"); booking.ErrorReason(err) != "BAD_PHONE" {
		t.Fatalf("bad number: %v", err)
	}
	verify := func(uid int64, phone string) {
		t.Helper()
		sent, err := b.svc.RequestOTPTo(ctx, uid, phone)
		if err != nil || len(sent.Channels) != 1 || sent.Channels[0] != "SMS" {
			t.Fatalf("request to %s: %+v %v", phone, sent, err)
		}
		var body, addr string
		var n int
		if err := b.env.Pool.QueryRow(ctx, `SELECT max(body), max(address), count(*) FROM notifications WHERE user_id = $1 AND kind = 'OTP'`,
			uid).Scan(&body, &addr, &n); err != nil || n != 1 || addr != "9876543210" {
			t.Fatalf("outbox: %d messages to %q (err %v); want one SMS to the named phone", n, addr, err)
		}
		if _, err := b.svc.VerifyOTP(ctx, uid, regexp.MustCompile(`\d{6}`).FindString(body)); err != nil {
			t.Fatal(err)
		}
	}
	verify(a1, "+91 98765-43210")
	verify(a2, "09876543210")
	var h1, h2 string
	if err := b.env.Pool.QueryRow(ctx, `SELECT (SELECT phone_hash FROM users WHERE id = $1), (SELECT phone_hash FROM users WHERE id = $2)`,
		a1, a2).Scan(&h1, &h2); err != nil {
		t.Fatal(err)
	}
	want := fraud.Recorder{Key: key}.PhoneHash("9876543210")
	if h1 != want || h2 != want || want == "" {
		t.Errorf("phone hashes %q %q, want both %q", h1, h2, want)
	}
	var leaked int
	if err := b.env.Pool.QueryRow(ctx, `SELECT count(*) FROM users WHERE phone_hash LIKE '%9876543210%'`).Scan(&leaked); err != nil || leaked != 0 {
		t.Errorf("%d accounts keep the raw number (err %v)", leaked, err)
	}
	// A code without a phone verifies but binds no phone.
	a3 := b.user(t, "ph-3", "INDIVIDUAL")
	if _, err := b.svc.RequestOTP(ctx, a3); err != nil {
		t.Fatal(err)
	}
	var body string
	if err := b.env.Pool.QueryRow(ctx, `SELECT body FROM notifications WHERE user_id = $1 AND channel = 'SMS'`, a3).Scan(&body); err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.VerifyOTP(ctx, a3, regexp.MustCompile(`\d{6}`).FindString(body)); err != nil {
		t.Fatal(err)
	}
	var none *string
	if err := b.env.Pool.QueryRow(ctx, `SELECT phone_hash FROM users WHERE id = $1`, a3).Scan(&none); err != nil || none != nil {
		t.Errorf("an OTP without a phone bound %v (err %v)", none, err)
	}

	nokey := setup(t, nil)
	u := nokey.user(t, "ph-nokey", "INDIVIDUAL")
	if _, err := nokey.svc.RequestOTPTo(ctx, u, "9876543210"); booking.ErrorReason(err) != "NO_PHONE_VERIFICATION" {
		t.Errorf("phone verification without a key: %v", err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func leadingZeros(tok, nonce string) int { return token.LeadingZeroBits(tok, nonce) }
