// Package web serves the passenger's HTML pages (server-rendered templ,
// working without JavaScript). The JSON API lives in booking/api.
package web

import (
	"log/slog"
	"net/http"

	"github.com/a-h/templ"
	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"tatkal/booking"
	"tatkal/booking/payment"
	"tatkal/static"
	"tatkal/views"
)

// Pages are the passenger pages.
type Pages struct {
	Booking  *booking.Service
	Payments *payment.Service
	Log      *slog.Logger
}

// Routes mounts the pages, top to bottom.
func (p *Pages) Routes(r chi.Router) {
	r.Handle("/static/*", static.Handler())
	r.Get("/payments/return", p.paymentReturn)
}

// paymentReturn is where the gateway sends the passenger's browser back.
// Passengers sign in to the API with bearer tokens, so this page, reached
// by a bank's redirect, cannot tell who is looking: a return URL is seen
// by the bank, the browser history and anyone it is forwarded to. So it
// says only how the payment stands, never the PNR, the amount or whose it
// is; the signed-in app shows those (GET /v1/bookings/{hold_id}/status).
func (p *Pages) paymentReturn(w http.ResponseWriter, r *http.Request) {
	id, err := uuid.Parse(r.URL.Query().Get("payment_id"))
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		p.render(w, r, "Payment", views.PaymentReturn(views.PaymentReturnPage{Headline: "Unknown payment",
			Message: "This link does not name a payment. Check your booking status in the app."}))
		return
	}
	v, pnr, err := p.Payments.Lookup(r.Context(), id)
	if booking.ErrorCode(err) == booking.ENOTFOUND {
		w.WriteHeader(http.StatusNotFound)
		p.render(w, r, "Payment", views.PaymentReturn(views.PaymentReturnPage{PaymentID: id.String(), Headline: "Unknown payment",
			Message: "We have no payment with this reference."}))
		return
	}
	if err != nil {
		p.Log.Error("payment return page", "payment", id, "err", err)
		http.Error(w, "Internal error.", http.StatusInternalServerError)
		return
	}
	page := views.PaymentReturnPage{PaymentID: id.String(), State: v.State}
	by := v.Deadline.In(booking.IST).Format("15:04")
	switch v.State {
	case payment.Success:
		page.Headline, page.Message = "Payment received", "Your ticket is being issued. See your bookings in the app for the PNR."
		if pnr != "" {
			page.Headline, page.Message = "Ticket booked", "Your e-ticket has been sent by SMS and email; your bookings in the app show the PNR."
		}
	case payment.Failed:
		page.Headline, page.Message = "Payment failed", "Nothing was charged. The seats were released; you can try again."
	case payment.Refunded:
		page.Headline, page.Message = "Payment refunded", "The money is on its way back to you."
	default:
		page.Headline = "Waiting for your bank"
		page.Message = "You will get a ticket or an automatic refund by " + by + " IST."
		page.Refresh = true
	}
	p.render(w, r, "Payment", views.PaymentReturn(page))
}

func (p *Pages) render(w http.ResponseWriter, r *http.Request, title string, c templ.Component) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := views.Page(title, c).Render(r.Context(), w); err != nil {
		p.Log.Error("render page", "path", r.URL.Path, "err", err)
	}
}
