package pspsim

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"tatkal/booking/lab/testenv"
	"tatkal/booking/payment/pspapi"
)

// captured makes a SUCCESS payment of amount on gw.
func (b *bundle) captured(t *testing.T, gw, ref string, amount int64) pspapi.Payment {
	t.Helper()
	p := b.create(t, gw, b.createReq(ref, pspapi.Card, amount))
	b.hooks.waitStatus(t, p.PSPRef, pspapi.StatusSuccess, 3*time.Second)
	return p
}

func (b *bundle) refund(t *testing.T, gw, key string, req pspapi.CreateRefund) reply {
	t.Helper()
	return b.must(t, "POST", "/gw/"+gw+"/v1/refunds", apiKey(gw), key, req)
}

func TestRefundsPartialIdempotentNeverExceed(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{})
	p := b.captured(t, "swiftpay", "pay-refund", 10000)

	first := pspapi.CreateRefund{PSPRef: p.PSPRef, AmountPaise: 4000, Reason: "seat not available", MerchantRef: "rf-1"}
	r1 := decodeAs[pspapi.Refund](t, b.refund(t, "swiftpay", "rk-1", first), http.StatusCreated)
	if r1.Status != pspapi.RefundPending || r1.AmountPaise != 4000 || r1.PSPRef != p.PSPRef || r1.MerchantRef != "rf-1" ||
		!strings.HasPrefix(r1.RefundRef, "rfnd_") || !r1.ExpectedAt.After(r1.CreatedAt.Add(48*time.Hour)) {
		t.Fatalf("refund = %+v", r1)
	}
	// Same key, same body: the same refund.
	again := b.refund(t, "swiftpay", "rk-1", first)
	if r := decodeAs[pspapi.Refund](t, again, http.StatusOK); r.RefundRef != r1.RefundRef || again.header.Get(pspapi.HeaderIdempotentReplay) != "true" {
		t.Fatalf("replay = %+v", r)
	}
	// Same key, different body: refused.
	changed := first
	changed.AmountPaise = 4001
	b.refund(t, "swiftpay", "rk-1", changed).wantError(t, http.StatusUnprocessableEntity, pspapi.CodeIdempotencyMismatch)
	// Same refund id, different key: refused.
	b.refund(t, "swiftpay", "rk-other", first).wantError(t, http.StatusConflict, pspapi.CodeDuplicateRef)

	// 6000 more is exactly the rest; one paisa more is refused.
	decodeAs[pspapi.Refund](t, b.refund(t, "swiftpay", "rk-2",
		pspapi.CreateRefund{PSPRef: p.PSPRef, AmountPaise: 6000, MerchantRef: "rf-2"}), http.StatusCreated)
	e := b.refund(t, "swiftpay", "rk-3", pspapi.CreateRefund{PSPRef: p.PSPRef, AmountPaise: 1, MerchantRef: "rf-3"}).
		wantError(t, http.StatusUnprocessableEntity, pspapi.CodeRefundExceeds)
	if !strings.Contains(e.Error, "left 0") {
		t.Fatalf("over-refund message = %q", e.Error)
	}
	if got := b.inquire(t, "swiftpay", p.PSPRef); got.RefundedPaise != 10000 || got.Status != pspapi.StatusSuccess {
		t.Fatalf("payment after refunds = %+v", got)
	}

	// Refunds are paid out after the delay.
	testenv.Eventually(t, 3*time.Second, "refund processed", func() error {
		r := decodeAs[pspapi.Refund](t, b.must(t, "GET", "/gw/swiftpay/v1/refunds/"+r1.RefundRef, apiKey("swiftpay"), "", nil), http.StatusOK)
		return testenv.Want(r.Status == pspapi.RefundProcessed && !r.ProcessedAt.IsZero(), "not yet")
	})
	b.must(t, "GET", "/gw/swiftpay/v1/refunds/rfnd_nope", apiKey("swiftpay"), "", nil).wantError(t, 404, pspapi.CodeNotFound)
	b.must(t, "GET", "/gw/bharatpg/v1/refunds/"+r1.RefundRef, apiKey("bharatpg"), "", nil).wantError(t, 404, pspapi.CodeNotFound)
	if n := b.count(t, `SELECT count(*) FROM {s}.refunds`); n != 2 {
		t.Fatalf("refunds stored = %d, want 2", n)
	}
}

func TestConcurrentRefundsNeverExceedCaptured(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{})
	p := b.captured(t, "bharatpg", "pay-race", 10000)
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ref := "rf-race-" + string(rune('a'+i))
			r, err := b.call(t, b.http, "POST", "/gw/bharatpg/v1/refunds", apiKey("bharatpg"), "k-"+ref,
				pspapi.CreateRefund{PSPRef: p.PSPRef, AmountPaise: 3000, MerchantRef: ref})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			codes[r.status]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if codes[http.StatusCreated] != 3 || codes[http.StatusUnprocessableEntity] != 5 {
		t.Fatalf("answers = %v, want 3×201 and 5×422", codes)
	}
	if n := b.count(t, `SELECT coalesce(sum(amount_paise), 0)::int FROM {s}.refunds WHERE psp_ref = $1`, p.PSPRef); n != 9000 {
		t.Fatalf("refunded in total %d, want 9000", n)
	}
}

func TestRefundRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{route: func(rc *pspapi.RouteConfig) { rc.AutoApproveMs = -1 }})
	p := b.create(t, "swiftpay", b.createReq("pay-uncaptured", pspapi.UPI, 500))
	b.refund(t, "swiftpay", "k1", pspapi.CreateRefund{PSPRef: p.PSPRef, AmountPaise: 100, MerchantRef: "rf-a"}).
		wantError(t, http.StatusConflict, pspapi.CodeNotCaptured)
	b.refund(t, "swiftpay", "k2", pspapi.CreateRefund{PSPRef: "pay_nope", AmountPaise: 100, MerchantRef: "rf-b"}).
		wantError(t, http.StatusNotFound, pspapi.CodeNotFound)
	for name, req := range map[string]pspapi.CreateRefund{
		"zero amount":     {PSPRef: p.PSPRef, AmountPaise: 0, MerchantRef: "rf-c"},
		"no psp_ref":      {AmountPaise: 10, MerchantRef: "rf-d"},
		"no merchant_ref": {PSPRef: p.PSPRef, AmountPaise: 10},
	} {
		if r := b.refund(t, "swiftpay", "k-"+name, req); r.status != http.StatusBadRequest {
			t.Errorf("%s: status %d", name, r.status)
		}
	}
	b.refund(t, "swiftpay", "", pspapi.CreateRefund{PSPRef: p.PSPRef, AmountPaise: 10, MerchantRef: "rf-e"}).
		wantError(t, http.StatusBadRequest, pspapi.CodeInvalid)
	if n := b.count(t, `SELECT count(*) FROM {s}.refunds`); n != 0 {
		t.Fatalf("refused refunds stored %d rows", n)
	}
	if got := b.inquire(t, "swiftpay", p.PSPRef); got.RefundedPaise != 0 {
		t.Fatalf("refunded_paise = %d", got.RefundedPaise)
	}
}
