package pspsim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"tatkal/booking/payment/pspapi"
	"tatkal/booking/sim/simhttp"
)

var vpaPattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._-]{1,255}@[a-zA-Z][a-zA-Z0-9.-]{1,63}$`)

// maxAmountPaise (₹10 crore) keeps fee arithmetic far from overflow.
const maxAmountPaise = 10_000_000_000

func chiParam(r *http.Request, name string) string { return chi.URLParam(r, name) }

// validateCreate says everything wrong with a create request, or nil.
func validateCreate(req pspapi.CreatePayment, carried bool, gw string) error {
	var problems []string
	if req.MerchantRef == "" || len(req.MerchantRef) > 100 {
		problems = append(problems, "merchant_ref is required (at most 100 characters)")
	}
	if req.AmountPaise <= 0 || req.AmountPaise > maxAmountPaise {
		problems = append(problems, "amount_paise must be a positive number of paise (at most 10000000000)")
	}
	if req.Currency != "INR" {
		problems = append(problems, `currency must be "INR"`)
	}
	switch {
	case !knownMethod(req.Method):
		problems = append(problems, `method must be one of "UPI", "CARD", "NETBANKING"`)
	case !carried:
		problems = append(problems, "gateway "+gw+" does not carry "+req.Method)
	case req.Method == pspapi.UPI && !vpaPattern.MatchString(req.VPA):
		problems = append(problems, `vpa must be a UPI address like "name@bank"`)
	case req.Method == pspapi.NetBanking && strings.TrimSpace(req.Bank) == "":
		problems = append(problems, "bank is required for NETBANKING")
	}
	if !absoluteURL(req.CallbackURL) {
		problems = append(problems, "callback_url must be an absolute http(s) URL")
	}
	if !absoluteURL(req.ReturnURL) {
		problems = append(problems, "return_url must be an absolute http(s) URL")
	}
	if len(problems) > 0 {
		return invalid("%s", strings.Join(problems, "; "))
	}
	return nil
}

func absoluteURL(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

func idemKey(r *http.Request) (string, error) {
	key := r.Header.Get(pspapi.HeaderIdempotencyKey)
	if key == "" || len(key) > 255 {
		return "", invalid("send an Idempotency-Key header (1 to 255 characters)")
	}
	return key, nil
}

// requestHash fingerprints a request body so a retried key can be told
// from a reused one; it hashes the decoded value, so spacing does not count.
func requestHash(v any) string {
	b, _ := json.Marshal(v) //nolint:errchkjson // plain structs
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// handleCreatePayment is POST /gw/{gw}/v1/payments. Once a request is
// valid the payment exists, even if the caller never hears the answer:
// a timeout fault (or capacity overflow) hangs the answer, not the payment.
func (s *Server) handleCreatePayment(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	gw := chiParam(r, "gw")
	var req pspapi.CreatePayment
	if err := simhttp.Decode(w, r, &req, maxBody); err != nil {
		return err
	}
	rc, carried, err := s.route(ctx, s.pool, gw, req.Method)
	if err != nil {
		return err
	}
	if carried && rc.Outage {
		return unavailable(gw, req.Method)
	}
	if err := validateCreate(req, carried, gw); err != nil {
		return err
	}
	key, err := idemKey(r)
	if err != nil {
		return err
	}
	hash := requestHash(req)

	// A retried key gets the first answer back, without faults: the
	// payment exists and the merchant is recovering.
	if prior, err := s.priorCreate(ctx, gw, key, hash, req.MerchantRef); err != nil || prior != nil {
		if err != nil {
			return err
		}
		return s.answerPayment(ctx, w, r, rc, prior, http.StatusOK, true)
	}

	overCapacity := !s.limiter.allow(routeKey(gw, req.Method), rc.CapacityTPS)
	hang := overCapacity || s.chance(rc.TimeoutRate, gw, req.MerchantRef, "timeout")

	now := s.now()
	p := &payment{
		PSPRef: newRef("pay_"), Gateway: gw, MerchantRef: req.MerchantRef, IdemKey: key, RequestHash: hash,
		Method: req.Method, AmountPaise: req.AmountPaise, Currency: req.Currency, VPA: req.VPA, Bank: req.Bank,
		CallbackURL: req.CallbackURL, ReturnURL: req.ReturnURL, Status: pspapi.StatusCreated,
		ExpiresAt: now.Add(ms(expiry(rc))), CreatedAt: now, UpdatedAt: now,
	}
	// The simulated customer: approves after AutoApproveMs unless they
	// abandon; either way the request expires at ExpiresAt.
	if rc.AutoApproveMs >= 0 && !s.chance(rc.AbandonRate, gw, req.MerchantRef, "abandon") {
		at := now.Add(ms(rc.AutoApproveMs))
		p.ApproveAt = &at
	}
	p.DueAt = p.nextDue()
	// The caller may hang up now; the gateway has the request and keeps it.
	inserted, err := s.insertPayment(context.WithoutCancel(ctx), s.pool, p)
	if err != nil {
		return err
	}
	if !inserted { // a concurrent create with the same key or merchant_ref won
		prior, err := s.priorCreate(ctx, gw, key, hash, req.MerchantRef)
		if err != nil {
			return err
		}
		if prior == nil {
			return fmt.Errorf("create %s: conflict on insert but no payment found", req.MerchantRef)
		}
		return s.answerPayment(ctx, w, r, rc, prior, http.StatusOK, true)
	}
	s.log.DebugContext(ctx, "payment created", "gateway", gw, "method", p.Method, "psp_ref", p.PSPRef,
		"merchant_ref", p.MerchantRef, "amount_paise", p.AmountPaise, "hang", hang, "over_capacity", overCapacity)

	if hang {
		if err := s.sleep(ctx, s.cfg.TimeoutHang); err != nil {
			return err
		}
		return &apiError{status: http.StatusGatewayTimeout, code: pspapi.CodeTimeout,
			msg: "the bank did not answer in time; the payment may exist: inquire by merchant_ref"}
	}
	return s.answerPayment(ctx, w, r, rc, p, http.StatusCreated, false)
}

// priorCreate finds the payment an earlier request with this key created
// (nil if there is none), or says why this request clashes with one: the
// key was used for another body, or the merchant_ref for another key.
// The merchant_ref lookup rechecks the key because a create with the same
// key may commit between the two reads.
func (s *Server) priorCreate(ctx context.Context, gw, key, hash, merchantRef string) (*payment, error) {
	p, err := s.paymentByIdemKey(ctx, s.pool, gw, key)
	if errors.Is(err, errNoRow) {
		p, err = s.paymentByMerchantRef(ctx, s.pool, gw, merchantRef)
		if errors.Is(err, errNoRow) {
			return nil, nil
		}
		if err == nil && p.IdemKey != key {
			return nil, conflict(pspapi.CodeDuplicateRef,
				"merchant_ref %q already has a payment created with another Idempotency-Key", merchantRef)
		}
	}
	if err != nil {
		return nil, err
	}
	if p.RequestHash != hash {
		return nil, unprocessable(pspapi.CodeIdempotencyMismatch,
			"Idempotency-Key %q was used for a different request (merchant_ref %q)", key, p.MerchantRef)
	}
	return p, nil
}

// answerPayment waits the route's latency and writes p.
func (s *Server) answerPayment(ctx context.Context, w http.ResponseWriter, r *http.Request, rc pspapi.RouteConfig, p *payment, status int, replay bool) error {
	if err := s.sleep(ctx, s.latency(rc)); err != nil {
		return err
	}
	if replay {
		w.Header().Set(pspapi.HeaderIdempotentReplay, "true")
	}
	simhttp.JSON(w, status, s.view(p, s.publicBase(r)))
	return nil
}

// handleGetPayment is GET /gw/{gw}/v1/payments/{ref}.
func (s *Server) handleGetPayment(w http.ResponseWriter, r *http.Request) error {
	gw, ref := chiParam(r, "gw"), chiParam(r, "ref")
	p, err := s.paymentByRef(r.Context(), s.pool, gw, ref)
	if errors.Is(err, errNoRow) {
		return notFound("no payment %q at %s", ref, gw)
	}
	if err != nil {
		return err
	}
	return s.answerInquiry(w, r, p)
}

// handleFindPayment is GET /gw/{gw}/v1/payments?merchant_ref=X, how a
// merchant whose create timed out learns whether the payment exists.
func (s *Server) handleFindPayment(w http.ResponseWriter, r *http.Request) error {
	gw, ref := chiParam(r, "gw"), r.URL.Query().Get("merchant_ref")
	if ref == "" {
		return invalid("give the merchant_ref query parameter")
	}
	p, err := s.paymentByMerchantRef(r.Context(), s.pool, gw, ref)
	if errors.Is(err, errNoRow) {
		return notFound("no payment with merchant_ref %q at %s", ref, gw)
	}
	if err != nil {
		return err
	}
	return s.answerInquiry(w, r, p)
}

func (s *Server) answerInquiry(w http.ResponseWriter, r *http.Request, p *payment) error {
	rc, _, err := s.route(r.Context(), s.pool, p.Gateway, p.Method)
	if err != nil {
		return err
	}
	if rc.Outage {
		return unavailable(p.Gateway, p.Method)
	}
	if !rc.InquiryOmitsAmount {
		return s.answerPayment(r.Context(), w, r, rc, p, http.StatusOK, false)
	}
	if err := s.sleep(r.Context(), s.latency(rc)); err != nil {
		return err
	}
	v := s.view(p, s.publicBase(r))
	v.AmountPaise, v.Currency = 0, ""
	simhttp.JSON(w, http.StatusOK, v)
	return nil
}

// view is the wire form of p; base is the public URL for the pay page.
func (s *Server) view(p *payment, base string) pspapi.Payment {
	out := pspapi.Payment{
		PSPRef: p.PSPRef, MerchantRef: p.MerchantRef, Gateway: p.Gateway, Method: p.Method,
		AmountPaise: p.AmountPaise, Currency: p.Currency, Status: p.Status, FailureReason: p.FailureReason, BankRef: p.BankRef,
		RefundedPaise: p.RefundedPaise, CreatedAt: p.CreatedAt, UpdatedAt: p.UpdatedAt,
	}
	out.CardFingerprint, out.AccountRef = instrumentView(p)
	if p.Status == pspapi.StatusCreated {
		na := &pspapi.NextAction{Type: pspapi.NextActionRedirect, URL: base + payPath(p.Gateway, p.PSPRef), ExpiresAt: p.ExpiresAt}
		if p.Method == pspapi.UPI {
			na.Type, na.VPA = pspapi.NextActionCollect, p.VPA
		}
		out.NextAction = na
	}
	return out
}

func payPath(gw, pspRef string) string {
	return "/gw/" + url.PathEscape(gw) + "/pay/" + url.PathEscape(pspRef)
}

// publicBase is the URL customers' browsers reach us at.
func (s *Server) publicBase(r *http.Request) string {
	if s.cfg.PublicURL != "" {
		return strings.TrimRight(s.cfg.PublicURL, "/")
	}
	scheme := "http"
	if r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https" {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }
