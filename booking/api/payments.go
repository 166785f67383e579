package api

import (
	"context"
	"io"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"tatkal/booking"
	"tatkal/booking/admission"
	"tatkal/booking/api/reply"
	"tatkal/booking/india"
	"tatkal/booking/payment"
)

// MaxAccountsPerInstrument is how many accounts may pay with one UPI address
// within 30 days.
const MaxAccountsPerInstrument = admission.MaxAccountsPerInstrument

type initiateRequest struct {
	HoldID         string `json:"hold_id"`
	Method         string `json:"method"`
	VPA            string `json:"vpa"`
	Bank           string `json:"bank"`
	IdempotencyKey string `json:"idempotency_key"`
}

type paymentResponse struct {
	payment.View
	Amount  string `json:"amount"`
	Message string `json:"message"`
}

func paymentOf(v payment.View) paymentResponse {
	r := paymentResponse{View: v, Amount: india.Decimal(v.AmountPaise)}
	by := v.Deadline.In(booking.IST).Format("15:04")
	outcome := "a ticket or an automatic refund"
	if v.Purpose == payment.PurposeTopUp {
		outcome = "your wallet credited or nothing charged"
	}
	switch {
	case v.InReview:
		r.Message = "This payment is being reviewed by our finance team; your money is safe and you will hear from us."
	case v.State == payment.Success && v.Purpose == payment.PurposeTopUp:
		r.Message = "Payment received; ₹" + r.Amount + " was added to your wallet."
	case v.State == payment.Success:
		r.Message = "Payment received."
	case v.State == payment.Failed:
		r.Message = "The payment did not go through and nothing was charged."
	case v.State == payment.Refunded:
		r.Message = "This payment was refunded."
	case v.State == payment.AwaitingUser:
		r.Message = "Approve the payment in your UPI app or on the bank's page. You will get " + outcome + " by " + by + " IST."
	default:
		r.Message = "Waiting for your bank. You will get " + outcome + " by " + by + " IST."
	}
	return r
}

// instrumentGuard counts a UPI address against the accounts paying with it
// (admission.Service.InstrumentGuard).
func (a *API) instrumentGuard(r *http.Request, method, vpa string) func(context.Context) error {
	if a.adm == nil {
		return nil
	}
	return a.adm.InstrumentGuard(method, vpa, callerFrom(r.Context()).UserID)
}

// initiatePayment starts paying for a hold: 201 for a new payment, 200 for
// a replay of the same idempotency key and request, 422 for the key sent
// with another request.
func (a *API) initiatePayment(w http.ResponseWriter, r *http.Request) {
	var req initiateRequest
	if err := decode(w, r, &req); err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	if req.IdempotencyKey == "" {
		req.IdempotencyKey = r.Header.Get("Idempotency-Key")
	}
	id, err := uuid.Parse(req.HoldID)
	if err != nil {
		reply.Error(w, r, a.log, booking.Errorf(booking.EINVALID, "BAD_HOLD_ID", "hold_id %q is not a hold id.", req.HoldID))
		return
	}
	v, err := a.payments.Initiate(r.Context(), callerFrom(r.Context()), payment.InitiateRequest{
		HoldID: id, Method: req.Method, VPA: req.VPA, Bank: req.Bank, IdempotencyKey: req.IdempotencyKey,
		Guard: a.instrumentGuard(r, req.Method, req.VPA)})
	a.writePayment(w, r, v, err)
}

func (a *API) writePayment(w http.ResponseWriter, r *http.Request, v payment.View, err error) {
	if err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	status := http.StatusCreated
	if v.Replayed {
		status = http.StatusOK
		w.Header().Set("Idempotent-Replayed", "true")
	}
	reply.JSON(w, status, paymentOf(v))
}

func (a *API) getPayment(w http.ResponseWriter, r *http.Request) {
	id, err := uuid.Parse(chi.URLParam(r, "payment_id"))
	if err != nil {
		reply.Error(w, r, a.log, booking.Errorf(booking.EINVALID, "BAD_PAYMENT_ID", "%q is not a payment id.", chi.URLParam(r, "payment_id")))
		return
	}
	v, err := a.payments.Get(r.Context(), callerFrom(r.Context()).UserID, id)
	if err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	reply.JSON(w, http.StatusOK, paymentOf(v))
}

// callback receives a gateway webhook; the body is verified before it is
// parsed.
func (a *API) callback(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		reply.Error(w, r, a.log, booking.Errorf(booking.EINVALID, "BODY_TOO_LARGE", "The callback body is too large."))
		return
	}
	if err := a.payments.HandleWebhook(r.Context(), r.Header, body); err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	reply.JSON(w, http.StatusOK, map[string]bool{"ok": true})
}

type walletResponse struct {
	BalancePaise int64           `json:"balance_paise"`
	Balance      string          `json:"balance"`
	Entries      []payment.Entry `json:"entries"`
}

func (a *API) wallet(w http.ResponseWriter, r *http.Request) {
	bal, entries, err := a.payments.Wallet(r.Context(), callerFrom(r.Context()).UserID, 20)
	if err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	reply.JSON(w, http.StatusOK, walletResponse{BalancePaise: bal, Balance: india.Decimal(bal), Entries: entries})
}

type topUpRequest struct {
	AmountPaise    int64  `json:"amount_paise"`
	Method         string `json:"method"`
	VPA            string `json:"vpa"`
	Bank           string `json:"bank"`
	IdempotencyKey string `json:"idempotency_key"`
}

// topUp starts a payment into the caller's wallet through a gateway. The
// answer is the payment (follow next_action, then poll
// GET /v1/payments/{payment_id}); the wallet is credited when the gateway
// confirms the money arrived, never before.
func (a *API) topUp(w http.ResponseWriter, r *http.Request) {
	var req topUpRequest
	if err := decode(w, r, &req); err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	if req.IdempotencyKey == "" {
		req.IdempotencyKey = r.Header.Get("Idempotency-Key")
	}
	v, err := a.payments.TopUp(r.Context(), callerFrom(r.Context()), payment.TopUpRequest{AmountPaise: req.AmountPaise,
		Method: req.Method, VPA: req.VPA, Bank: req.Bank, IdempotencyKey: req.IdempotencyKey,
		Guard: a.instrumentGuard(r, req.Method, req.VPA)})
	a.writePayment(w, r, v, err)
}
