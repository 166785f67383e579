package web

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"tatkal/booking"
	"tatkal/booking/payment"
	"tatkal/booking/pii"
	"tatkal/views"
)

// passengers is the page to prepare before 10:00: identity, the master
// list of passengers and the payment choice.
func (p *Pages) passengers(w http.ResponseWriter, r *http.Request) {
	p.renderPassengers(w, r, http.StatusOK, views.SiteFrame{Notice: notices[r.URL.Query().Get("notice")]}, views.PassengerForm{})
}

func (p *Pages) renderPassengers(w http.ResponseWriter, r *http.Request, status int, f views.SiteFrame, form views.PassengerForm) {
	s := sessionOf(r)
	saved, err := p.cfg.Booking.SavedPassengers(r.Context(), s.UserID)
	if err != nil {
		p.fail(w, r, "Passengers", err)
		return
	}
	pref, err := p.cfg.Payments.PreferenceOf(r.Context(), s.UserID)
	if err != nil {
		p.fail(w, r, "Passengers", err)
		return
	}
	page := views.PassengersPage{Passengers: savedRows(saved), Form: form, IDTypes: idTypes(), Banks: payment.Banks(),
		Pref: views.PayChoice{Method: pref.Method, VPA: pref.VPA, Bank: pref.Bank}, Verified: s.Verified, DeviceOK: p.deviceBinding(r) != ""}
	f.Active = "passengers"
	p.render(w, r, status, "Passengers", f, views.SitePassengers(views.SiteFrame{CSRF: p.csrfToken(r)}, page))
}

func savedRows(saved []booking.SavedPassenger) []views.SavedPassengerRow {
	out := make([]views.SavedPassengerRow, 0, len(saved))
	for _, x := range saved {
		out = append(out, views.SavedPassengerRow{ID: x.ID, Name: x.Name, Age: x.Age, Gender: x.Gender, BerthPref: x.BerthPref,
			IDType: x.IDType, IDRef: pii.Mask(x.IDHint), Validated: x.Validated})
	}
	return out
}

func idTypes() []string {
	out := make([]string, 0, len(booking.AcceptedIDs))
	for t := range booking.AcceptedIDs {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// addPassenger validates and saves a passenger; a mistake keeps the form
// filled in with the rule that failed.
func (p *Pages) addPassenger(w http.ResponseWriter, r *http.Request) {
	form := views.PassengerForm{Name: r.PostFormValue("name"), Age: strings.TrimSpace(r.PostFormValue("age")), Gender: r.PostFormValue("gender"),
		BerthPref: r.PostFormValue("berth_pref"), IDType: r.PostFormValue("id_type"), IDRef: r.PostFormValue("id_ref")}
	age, err := strconv.Atoi(form.Age)
	if err != nil {
		p.renderPassengers(w, r, http.StatusBadRequest, views.SiteFrame{Error: "Age must be a number of years."}, form)
		return
	}
	_, err = p.cfg.Booking.SavePassenger(r.Context(), sessionOf(r).UserID, booking.Passenger{Name: form.Name, Age: age, Gender: form.Gender,
		BerthPref: form.BerthPref, IDType: form.IDType, IDRef: form.IDRef})
	if err != nil {
		if booking.ErrorCode(err) == booking.EINTERNAL {
			p.fail(w, r, "Passengers", err)
			return
		}
		p.renderPassengers(w, r, http.StatusBadRequest, views.SiteFrame{Error: booking.ErrorMessage(err)}, form)
		return
	}
	http.Redirect(w, r, "/passengers?notice=saved", http.StatusSeeOther)
}

func (p *Pages) removePassenger(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err == nil {
		err = p.cfg.Booking.RemovePassenger(r.Context(), sessionOf(r).UserID, id)
	} else {
		err = booking.Errorf(booking.ENOTFOUND, "NO_SUCH_PASSENGER", "That passenger is not on your list.")
	}
	if err != nil {
		p.fail(w, r, "Passengers", err)
		return
	}
	http.Redirect(w, r, "/passengers?notice=removed", http.StatusSeeOther)
}

// savePreference stores how the passenger will pay, checked like a payment.
func (p *Pages) savePreference(w http.ResponseWriter, r *http.Request) {
	_, err := p.cfg.Payments.SavePreference(r.Context(), sessionOf(r).UserID, payment.Preference{Method: r.PostFormValue("method"),
		VPA: r.PostFormValue("vpa"), Bank: r.PostFormValue("bank")})
	if err != nil {
		if booking.ErrorCode(err) == booking.EINTERNAL {
			p.fail(w, r, "Passengers", err)
			return
		}
		p.renderPassengers(w, r, http.StatusBadRequest, views.SiteFrame{Error: booking.ErrorMessage(err)}, views.PassengerForm{})
		return
	}
	http.Redirect(w, r, "/passengers?notice=pref", http.StatusSeeOther)
}

// notices are the confirmations a redirect names by code (never text from
// the link, which anyone could write).
var notices = map[string]string{"saved": "Passenger saved.", "removed": "Passenger removed.", "pref": "Payment choice saved.",
	"released": "The seats were released. Nothing was charged.", "cancelled": "Cancelled.",
	"paylater": "Your seats are held, but the payment could not start. Choose how to pay below before the time runs out."}
