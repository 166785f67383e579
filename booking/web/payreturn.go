package web

import (
	"net/http"

	"github.com/google/uuid"

	"tatkal/booking"
	"tatkal/booking/india"
	"tatkal/booking/payment"
	"tatkal/views"
)

// paymentReturn is where the gateway sends the passenger's browser back.
// A return URL is seen by the bank, the browser history and anyone it is
// forwarded to, so to anyone but the signed-in owner of the payment it says
// only how the payment stands, never the PNR, the amount or whose it is.
// The owner (the session cookie comes back with the bank's redirect, being
// SameSite=Lax) also sees the PNR, the amount and a link to the booking.
func (p *Pages) paymentReturn(w http.ResponseWriter, r *http.Request) {
	id, err := uuid.Parse(r.URL.Query().Get("payment_id"))
	if err != nil {
		p.renderReturn(w, r, http.StatusBadRequest, views.PaymentReturnPage{Headline: "Unknown payment",
			Message: "This link does not name a payment. Check your booking status under My bookings."})
		return
	}
	v, pnr, err := p.cfg.Payments.Lookup(r.Context(), id)
	if booking.ErrorCode(err) == booking.ENOTFOUND {
		p.renderReturn(w, r, http.StatusNotFound, views.PaymentReturnPage{PaymentID: id.String(), Headline: "Unknown payment",
			Message: "We have no payment with this reference."})
		return
	}
	if err != nil {
		p.fail(w, r, "Payment", err)
		return
	}
	page := views.PaymentReturnPage{PaymentID: id.String(), State: v.State}
	owner := false
	if s := sessionOf(r); s.UserID != 0 {
		// Get answers only the payment's owner; anyone else gets not found.
		if _, err := p.cfg.Payments.Get(r.Context(), s.UserID, id); err == nil {
			owner = true
		}
	}
	by := v.Deadline.In(booking.IST).Format("15:04")
	switch v.State {
	case payment.Success:
		page.Headline, page.Message = "Payment received", "Your ticket is being issued. See My bookings for the PNR."
		if pnr != "" {
			page.Headline, page.Message = "Ticket booked", "Your e-ticket has been sent by SMS and email; My bookings shows the PNR."
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
	if owner {
		page.Amount, page.PNR = india.Decimal(v.AmountPaise), pnr
		if v.HoldID != uuid.Nil {
			page.BookingHref = "/bookings/" + v.HoldID.String()
		} else {
			page.BookingHref = "/wallet"
		}
	}
	p.renderReturn(w, r, http.StatusOK, page)
}

func (p *Pages) renderReturn(w http.ResponseWriter, r *http.Request, status int, page views.PaymentReturnPage) {
	p.render(w, r, status, "Payment", views.SiteFrame{}, views.PaymentReturn(page))
}
