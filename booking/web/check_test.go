package web_test

import (
	"encoding/json"
	"net/http"
	"net/url"

	"tatkal/booking/admission/token"
	"tatkal/booking/lab/testenv"
)

// solveCheck does what site.js does for a hold form without a browser:
// asks /book/challenge for the booking check of attempt key (with the CSRF
// token of the page at from) and solves it, returning the form's
// challenge and nonce. Every hold carries one, on every shard.
func (b *browser) solveCheck(from, key string) url.Values {
	b.t.Helper()
	_, _, page := b.get(from)
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		b.t.Fatalf("no CSRF token on %s", from)
	}
	r := testenv.Call(b.t, testenv.Request{Method: http.MethodPost, URL: b.base + "/book/challenge", Client: b.c,
		Body: url.Values{"attempt": {key}, "csrf": {m[1]}}, Header: map[string]string{"Origin": b.base}})
	var ch struct {
		Challenge string `json:"challenge"`
		Bits      int    `json:"difficulty_bits"`
	}
	if err := json.Unmarshal(r.Raw, &ch); err != nil || r.Status != http.StatusOK || ch.Challenge == "" {
		b.t.Fatalf("booking check for %s: %d %s", key, r.Status, r.Raw)
	}
	return url.Values{"challenge": {ch.Challenge}, "nonce": {token.Solve(ch.Challenge, ch.Bits)}}
}

// with is form with more's fields added.
func with(form url.Values, more url.Values) url.Values {
	for k, v := range more {
		form[k] = v
	}
	return form
}
