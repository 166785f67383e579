package payment

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"tatkal/booking/payment/pspapi"
)

// The seen-events memory forgets its oldest entries first and never holds
// more than its capacity.
func TestSeenEventsForgetsOldestFirst(t *testing.T) {
	s := newSeenEvents(3)
	for i := range 5 {
		s.add(fmt.Sprint(i))
	}
	s.add("4") // again: no new slot
	for i, want := range []bool{false, false, true, true, true} {
		if got := s.has(fmt.Sprint(i)); got != want {
			t.Errorf("has(%d) = %v, want %v", i, got, want)
		}
	}
	if len(s.set) != 3 {
		t.Errorf("holds %d keys, capacity 3", len(s.set))
	}
}

// A duplicate delivery of an event this process recorded is acknowledged
// without PostgreSQL: the service here has no pool at all, so any query
// would panic. A forged duplicate (bad signature) is still refused.
func TestDuplicateCallbackNeedsNoDatabase(t *testing.T) {
	secret := []byte("whsec-test-0123456789")
	s := &Service{gateways: map[string]*gatewayClient{"swiftpay": {cfg: GatewayConfig{ID: "swiftpay", WebhookSecrets: [][]byte{secret}}}},
		seen: newSeenEvents(16), log: slog.New(slog.DiscardHandler)}
	body, _ := json.Marshal(pspapi.Webhook{EventID: "evt_1", PSPRef: "pay_1", MerchantRef: "01a2306e-5a94-7440-b77e-47b3a1b79492",
		Gateway: "swiftpay", Status: pspapi.StatusSuccess, AmountPaise: 100})
	s.seen.add(seenKey("swiftpay", "evt_1"))
	now := time.Now()
	h := http.Header{}
	h.Set(pspapi.HeaderGateway, "swiftpay")
	h.Set(pspapi.HeaderTimestamp, fmt.Sprint(now.Unix()))
	h.Set(pspapi.HeaderSignature, pspapi.Sign(secret, now, body))
	if err := s.HandleWebhook(context.Background(), h, body); err != nil {
		t.Fatalf("duplicate of a recorded event: %v", err)
	}
	h.Set(pspapi.HeaderSignature, pspapi.Sign([]byte("not-the-secret"), now, body))
	if err := s.HandleWebhook(context.Background(), h, body); err == nil {
		t.Fatal("a duplicate with a forged signature was acknowledged")
	}
}
