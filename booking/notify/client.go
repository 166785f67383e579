package notify

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

// Client calls the messaging gateway.
type Client struct {
	base string
	key  string
	http *http.Client
}

// NewClient returns a client of the gateway at base, calling with key. A
// nil hc gets a 10-second timeout.
func NewClient(base, key string, hc *http.Client) *Client {
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	return &Client{base: strings.TrimRight(base, "/"), key: key, http: hc}
}

// PermanentError is a refusal that repeating will not change (a bad
// message, a wrong key, a key reused for another message).
type PermanentError struct {
	Status int
	Body   ErrorBody
}

func (e *PermanentError) Error() string {
	return fmt.Sprintf("gateway refused the message (%d %s): %s", e.Status, e.Body.Code, e.Body.Message)
}

// IsPermanent says whether err is a refusal worth no retry.
func IsPermanent(err error) bool {
	var p *PermanentError
	return errors.As(err, &p)
}

// Send hands m to the gateway under idempotency key key. Sending again
// with the same key returns the first answer and delivers nothing more.
func (c *Client) Send(ctx context.Context, key string, m Message) (Receipt, error) {
	body, err := json.Marshal(m)
	if err != nil {
		return Receipt{}, fmt.Errorf("encode message: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/messages", bytes.NewReader(body))
	if err != nil {
		return Receipt{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	return c.do(req)
}

// Status reads the delivery receipt of message id.
func (c *Client) Status(ctx context.Context, id string) (Receipt, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/v1/messages/"+url.PathEscape(id), nil)
	if err != nil {
		return Receipt{}, err
	}
	return c.do(req)
}

func (c *Client) do(req *http.Request) (Receipt, error) {
	req.Header.Set("Authorization", "Bearer "+c.key)
	resp, err := c.http.Do(req)
	if err != nil {
		return Receipt{}, fmt.Errorf("messaging gateway %s %s: %w", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return Receipt{}, fmt.Errorf("messaging gateway %s: read answer: %w", req.URL.Path, err)
	}
	if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusAccepted {
		var r Receipt
		if err := json.Unmarshal(data, &r); err != nil || r.ID == "" {
			return Receipt{}, fmt.Errorf("messaging gateway %s: unreadable answer %q", req.URL.Path, truncate(data))
		}
		return r, nil
	}
	var eb ErrorBody
	json.Unmarshal(data, &eb) //nolint:errcheck // an unreadable body still has its status
	if resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests &&
		resp.StatusCode != http.StatusRequestTimeout {
		return Receipt{}, &PermanentError{Status: resp.StatusCode, Body: eb}
	}
	return Receipt{}, fmt.Errorf("messaging gateway %s: %d %s %s", req.URL.Path, resp.StatusCode, eb.Code, eb.Message)
}

func truncate(b []byte) string {
	if len(b) > 200 {
		b = b[:200]
	}
	return string(b)
}

// BaseURL is the gateway's base URL.
func (c *Client) BaseURL() string { return c.base }
