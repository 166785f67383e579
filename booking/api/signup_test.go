package api_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tatkal/booking"
	"tatkal/booking/kyc"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
	"tatkal/booking/signup"
)

var phoneSeq atomic.Int64

// newPhone is a mobile number no other test uses.
func newPhone() string {
	return fmt.Sprintf("9%09d", time.Now().UnixNano()%1_000_000_000/1000*1000+phoneSeq.Add(1)%1000)
}

// aadhaar is a valid 12-digit number (Verhoeff check digit) from 11 digits.
func aadhaar(eleven string) string { return eleven + string(kyc.CheckDigit(eleven)) }

var codeRE = regexp.MustCompile(`\b([0-9]{6})\b`)

// smsCode is the 6-digit code of the newest SMS to phone after since.
func smsCode(t *testing.T, s *teststack.Stack, phone string, since time.Time) string {
	t.Helper()
	body := s.LastSMS(t, phone, since, codeRE)
	m := codeRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("SMS to %s has no code: %q", phone, body)
	}
	return m[1]
}

func anon(s *teststack.Stack) *client {
	return &client{base: s.Server.URL, http: &http.Client{Timeout: 60 * time.Second}}
}

func (c *client) post(t *testing.T, path string, body any) reply {
	t.Helper()
	r, err := testenv.Do(testenv.Request{Method: "POST", URL: c.base + path, Token: c.token, Body: body, Client: c.http})
	if err != nil {
		t.Fatal(err)
	}
	return reply{status: r.Status, header: r.Header, body: r.JSON, raw: string(r.Raw)}
}

func wantProblem(t *testing.T, r reply, status int, reason string) {
	t.Helper()
	if r.status != status || r.body["reason"] != reason {
		t.Fatalf("want %d %s, got %d %s", status, reason, r.status, r.raw)
	}
}

const goodPassword = "a long passphrase 7"

// signUp opens an account for phone through the API, reading the code from
// the SMS simulator, and returns its (unverified) session token.
func signUp(t *testing.T, s *teststack.Stack, phone string) string {
	t.Helper()
	c := anon(s)
	since := time.Now()
	if r := c.post(t, "/v1/signup/code", map[string]string{"phone": phone}); r.status != http.StatusAccepted {
		t.Fatalf("signup code: %d %s", r.status, r.raw)
	}
	code := smsCode(t, s, phone, since)
	r := c.post(t, "/v1/signup", map[string]string{"phone": phone, "code": code, "email": "traveller@example.com", "password": goodPassword})
	if r.status != http.StatusCreated || r.body["verified"] != false {
		t.Fatalf("signup: %d %s", r.status, r.raw)
	}
	return r.body["token"].(string)
}

// TestSignupBadInputs: a new passenger opens an account with the code read
// from the SMS simulator; every bad input is refused with its reason and
// changes nothing: a bad e-mail or password costs no attempt, a wrong code
// does, five kill the code, an expired code is refused, a second request
// within 30 s is refused, a number that has an account gets the same
// answer (its owner is told, no code goes out) and cannot be signed up
// twice. Codes and numbers are kept only as keyed hashes.
func TestSignupBadInputs(t *testing.T) {
	s := teststack.New(t, teststack.Options{Work: true})
	ctx := context.Background()
	c := anon(s)
	phone := newPhone()
	since := time.Now()
	first := c.post(t, "/v1/signup/code", map[string]string{"phone": phone})
	if first.status != http.StatusAccepted {
		t.Fatalf("code: %d %s", first.status, first.raw)
	}
	wantProblem(t, c.post(t, "/v1/signup/code", map[string]string{"phone": phone}), http.StatusTooManyRequests, "OTP_TOO_SOON")
	wantProblem(t, c.post(t, "/v1/signup/code", map[string]string{"phone": "12345"}), http.StatusBadRequest, "BAD_PHONE")
	code := smsCode(t, s, phone, since)

	// Hashed at rest: neither the code nor the number is in the table.
	var rows int
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM signup_codes WHERE code_mac LIKE '%' || $1 || '%' OR phone_mac LIKE '%' || $2 || '%'`,
		code, phone).Scan(&rows), "codes in clear")
	if rows != 0 {
		t.Fatalf("%d signup_codes rows hold the code or the number in clear", rows)
	}

	attempts := func() int {
		var n int
		teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT attempts FROM signup_codes ORDER BY id DESC LIMIT 1`).Scan(&n), "attempts")
		return n
	}
	reg := func(code, email, pw string) reply {
		return c.post(t, "/v1/signup", map[string]string{"phone": phone, "code": code, "email": email, "password": pw})
	}
	wantProblem(t, reg(code, "not-an-address", goodPassword), http.StatusBadRequest, "BAD_EMAIL")
	wantProblem(t, reg(code, "a@example.com", "short"), http.StatusBadRequest, "BAD_PASSWORD")
	wantProblem(t, reg(code, "a@example.com", "xx"+phone+"xxxxxx"), http.StatusBadRequest, "BAD_PASSWORD")
	if n := attempts(); n != 0 {
		t.Fatalf("bad fields cost %d attempts; they must cost none", n)
	}
	wrong := fmt.Sprintf("%06d", (atoi(code)+1)%1_000_000)
	wantProblem(t, reg(wrong, "a@example.com", goodPassword), http.StatusBadRequest, "OTP_WRONG")
	if n := attempts(); n != 1 {
		t.Fatalf("a wrong code counted %d attempts, want 1", n)
	}
	var users int
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM users WHERE phone = $1 OR login = $1`, phone).Scan(&users), "users")
	if users != 0 {
		t.Fatal("a refused sign-up left an account")
	}

	// Expired: the right code, past its five minutes.
	teststack.Must(t, exec(s, `UPDATE signup_codes SET expires_at = now() - interval '1 second' WHERE id = (SELECT max(id) FROM signup_codes)`), "expire")
	wantProblem(t, reg(code, "a@example.com", goodPassword), http.StatusBadRequest, "OTP_EXPIRED")

	// Too many attempts: a fresh code, five wrong answers, then even the right one is refused.
	teststack.Must(t, exec(s, `UPDATE signup_codes SET created_at = created_at - interval '1 minute'`), "age the request")
	since = time.Now()
	if r := c.post(t, "/v1/signup/code", map[string]string{"phone": phone}); r.status != http.StatusAccepted {
		t.Fatalf("second code: %d %s", r.status, r.raw)
	}
	code = smsCode(t, s, phone, since)
	wrong = fmt.Sprintf("%06d", (atoi(code)+1)%1_000_000)
	for i := 0; i < 5; i++ {
		wantProblem(t, reg(wrong, "a@example.com", goodPassword), http.StatusBadRequest, "OTP_WRONG")
	}
	wantProblem(t, reg(code, "a@example.com", goodPassword), http.StatusTooManyRequests, "OTP_LOCKED")

	// A third code opens the account.
	teststack.Must(t, exec(s, `UPDATE signup_codes SET created_at = created_at - interval '1 minute'`), "age the requests")
	since = time.Now()
	if r := c.post(t, "/v1/signup/code", map[string]string{"phone": phone}); r.status != http.StatusAccepted {
		t.Fatalf("third code: %d %s", r.status, r.raw)
	}
	code = smsCode(t, s, phone, since)
	ok := reg(code, "Traveller@Example.COM", goodPassword)
	if ok.status != http.StatusCreated || ok.body["token"] == nil || ok.body["verified"] != false {
		t.Fatalf("sign-up: %d %s", ok.status, ok.raw)
	}
	var email, status string
	var kycRequired bool
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT email, id_verification_status, kyc_required FROM users WHERE login = $1 AND phone = $1`, phone).
		Scan(&email, &status, &kycRequired), "the account")
	if email != "Traveller@example.com" || status != "UNVERIFIED" || !kycRequired {
		t.Fatalf("account: email %q status %s kyc_required %v", email, status, kycRequired)
	}
	// The code is used up.
	wantProblem(t, reg(code, "a@example.com", goodPassword), http.StatusBadRequest, "OTP_NONE")

	// Duplicate phone: the same answer as for a new number, no code goes
	// out (the owner is told), and no code opens a second account.
	teststack.Must(t, exec(s, `UPDATE signup_codes SET created_at = created_at - interval '1 minute'`), "age the requests")
	since = time.Now()
	again := c.post(t, "/v1/signup/code", map[string]string{"phone": phone})
	if again.status != first.status || again.raw != first.raw {
		t.Fatalf("a number with an account answers %d %s; a new one answered %d %s", again.status, again.raw, first.status, first.raw)
	}
	if body := s.LastSMS(t, phone, since, regexp.MustCompile(`already has one`)); codeRE.MatchString(body) {
		t.Fatalf("the owner of a registered number got %q", body)
	}
	wantProblem(t, reg(code, "a@example.com", goodPassword), http.StatusBadRequest, "OTP_WRONG")
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM users WHERE phone = $1 OR login = $1`, phone).Scan(&users), "users")
	if users != 1 {
		t.Fatalf("%d accounts for one number", users)
	}
}

// TestSignupCodesLimitedPerNetwork: one network asks at most 30 codes an
// hour, whatever the numbers; the 31st is refused and sends nothing.
func TestSignupCodesLimitedPerNetwork(t *testing.T) {
	s := teststack.New(t, teststack.Options{})
	c := anon(s)
	for i := 0; i < 30; i++ {
		if r := c.post(t, "/v1/signup/code", map[string]string{"phone": newPhone()}); r.status != http.StatusAccepted {
			t.Fatalf("code %d: %d %s", i, r.status, r.raw)
		}
	}
	wantProblem(t, c.post(t, "/v1/signup/code", map[string]string{"phone": newPhone()}), http.StatusTooManyRequests, "OTP_TOO_MANY_HERE")
	var n int
	teststack.Must(t, s.Pool.QueryRow(context.Background(), `SELECT count(*) FROM notifications WHERE kind = 'SIGNUP_OTP'`).Scan(&n), "codes sent")
	if n != 30 {
		t.Fatalf("%d codes sent, want 30", n)
	}
}

// TestIdentityThroughKYC: a new account is verified by the identity
// verifier simulator. A verifier fault is a clear 503 and changes nothing;
// a mismatch and a number already verifying another account are refused;
// the verified account keeps a keyed hash and the verifier's reference,
// never the number.
func TestIdentityThroughKYC(t *testing.T) {
	s := teststack.New(t, teststack.Options{Work: true})
	ctx := context.Background()
	tok := signUp(t, s, newPhone())
	c := &client{base: s.Server.URL, token: tok, http: &http.Client{Timeout: 60 * time.Second}}
	number := aadhaar("23456789012")
	id := map[string]any{"aadhaar": number[:4] + " " + number[4:8] + " " + number[8:], "name": "Asha  Rao", "year_of_birth": 1990, "consent": true}

	wantProblem(t, c.post(t, "/v1/account/identity", map[string]any{"aadhaar": number, "name": "Asha Rao", "year_of_birth": 1990}), http.StatusBadRequest, "CONSENT_REQUIRED")
	wantProblem(t, c.post(t, "/v1/account/identity", map[string]any{"aadhaar": number[:11] + string('0'+(number[11]-'0'+1)%10), "name": "Asha Rao", "year_of_birth": 1990, "consent": true}),
		http.StatusBadRequest, "BAD_ID_NUMBER")

	state := func() (string, bool, int) {
		var st string
		var hashed bool
		var audits int
		teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT id_verification_status, kyc_hash IS NOT NULL,
			(SELECT count(*) FROM audit_log WHERE action = 'IDENTITY_VERIFIED') FROM users WHERE kyc_required`).Scan(&st, &hashed, &audits), "state")
		return st, hashed, audits
	}
	s.SetKYCFaults(t, kyc.Faults{FailRate: 1})
	wantProblem(t, c.post(t, "/v1/account/identity", id), http.StatusServiceUnavailable, "KYC_UNAVAILABLE")
	if st, hashed, audits := state(); st != "UNVERIFIED" || hashed || audits != 0 {
		t.Fatalf("a verifier fault changed the account: %s hashed %v audits %d", st, hashed, audits)
	}
	// The verifier decides but the answer is lost: still nothing here; the
	// retry with the same question gets its first decision.
	s.SetKYCFaults(t, kyc.Faults{LostReplyRate: 1})
	wantProblem(t, c.post(t, "/v1/account/identity", id), http.StatusServiceUnavailable, "KYC_UNAVAILABLE")
	if st, hashed, _ := state(); st != "UNVERIFIED" || hashed {
		t.Fatal("a lost answer changed the account")
	}
	s.SetKYCFaults(t, kyc.Faults{LatencyMs: 50})
	ok := c.post(t, "/v1/account/identity", id)
	if ok.status != http.StatusOK || ok.body["verified"] != true {
		t.Fatalf("verify: %d %s", ok.status, ok.raw)
	}
	if st, hashed, audits := state(); st != "VERIFIED" || !hashed || audits != 1 {
		t.Fatalf("after VERIFIED: %s hashed %v audits %d", st, hashed, audits)
	}
	var leaked int
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM users u WHERE strpos(u::text, $1) > 0`, number).Scan(&leaked), "number kept")
	if leaked != 0 {
		t.Fatal("the identity number is kept in users")
	}

	// A second account: the same number is refused once the verifier has
	// said they are its holder (never before: that would tell anyone which
	// numbers have accounts); a number the register knows under another
	// name is a mismatch.
	other := &client{base: s.Server.URL, token: signUp(t, s, newPhone()), http: c.http}
	wantProblem(t, other.post(t, "/v1/account/identity", id), http.StatusConflict, "ID_IN_USE")
	known := aadhaar("34567890123")
	mustExec(t, s, `INSERT INTO kyc.people (number_hash, name, birth_year) SELECT encode(sha256(('kycsim|' || $1)::bytea), 'hex'), 'ravi kumar', 1980`, known)
	wantProblem(t, other.post(t, "/v1/account/identity", map[string]any{"aadhaar": known, "name": "Asha Rao", "year_of_birth": 1990, "consent": true}),
		http.StatusBadRequest, "KYC_MISMATCH")
	// Five questions a day: a script testing numbers and names through our
	// verifier stops there, and the verifier is not asked the sixth.
	for i := 3; i <= signup.IdentityAttemptsPerDay; i++ {
		wantProblem(t, other.post(t, "/v1/account/identity", map[string]any{"aadhaar": known, "name": "Asha Rao", "year_of_birth": 1990 + i, "consent": true}),
			http.StatusBadRequest, "KYC_MISMATCH")
	}
	wantProblem(t, other.post(t, "/v1/account/identity", map[string]any{"aadhaar": known, "name": "Ravi Kumar", "year_of_birth": 1980, "consent": true}),
		http.StatusTooManyRequests, "KYC_TOO_MANY")
	var refusals int
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action = 'IDENTITY_REFUSED'`).Scan(&refusals), "audited")
	if refusals != signup.IdentityAttemptsPerDay-1 {
		t.Fatalf("%d refusals audited, want %d", refusals, signup.IdentityAttemptsPerDay-1)
	}
}

// TestPasswordResetBySMS: a reset code goes to an account's number only
// (the answer for a number with no account is the same, and nothing is
// sent); the new password works, the old does not, and every earlier
// session is signed out.
func TestPasswordResetBySMS(t *testing.T) {
	s := teststack.New(t, teststack.Options{Work: true})
	phone := newPhone()
	tok := signUp(t, s, phone)
	c := anon(s)
	stranger := newPhone()
	mustExec(t, s, `UPDATE signup_codes SET created_at = created_at - interval '1 minute'`) // the sign-up's code was just sent
	since := time.Now()
	a := c.post(t, "/v1/auth/reset/code", map[string]string{"phone": phone})
	b := c.post(t, "/v1/auth/reset/code", map[string]string{"phone": stranger})
	if a.status != http.StatusAccepted || b.status != a.status || strings.ReplaceAll(b.raw, stranger[6:], "") != strings.ReplaceAll(a.raw, phone[6:], "") {
		t.Fatalf("reset answers differ: %d %s / %d %s", a.status, a.raw, b.status, b.raw)
	}
	code := smsCode(t, s, phone, since)
	wantProblem(t, c.post(t, "/v1/auth/reset", map[string]string{"phone": stranger, "code": code, "password": "another long one 8"}), http.StatusBadRequest, "OTP_WRONG")
	if r := c.post(t, "/v1/auth/reset", map[string]string{"phone": phone, "code": code, "password": "another long one 8"}); r.status != http.StatusOK {
		t.Fatalf("reset: %d %s", r.status, r.raw)
	}
	var toStranger int
	teststack.Must(t, s.Pool.QueryRow(context.Background(), `SELECT count(*) FROM notifications WHERE address = $1`, stranger).Scan(&toStranger), "sent")
	if toStranger != 0 {
		t.Fatal("a reset for a number with no account sent a message")
	}
	if r := c.post(t, "/v1/auth/login", map[string]string{"login": phone, "password": goodPassword}); r.status != http.StatusUnauthorized {
		t.Fatalf("the old password still signs in: %d", r.status)
	}
	if r := c.post(t, "/v1/auth/login", map[string]string{"login": phone, "password": "another long one 8"}); r.status != http.StatusOK {
		t.Fatalf("the new password: %d %s", r.status, r.raw)
	}
	old := &client{base: s.Server.URL, token: tok, http: c.http}
	testenv.Eventually(t, 10*time.Second, "the old session signed out", func() error {
		r := old.do(t, "GET", "/v1/wallet", nil, "")
		return testenv.Want(r.status == http.StatusUnauthorized, "old session answers %d", r.status)
	})
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

func exec(s *teststack.Stack, q string, args ...any) error {
	_, err := s.Pool.Exec(context.Background(), q, args...)
	return err
}

func mustExec(t *testing.T, s *teststack.Stack, q string, args ...any) {
	t.Helper()
	teststack.Must(t, exec(s, q, args...), "exec %s", q)
}

// TestAccountAgeRule: with the min_account_age rule set, an account younger
// than it is refused at hold time with ACCOUNT_TOO_NEW (saying from when),
// verified or not; an older one holds. Its default is none.
func TestAccountAgeRule(t *testing.T) {
	if booking.DefaultRules().MinAccountAge != 0 {
		t.Fatal("the default must let a verified new account book the day it signs up")
	}
	rules := booking.DefaultRules()
	rules.MinAccountAge = 72 * time.Hour
	s := teststack.New(t, teststack.Options{Rules: &rules})
	_, date := s.DemoShard(t, 8, 0)
	users := s.Users(t, "age", 2)
	ctx := context.Background()
	req := func(u int64, key string) booking.HoldRequest {
		return booking.HoldRequest{UserID: u, IdempotencyKey: key, Train: "12951", Date: date, Class: "3A", Quota: "TQ", From: "MMCT", To: "NDLS",
			Passengers: []booking.Passenger{{Name: "Asha Rao", Age: 34, Gender: "F", IDType: "PAN", IDRef: "ABCDE1234F"}}}
	}
	young := booking.Caller{UserID: users[0], Verified: true, CreatedAt: time.Now().Add(-time.Hour), Device: "teststack-device"}
	_, err := s.Service.Hold(ctx, young, req(users[0], "age-young-1"))
	if booking.ErrorCode(err) != booking.EFORBIDDEN || !strings.Contains(booking.ErrorMessage(err), "from ") || reasonOf(err) != "ACCOUNT_TOO_NEW" {
		t.Fatalf("a 1-hour-old verified account: %v", err)
	}
	old := booking.Caller{UserID: users[1], Verified: true, CreatedAt: time.Now().Add(-73 * time.Hour), Device: "teststack-device"}
	if res, err := s.Service.Hold(ctx, old, req(users[1], "age-old-1")); err != nil || res.Status != "HELD" {
		t.Fatalf("a 73-hour-old account: %+v %v", res, err)
	}
}

func reasonOf(err error) string {
	var e *booking.Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

// TestSignupRaces: many requests at once for one number send one code
// (the limits count exactly: the rest are told to wait), and many sign-ups
// at once with its right code open one account; the database agrees.
func TestSignupRaces(t *testing.T) {
	s := teststack.New(t, teststack.Options{Work: true})
	ctx := context.Background()
	phone := newPhone()
	const n = 16
	statuses := make([]int, n)
	var wg sync.WaitGroup
	since := time.Now()
	for i := range n {
		wg.Go(func() { statuses[i] = anon(s).post(t, "/v1/signup/code", map[string]string{"phone": phone}).status })
	}
	wg.Wait()
	accepted := 0
	for _, st := range statuses {
		switch st {
		case http.StatusAccepted:
			accepted++
		case http.StatusTooManyRequests:
		default:
			t.Fatalf("a concurrent code request answered %d", st)
		}
	}
	var rows, sent int
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM signup_codes), (SELECT count(*) FROM notifications WHERE kind = 'SIGNUP_OTP')`).Scan(&rows, &sent), "codes")
	if accepted != 1 || rows != 1 || sent != 1 {
		t.Fatalf("%d requests at once: %d accepted, %d codes kept, %d sent; want 1 each", n, accepted, rows, sent)
	}
	code := smsCode(t, s, phone, since)
	created := make([]int, n)
	for i := range n {
		wg.Go(func() {
			created[i] = anon(s).post(t, "/v1/signup", map[string]string{"phone": phone, "code": code, "email": "a@example.com", "password": goodPassword}).status
		})
	}
	wg.Wait()
	opened := 0
	for _, st := range created {
		if st == http.StatusCreated {
			opened++
		} else if st != http.StatusBadRequest && st != http.StatusConflict {
			t.Fatalf("a concurrent sign-up answered %d", st)
		}
	}
	var users int
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM users WHERE phone = $1`, phone).Scan(&users), "users")
	if opened != 1 || users != 1 {
		t.Fatalf("%d sign-ups at once with the right code: %d opened, %d accounts; want 1", n, opened, users)
	}
}
