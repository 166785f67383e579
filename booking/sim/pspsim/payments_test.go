package pspsim

import (
	"errors"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"tatkal/booking/payment/pspapi"
)

func TestCreateAutoApproveSignedSuccessWebhook(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{})
	req := b.createReq("pay-happy-1", pspapi.UPI, 123450)
	start := time.Now()
	p := b.create(t, "swiftpay", req)

	if p.Status != pspapi.StatusCreated || p.Gateway != "swiftpay" || p.Method != pspapi.UPI ||
		p.MerchantRef != req.MerchantRef || p.AmountPaise != 123450 || !strings.HasPrefix(p.PSPRef, "pay_") {
		t.Fatalf("create answer = %+v", p)
	}
	na := p.NextAction
	if na == nil || na.Type != pspapi.NextActionCollect || na.VPA != "asha.k@okbank" ||
		na.URL != b.ts.URL+"/gw/swiftpay/pay/"+p.PSPRef {
		t.Fatalf("next_action = %+v", na)
	}
	if d := na.ExpiresAt.Sub(p.CreatedAt); d != 3*time.Second {
		t.Fatalf("expires %v after create, want 3s", d)
	}

	h := b.hooks.waitStatus(t, p.PSPRef, pspapi.StatusSuccess, 3*time.Second)
	if waited := time.Since(start); waited < 150*time.Millisecond {
		t.Fatalf("SUCCESS after %v, before the customer's 150 ms", waited)
	}
	if h.MerchantRef != req.MerchantRef || h.Gateway != "swiftpay" || h.Method != pspapi.UPI || h.AmountPaise != 123450 ||
		h.EventID == "" || !regexp.MustCompile(`^\d{12}$`).MatchString(h.BankRef) || h.FailureReason != "" {
		t.Fatalf("webhook = %+v", h.Webhook)
	}
	// The receiver verified the signature; check it binds secret and body.
	ts, sig := h.header.Get(pspapi.HeaderTimestamp), h.header.Get(pspapi.HeaderSignature)
	if err := pspapi.Verify(secret("swiftpay"), ts, sig, h.raw, time.Now()); err != nil {
		t.Fatalf("verify: %v", err)
	}
	if err := pspapi.Verify(secret("bharatpg"), ts, sig, h.raw, time.Now()); !errors.Is(err, pspapi.ErrBadSignature) {
		t.Fatalf("verify with another gateway's secret = %v, want ErrBadSignature", err)
	}
	tampered := []byte(strings.Replace(string(h.raw), "123450", "123451", 1))
	if err := pspapi.Verify(secret("swiftpay"), ts, sig, tampered, time.Now()); !errors.Is(err, pspapi.ErrBadSignature) {
		t.Fatalf("verify tampered body = %v, want ErrBadSignature", err)
	}
	if h.header.Get(pspapi.HeaderGateway) != "swiftpay" {
		t.Fatalf("gateway header = %q", h.header.Get(pspapi.HeaderGateway))
	}

	got := b.inquire(t, "swiftpay", p.PSPRef)
	if got.Status != pspapi.StatusSuccess || got.BankRef != h.BankRef || got.NextAction != nil {
		t.Fatalf("inquiry = %+v", got)
	}
	time.Sleep(100 * time.Millisecond)
	if hs := b.hooks.of(p.PSPRef); len(hs) != 1 {
		t.Fatalf("webhooks = %v, want exactly one SUCCESS", statuses(hs))
	}
}

func TestDecline(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{route: func(rc *pspapi.RouteConfig) { rc.DeclineRate = 1 }})
	p := b.create(t, "bharatpg", b.createReq("pay-decline", pspapi.Card, 50000))
	if p.NextAction == nil || p.NextAction.Type != pspapi.NextActionRedirect || p.NextAction.URL == "" {
		t.Fatalf("card next_action = %+v", p.NextAction)
	}
	h := b.hooks.waitStatus(t, p.PSPRef, pspapi.StatusFailed, 3*time.Second)
	if h.FailureReason != pspapi.ReasonDeclined || h.BankRef != "" {
		t.Fatalf("webhook = %+v", h.Webhook)
	}
	got := b.inquire(t, "bharatpg", p.PSPRef)
	if got.Status != pspapi.StatusFailed || got.FailureReason != pspapi.ReasonDeclined {
		t.Fatalf("inquiry = %+v", got)
	}
}

func TestPendingThenResolution(t *testing.T) {
	t.Parallel()
	// Resolution 2 s after PENDING: the inquiry right after the PENDING
	// webhook must still see PENDING however slow the machine.
	b := setup(t, opts{route: func(rc *pspapi.RouteConfig) { rc.PendingRate = 1; rc.PendingResolveMs = 2000 }})
	ok := b.create(t, "swiftpay", b.createReq("pay-pending-ok", pspapi.UPI, 1000))
	b.putRoute(t, "swiftpay", pspapi.NetBanking, func(rc *pspapi.RouteConfig) { rc.DeclineRate = 1 })
	bad := b.create(t, "swiftpay", b.createReq("pay-pending-bad", pspapi.NetBanking, 2000))

	pend := b.hooks.waitStatus(t, ok.PSPRef, pspapi.StatusPending, 3*time.Second)
	if got := b.inquire(t, "swiftpay", ok.PSPRef); got.Status != pspapi.StatusPending {
		t.Fatalf("inquiry after PENDING webhook = %s", got.Status)
	}
	done := b.hooks.waitStatus(t, ok.PSPRef, pspapi.StatusSuccess, 10*time.Second)
	if d := done.BankEventTime.Sub(pend.BankEventTime); d < 2000*time.Millisecond {
		t.Fatalf("resolved %v after PENDING, want >= 2s", d)
	}
	if done.EventID == pend.EventID {
		t.Fatal("PENDING and SUCCESS share an event_id")
	}
	if s := statuses(b.hooks.of(ok.PSPRef)); strings.Join(s, ",") != "PENDING,SUCCESS" {
		t.Fatalf("webhooks = %v", s)
	}

	b.hooks.waitStatus(t, bad.PSPRef, pspapi.StatusPending, 10*time.Second)
	f := b.hooks.waitStatus(t, bad.PSPRef, pspapi.StatusFailed, 10*time.Second)
	if f.FailureReason != pspapi.ReasonDeclined {
		t.Fatalf("pending decline reason = %q", f.FailureReason)
	}
	if got := b.inquire(t, "swiftpay", bad.PSPRef); got.Status != pspapi.StatusFailed {
		t.Fatalf("inquiry = %+v", got)
	}
}

func TestTimeoutFaultPaymentStillExists(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{route: func(rc *pspapi.RouteConfig) { rc.TimeoutRate = 1 }})
	req := b.createReq("pay-timeout", pspapi.UPI, 7700)
	impatient := &http.Client{Timeout: 300 * time.Millisecond}
	start := time.Now()
	_, err := b.call(t, impatient, "POST", "/gw/swiftpay/v1/payments", apiKey("swiftpay"), "k-timeout", req)
	var ne interface{ Timeout() bool }
	if err == nil || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("create with a 300 ms client: err = %v, want a timeout", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("client waited %v", d)
	}

	// The merchant recovers by merchant_ref: the payment exists (once the
	// gateway has stored it: the create the client gave up on goes on).
	for deadline := time.Now().Add(10 * time.Second); b.count(t, `SELECT count(*) FROM {s}.payments WHERE merchant_ref = 'pay-timeout'`) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the timed-out create never stored its payment")
		}
		time.Sleep(50 * time.Millisecond)
	}
	p := b.inquireByMerchantRef(t, "swiftpay", "pay-timeout")
	if p.MerchantRef != "pay-timeout" || p.AmountPaise != 7700 || p.PSPRef == "" {
		t.Fatalf("inquiry by merchant_ref = %+v", p)
	}
	// And it proceeds: the customer approves, the webhook comes.
	b.hooks.waitStatus(t, p.PSPRef, pspapi.StatusSuccess, 3*time.Second)
	if got := b.inquire(t, "swiftpay", p.PSPRef); got.Status != pspapi.StatusSuccess {
		t.Fatalf("status = %s", got.Status)
	}
	// Retrying the create with the same key answers at once, same payment.
	start = time.Now()
	r := b.must(t, "POST", "/gw/swiftpay/v1/payments", apiKey("swiftpay"), "k-timeout", req)
	again := decodeAs[pspapi.Payment](t, r, http.StatusOK)
	if again.PSPRef != p.PSPRef || r.header.Get(pspapi.HeaderIdempotentReplay) != "true" || time.Since(start) > time.Second {
		t.Fatalf("retry = %+v (replay header %q) after %v", again, r.header.Get(pspapi.HeaderIdempotentReplay), time.Since(start))
	}
	if n := b.count(t, `SELECT count(*) FROM {s}.payments`); n != 1 {
		t.Fatalf("payments = %d, want 1", n)
	}
}

func TestTimeoutHangIsBounded(t *testing.T) {
	t.Parallel()
	// A patient client gets a 504 once the hang ends.
	b := setup(t, opts{route: func(rc *pspapi.RouteConfig) { rc.TimeoutRate = 1 }, hang: 300 * time.Millisecond})
	r := b.must(t, "POST", "/gw/swiftpay/v1/payments", apiKey("swiftpay"), "k1", b.createReq("pay-504", pspapi.Card, 100))
	r.wantError(t, http.StatusGatewayTimeout, pspapi.CodeTimeout)
	if p := b.inquireByMerchantRef(t, "swiftpay", "pay-504"); p.Status == "" {
		t.Fatal("payment missing after 504")
	}
}

func TestLateSuccess(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{route: func(rc *pspapi.RouteConfig) { rc.LateSuccessRate = 1; rc.LateSuccessMs = 1200 }})
	p := b.create(t, "bharatpg", b.createReq("pay-late", pspapi.UPI, 999))
	pend := b.hooks.waitStatus(t, p.PSPRef, pspapi.StatusPending, 2*time.Second)
	time.Sleep(500 * time.Millisecond)
	if got := b.inquire(t, "bharatpg", p.PSPRef); got.Status != pspapi.StatusPending {
		t.Fatalf("status 500 ms into the late window = %s, want PENDING", got.Status)
	}
	done := b.hooks.waitStatus(t, p.PSPRef, pspapi.StatusSuccess, 3*time.Second)
	if d := done.BankEventTime.Sub(pend.BankEventTime); d < 1200*time.Millisecond {
		t.Fatalf("late success came %v after approval, want >= 1.2s", d)
	}
}

func TestCapacityLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{route: func(rc *pspapi.RouteConfig) { rc.CapacityTPS = 2 }})
	impatient := &http.Client{Timeout: time.Second}
	var wg sync.WaitGroup
	var mu sync.Mutex
	answered, timedOut := 0, 0
	for i := range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ref := "pay-cap-" + string(rune('a'+i))
			r, err := b.call(t, impatient, "POST", "/gw/swiftpay/v1/payments", apiKey("swiftpay"), "k-"+ref, b.createReq(ref, pspapi.Card, 100))
			mu.Lock()
			defer mu.Unlock()
			var ne interface{ Timeout() bool }
			switch {
			case err == nil && r.status == http.StatusCreated:
				answered++
			case errors.As(err, &ne) && ne.Timeout():
				timedOut++
			default:
				t.Errorf("create: %v %d %s", err, r.status, r.body)
			}
		}()
	}
	wg.Wait()
	// Two tokens at once; at most a sliver of refill during the burst.
	if answered < 2 || answered > 3 || answered+timedOut != 5 {
		t.Fatalf("answered %d, timed out %d; want 2 (or 3) and the rest timing out", answered, timedOut)
	}
	// Every one of them exists, as a timed-out create does.
	for i := range 5 {
		b.inquireByMerchantRef(t, "swiftpay", "pay-cap-"+string(rune('a'+i)))
	}
	// Other routes are metered separately, and the bucket refills.
	b.create(t, "swiftpay", b.createReq("pay-cap-upi", pspapi.UPI, 100))
	time.Sleep(time.Second)
	b.create(t, "swiftpay", b.createReq("pay-cap-later", pspapi.Card, 100))
}

func TestOutage(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{route: func(rc *pspapi.RouteConfig) { rc.AutoApproveMs = 300 }})
	done := b.create(t, "swiftpay", b.createReq("pay-done", pspapi.UPI, 100))
	b.hooks.waitStatus(t, done.PSPRef, pspapi.StatusSuccess, 3*time.Second)
	// The customer of the next payment approves 2 s after it is made: long
	// after the outage starts however slow the machine, and long before
	// the check below, so only the outage can keep it from moving.
	b.putRoute(t, "swiftpay", pspapi.UPI, func(rc *pspapi.RouteConfig) { rc.AutoApproveMs = 2000 })
	before := b.create(t, "swiftpay", b.createReq("pay-before-outage", pspapi.UPI, 100))
	b.putRoute(t, "swiftpay", pspapi.UPI, func(rc *pspapi.RouteConfig) { rc.Outage = true })

	r := b.must(t, "POST", "/gw/swiftpay/v1/payments", apiKey("swiftpay"), "k-out", b.createReq("pay-in-outage", pspapi.UPI, 100))
	r.wantError(t, http.StatusServiceUnavailable, pspapi.CodeUnavailable)
	if r.header.Get("Retry-After") == "" {
		t.Error("503 without Retry-After")
	}
	b.must(t, "GET", "/gw/swiftpay/v1/payments/"+before.PSPRef, apiKey("swiftpay"), "", nil).wantError(t, 503, pspapi.CodeUnavailable)
	b.must(t, "GET", "/gw/swiftpay/v1/payments?merchant_ref=pay-done", apiKey("swiftpay"), "", nil).wantError(t, 503, pspapi.CodeUnavailable)
	b.must(t, "POST", "/gw/swiftpay/v1/refunds", apiKey("swiftpay"), "rk", pspapi.CreateRefund{PSPRef: done.PSPRef, AmountPaise: 10, MerchantRef: "rf-1"}).
		wantError(t, 503, pspapi.CodeUnavailable)
	if page, err := http.Get(b.ts.URL + "/gw/swiftpay/pay/" + before.PSPRef); err != nil || page.StatusCode != 503 {
		t.Fatalf("pay page in outage: %v %v", err, page)
	} else {
		page.Body.Close()
	}
	if n := b.count(t, `SELECT count(*) FROM {s}.payments WHERE merchant_ref = 'pay-in-outage'`); n != 0 {
		t.Fatalf("a create during outage stored a payment")
	}
	// Other routes carry on.
	b.create(t, "swiftpay", b.createReq("pay-card-ok", pspapi.Card, 100))
	b.create(t, "bharatpg", b.createReq("pay-other-gw", pspapi.UPI, 100))

	// Nothing moves on a route that is down...
	time.Sleep(2500 * time.Millisecond)
	if s := b.dbStatus(t, before.PSPRef); s != pspapi.StatusCreated {
		t.Fatalf("payment moved to %s during the outage", s)
	}
	if hs := b.hooks.of(before.PSPRef); len(hs) != 0 {
		t.Fatalf("webhooks during outage: %v", statuses(hs))
	}
	// ...and everything resumes when it is back.
	b.putRoute(t, "swiftpay", pspapi.UPI, func(rc *pspapi.RouteConfig) { rc.Outage = false })
	b.hooks.waitStatus(t, before.PSPRef, pspapi.StatusSuccess, 10*time.Second)
}

func TestIdempotentCreate(t *testing.T) {
	t.Parallel()
	b := setup(t, opts{route: func(rc *pspapi.RouteConfig) { rc.AutoApproveMs = -1 }})
	req := b.createReq("pay-idem", pspapi.UPI, 5000)
	path, key := "/gw/swiftpay/v1/payments", "idem-key-1"

	// Ten concurrent tries with one key: one payment, the same answer.
	var wg sync.WaitGroup
	refs := make([]string, 10)
	for i := range refs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := b.call(t, b.http, "POST", path, apiKey("swiftpay"), key, req)
			if err != nil || (r.status != 201 && r.status != 200) {
				t.Errorf("create: %v %d %s", err, r.status, r.body)
				return
			}
			refs[i] = decodeAs[pspapi.Payment](t, r, r.status).PSPRef
		}()
	}
	wg.Wait()
	for _, ref := range refs {
		if ref != refs[0] || ref == "" {
			t.Fatalf("psp_refs differ: %v", refs)
		}
	}
	if n := b.count(t, `SELECT count(*) FROM {s}.payments`); n != 1 {
		t.Fatalf("payments = %d, want 1", n)
	}

	// Spacing does not matter; the body does.
	same := `{"merchant_ref":"pay-idem","amount_paise":5000,"currency":"INR","method":"UPI","vpa":"asha.k@okbank",` +
		`"callback_url":"` + req.CallbackURL + `","return_url":"` + req.ReturnURL + `"}`
	r := b.must(t, "POST", path, apiKey("swiftpay"), key, same)
	if p := decodeAs[pspapi.Payment](t, r, http.StatusOK); p.PSPRef != refs[0] {
		t.Fatalf("replay psp_ref = %s", p.PSPRef)
	}
	changed := req
	changed.AmountPaise = 5001
	b.must(t, "POST", path, apiKey("swiftpay"), key, changed).wantError(t, http.StatusUnprocessableEntity, pspapi.CodeIdempotencyMismatch)
	b.must(t, "POST", path, apiKey("swiftpay"), "another-key", req).wantError(t, http.StatusConflict, pspapi.CodeDuplicateRef)
	// The same merchant_ref on another gateway is another payment.
	other := b.create(t, "bharatpg", req)
	if other.PSPRef == refs[0] {
		t.Fatal("bharatpg reused swiftpay's psp_ref")
	}
	if n := b.count(t, `SELECT count(*) FROM {s}.payments`); n != 2 {
		t.Fatalf("payments = %d, want 2", n)
	}
}

func TestCreateValidationAndAuth(t *testing.T) {
	t.Parallel()
	routes := testRoutes(nil)
	var carried []pspapi.RouteConfig
	for _, rc := range routes {
		if rc.Gateway != "bharatpg" || rc.Method != pspapi.NetBanking {
			carried = append(carried, rc)
		}
	}
	b := setup(t, opts{routes: carried})
	good := b.createReq("pay-valid", pspapi.UPI, 100)
	cases := []struct {
		name string
		gw   string
		mut  func(*pspapi.CreatePayment)
		raw  string
		want string
	}{
		{"zero amount", "swiftpay", func(r *pspapi.CreatePayment) { r.AmountPaise = 0 }, "", "amount_paise"},
		{"negative amount", "swiftpay", func(r *pspapi.CreatePayment) { r.AmountPaise = -5 }, "", "amount_paise"},
		{"currency", "swiftpay", func(r *pspapi.CreatePayment) { r.Currency = "USD" }, "", "currency"},
		{"unknown method", "swiftpay", func(r *pspapi.CreatePayment) { r.Method = "WALLET" }, "", "method"},
		{"method not carried", "bharatpg", func(r *pspapi.CreatePayment) { r.Method = pspapi.NetBanking; r.Bank = "HDFC" }, "", "does not carry NETBANKING"},
		{"vpa", "swiftpay", func(r *pspapi.CreatePayment) { r.VPA = "asha" }, "", "vpa"},
		{"vpa empty", "swiftpay", func(r *pspapi.CreatePayment) { r.VPA = "" }, "", "vpa"},
		{"bank", "swiftpay", func(r *pspapi.CreatePayment) { r.Method = pspapi.NetBanking; r.Bank = " " }, "", "bank"},
		{"relative callback", "swiftpay", func(r *pspapi.CreatePayment) { r.CallbackURL = "/hooks" }, "", "callback_url"},
		{"ftp return", "swiftpay", func(r *pspapi.CreatePayment) { r.ReturnURL = "ftp://x.example/r" }, "", "return_url"},
		{"no merchant_ref", "swiftpay", func(r *pspapi.CreatePayment) { r.MerchantRef = "" }, "", "merchant_ref"},
		{"unknown field", "swiftpay", nil, `{"merchant_ref":"x","amount_paise":1,"tip":5}`, "tip"},
		{"not json", "swiftpay", nil, `amount=5`, "JSON"},
	}
	for _, c := range cases {
		var body any = c.raw
		if c.raw == "" {
			req := good
			c.mut(&req)
			body = req
		}
		r := b.must(t, "POST", "/gw/"+c.gw+"/v1/payments", apiKey(c.gw), "k-"+c.name, body)
		e := r.wantError(t, http.StatusBadRequest, pspapi.CodeInvalid)
		if !strings.Contains(e.Error, c.want) {
			t.Errorf("%s: error %q does not mention %q", c.name, e.Error, c.want)
		}
	}
	// Several problems are reported together.
	e := b.must(t, "POST", "/gw/swiftpay/v1/payments", apiKey("swiftpay"), "k-multi",
		pspapi.CreatePayment{MerchantRef: "m", Method: pspapi.UPI, VPA: "a@b"}).wantError(t, 400, pspapi.CodeInvalid)
	for _, want := range []string{"amount_paise", "currency", "callback_url", "return_url"} {
		if !strings.Contains(e.Error, want) {
			t.Errorf("combined error %q lacks %q", e.Error, want)
		}
	}
	b.must(t, "POST", "/gw/swiftpay/v1/payments", apiKey("swiftpay"), "", good).wantError(t, 400, pspapi.CodeInvalid)

	// Auth.
	b.must(t, "POST", "/gw/swiftpay/v1/payments", "", "k", good).wantError(t, 401, pspapi.CodeUnauthorized)
	b.must(t, "POST", "/gw/swiftpay/v1/payments", apiKey("bharatpg"), "k", good).wantError(t, 401, pspapi.CodeUnauthorized)
	b.must(t, "GET", "/gw/swiftpay/v1/payments/pay_x", "sk_wrong", "", nil).wantError(t, 401, pspapi.CodeUnauthorized)
	b.must(t, "POST", "/gw/nopay/v1/payments", apiKey("swiftpay"), "k", good).wantError(t, 404, pspapi.CodeNotFound)

	if n := b.count(t, `SELECT count(*) FROM {s}.payments`); n != 0 {
		t.Fatalf("bad requests stored %d payments", n)
	}

	// Inquiry of what does not exist.
	b.must(t, "GET", "/gw/swiftpay/v1/payments/pay_nope", apiKey("swiftpay"), "", nil).wantError(t, 404, pspapi.CodeNotFound)
	b.must(t, "GET", "/gw/swiftpay/v1/payments?merchant_ref=nope", apiKey("swiftpay"), "", nil).wantError(t, 404, pspapi.CodeNotFound)
	b.must(t, "GET", "/gw/swiftpay/v1/payments", apiKey("swiftpay"), "", nil).wantError(t, 400, pspapi.CodeInvalid)
	// A payment of one gateway is unknown at the other.
	p := b.create(t, "swiftpay", good)
	b.must(t, "GET", "/gw/bharatpg/v1/payments/"+p.PSPRef, apiKey("bharatpg"), "", nil).wantError(t, 404, pspapi.CodeNotFound)
}

func TestAbandonedRequestExpires(t *testing.T) {
	t.Parallel()
	const expire = 800 * time.Millisecond
	b := setup(t, opts{route: func(rc *pspapi.RouteConfig) { rc.AbandonRate = 1; rc.ExpireAfterMs = int(expire.Milliseconds()) }})
	created := time.Now()
	p := b.create(t, "swiftpay", b.createReq("pay-abandon", pspapi.UPI, 100))
	time.Sleep(250 * time.Millisecond)
	// Judged only before expiry for certain: a loaded machine may be late.
	if got := b.inquire(t, "swiftpay", p.PSPRef); got.Status != pspapi.StatusCreated && time.Since(created) < expire {
		t.Fatalf("abandoned payment is %s before expiry (auto-approve was 150 ms)", got.Status)
	}
	h := b.hooks.waitStatus(t, p.PSPRef, pspapi.StatusFailed, 3*time.Second)
	if h.FailureReason != pspapi.ReasonExpired || h.BankEventTime.Before(p.NextAction.ExpiresAt) {
		t.Fatalf("webhook = %+v, expires_at %v", h.Webhook, p.NextAction.ExpiresAt)
	}
}
