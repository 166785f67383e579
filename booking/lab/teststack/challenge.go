package teststack

import (
	"fmt"
	"strings"
	"testing"

	"tatkal/booking/admission/token"
	"tatkal/booking/lab/testenv"
)

// Challenge asks the app at base for a booking challenge for attempt (the
// hold's Idempotency-Key) as the session token, solves it, and returns
// the hold's "challenge" object in JSON ("" when none was given: the
// hold then shows why). Every hold carries one, on every shard (issue 39:
// 16); the stacks' challenges are cheap (Options.ChallengeBits).
func Challenge(t testing.TB, base, sessionToken, attempt string, headers map[string]string) string {
	t.Helper()
	ch := ChallengeObject(t, base, sessionToken, attempt, headers)
	if ch == nil {
		return ""
	}
	return fmt.Sprintf(`{"type":"POW_SHA256","token":%q,"nonce":%q}`, ch["token"], ch["nonce"])
}

// ChallengeObject is Challenge as the hold body's "challenge" value for a
// body built as a map (nil when none was given).
func ChallengeObject(t testing.TB, base, sessionToken, attempt string, headers map[string]string) map[string]string {
	t.Helper()
	r, err := testenv.Do(testenv.Request{Method: "POST", URL: base + "/v1/challenge", Token: sessionToken, Header: headers,
		Body: map[string]string{"attempt": attempt}})
	if err != nil || r.Status != 200 {
		return nil
	}
	tok, _ := r.JSON["challenge"].(string)
	bits, _ := r.JSON["difficulty_bits"].(float64)
	return map[string]string{"type": "POW_SHA256", "token": tok, "nonce": token.Solve(tok, int(bits))}
}

// WithChallenge is the hold body (one JSON object) with a solved
// challenge for attempt added, as Challenge makes it.
func WithChallenge(t testing.TB, base, sessionToken, attempt, body string, headers map[string]string) string {
	t.Helper()
	ch := Challenge(t, base, sessionToken, attempt, headers)
	b := strings.TrimSpace(body)
	if ch == "" || !strings.HasSuffix(b, "}") || strings.Contains(b, `"challenge"`) {
		return body
	}
	return strings.TrimSuffix(b, "}") + `,"challenge":` + ch + "}"
}
