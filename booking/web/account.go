package web

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"tatkal/booking"
	"tatkal/booking/bookingstate"
	"tatkal/booking/i18n"
	"tatkal/booking/india"
	"tatkal/booking/payment"
	"tatkal/views"
)

// history is the passenger's bookings, newest first.
func (p *Pages) history(w http.ResponseWriter, r *http.Request) {
	if p.switchedOff(w, r, "off.history") {
		return
	}
	vs, err := p.cfg.Booking.History(r.Context(), sessionOf(r).UserID, 50)
	if err != nil {
		p.fail(w, r, "My bookings", err)
		return
	}
	rows := make([]views.HistoryRow, 0, len(vs))
	for _, v := range vs {
		// Payments are not read per row: the state here is the booking's
		// own; the booking's page adds what the bank says.
		words := bookingstate.Describe(v, nil, p.cfg.Now())
		rows = append(rows, views.HistoryRow{Href: "/bookings/" + v.ID.String(), Train: v.Train, Journey: v.From + " → " + v.To + " · " + v.Class,
			Date: i18n.Date(langOf(r), v.Date), State: words.Title(), PNR: v.PNR})
	}
	p.render(w, r, http.StatusOK, "My bookings", views.SiteFrame{Active: "bookings"}, views.SiteHistory(views.SiteFrame{}, rows))
}

// cancelPage shows what cancelling would do and the refund the rules give
// (booking.Lifecycle.CancelPreview), changing nothing.
func (p *Pages) cancelPage(w http.ResponseWriter, r *http.Request) {
	id, err := holdIDOf(r)
	if err != nil {
		p.fail(w, r, "Cancel", err)
		return
	}
	p.renderCancel(w, r, http.StatusOK, id, views.SiteFrame{})
}

func (p *Pages) renderCancel(w http.ResponseWriter, r *http.Request, status int, id uuid.UUID, f views.SiteFrame) {
	q, err := p.cfg.Booking.CancelPreview(r.Context(), sessionOf(r).UserID, id)
	if err != nil {
		p.fail(w, r, "Cancel", err)
		return
	}
	f.Active = "bookings"
	p.render(w, r, status, "Cancel", f, views.SiteCancel(views.SiteFrame{CSRF: p.csrfToken(r)}, views.CancelPage{HoldID: id.String(), PNR: q.PNR,
		What: q.What, Refund: india.Rupees(q.RefundPaise), RefundPaise: q.RefundPaise, Message: q.Message, Allowed: q.Allowed}))
}

// cancel cancels what the passenger was shown, at the refund shown: if the
// rules now give another refund, nothing is cancelled and the new preview
// is shown.
func (p *Pages) cancel(w http.ResponseWriter, r *http.Request) {
	id, err := holdIDOf(r)
	if err != nil {
		p.fail(w, r, "Cancel", err)
		return
	}
	uid := sessionOf(r).UserID
	switch r.PostFormValue("what") {
	case "booking":
		expect, perr := strconv.ParseInt(r.PostFormValue("expect_refund_paise"), 10, 64)
		if perr != nil {
			p.renderCancel(w, r, http.StatusBadRequest, id, views.SiteFrame{Error: views.T(r.Context(), "err.BAD_KEY")})
			return
		}
		_, err = p.cfg.Booking.CancelBooking(r.Context(), uid, id, &expect)
	default:
		_, err = p.cfg.Booking.Cancel(r.Context(), uid, id)
	}
	if err != nil {
		if c := booking.ErrorCode(err); c == booking.EINVALID || c == booking.ECONFLICT {
			p.renderCancel(w, r, http.StatusConflict, id, views.SiteFrame{Error: errText(r, err)})
			return
		}
		p.fail(w, r, "Cancel", err)
		return
	}
	http.Redirect(w, r, "/bookings/"+id.String()+"?notice=cancelled", http.StatusSeeOther)
}

// wallet is the balance, its ledger and the top-up form.
func (p *Pages) wallet(w http.ResponseWriter, r *http.Request) {
	p.renderWallet(w, r, http.StatusOK, views.SiteFrame{})
}

func (p *Pages) renderWallet(w http.ResponseWriter, r *http.Request, status int, f views.SiteFrame) {
	uid := sessionOf(r).UserID
	bal, entries, err := p.cfg.Payments.Wallet(r.Context(), uid, 50)
	if err != nil {
		p.fail(w, r, "Wallet", err)
		return
	}
	pref, err := p.cfg.Payments.PreferenceOf(r.Context(), uid)
	if err != nil {
		p.fail(w, r, "Wallet", err)
		return
	}
	if pref.Method == payment.Wallet {
		pref.Method = payment.UPI // a top-up cannot come from the wallet itself
	}
	page := views.WalletPage{Balance: india.Rupees(bal), Banks: payment.Banks(), Pref: views.PayChoice{Method: pref.Method, VPA: pref.VPA, Bank: pref.Bank},
		Key: "webtop-" + uuid.NewString()}
	for _, e := range entries {
		page.Entries = append(page.Entries, views.WalletRow{At: i18n.DateTime(langOf(r), e.At.In(booking.IST)), Kind: e.Kind, Ref: p.ledgerRef(r, e.Ref),
			Amount: signedRupees(e.AmountPaise), Balance: india.Rupees(e.BalanceAfter)})
	}
	f.Active = "wallet"
	p.render(w, r, status, "Wallet", f, views.SiteWallet(views.SiteFrame{CSRF: p.csrfToken(r)}, page))
}

// ledgerRef is what a passenger recognises a wallet entry by: the PNR of
// the booking it paid or refunded, else a short reference.
func (p *Pages) ledgerRef(r *http.Request, ref string) string {
	if id, err := uuid.Parse(ref); err == nil {
		var pnr string
		err := p.cfg.Pool.QueryRow(r.Context(), `SELECT b.pnr FROM bookings b WHERE b.hold_id = $1 AND b.pnr IS NOT NULL
			UNION ALL SELECT b.pnr FROM payments x JOIN bookings b ON b.hold_id = x.hold_id WHERE x.id = $1 AND b.pnr IS NOT NULL LIMIT 1`, id).Scan(&pnr)
		if err == nil && pnr != "" {
			return views.T(r.Context(), "pnr") + " " + pnr
		}
		return "#" + strings.ToUpper(ref[:8])
	}
	return ref
}

func signedRupees(paise int64) string {
	if paise < 0 {
		return "−" + india.Rupees(-paise)
	}
	return "+" + india.Rupees(paise)
}

// topUp starts a payment into the wallet through a gateway; the wallet is
// credited when the gateway confirms, never before.
func (p *Pages) topUp(w http.ResponseWriter, r *http.Request) {
	s := sessionOf(r)
	rupees, err := strconv.ParseInt(strings.TrimSpace(r.PostFormValue("amount")), 10, 64)
	if err != nil || rupees <= 0 {
		p.renderWallet(w, r, http.StatusBadRequest, views.SiteFrame{Error: views.T(r.Context(), "err.f.amount")})
		return
	}
	method, vpa := r.PostFormValue("method"), strings.TrimSpace(r.PostFormValue("vpa"))
	v, err := p.cfg.Payments.TopUp(r.Context(), s.caller(), payment.TopUpRequest{AmountPaise: rupees * 100, Method: method, VPA: vpa,
		Bank: r.PostFormValue("bank"), IdempotencyKey: r.PostFormValue("key"), Guard: p.cfg.Admission.InstrumentGuard(method, vpa, s.UserID)})
	if err != nil {
		if c := booking.ErrorCode(err); c == booking.EINTERNAL || c == booking.EOVERLOADED {
			p.fail(w, r, "Wallet", err)
			return
		}
		p.renderWallet(w, r, http.StatusBadRequest, views.SiteFrame{Error: errText(r, err)})
		return
	}
	if v.NextAction != nil && v.NextAction.URL != "" {
		p.toGateway(w, r, v, "/wallet")
		return
	}
	http.Redirect(w, r, "/wallet", http.StatusSeeOther)
}
