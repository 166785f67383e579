// Package notify delivers the notifications outbox (booking.Notify) to a
// messaging gateway: the protocol and its client, the relay that turns
// outbox rows into send jobs, and the send job itself, which records
// sent_at and the delivery receipt. Every message carries its own
// idempotency key, so a retry after a timeout, a lost answer or a worker
// killed mid-send never makes the gateway deliver it twice.
//
// The gateway's protocol (booking/sim/msgsim simulates it):
//
//	POST /v1/messages        Authorization: Bearer <TATKAL_MSG_KEY>, Idempotency-Key: <key>
//	                         body Message; 202 Accepted, or 200 with duplicate=true for a
//	                         key seen before (same message: nothing is sent again); 409 for
//	                         a key seen with another message.
//	GET  /v1/messages/{id}   the delivery receipt: ACCEPTED, then DELIVERED or UNDELIVERED.
//	GET/PUT /admin/faults    latency, failures, lost answers (Bearer TATKAL_SIM_ADMIN_TOKEN).
package notify

import (
	"fmt"
	"time"
)

// Message is one SMS or e-mail to send.
type Message struct {
	Channel     string       `json:"channel"` // SMS or EMAIL
	To          string       `json:"to"`
	Subject     string       `json:"subject,omitempty"`
	Body        string       `json:"body"`
	ClientRef   string       `json:"client_ref"` // ours: the outbox row
	Attachments []Attachment `json:"attachments,omitempty"`
}

// Attachment is a file sent with an e-mail.
type Attachment struct {
	Name        string `json:"name"`
	ContentType string `json:"content_type"`
	Data        []byte `json:"data"` // base64 in JSON
}

// maxAttachment bounds one attachment (an e-ticket PDF is some 10 KiB).
const maxAttachment = 2 << 20

// Validate says what is wrong with m, or nil.
func (m Message) Validate() error {
	switch {
	case m.Channel != "SMS" && m.Channel != "EMAIL":
		return fmt.Errorf("channel %q: want SMS or EMAIL", m.Channel)
	case m.To == "" || len(m.To) > 200:
		return fmt.Errorf("to: want 1-200 characters")
	case m.Body == "" || len(m.Body) > 4000:
		return fmt.Errorf("body: want 1-4000 characters")
	case m.Channel == "SMS" && len(m.Attachments) > 0:
		return fmt.Errorf("an SMS carries no attachments")
	}
	for _, a := range m.Attachments {
		if a.Name == "" || len(a.Data) == 0 || len(a.Data) > maxAttachment {
			return fmt.Errorf("attachment %q: want a name and 1..%d bytes", a.Name, maxAttachment)
		}
	}
	return nil
}

// Delivery states of a receipt.
const (
	Accepted    = "ACCEPTED" // taken by the gateway, not yet delivered
	Delivered   = "DELIVERED"
	Undelivered = "UNDELIVERED" // the handset or mailbox refused it
)

// Receipt is what the gateway says about a message.
type Receipt struct {
	ID          string     `json:"id"`
	Status      string     `json:"status"`
	Duplicate   bool       `json:"duplicate,omitempty"` // answer to a key seen before
	AcceptedAt  time.Time  `json:"accepted_at"`
	DeliveredAt *time.Time `json:"delivered_at,omitempty"`
	Error       string     `json:"error,omitempty"`
}

// Final says whether the receipt will not change any more.
func (r Receipt) Final() bool { return r.Status == Delivered || r.Status == Undelivered }

// ErrorBody is the gateway's error answer.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Faults are what the simulator injects, so delivery is tested against a
// gateway that is slow, flaky, and sometimes does the work but loses the
// answer.
type Faults struct {
	LatencyMs int `json:"latency_ms"` // before every answer
	JitterMs  int `json:"jitter_ms"`  // plus a uniform 0..JitterMs
	// FailRate answers 503 without taking the message.
	FailRate float64 `json:"fail_rate"`
	// LostReplyRate takes the message, then answers 502: the caller cannot
	// tell it from a failure and must retry with the same key.
	LostReplyRate float64 `json:"lost_reply_rate"`
	// ReplyDelayMs takes the message, then waits this long before answering
	// (a caller killed meanwhile never learns it was taken).
	ReplyDelayMs int `json:"reply_delay_ms"`
	// UndeliverableRate: accepted messages that the receipt later says
	// were not delivered.
	UndeliverableRate float64 `json:"undeliverable_rate"`
	// DeliverAfterMs: how long after acceptance the receipt turns final.
	DeliverAfterMs int `json:"deliver_after_ms"`
}

const maxFaultMs = 60_000

// Validate says what is wrong with f, or nil.
func (f Faults) Validate() error {
	for _, ms := range []int{f.LatencyMs, f.JitterMs, f.ReplyDelayMs, f.DeliverAfterMs} {
		if ms < 0 || ms > maxFaultMs {
			return fmt.Errorf("latencies and delays must be in 0..%d ms (got %d)", maxFaultMs, ms)
		}
	}
	for _, r := range []float64{f.FailRate, f.LostReplyRate, f.UndeliverableRate} {
		if !(r >= 0 && r <= 1) {
			return fmt.Errorf("rates must be in [0,1] (got %v)", r)
		}
	}
	if f.FailRate+f.LostReplyRate > 1 {
		return fmt.Errorf("fail_rate + lost_reply_rate must not exceed 1")
	}
	return nil
}
