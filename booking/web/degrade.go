package web

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"tatkal/booking"
	"tatkal/booking/payment"
	"tatkal/views"
)

// switchedOff answers a non-essential page (key: its catalogue text,
// off.history or off.pdf) while the NON_ESSENTIAL kill switch is on: a
// 503 with Retry-After and a page that says plainly why and what to do,
// and reports true; false while the feature runs.
func (p *Pages) switchedOff(w http.ResponseWriter, r *http.Request, key string) bool {
	if p.cfg.Booking.NonEssentialEnabled() {
		return false
	}
	w.Header().Set("Retry-After", strconv.Itoa(int(booking.SwitchedOffRetry.Seconds())))
	title := views.T(r.Context(), "off.title")
	p.render(w, r, http.StatusServiceUnavailable, title, views.SiteFrame{}, views.SiteSwitchedOff(title, views.T(r.Context(), key)))
	return true
}

// lightForm fills the single-step form's payment part of a window page
// (the light_form lever): the passenger's usual method and a payment key.
func (p *Pages) lightForm(r *http.Request, page *views.WindowPage) {
	page.Light, page.Banks, page.PayKey = true, payment.Banks(), "webpay-"+uuid.NewString()
	if pref, err := p.cfg.Payments.PreferenceOf(r.Context(), sessionOf(r).UserID); err == nil {
		page.Pay = views.PayChoice{Method: pref.Method, VPA: pref.VPA, Bank: pref.Bank}
	}
}

// payAfterHold starts the payment of a hold just made by the single-step
// form, as the pay form would: the wallet answers at once, a gateway's
// page is where the browser goes next. A payment that cannot start leaves
// the hold in place; the booking page says so and offers the pay form.
func (p *Pages) payAfterHold(w http.ResponseWriter, r *http.Request, id uuid.UUID) {
	s := sessionOf(r)
	method, vpa, bank := r.PostFormValue("method"), strings.TrimSpace(r.PostFormValue("vpa")), r.PostFormValue("bank")
	v, err := p.cfg.Payments.Initiate(r.Context(), s.caller(), payment.InitiateRequest{HoldID: id, Method: method, VPA: vpa, Bank: bank,
		IdempotencyKey: r.PostFormValue("paykey"), Guard: p.cfg.Admission.InstrumentGuard(method, vpa, s.UserID)})
	if err != nil {
		if booking.ErrorCode(err) == booking.EINTERNAL {
			p.cfg.Log.Error("single-step payment", "hold", id, "err", err)
		}
		http.Redirect(w, r, "/bookings/"+id.String()+"?notice=paylater", http.StatusSeeOther)
		return
	}
	if v.NextAction != nil && v.NextAction.URL != "" {
		p.toGateway(w, r, v, "/bookings/"+id.String())
		return
	}
	http.Redirect(w, r, "/bookings/"+id.String(), http.StatusSeeOther)
}
