package prs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client speaks the protocol to a reservation core, simulated or real.
// It never retries by itself: the caller (a River job) owns the retry
// schedule, and every call is safe to repeat.
type Client struct {
	base   string
	apiKey string
	http   *http.Client
}

// DefaultTimeout bounds a call when NewClient is given no http.Client.
const DefaultTimeout = 10 * time.Second

// Answer size limits: a booking answer is small; an export is a day.
const (
	maxAnswer = 1 << 20
	maxExport = 512 << 20
)

// NewClient returns a client of the core at baseURL (no trailing /v1).
// httpClient may be nil; its Timeout is what turns a hung core into a
// retryable error.
func NewClient(baseURL, apiKey string, httpClient *http.Client) *Client {
	if httpClient == nil {
		httpClient = &http.Client{Timeout: DefaultTimeout}
	}
	return &Client{base: strings.TrimRight(baseURL, "/"), apiKey: apiKey, http: httpClient}
}

// ErrNotFound: the core has no such PNR. It comes as a *ProtocolError
// with Status 404, so errors.Is(err, ErrNotFound) and errors.As both work.
var ErrNotFound = errors.New("prs: no such PNR")

// RejectedError is the core's definitive refusal of a booking (a berth it
// already sold, or its own reasons). Retrying will not change it: our side
// must compensate.
type RejectedError struct {
	PNR    string
	Reason string // ReasonBerthTaken, ReasonCoreRejected, or whatever a real core says
	Detail string
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("prs rejected PNR %s: %s (%s)", e.PNR, e.Reason, e.Detail)
}

// ProtocolError is a request the core calls wrong (400, 401, 409, ...) or
// an answer we cannot read: a bug or misconfiguration on one side, which
// neither a retry nor a compensation fixes.
type ProtocolError struct {
	Op      string
	Status  int // 0 when the request never left
	Code    string
	Message string
}

// Is makes a 404 for a PNR match ErrNotFound.
func (e *ProtocolError) Is(target error) bool {
	return target == ErrNotFound && e.Status == http.StatusNotFound && e.Code == CodeNotFound
}

func (e *ProtocolError) Error() string {
	if e.Status == 0 {
		return fmt.Sprintf("prs %s: %s: %s", e.Op, e.Code, e.Message)
	}
	return fmt.Sprintf("prs %s: HTTP %d %s: %s", e.Op, e.Status, e.Code, e.Message)
}

// UnavailableError means the outcome is unknown or the core could not take
// the request now (timeout, connection error, 5xx, 429): repeat the same
// call later; the protocol's idempotency makes that safe.
type UnavailableError struct {
	Op     string
	Status int // 0 for transport errors
	Err    error
}

func (e *UnavailableError) Error() string {
	if e.Status == 0 {
		return fmt.Sprintf("prs %s: %v", e.Op, e.Err)
	}
	return fmt.Sprintf("prs %s: HTTP %d: %v", e.Op, e.Status, e.Err)
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// IsRetryable reports whether err says to try the same call again later.
func IsRetryable(err error) bool {
	var u *UnavailableError
	return errors.As(err, &u)
}

// Sync sends a booking to the core. Sending it again returns the same Ack.
func (c *Client) Sync(ctx context.Context, b Booking) (Ack, error) {
	op := "sync " + b.PNR
	req := b.Request()
	if err := req.Validate(); err != nil {
		return Ack{}, &ProtocolError{Op: op, Code: CodeBadRequest, Message: err.Error()}
	}
	var ack Ack
	if err := c.call(ctx, op, http.MethodPut, "/v1/bookings/"+url.PathEscape(b.PNR), req, &ack, maxAnswer); err != nil {
		if rej, ok := errors.AsType[*RejectedError](err); ok {
			rej.PNR = b.PNR
		}
		return Ack{}, err
	}
	if ack.PNR != b.PNR || ack.CoreRef == "" {
		return Ack{}, &ProtocolError{Op: op, Status: http.StatusOK, Code: "BAD_ANSWER",
			Message: fmt.Sprintf("acknowledgement for PNR %q with core ref %q", ack.PNR, ack.CoreRef)}
	}
	return ack, nil
}

// Cancel cancels a PNR at the core and frees its berths; cancelling again
// is harmless. An unknown PNR is ErrNotFound.
func (c *Client) Cancel(ctx context.Context, pnr string) error {
	return c.call(ctx, "cancel "+pnr, http.MethodPost, "/v1/bookings/"+url.PathEscape(pnr)+"/cancel", nil, nil, maxAnswer)
}

// Get reads the core's record of a PNR with its state.
func (c *Client) Get(ctx context.Context, pnr string) (Booking, error) {
	var b Booking
	if err := c.call(ctx, "get "+pnr, http.MethodGet, "/v1/bookings/"+url.PathEscape(pnr), nil, &b, maxAnswer); err != nil {
		return Booking{}, err
	}
	return b, nil
}

// Export returns every booking the core holds for a journey date (the
// date's calendar day as written, whatever its location), cancelled ones
// included.
func (c *Client) Export(ctx context.Context, date time.Time) ([]Booking, error) {
	day := date.Format(DateLayout)
	out := []Booking{}
	if err := c.call(ctx, "export "+day, http.MethodGet, "/v1/exports/"+day, nil, &out, maxExport); err != nil {
		return nil, err
	}
	return out, nil
}

// call makes one request and decodes a 2xx answer into out (if not nil).
func (c *Client) call(ctx context.Context, op, method, path string, in, out any, limit int64) error {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return &ProtocolError{Op: op, Code: CodeBadRequest, Message: err.Error()}
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return &ProtocolError{Op: op, Code: "BAD_URL", Message: err.Error()}
	}
	req.Header.Set("Authorization", "Bearer "+c.apiKey)
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// Timeouts and broken connections alike: the core may or may
		// not have acted, and only a repeat can tell.
		return &UnavailableError{Op: op, Err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return &UnavailableError{Op: op, Status: resp.StatusCode, Err: fmt.Errorf("read answer: %w", err)}
	}
	if int64(len(data)) > limit {
		return &ProtocolError{Op: op, Status: resp.StatusCode, Code: "BAD_ANSWER", Message: fmt.Sprintf("answer over %d bytes", limit)}
	}
	if resp.StatusCode >= 300 {
		return statusError(op, resp.StatusCode, data)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return &ProtocolError{Op: op, Status: resp.StatusCode, Code: "BAD_ANSWER", Message: fmt.Sprintf("decode answer: %v", err)}
	}
	return nil
}

// statusError classifies an error answer.
func statusError(op string, status int, data []byte) error {
	var e ErrorBody
	if json.Unmarshal(data, &e) != nil || e.Code == "" {
		e = ErrorBody{Code: http.StatusText(status), Message: strings.TrimSpace(string(data[:min(len(data), 200)]))}
	}
	switch {
	case status == http.StatusUnprocessableEntity && e.Code == CodeRejected:
		return &RejectedError{Reason: e.Reason, Detail: e.Message}
	case status >= 500 || status == http.StatusTooManyRequests:
		return &UnavailableError{Op: op, Status: status, Err: fmt.Errorf("%s: %s", e.Code, e.Message)}
	default:
		return &ProtocolError{Op: op, Status: status, Code: e.Code, Message: e.Message}
	}
}
