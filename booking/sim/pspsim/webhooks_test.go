package pspsim

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"tatkal/booking/lab/testenv"
	"tatkal/booking/payment/pspapi"
)

func TestLostCallbackInquiryTellsTruth(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{route: func(rc *pspapi.RouteConfig) { rc.LostCallbackRate = 1 }})
	p := b.create(t, "swiftpay", b.createReq("pay-lost", pspapi.UPI, 4200))
	testenv.Eventually(t, 3*time.Second, "SUCCESS by inquiry", func() error {
		return testenv.Want(b.inquire(t, "swiftpay", p.PSPRef).Status == pspapi.StatusSuccess, "not yet")
	})
	time.Sleep(300 * time.Millisecond)
	if hs := b.hooks.of(p.PSPRef); len(hs) != 0 {
		t.Fatalf("a lost callback arrived: %v", statuses(hs))
	}
	if n := b.count(t, `SELECT count(*) FROM {s}.webhooks WHERE psp_ref = $1 AND state = 'LOST' AND attempts = 0`, p.PSPRef); n != 1 {
		t.Fatalf("LOST webhook records = %d, want 1", n)
	}
}

func TestDuplicateCallbackSameEventID(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{route: func(rc *pspapi.RouteConfig) { rc.DuplicateCallbackRate = 1; rc.CallbackDelayMs = 100 }})
	p := b.create(t, "bharatpg", b.createReq("pay-dup", pspapi.Card, 4200))
	testenv.Eventually(t, 3*time.Second, "two deliveries", func() error { return testenv.Want(len(b.hooks.of(p.PSPRef)) >= 2, "not yet") })
	time.Sleep(300 * time.Millisecond)
	hs := b.hooks.of(p.PSPRef)
	if len(hs) != 2 {
		t.Fatalf("deliveries = %d, want 2", len(hs))
	}
	if hs[0].EventID != hs[1].EventID || !bytes.Equal(hs[0].raw, hs[1].raw) || hs[0].Status != pspapi.StatusSuccess {
		t.Fatalf("duplicates differ: %s vs %s", hs[0].raw, hs[1].raw)
	}
	// The delay applies: nothing before approval (150 ms) + delay (100 ms).
	created := b.inquire(t, "bharatpg", p.PSPRef).CreatedAt
	if d := hs[0].at.Sub(created); d < 250*time.Millisecond {
		t.Fatalf("first delivery %v after create, want >= 250ms", d)
	}
}

func TestWebhookRetriedWithBackoffUntilAccepted(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{})
	b.hooks.setRespond(func(_ pspapi.Webhook, attempt int) int {
		if attempt <= 2 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	p := b.create(t, "swiftpay", b.createReq("pay-retry", pspapi.UPI, 100))
	h := b.hooks.waitStatus(t, p.PSPRef, pspapi.StatusSuccess, 3*time.Second)
	at := b.hooks.attemptsAt(h.EventID)
	if len(at) != 3 {
		t.Fatalf("attempts = %d, want 3", len(at))
	}
	// Backoff 60 ms then 120 ms (the loop ticks every 15 ms).
	if d := at[1].Sub(at[0]); d < 60*time.Millisecond {
		t.Fatalf("second attempt %v after the first, want >= 60ms", d)
	}
	if d := at[2].Sub(at[1]); d < 120*time.Millisecond {
		t.Fatalf("third attempt %v after the second, want >= 120ms (doubling)", d)
	}
	time.Sleep(200 * time.Millisecond)
	if n := b.count(t, `SELECT count(*) FROM {s}.webhooks WHERE psp_ref = $1 AND state = 'DELIVERED' AND attempts = 3`, p.PSPRef); n != 1 {
		t.Fatalf("delivered record with 3 attempts = %d", n)
	}
	if got := len(b.hooks.attemptsAt(h.EventID)); got != 3 {
		t.Fatalf("sent again after acceptance: %d attempts", got)
	}
}

func TestWebhookGivesUpAfterLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{})
	b.hooks.setRespond(func(pspapi.Webhook, int) int { return http.StatusServiceUnavailable })
	p := b.create(t, "swiftpay", b.createReq("pay-giveup", pspapi.UPI, 100))
	testenv.Eventually(t, 5*time.Second, "webhook given up", func() error {
		return testenv.Want(b.count(t, `SELECT count(*) FROM {s}.webhooks WHERE psp_ref = $1 AND state = 'GAVE_UP'`, p.PSPRef) == 1, "not yet")
	})
	var eventID string
	if err := b.env.Pool.QueryRow(context.Background(), b.srv.q(`SELECT event_id FROM {s}.webhooks WHERE psp_ref = $1`), p.PSPRef).Scan(&eventID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(700 * time.Millisecond) // longer than the capped backoff
	if n := len(b.hooks.attemptsAt(eventID)); n != b.cfg.WebhookMaxAttempts {
		t.Fatalf("attempts = %d, want exactly %d", n, b.cfg.WebhookMaxAttempts)
	}
	// The payment itself is still SUCCESS: webhooks are news, not truth.
	if got := b.inquire(t, "swiftpay", p.PSPRef); got.Status != pspapi.StatusSuccess {
		t.Fatalf("status = %s", got.Status)
	}
}

func TestBackoffDoublesToCap(t *testing.T) {
	s := &Server{cfg: Config{WebhookRetryBase: time.Second, WebhookRetryMax: 10 * time.Second}}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	for i, w := range want {
		if got := s.backoff(i + 1); got != w {
			t.Errorf("backoff(%d) = %v, want %v", i+1, got, w)
		}
	}
}
