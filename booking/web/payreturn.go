package web

import (
	"net/http"

	"github.com/google/uuid"

	"tatkal/booking"
	"tatkal/booking/i18n"
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
		p.renderReturn(w, r, http.StatusBadRequest, views.PaymentReturnPage{Headline: views.T(r.Context(), "ret.unknown"),
			Message: views.T(r.Context(), "ret.nolink")})
		return
	}
	v, pnr, err := p.cfg.Payments.Lookup(r.Context(), id)
	if booking.ErrorCode(err) == booking.ENOTFOUND {
		p.renderReturn(w, r, http.StatusNotFound, views.PaymentReturnPage{PaymentID: id.String(), Headline: views.T(r.Context(), "ret.unknown"),
			Message: views.T(r.Context(), "ret.noref")})
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
	l, by := langOf(r), i18n.Clock(v.Deadline.In(booking.IST), false)
	say := func(head, msg string) { page.Headline, page.Message = i18n.Text(l, head), i18n.Text(l, msg) }
	switch v.State {
	case payment.Success:
		say("ret.received", "ret.received.msg")
		if pnr != "" {
			say("ret.booked", "ret.booked.msg")
		}
	case payment.Failed:
		say("ret.failed", "ret.failed.msg")
	case payment.Refunded:
		say("ret.refunded", "ret.refunded.msg")
	default:
		page.Headline = i18n.Text(l, "state.PAYMENT_PENDING")
		page.Message = i18n.Format(l, "ret.pending.msg", by)
		page.Refresh = true
	}
	if owner {
		page.Amount, page.PNR = india.Rupees(v.AmountPaise), pnr
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
