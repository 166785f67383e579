package pspsim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"tatkal/booking/payment/pspapi"
)

// Webhook delivery states.
const (
	hookPending   = "PENDING"   // due at next_attempt_at
	hookDelivered = "DELIVERED" // the merchant answered 2xx
	hookGaveUp    = "GAVE_UP"   // every attempt failed
	hookLost      = "LOST"      // the route's fault ate it; kept for the record, never sent
)

// duplicateGap is how long after the original a duplicate delivery goes.
const duplicateGap = 150 * time.Millisecond

// enqueueWebhook records the event announcing p's new status, in the
// transaction that moved p. The route's faults apply here: the callback
// may be lost, delayed, or delivered twice with the same event_id.
func (s *Server) enqueueWebhook(ctx context.Context, tx pgx.Tx, p *payment, rc pspapi.RouteConfig, now time.Time) error {
	ev := pspapi.Webhook{
		EventID: newRef("evt_"), PSPRef: p.PSPRef, MerchantRef: p.MerchantRef, Gateway: p.Gateway,
		Method: p.Method, Status: p.Status, AmountPaise: p.AmountPaise, Currency: p.Currency, BankRef: p.BankRef,
		FailureReason: p.FailureReason, BankEventTime: now,
	}
	ev.CardFingerprint, ev.AccountRef = instrumentView(p)
	body, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode webhook: %w", err)
	}
	state := hookPending
	if s.chance(rc.LostCallbackRate, p.Gateway, p.MerchantRef, p.Status, "lost") {
		state = hookLost
	}
	at := now.Add(ms(rc.CallbackDelayMs))
	copies := 1
	if state == hookPending && s.chance(rc.DuplicateCallbackRate, p.Gateway, p.MerchantRef, p.Status, "duplicate") {
		copies = 2
	}
	for i := range copies {
		next := at.Add(time.Duration(i) * duplicateGap)
		if _, err := tx.Exec(ctx, s.q(`INSERT INTO {s}.webhooks
			(event_id, psp_ref, gateway, method, status, callback_url, body, state, next_attempt_at, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`),
			ev.EventID, p.PSPRef, p.Gateway, p.Method, p.Status, p.CallbackURL, string(body), state, next, now); err != nil {
			return fmt.Errorf("enqueue webhook for %s: %w", p.PSPRef, err)
		}
	}
	if state == hookLost {
		s.log.DebugContext(ctx, "webhook lost by fault", "psp_ref", p.PSPRef, "event_id", ev.EventID, "status", p.Status)
	}
	return nil
}

// delivery is a claimed webhook attempt.
type delivery struct {
	ID          int64  `db:"id"`
	EventID     string `db:"event_id"`
	PSPRef      string `db:"psp_ref"`
	Gateway     string `db:"gateway"`
	CallbackURL string `db:"callback_url"`
	Body        string `db:"body"`
	Attempts    int    `db:"attempts"`
}

// dispatchWebhooks claims due deliveries, as many as there are free slots,
// and sends each in its own goroutine. A claim pushes next_attempt_at past
// the HTTP timeout, so a crash mid-send means a retry, never a loss.
func (s *Server) dispatchWebhooks(ctx context.Context, slots chan struct{}, wg *sync.WaitGroup) error {
	free := cap(slots) - len(slots)
	if free == 0 {
		return nil
	}
	now := s.now()
	lease := now.Add(s.cfg.HTTPClient.Timeout + 30*time.Second)
	rows, err := s.pool.Query(ctx, s.q(`UPDATE {s}.webhooks SET attempts = attempts + 1, next_attempt_at = $3
		WHERE id IN (SELECT id FROM {s}.webhooks a WHERE state = 'PENDING' AND next_attempt_at <= $1 AND `+outageFilter+`
			ORDER BY next_attempt_at, id LIMIT $2 FOR UPDATE OF a SKIP LOCKED)
		RETURNING id, event_id, psp_ref, gateway, callback_url, body, attempts`), now, free, lease)
	if err != nil {
		return fmt.Errorf("claim webhooks: %w", err)
	}
	claimed, err := pgx.CollectRows(rows, pgx.RowToStructByName[delivery])
	if err != nil {
		return fmt.Errorf("claim webhooks: %w", err)
	}
	for _, d := range claimed {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			s.deliver(ctx, d)
		}()
	}
	return nil
}

// deliver POSTs one webhook, signed, and records the outcome. Non-2xx or
// no answer means a retry with doubling backoff, up to the attempt limit.
func (s *Server) deliver(ctx context.Context, d delivery) {
	log := s.log.With("psp_ref", d.PSPRef, "event_id", d.EventID, "attempt", d.Attempts, "url", d.CallbackURL)
	code, sendErr := s.send(ctx, d)
	if ctx.Err() != nil {
		return // shutting down; the lease expires and another run retries
	}
	now := s.now()
	var err error
	switch {
	case sendErr == nil:
		_, err = s.pool.Exec(ctx, s.q(`UPDATE {s}.webhooks SET state = 'DELIVERED', delivered_at = $2,
			last_http_status = $3, last_error = '', next_attempt_at = NULL WHERE id = $1`), d.ID, now, code)
		log.DebugContext(ctx, "webhook delivered", "http_status", code)
	case d.Attempts >= s.cfg.WebhookMaxAttempts:
		_, err = s.pool.Exec(ctx, s.q(`UPDATE {s}.webhooks SET state = 'GAVE_UP', last_http_status = $2,
			last_error = $3, next_attempt_at = NULL WHERE id = $1`), d.ID, code, sendErr.Error())
		log.WarnContext(ctx, "webhook given up", "http_status", code, "err", sendErr)
	default:
		next := now.Add(s.backoff(d.Attempts))
		_, err = s.pool.Exec(ctx, s.q(`UPDATE {s}.webhooks SET last_http_status = $2, last_error = $3,
			next_attempt_at = $4 WHERE id = $1`), d.ID, code, sendErr.Error(), next)
		log.InfoContext(ctx, "webhook failed, will retry", "http_status", code, "err", sendErr, "next_attempt_at", next)
	}
	if err != nil {
		log.ErrorContext(ctx, "record webhook attempt", "err", err)
	}
}

// backoff is the wait after the n-th failed attempt.
func (s *Server) backoff(n int) time.Duration {
	d := s.cfg.WebhookRetryBase
	for i := 1; i < n && d < s.cfg.WebhookRetryMax; i++ {
		d *= 2
	}
	return min(d, s.cfg.WebhookRetryMax)
}

// send makes one attempt; it returns the HTTP status (0 if none) and an
// error unless the merchant answered 2xx.
func (s *Server) send(ctx context.Context, d delivery) (int, error) {
	gw, ok := s.gateways[d.Gateway]
	if !ok {
		return 0, fmt.Errorf("gateway %q is not configured: no secret to sign with", d.Gateway)
	}
	body := []byte(d.Body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.CallbackURL, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("build webhook request: %w", err)
	}
	ts := s.now()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "tatkal-pspsim/1")
	req.Header.Set(pspapi.HeaderGateway, d.Gateway)
	req.Header.Set(pspapi.HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	req.Header.Set(pspapi.HeaderSignature, pspapi.Sign(gw.WebhookSecret, ts, body))
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("post webhook: %w", err)
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) //nolint:errcheck // drain for reuse
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, errors.New("merchant answered " + resp.Status + ": " + string(snippet))
	}
	return resp.StatusCode, nil
}
