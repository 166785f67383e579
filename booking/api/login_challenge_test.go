package api_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"tatkal/booking/admission/token"
	"tatkal/booking/api"
	"tatkal/booking/auth"
	"tatkal/booking/httpx"
	"tatkal/booking/lab/testenv"
)

// Backoff, then a challenge, over HTTP: an account locked by guesses from
// elsewhere is entered by its owner with the right password and a solved
// challenge; a wrong password, a reused or a forged challenge do not get
// in; a locked address gets in with none. Clients are told apart by
// X-Forwarded-For from a trusted proxy (the test client's own address).
func TestLoginChallengeOpensOnlyTheAccountLock(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	clk := &testenv.Clock{}
	signer, err := auth.NewSigner([]byte(strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	// Locks last the longest backoff (15 min), not the first one (1 s): on
	// a loaded machine the steps below took longer than a second, and the
	// account's lock lapsed before its owner asked for a challenge.
	guard := auth.NewGuard(auth.GuardConfig{Pool: env.Pool, Scope: "passenger", Now: clk.Now, ChallengeBits: 10, DummyParams: cheap,
		BaseDelay: 15 * time.Minute})
	rt := chi.NewRouter()
	api.New(api.Config{Pool: env.Pool, Signer: signer, Guard: guard, Now: clk.Now}).Routes(rt)
	proxies, _ := httpx.ParseProxies("127.0.0.1/32, ::1")
	srv := httptest.NewServer(httpx.App(rt, httpx.AppOptions{APIReject: api.RejectInput, TrustedProxies: proxies}))
	t.Cleanup(srv.Close)
	c := &client{base: srv.URL, http: &http.Client{Timeout: 60 * time.Second}}
	seedUsers(t, env, "own", 1, "right-pw", cheap)
	const acct = "own00001"
	from := func(ip string) map[string]string { return map[string]string{"X-Forwarded-For": ip} }
	login := func(ip, pw, challenge, nonce string) reply {
		return c.do(t, "POST", "/v1/auth/login", from(ip),
			fmt.Sprintf(`{"login":%q,"password":%q,"challenge":%q,"nonce":%q}`, acct, pw, challenge, nonce))
	}
	getChallenge := func(ip string) (string, int, reply) {
		r := c.do(t, "POST", "/v1/auth/login/challenge", from(ip), fmt.Sprintf(`{"login":%q}`, acct))
		ch, _ := r.body["challenge"].(string)
		bits, _ := r.body["difficulty_bits"].(float64)
		return ch, int(bits), r
	}
	solve := func(ch string, bits int) string { return token.Solve(ch, bits) }

	if _, _, r := getChallenge("198.51.100.7"); r.status != http.StatusConflict || r.body["reason"] != "NO_CHALLENGE_NEEDED" {
		t.Fatalf("challenge for an unlocked account: %d %s", r.status, r.raw)
	}
	// Twenty guesses from five addresses lock the account (PerAccount 20),
	// no address reaching its own allowance.
	for i := range 20 {
		if r := login(fmt.Sprintf("192.0.2.%d", 1+i/4), "guess", "", ""); r.status != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d %s", i, r.status, r.raw)
		}
	}
	owner := "198.51.100.7"
	if r := login(owner, "right-pw", "", ""); r.status != http.StatusTooManyRequests || r.body["reason"] != "ACCOUNT_LOCKED" {
		t.Fatalf("owner, no challenge: %d %s, want 429 ACCOUNT_LOCKED", r.status, r.raw)
	}

	// A sprayer takes a challenge, then locks its own address: the
	// challenge does not open that.
	sprayer := "203.0.113.9"
	held, bits, r := getChallenge(sprayer)
	if r.status != http.StatusOK || held == "" || bits != 10 || r.body["type"] != "POW_SHA256" {
		t.Fatalf("challenge: %d %s", r.status, r.raw)
	}
	for i := range 50 {
		c.do(t, "POST", "/v1/auth/login", from(sprayer), loginBody(fmt.Sprintf("other%d", i), "guess")) //nolint:errcheck
	}
	if r := login(sprayer, "right-pw", held, solve(held, bits)); r.status != http.StatusTooManyRequests || r.body["reason"] != "TOO_MANY_ATTEMPTS" {
		t.Fatalf("locked address with a solved challenge: %d %s, want 429 TOO_MANY_ATTEMPTS", r.status, r.raw)
	}
	if _, _, r := getChallenge(sprayer); r.status != http.StatusTooManyRequests {
		t.Fatalf("a locked address asked for a challenge: %d %s, want 429", r.status, r.raw)
	}

	ch, bits, r := getChallenge(owner)
	if r.status != http.StatusOK || len(ch) < 8 {
		t.Fatalf("the owner's challenge: %d %s", r.status, r.raw)
	}
	forged := ch[:len(ch)-4] + "0000"
	if forged == ch {
		forged = ch[:len(ch)-4] + "1111"
	}
	if r := login(owner, "right-pw", forged, solve(forged, bits)); r.status != http.StatusTooManyRequests || r.body["reason"] != "CHALLENGE_REFUSED" {
		t.Fatalf("forged challenge: %d %s, want 429 CHALLENGE_REFUSED", r.status, r.raw)
	}
	nonce := solve(ch, bits)
	if r := login(owner, "wrong-pw", ch, nonce); r.status != http.StatusUnauthorized {
		t.Fatalf("wrong password with a solved challenge: %d %s, want 401", r.status, r.raw)
	}
	if r := login(owner, "right-pw", ch, nonce); r.status != http.StatusTooManyRequests || r.body["reason"] != "CHALLENGE_REFUSED" {
		t.Fatalf("reused challenge: %d %s, want 429 CHALLENGE_REFUSED", r.status, r.raw)
	}
	ch, bits, _ = getChallenge(owner)
	if r := login(owner, "right-pw", ch, solve(ch, bits)); r.status != http.StatusOK || r.body["token"] == nil {
		t.Fatalf("owner with the right password and a solved challenge: %d %s, want 200", r.status, r.raw)
	}
}
