// Package kyc is the identity verifier as the product sees it: a Verifier
// that answers whether a person's identity number, name and year of birth
// belong together (an Aadhaar-style demographic check), the verifier's wire
// protocol, and its HTTP client. booking/sim/kycsim simulates the service.
//
// The protocol:
//
//	POST /v1/verifications   Authorization: Bearer <TATKAL_KYC_KEY>, Idempotency-Key: <key>
//	                         body Request; 200 with a Result (VERIFIED, MISMATCH or
//	                         INVALID_NUMBER); the same key answers the same Result again.
//	GET/PUT /admin/faults    latency, failures, lost answers (Bearer TATKAL_SIM_ADMIN_TOKEN).
//
// The identity number is sent to the verifier and nowhere else: the product
// keeps only a keyed hash of it (one account per identity) and the
// verifier's reference.
package kyc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Verifier checks an identity. Verify answers the verifier's decision, or
// an error when it gave none (down, slow, refused the call): then nothing
// was decided and the caller may ask again with the same key.
type Verifier interface {
	Verify(ctx context.Context, key string, r Request) (Result, error)
}

// Request is one identity to check. Consent is the person's explicit
// agreement, which the verifier requires.
type Request struct {
	Number      string `json:"number"` // 12 digits, Aadhaar-style
	Name        string `json:"name"`
	YearOfBirth int    `json:"year_of_birth"`
	Consent     bool   `json:"consent"`
	ClientRef   string `json:"client_ref"`
}

// Decisions of a Result.
const (
	Verified      = "VERIFIED"       // the number, name and year belong together
	Mismatch      = "MISMATCH"       // the number is known, with another name or year
	InvalidNumber = "INVALID_NUMBER" // no such number (its check digit is wrong)
)

// Result is the verifier's decision.
type Result struct {
	Ref    string `json:"ref"`
	Status string `json:"status"`
	// Masked is the number as it may be shown: the last four digits.
	Masked    string    `json:"masked"`
	DecidedAt time.Time `json:"decided_at"`
}

// ErrorBody is the verifier's error answer.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Faults are what the simulator injects: a verifier that is slow, down, or
// decides and loses the answer.
type Faults struct {
	LatencyMs int `json:"latency_ms"` // before every answer
	JitterMs  int `json:"jitter_ms"`  // plus a uniform 0..JitterMs
	// FailRate answers 503 without deciding.
	FailRate float64 `json:"fail_rate"`
	// LostReplyRate decides, then answers 502; the same key later answers
	// the decision.
	LostReplyRate float64 `json:"lost_reply_rate"`
}

// Validate says what is wrong with f, or nil.
func (f Faults) Validate() error {
	for _, ms := range []int{f.LatencyMs, f.JitterMs} {
		if ms < 0 || ms > 60_000 {
			return fmt.Errorf("latencies must be in 0..60000 ms (got %d)", ms)
		}
	}
	for _, r := range []float64{f.FailRate, f.LostReplyRate} {
		if !(r >= 0 && r <= 1) {
			return fmt.Errorf("rates must be in [0,1] (got %v)", r)
		}
	}
	if f.FailRate+f.LostReplyRate > 1 {
		return errors.New("fail_rate + lost_reply_rate must not exceed 1")
	}
	return nil
}

// ValidNumber reports whether n is 12 digits, not starting 0 or 1, whose
// last is the Verhoeff check digit of the others (as Aadhaar numbers are).
func ValidNumber(n string) bool {
	if len(n) != 12 || n[0] < '2' {
		return false
	}
	c := 0
	for i := len(n) - 1; i >= 0; i-- {
		d := n[i]
		if d < '0' || d > '9' {
			return false
		}
		c = verhoeffD[c][verhoeffP[(len(n)-1-i)%8][d-'0']]
	}
	return c == 0
}

// CheckDigit is the Verhoeff check digit of digits (tests and the
// simulator's examples make valid numbers with it).
func CheckDigit(digits string) byte {
	c := 0
	for i := len(digits) - 1; i >= 0; i-- {
		c = verhoeffD[c][verhoeffP[(len(digits)-i)%8][digits[i]-'0']]
	}
	return '0' + byte(verhoeffInv[c])
}

var verhoeffD = [10][10]int{
	{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 2, 3, 4, 0, 6, 7, 8, 9, 5}, {2, 3, 4, 0, 1, 7, 8, 9, 5, 6},
	{3, 4, 0, 1, 2, 8, 9, 5, 6, 7}, {4, 0, 1, 2, 3, 9, 5, 6, 7, 8}, {5, 9, 8, 7, 6, 0, 4, 3, 2, 1},
	{6, 5, 9, 8, 7, 1, 0, 4, 3, 2}, {7, 6, 5, 9, 8, 2, 1, 0, 4, 3}, {8, 7, 6, 5, 9, 3, 2, 1, 0, 4},
	{9, 8, 7, 6, 5, 4, 3, 2, 1, 0},
}
var verhoeffP = [8][10]int{
	{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 5, 7, 6, 2, 8, 3, 0, 9, 4}, {5, 8, 0, 3, 7, 9, 6, 1, 4, 2},
	{8, 9, 1, 6, 0, 4, 3, 5, 2, 7}, {9, 4, 5, 3, 1, 2, 6, 8, 7, 0}, {4, 2, 8, 6, 5, 7, 3, 9, 0, 1},
	{2, 7, 9, 3, 8, 0, 6, 4, 1, 5}, {7, 0, 4, 6, 9, 1, 3, 2, 5, 8},
}
var verhoeffInv = [10]int{0, 4, 3, 2, 1, 5, 6, 7, 8, 9}

// NormaliseNumber drops the spaces and dashes people type between groups.
func NormaliseNumber(s string) string {
	return strings.Map(func(c rune) rune {
		if c == ' ' || c == '-' {
			return -1
		}
		return c
	}, s)
}

// Client calls the verifier over HTTP.
type Client struct {
	base, key string
	http      *http.Client
}

// NewClient returns a client of the verifier at base, calling with key. A
// nil hc gets a 10-second timeout.
func NewClient(base, key string, hc *http.Client) *Client {
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	return &Client{base: strings.TrimRight(base, "/"), key: key, http: hc}
}

// ErrRefused is a call the verifier refused outright (a wrong key, a
// request it cannot read): asking again will not help.
var ErrRefused = errors.New("the identity verifier refused the call")

// Verify asks the verifier about r under idempotency key key.
func (c *Client) Verify(ctx context.Context, key string, r Request) (Result, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return Result{}, fmt.Errorf("encode verification: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/verifications", bytes.NewReader(body))
	if err != nil {
		return Result{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Authorization", "Bearer "+c.key)
	resp, err := c.http.Do(req)
	if err != nil {
		return Result{}, fmt.Errorf("identity verifier: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return Result{}, fmt.Errorf("identity verifier: read answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var e ErrorBody
		json.Unmarshal(b, &e) //nolint:errcheck // the status says enough without it
		if resp.StatusCode == http.StatusBadRequest || resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusConflict {
			return Result{}, fmt.Errorf("%w (%d %s: %s)", ErrRefused, resp.StatusCode, e.Code, e.Message)
		}
		return Result{}, fmt.Errorf("identity verifier answered %d %s: %s", resp.StatusCode, e.Code, e.Message)
	}
	var res Result
	if err := json.Unmarshal(b, &res); err != nil {
		return Result{}, fmt.Errorf("identity verifier: decode answer: %w", err)
	}
	switch res.Status {
	case Verified, Mismatch, InvalidNumber:
		return res, nil
	}
	return Result{}, fmt.Errorf("identity verifier: unknown decision %q", res.Status)
}
