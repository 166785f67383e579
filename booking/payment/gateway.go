package payment

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"tatkal/booking/payment/pspapi"
)

// GatewayConfig is how we reach one gateway.
type GatewayConfig struct {
	ID      string
	BaseURL string // e.g. http://127.0.0.1:8081 (the /gw/{id} prefix is added)
	APIKey  string
	// WebhookSecrets are every secret a callback may be signed with: during
	// a rotation the gateway's new one and the old, newest first.
	WebhookSecrets [][]byte
}

// gatewayClient speaks pspapi to one gateway.
type gatewayClient struct {
	cfg  GatewayConfig
	http *http.Client
}

// callError classifies a failed gateway call.
type callError struct {
	Status     int  // HTTP status, 0 when no answer came
	Definitive bool // the gateway answered and the answer is final (4xx)
	NotFound   bool
	Err        error
}

func (e *callError) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("gateway answered %d: %v", e.Status, e.Err)
	}
	return fmt.Sprintf("gateway unreachable: %v", e.Err)
}

func (e *callError) Unwrap() error { return e.Err }

func (g *gatewayClient) url(path string) string {
	return g.cfg.BaseURL + "/gw/" + g.cfg.ID + path
}

func (g *gatewayClient) do(ctx context.Context, method, path, idemKey string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, g.url(path), rd)
	if err != nil {
		return &callError{Definitive: true, Err: err}
	}
	req.Header.Set("Authorization", "Bearer "+g.cfg.APIKey)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	resp, err := g.http.Do(req)
	if err != nil {
		return &callError{Err: err}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return &callError{Status: 404, Definitive: true, NotFound: true, Err: errors.New(string(raw))}
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
		return &callError{Status: resp.StatusCode, Err: errors.New(string(raw))}
	case resp.StatusCode >= 400:
		return &callError{Status: resp.StatusCode, Definitive: true, Err: errors.New(string(raw))}
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return &callError{Status: resp.StatusCode, Err: fmt.Errorf("decode answer: %w", err)}
		}
	}
	return nil
}

func (g *gatewayClient) create(ctx context.Context, idemKey string, req pspapi.CreatePayment) (pspapi.Payment, error) {
	var p pspapi.Payment
	err := g.do(ctx, "POST", "/v1/payments", idemKey, req, &p)
	return p, err
}

func (g *gatewayClient) get(ctx context.Context, pspRef string) (pspapi.Payment, error) {
	var p pspapi.Payment
	err := g.do(ctx, "GET", "/v1/payments/"+url.PathEscape(pspRef), "", nil, &p)
	return p, err
}

func (g *gatewayClient) find(ctx context.Context, merchantRef string) (pspapi.Payment, error) {
	var p pspapi.Payment
	err := g.do(ctx, "GET", "/v1/payments?merchant_ref="+url.QueryEscape(merchantRef), "", nil, &p)
	return p, err
}

func (g *gatewayClient) refund(ctx context.Context, idemKey string, req pspapi.CreateRefund) (pspapi.Refund, error) {
	var r pspapi.Refund
	err := g.do(ctx, "POST", "/v1/refunds", idemKey, req, &r)
	return r, err
}

func (g *gatewayClient) getRefund(ctx context.Context, ref string) (pspapi.Refund, error) {
	var r pspapi.Refund
	err := g.do(ctx, "GET", "/v1/refunds/"+url.PathEscape(ref), "", nil, &r)
	return r, err
}

// timed runs call and reports how long it took.
func timed(call func() error) (time.Duration, error) {
	start := time.Now()
	err := call()
	return time.Since(start), err
}
