// Package pspapi is the wire protocol between tatkal and a payment gateway:
// request and response bodies, webhook signing, settlement file columns.
// The gateway simulator (tatkal psp) serves it and the payment orchestrator
// speaks it, so the adapter could later point at a real provider that
// speaks the same shape.
//
// Every gateway lives under /gw/{gateway}:
//
//	POST /gw/{gw}/v1/payments                 create (Authorization: Bearer <api key>, Idempotency-Key)
//	GET  /gw/{gw}/v1/payments/{psp_ref}       status inquiry
//	GET  /gw/{gw}/v1/payments?merchant_ref=X  status inquiry when the create answer was lost
//	POST /gw/{gw}/v1/refunds                  refund (Idempotency-Key; same key, same refund)
//	GET  /gw/{gw}/v1/refunds/{refund_ref}     refund status
//	GET  /gw/{gw}/v1/settlements/{date}.csv   the day's settlement file (date YYYY-MM-DD)
//	GET  /gw/{gw}/pay/{psp_ref}               the customer's page: UPI collect, card 3-D Secure, bank login
//	POST /gw/{gw}/pay/{psp_ref}/approve|decline
//
// Webhooks go to the callback_url given at create, signed as described at Sign.
// The admin API (Authorization: Bearer <admin token>):
//
//	GET /admin/routes                       every route's fault settings
//	PUT /admin/routes/{gw}/{method}         replace one route's settings (RouteConfig)
package pspapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Methods a route can carry.
const (
	UPI        = "UPI"
	Card       = "CARD"
	NetBanking = "NETBANKING"
)

// Payment statuses at the gateway.
const (
	StatusCreated = "CREATED" // awaiting the customer (collect request sent, 3-D Secure, bank login)
	StatusPending = "PENDING" // the bank has it; the answer comes later
	StatusSuccess = "SUCCESS"
	StatusFailed  = "FAILED"
)

// Refund statuses.
const (
	RefundPending   = "PENDING"
	RefundProcessed = "PROCESSED"
	RefundFailed    = "FAILED"
)

// Failure reasons a FAILED payment carries.
const (
	ReasonDeclined             = "DECLINED"              // the customer's bank declined
	ReasonExpired              = "EXPIRED"               // the customer never answered before ExpiresAt
	ReasonCustomerDeclined     = "CUSTOMER_DECLINED"     // the customer pressed decline
	ReasonAuthenticationFailed = "AUTHENTICATION_FAILED" // wrong 3-D Secure OTP
)

// Next action types.
const (
	NextActionCollect  = "collect"
	NextActionRedirect = "redirect"
)

// Request and response headers besides Authorization.
const (
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderIdempotentReplay is "true" on an answer repeated for a
	// retried Idempotency-Key.
	HeaderIdempotentReplay = "Idempotent-Replayed"
)

// ErrorBody is every error answer of the gateway API and admin API.
type ErrorBody struct {
	Error string `json:"error"` // for people
	Code  string `json:"code"`  // for programs, one of the Code constants
}

// Error codes in ErrorBody.Code.
const (
	CodeInvalid             = "INVALID_REQUEST"         // 400: nothing changed
	CodeUnauthorized        = "UNAUTHORIZED"            // 401
	CodeForbidden           = "FORBIDDEN"               // 403
	CodeNotFound            = "NOT_FOUND"               // 404
	CodeDuplicateRef        = "DUPLICATE_MERCHANT_REF"  // 409: merchant_ref already used with another Idempotency-Key
	CodeNotCaptured         = "NOT_CAPTURED"            // 409: refund of a payment that is not SUCCESS
	CodeIdempotencyMismatch = "IDEMPOTENCY_MISMATCH"    // 422: same Idempotency-Key, different body
	CodeRefundExceeds       = "REFUND_EXCEEDS_CAPTURED" // 422: refunds would exceed the captured amount
	CodeUnavailable         = "GATEWAY_UNAVAILABLE"     // 503: outage; retry later
	CodeTimeout             = "UPSTREAM_TIMEOUT"        // 504: the bank did not answer; the payment may exist, inquire by merchant_ref
	CodeInternal            = "INTERNAL"                // 500
)

// CreatePayment is the body of POST /gw/{gw}/v1/payments.
type CreatePayment struct {
	MerchantRef string `json:"merchant_ref"` // our payment id; unique per gateway
	AmountPaise int64  `json:"amount_paise"`
	Currency    string `json:"currency"` // INR
	Method      string `json:"method"`
	VPA         string `json:"vpa,omitempty"`  // UPI
	Bank        string `json:"bank,omitempty"` // NETBANKING
	CallbackURL string `json:"callback_url"`
	ReturnURL   string `json:"return_url"`
}

// NextAction tells the customer what to do.
type NextAction struct {
	Type      string    `json:"type"` // "collect" (approve in the UPI app) or "redirect" (open URL)
	URL       string    `json:"url,omitempty"`
	VPA       string    `json:"vpa,omitempty"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Payment is the gateway's view of a payment (create answer, inquiry answer).
type Payment struct {
	PSPRef        string      `json:"psp_ref"`
	MerchantRef   string      `json:"merchant_ref"`
	Gateway       string      `json:"gateway"`
	Method        string      `json:"method"`
	AmountPaise   int64       `json:"amount_paise"`
	Currency      string      `json:"currency"`
	Status        string      `json:"status"`
	FailureReason string      `json:"failure_reason,omitempty"`
	BankRef       string      `json:"bank_ref,omitempty"`
	NextAction    *NextAction `json:"next_action,omitempty"`
	// CardFingerprint (CARD) and AccountRef (NETBANKING) say which card or
	// bank account paid, once the customer has approved: stable for one
	// card or account across payments, accounts and the gateways (as a card
	// network's Payment Account Reference), and never the number itself.
	CardFingerprint string `json:"card_fingerprint,omitempty"`
	AccountRef      string `json:"account_ref,omitempty"`
	// RefundedPaise is the total of the refunds accepted so far.
	RefundedPaise int64     `json:"refunded_paise,omitempty"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
}

// CreateRefund is the body of POST /gw/{gw}/v1/refunds.
type CreateRefund struct {
	PSPRef      string `json:"psp_ref"`
	AmountPaise int64  `json:"amount_paise"`
	Reason      string `json:"reason"`
	MerchantRef string `json:"merchant_ref"` // our refund id
}

// Refund is the gateway's view of a refund.
type Refund struct {
	RefundRef   string    `json:"refund_ref"`
	PSPRef      string    `json:"psp_ref"`
	MerchantRef string    `json:"merchant_ref"`
	AmountPaise int64     `json:"amount_paise"`
	Status      string    `json:"status"`
	CreatedAt   time.Time `json:"created_at"`
	// ExpectedAt is when the money reaches the customer's bank.
	ExpectedAt time.Time `json:"expected_at"`
	// ProcessedAt is when the gateway paid the refund out (Status PROCESSED).
	ProcessedAt time.Time `json:"processed_at,omitzero"`
}

// Webhook is the body the gateway POSTs to callback_url.
type Webhook struct {
	EventID       string `json:"event_id"` // unique per event; duplicates repeat it
	PSPRef        string `json:"psp_ref"`
	MerchantRef   string `json:"merchant_ref"`
	Gateway       string `json:"gateway"`
	Method        string `json:"method"`
	Status        string `json:"status"`
	AmountPaise   int64  `json:"amount_paise"`
	Currency      string `json:"currency,omitempty"`
	BankRef       string `json:"bank_ref,omitempty"`
	FailureReason string `json:"failure_reason,omitempty"`
	// CardFingerprint and AccountRef as in Payment.
	CardFingerprint string    `json:"card_fingerprint,omitempty"`
	AccountRef      string    `json:"account_ref,omitempty"`
	BankEventTime   time.Time `json:"bank_event_time"`
}

// Webhook headers.
const (
	HeaderGateway   = "X-PSP-Gateway"
	HeaderTimestamp = "X-PSP-Timestamp" // unix seconds
	HeaderSignature = "X-PSP-Signature" // "v1=" + hex HMAC-SHA256(secret, timestamp + "." + body)
)

// ReplayWindow is how old (or how far in the future) a webhook timestamp may
// be before it is refused as a replay.
const ReplayWindow = 5 * time.Minute

// Sign returns the signature header value for body sent at ts.
func Sign(secret []byte, ts time.Time, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(strconv.FormatInt(ts.Unix(), 10)))
	m.Write([]byte("."))
	m.Write(body)
	return "v1=" + hex.EncodeToString(m.Sum(nil))
}

// Signature failures.
var (
	ErrBadSignature = errors.New("webhook signature does not match")
	ErrReplayed     = errors.New("webhook timestamp outside the replay window")
)

// Verify checks a webhook's timestamp header and signature at time now.
func Verify(secret []byte, tsHeader, sigHeader string, body []byte, now time.Time) error {
	sec, err := strconv.ParseInt(tsHeader, 10, 64)
	if err != nil {
		return ErrBadSignature
	}
	ts := time.Unix(sec, 0)
	if d := now.Sub(ts); d > ReplayWindow || d < -ReplayWindow {
		return ErrReplayed
	}
	want := Sign(secret, ts, body)
	if !strings.HasPrefix(sigHeader, "v1=") || !hmac.Equal([]byte(sigHeader), []byte(want)) {
		return ErrBadSignature
	}
	return nil
}

// VerifyAny checks a webhook against several secrets, as during a
// rotation: it passes when any of them signed it. A replayed timestamp is
// reported as such whatever the secret.
func VerifyAny(secrets [][]byte, tsHeader, sigHeader string, body []byte, now time.Time) error {
	err := ErrBadSignature
	for _, s := range secrets {
		if len(s) == 0 {
			continue
		}
		if err = Verify(s, tsHeader, sigHeader, body, now); err == nil || errors.Is(err, ErrReplayed) {
			return err
		}
	}
	return err
}

// RouteConfig is one route's behaviour, settable at runtime through the
// admin API. Rates are probabilities in [0, 1]; durations in milliseconds.
type RouteConfig struct {
	Gateway string `json:"gateway"`
	Method  string `json:"method"`
	// Latency of the create and inquiry calls: log-normal-ish between p50 and p99.
	LatencyP50Ms int `json:"latency_p50_ms"`
	LatencyP99Ms int `json:"latency_p99_ms"`
	// TimeoutRate: the create call hangs past any sensible client timeout
	// (the payment may still be created and may still succeed).
	TimeoutRate float64 `json:"timeout_rate"`
	// DeclineRate: the customer's bank declines (a definitive FAILED).
	DeclineRate float64 `json:"decline_rate"`
	// PendingRate: after the customer approves, the bank answers PENDING
	// and resolves PendingResolveMs later (success unless declined).
	PendingRate      float64 `json:"pending_rate"`
	PendingResolveMs int     `json:"pending_resolve_ms"`
	// LateSuccessRate: success arrives LateSuccessMs after approval, long
	// enough to outlive a hold.
	LateSuccessRate float64 `json:"late_success_rate"`
	LateSuccessMs   int     `json:"late_success_ms"`
	// Webhook faults.
	LostCallbackRate      float64 `json:"lost_callback_rate"`
	DuplicateCallbackRate float64 `json:"duplicate_callback_rate"`
	CallbackDelayMs       int     `json:"callback_delay_ms"`
	// CapacityTPS limits creates per second; the excess times out. 0 = unlimited.
	CapacityTPS int `json:"capacity_tps"`
	// Outage: every call answers 503 (creates, inquiries, refunds).
	Outage bool `json:"outage"`
	// The simulated customer: approves AutoApproveMs after create unless
	// they abandon (AbandonRate: never answers; the collect request
	// expires). AutoApproveMs < 0 means only the browser page decides.
	AutoApproveMs int     `json:"auto_approve_ms"`
	AbandonRate   float64 `json:"abandon_rate"`
	// ExpireAfterMs is how long the customer has to answer (the collect
	// request's or redirect's NextAction.ExpiresAt); 0 means 5 minutes.
	ExpireAfterMs int `json:"expire_after_ms"`
	// FeeBps is the gateway's fee on captured payments, for settlement.
	FeeBps int `json:"fee_bps"`
	// RefundFailRate: the customer's bank refuses a refund (account
	// closed, say): it is answered FAILED and nothing is paid out.
	RefundFailRate float64 `json:"refund_fail_rate,omitempty"`
	// InquiryOmitsAmount: status inquiry answers carry no amount and no
	// currency, as some gateways' status APIs do.
	InquiryOmitsAmount bool `json:"inquiry_omits_amount,omitempty"`
}

// Settlement files: each gateway writes its own layout, as real ones do.
// The header rows are the contract between the simulator that writes them
// and reconciliation that reads them.
//
// swiftpay-v1: signed amounts in rupees with two decimals, dates as
// DD/MM/YYYY and times as DD/MM/YYYY HH:MM:SS in IST; types CAPTURE,
// REFUND, CHARGEBACK. Gross is negative for refunds and chargebacks; Net =
// Gross - MDR - GST.
//
// bharatpg-v1: unsigned amounts in paise with the direction in entry_type
// (SALE, RFND, CHBK) and a signed settled_paise; settlement_date as
// YYYYMMDD, txn_timestamp RFC 3339 in UTC; utr is the payout reference.
var (
	SwiftpayColumns = []string{"Txn Type", "SwiftPay Txn ID", "Merchant Order ID", "Refund ID", "Merchant Refund ID",
		"Payment Mode", "Gross Amount (INR)", "MDR (INR)", "GST on MDR (INR)", "Net Amount (INR)", "Txn Date",
		"Settlement Date", "Payout Ref"}
	BharatpgColumns = []string{"settlement_date", "utr", "entry_type", "pg_txn_id", "merchant_txn_ref",
		"merchant_refund_ref", "pg_refund_id", "pay_method", "txn_amount_paise", "commission_paise", "igst_paise",
		"settled_paise", "txn_timestamp"}
)
