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
	p.renderPassengers(w, r, http.StatusOK, views.SiteFrame{Notice: noticeOf(r)}, views.PassengerForm{})
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

// idTypes are the accepted photo IDs with their numbers' shape as HTML
// patterns (booking.AcceptedIDs, anchored by HTML itself; "/" and "-"
// escaped inside a class, as the browser's v-mode patterns require).
func idTypes() []views.IDTypeOption {
	out := make([]views.IDTypeOption, 0, len(booking.AcceptedIDs))
	for t, re := range booking.AcceptedIDs {
		pat := strings.TrimSuffix(strings.TrimPrefix(re.String(), "^"), "$")
		pat = strings.ReplaceAll(pat, "/-]", `\/\-]`)
		out = append(out, views.IDTypeOption{Code: t, Pattern: pat})
	}
	slices.SortFunc(out, func(a, b views.IDTypeOption) int { return strings.Compare(a.Code, b.Code) })
	return out
}

// fieldOf is the form field a refusal is about, by its reason: a
// passenger rule's, a payment's, or sign-up's and the identity check's.
var fieldOf = map[string]string{"BAD_NAME": "name", "BAD_AGE": "age", "BAD_GENDER": "gender", "BAD_BERTH_PREF": "berth_pref",
	"BAD_ID_TYPE": "id_type", "BAD_ID_REF": "id_ref", "BAD_VPA": "vpa", "BAD_BANK": "bank",
	"BAD_PHONE": "phone", "PHONE_TAKEN": "phone", "BAD_EMAIL": "email", "BAD_PASSWORD": "password",
	"OTP_FORMAT": "code", "OTP_WRONG": "code", "OTP_NONE": "code", "OTP_EXPIRED": "code", "OTP_LOCKED": "code",
	"BAD_ID_NUMBER": "aadhaar", "ID_IN_USE": "aadhaar", "KYC_MISMATCH": "aadhaar", "BAD_BIRTH_YEAR": "year", "CONSENT_REQUIRED": "consent"}

// addPassenger validates and saves a passenger; a mistake keeps the form
// filled in with the rule that failed.
func (p *Pages) addPassenger(w http.ResponseWriter, r *http.Request) {
	form := views.PassengerForm{Name: r.PostFormValue("name"), Age: strings.TrimSpace(r.PostFormValue("age")), Gender: r.PostFormValue("gender"),
		BerthPref: r.PostFormValue("berth_pref"), IDType: r.PostFormValue("id_type"), IDRef: r.PostFormValue("id_ref")}
	form.IDRef = strings.ToUpper(strings.TrimSpace(form.IDRef))
	age, err := strconv.Atoi(form.Age)
	if err != nil {
		form.Set("age", views.T(r.Context(), "err.f.age"))
		p.renderPassengers(w, r, http.StatusBadRequest, views.SiteFrame{Error: views.T(r.Context(), "err.form")}, form)
		return
	}
	_, err = p.cfg.Booking.SavePassenger(r.Context(), sessionOf(r).UserID, booking.Passenger{Name: form.Name, Age: age, Gender: form.Gender,
		BerthPref: form.BerthPref, IDType: form.IDType, IDRef: form.IDRef})
	if err != nil {
		if booking.ErrorCode(err) == booking.EINTERNAL {
			p.fail(w, r, "Passengers", err)
			return
		}
		f := views.SiteFrame{Error: errText(r, err)}
		if field, ok := fieldOf[booking.ErrorReason(err)]; ok {
			// The message under its field; the top says only to look there.
			form.Set(field, errText(r, err))
			f.Error = views.T(r.Context(), "err.form")
		}
		p.renderPassengers(w, r, http.StatusBadRequest, f, form)
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
		p.renderPassengers(w, r, http.StatusBadRequest, views.SiteFrame{Error: errText(r, err)}, views.PassengerForm{})
		return
	}
	http.Redirect(w, r, "/passengers?notice=pref", http.StatusSeeOther)
}

// notices are the confirmations a redirect names by code (never text from
// the link, which anyone could write), as catalogue keys.
var notices = map[string]string{"saved": "notice.saved", "removed": "notice.removed", "pref": "notice.pref",
	"released": "notice.released", "cancelled": "notice.cancelled", "paylater": "notice.paylater"}

// noticeOf is the notice the link names, in the page's language.
func noticeOf(r *http.Request) string {
	if k, ok := notices[r.URL.Query().Get("notice")]; ok {
		return views.T(r.Context(), k)
	}
	return ""
}
