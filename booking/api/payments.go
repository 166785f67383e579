package api

import (
	"context"
	"io"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"tatkal/booking"
	"tatkal/booking/payment"
)

// MaxAccountsPerInstrument is how many accounts may pay with one UPI address
// within 30 days.
const MaxAccountsPerInstrument = 3

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
	r := paymentResponse{View: v, Amount: booking.Rupees(v.AmountPaise)}
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
// (one address paying for many accounts is a tout's signature: past a few
// accounts it is refused, looking like overload). The payment path runs it
// only once the hold is the caller's and payable, so a request naming a
// random hold with someone else's address counts nothing.
func (a *API) instrumentGuard(r *http.Request, method, vpa string) func(context.Context) error {
	if method != payment.UPI || a.adm == nil || vpa == "" {
		return nil
	}
	user := callerFrom(r.Context()).UserID
	return func(ctx context.Context) error {
		return a.adm.CheckInstrument(ctx, "upi:"+strings.ToLower(vpa), user, MaxAccountsPerInstrument)
	}
}

// initiatePayment starts paying for a hold: 201 for a new payment, 200 for
// a replay of the same idempotency key and request, 422 for the key sent
// with another request.
func (a *API) initiatePayment(w http.ResponseWriter, r *http.Request) {
	var req initiateRequest
	if err := decode(w, r, &req); err != nil {
		writeError(w, r, a.log, err)
		return
	}
	if req.IdempotencyKey == "" {
		req.IdempotencyKey = r.Header.Get("Idempotency-Key")
	}
	id, err := uuid.Parse(req.HoldID)
	if err != nil {
		writeError(w, r, a.log, booking.Errorf(booking.EINVALID, "BAD_HOLD_ID", "hold_id %q is not a hold id.", req.HoldID))
		return
	}
	v, err := a.payments.Initiate(r.Context(), callerFrom(r.Context()), payment.InitiateRequest{
		HoldID: id, Method: req.Method, VPA: req.VPA, Bank: req.Bank, IdempotencyKey: req.IdempotencyKey,
		Guard: a.instrumentGuard(r, req.Method, req.VPA)})
	a.writePayment(w, r, v, err)
}

func (a *API) writePayment(w http.ResponseWriter, r *http.Request, v payment.View, err error) {
	if err != nil {
		a.writeAdmError(w, r, err)
		return
	}
	status := http.StatusCreated
	if v.Replayed {
		status = http.StatusOK
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeJSON(w, status, paymentOf(v))
}

func (a *API) getPayment(w http.ResponseWriter, r *http.Request) {
	id, err := uuid.Parse(chi.URLParam(r, "payment_id"))
	if err != nil {
		writeError(w, r, a.log, booking.Errorf(booking.EINVALID, "BAD_PAYMENT_ID", "%q is not a payment id.", chi.URLParam(r, "payment_id")))
		return
	}
	v, err := a.payments.Get(r.Context(), callerFrom(r.Context()).UserID, id)
	if err != nil {
		writeError(w, r, a.log, err)
		return
	}
	writeJSON(w, http.StatusOK, paymentOf(v))
}

// callback receives a gateway webhook; the body is verified before it is
// parsed.
func (a *API) callback(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeError(w, r, a.log, booking.Errorf(booking.EINVALID, "BODY_TOO_LARGE", "The callback body is too large."))
		return
	}
	if err := a.payments.HandleWebhook(r.Context(), r.Header, body); err != nil {
		writeError(w, r, a.log, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

type walletResponse struct {
	BalancePaise int64           `json:"balance_paise"`
	Balance      string          `json:"balance"`
	Entries      []payment.Entry `json:"entries"`
}

func (a *API) wallet(w http.ResponseWriter, r *http.Request) {
	bal, entries, err := a.payments.Wallet(r.Context(), callerFrom(r.Context()).UserID, 20)
	if err != nil {
		writeError(w, r, a.log, err)
		return
	}
	writeJSON(w, http.StatusOK, walletResponse{BalancePaise: bal, Balance: booking.Rupees(bal), Entries: entries})
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
		writeError(w, r, a.log, err)
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

// describePayment turns the latest payment of a hold into the passenger's
// state and message (seeds/000 section 3 and the payments issue, part 5).
func describePayment(s *statusResponse, v booking.HoldView, pays []payment.View) {
	if len(pays) == 0 {
		return
	}
	latest := pays[0]
	s.Payment = &latest
	for _, p := range pays {
		if p.Refund != nil {
			r := p.Refund
			if r.State == "PROCESSED" {
				s.State = "REFUNDED"
				s.Message = "₹" + booking.Rupees(r.AmountPaise) + " was refunded"
				if r.GatewayRef != "" {
					s.Message += " (reference " + r.GatewayRef + ")"
				}
				if r.ExpectedAt != nil && r.GatewayRef != "" {
					s.Message += "; it reaches your bank by " + r.ExpectedAt.In(booking.IST).Format("2 Jan") + "."
				} else {
					s.Message += " to your wallet."
				}
			} else if v.BookingStat != booking.BookingConfirmed && v.BookingStat != booking.BookingWaitlisted {
				s.State = "REFUND_INITIATED"
				s.Message = "₹" + booking.Rupees(r.AmountPaise) + " is being refunded automatically (" + refundReason(r.Reason) + ")."
			}
			if v.BookingStat == "" || v.BookingStat == booking.BookingCancelled {
				return
			}
		}
	}
	if v.BookingStat != "" {
		return
	}
	by := latest.Deadline.In(booking.IST).Format("15:04")
	switch latest.State {
	case payment.Initiated, payment.AwaitingUser, payment.PendingAtBank, payment.Unknown:
		s.State = "PAYMENT_PENDING"
		s.Message = "Waiting for your bank. You will get a ticket or an automatic refund by " + by + " IST."
		s.NextCheckAfterMs = 3000
	case payment.Failed:
		if v.State != booking.HoldHeld {
			s.State, s.Message = "FAILED", "The payment failed and nothing was charged. The seats were released."
		}
	case payment.Success:
		s.State = "PAYMENT_PENDING"
		s.Message = "Payment received; your ticket is being issued."
		s.NextCheckAfterMs = 2000
	}
}

func refundReason(r string) string {
	switch r {
	case booking.RefundLateSuccessNoSeat:
		return "your bank confirmed the payment after the seats were gone"
	case booking.RefundDuplicateCharge:
		return "you were charged twice"
	case booking.RefundHoldCancelled:
		return "you cancelled before the payment arrived"
	case booking.RefundWaitlistCancelled:
		return "waitlisted ticket cancelled, less clerkage"
	case booking.RefundCoreRejected:
		return "the reservation system could not issue the ticket"
	case booking.RefundAmountMismatch:
		return "your bank was charged a different amount than the fare"
	}
	return "refund"
}
