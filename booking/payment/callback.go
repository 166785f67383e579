package payment

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"tatkal/booking"
	"tatkal/booking/db"
	"tatkal/booking/payment/pspapi"
)

// HandleWebhook verifies and applies one gateway callback. A callback with
// a bad signature, a timestamp outside the replay window, an unknown
// payment or an amount that does not match is refused, logged and changes
// nothing. A duplicate is acknowledged and changes nothing.
func (s *Service) HandleWebhook(ctx context.Context, h http.Header, body []byte) error {
	defer observe("callback", time.Now())
	reject := func(err *booking.Error) error {
		s.log.Warn("webhook rejected", "gateway", h.Get(pspapi.HeaderGateway), "reason", err.Reason, "detail", err.Message)
		return err
	}
	gw := h.Get(pspapi.HeaderGateway)
	g := s.gateways[gw]
	if g == nil {
		return reject(booking.Errorf(booking.EUNAUTH, "UNKNOWN_GATEWAY", "Unknown gateway %q.", gw))
	}
	switch err := pspapi.VerifyAny(g.cfg.WebhookSecrets, h.Get(pspapi.HeaderTimestamp), h.Get(pspapi.HeaderSignature), body, time.Now()); {
	case errors.Is(err, pspapi.ErrReplayed):
		return reject(booking.Errorf(booking.EUNAUTH, "REPLAYED", "The callback's timestamp is outside the replay window."))
	case err != nil:
		return reject(booking.Errorf(booking.EUNAUTH, "BAD_SIGNATURE", "The callback's signature does not match."))
	}
	var w pspapi.Webhook
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil || w.EventID == "" {
		return reject(booking.Errorf(booking.EINVALID, "MALFORMED_CALLBACK", "The callback body is not a valid event."))
	}
	key := seenKey(gw, w.EventID)
	if s.seen.has(key) {
		return nil // a duplicate delivery of an event this process recorded
	}
	id, err := uuid.Parse(w.MerchantRef)
	if err != nil {
		return reject(booking.Errorf(booking.EINVALID, "UNKNOWN_PAYMENT", "The callback names no payment of ours."))
	}
	p := pspapi.Payment{PSPRef: w.PSPRef, MerchantRef: w.MerchantRef, Status: w.Status, AmountPaise: w.AmountPaise,
		Currency: w.Currency, BankRef: w.BankRef, FailureReason: w.FailureReason, CardFingerprint: w.CardFingerprint, AccountRef: w.AccountRef}
	if w.AmountPaise <= 0 {
		return reject(booking.Errorf(booking.EINVALID, "AMOUNT_MISMATCH", "The callback carries no amount."))
	}
	// The event is recorded in the transaction that applies it: recorded
	// means applied, and the callback costs one commit. The payment is
	// checked against the callback (its gateway, its reference, the event
	// not seen) under its lock there, not read beforehand: that read was a
	// sixth of a callback's statement time.
	hook := &webhookEvent{gateway: gw, eventID: w.EventID, status: w.Status}
	err = s.applyAnd(ctx, id, p, "webhook "+w.EventID, false, hook)
	if errors.Is(err, errSeenEvent) {
		s.seen.add(key)
		return nil // a duplicate delivery of an event recorded before
	}
	if err != nil {
		var be *booking.Error
		if errors.As(err, &be) {
			if r := be.Reason; r == "AMOUNT_MISMATCH" || r == "CURRENCY_MISMATCH" {
				// The gateway's callback disagrees with our amount: its
				// answer to a direct inquiry decides (a real capture of
				// another amount is refunded and raised for review).
				if ierr := s.inquireNow(ctx, id); ierr != nil {
					return fmt.Errorf("webhook %s: %w", w.EventID, ierr)
				}
			}
			return reject(be)
		}
		return err
	}
	s.seen.add(key)
	return nil
}

// webhookEvent is a callback's event, recorded with what it changed.
type webhookEvent struct{ gateway, eventID, status string }

// errSeenEvent: the callback's event was recorded before, so it changed
// what it changes then; this delivery is acknowledged and changes nothing.
var errSeenEvent = errors.New("the callback's event was recorded before")

// gatewayID and id name the event for the look-up of whether it was seen:
// "" for an answer that is not a callback, which no event has.
func (h *webhookEvent) gatewayID() string {
	if h == nil {
		return ""
	}
	return h.gateway
}

func (h *webhookEvent) id() string {
	if h == nil {
		return ""
	}
	return h.eventID
}

// check holds a callback to the payment it names, read under the
// payment's lock: another gateway's payment is not ours to that gateway
// (its secret signed nothing about it), a gateway reference other than the
// one the payment has is refused, and an event recorded before is a
// duplicate (errSeenEvent). An answer that is not a callback passes.
func (h *webhookEvent) check(gateway, pspRef string, seen bool, p pspapi.Payment) error {
	switch {
	case h == nil:
		return nil
	case gateway != h.gateway:
		return errNoSuchPayment(h)
	case pspRef != "" && p.PSPRef != pspRef:
		return booking.Errorf(booking.EINVALID, "REF_MISMATCH", "The callback's gateway reference does not match the payment's.")
	case seen:
		return errSeenEvent
	}
	return nil
}

// errNoSuchPayment refuses an answer naming no payment of ours (at the
// callback's gateway).
func errNoSuchPayment(h *webhookEvent) error {
	if h == nil {
		return booking.Errorf(booking.ENOTFOUND, "UNKNOWN_PAYMENT", "No such payment.")
	}
	return booking.Errorf(booking.EINVALID, "UNKNOWN_PAYMENT", "The callback names no payment of ours at %s.", h.gateway)
}

// inquireNow schedules a status inquiry at once, beside any already
// scheduled (apply is idempotent, so two answers change nothing twice).
func (s *Service) inquireNow(ctx context.Context, id uuid.UUID) error {
	return db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		_, err := s.jobs.InsertTx(ctx, tx, InquiryArgs{PaymentID: id}, nil)
		return err
	})
}
