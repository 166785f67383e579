package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"tatkal/booking/lab/teststack"
)

// TestVerifyAsksForPhone: the verify form asks for a mobile number and
// refuses to send a code without one or with one that is not a mobile
// number; the code goes by SMS to that number alone, and the right code
// makes the number the account's identity: two accounts verified with one
// number share it, so the per-person Tatkal cap counts them together.
func TestVerifyAsksForPhone(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{})
	ctx := context.Background()
	users := s.Users(t, "vp", 2)
	_, err := s.Pool.Exec(ctx, `UPDATE users SET id_verification_status = 'UNVERIFIED', verified_at = NULL, phone_hash = NULL WHERE id = ANY($1)`, users)
	teststack.Must(t, err, "unverify")

	verifyWith := func(login string, user int64) {
		t.Helper()
		b := newBrowser(t, s)
		b.signIn(login, "pw-vp")
		_, _, page := b.get("/verify")
		if !strings.Contains(page, `data-testid="otp-phone"`) || !strings.Contains(page, `name="phone"`) {
			t.Fatalf("the verify form asks for no phone number:\n%.2000s", page)
		}
		if status, _, page := b.post("/verify", "/verify/send", url.Values{}); status != http.StatusBadRequest ||
			strings.Contains(page, `data-testid="otp-code"`) || !strings.Contains(page, "mobile number") {
			t.Fatalf("send without a number: %d, want 400 and no code field\n%.2000s", status, page)
		}
		if status, _, page := b.post("/verify", "/verify/send", url.Values{"phone": {"12345"}}); status != http.StatusBadRequest ||
			strings.Contains(page, `data-testid="otp-code"`) {
			t.Fatalf("send to a bad number: %d, want 400 and no code field\n%.2000s", status, page)
		}
		status, _, page := b.post("/verify", "/verify/send", url.Values{"phone": {"+91 98765-43210"}})
		if status != http.StatusOK || !strings.Contains(page, `data-testid="otp-code"`) {
			t.Fatalf("send to a mobile number: %d\n%.2000s", status, page)
		}
		var channel, address string
		err := s.Pool.QueryRow(ctx, `SELECT channel, coalesce(address, '') FROM notifications WHERE user_id = $1 AND kind = 'OTP' ORDER BY id DESC LIMIT 1`, user).Scan(&channel, &address)
		teststack.Must(t, err, "the code sent")
		if channel != "SMS" || address != "9876543210" {
			t.Fatalf("code sent by %s to %q, want SMS to 9876543210", channel, address)
		}
		if status, loc, page := b.post("/verify", "/verify", url.Values{"code": {lastCode(t, s, user)}}); status != http.StatusSeeOther {
			t.Fatalf("verify with the code: %d %q\n%.2000s", status, loc, page)
		}
	}
	verifyWith("vp00001", users[0])
	verifyWith("vp00002", users[1])
	var verified, people int
	err = s.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE id_verification_status = 'VERIFIED' AND phone_hash IS NOT NULL), count(DISTINCT phone_hash)
		FROM users WHERE id = ANY($1)`, users).Scan(&verified, &people)
	teststack.Must(t, err, "read the identities")
	if verified != 2 || people != 1 {
		t.Fatalf("%d accounts verified with a number, %d distinct numbers; want 2 and 1", verified, people)
	}
}
