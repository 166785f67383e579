package web

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"tatkal/booking"
	"tatkal/booking/india"
	"tatkal/booking/tdr"
	"tatkal/views"
)

// The rules page, a booking's TDR and the warning before a new hold while
// an earlier payment for the journey is unresolved (issue 39, 14 and 15).

// tdrRoutes mounts the pages: the rules for everyone, TDRs for the
// signed-in passenger (r carries requireSignIn and the CSRF check).
func (p *Pages) tdrRoutes(public, signedIn chi.Router) {
	public.Get("/rules", p.rules)
	signedIn.Get("/bookings/{hold_id}/tdr", p.tdrPage)
	signedIn.Post("/bookings/{hold_id}/tdr", p.fileTDR)
}

func (p *Pages) tdrService() *tdr.Service {
	return &tdr.Service{Pool: p.cfg.Pool}
}

func (p *Pages) rules(w http.ResponseWriter, r *http.Request) {
	rl := tdr.DefaultRules()
	p.render(w, r, http.StatusOK, "Tatkal rules", views.SiteFrame{}, views.SiteRules(views.RulesPage{LateHours: int(rl.LateThreshold.Hours()),
		NotRunHours: int(rl.NotRunWithin.Hours()), OpensHours: int(rl.OpensBefore.Hours())}))
}

func (p *Pages) tdrPage(w http.ResponseWriter, r *http.Request) {
	p.renderTDR(w, r, http.StatusOK, views.SiteFrame{}, views.TDRSitePage{})
}

func (p *Pages) fileTDR(w http.ResponseWriter, r *http.Request) {
	id, err := holdIDOf(r)
	if err != nil {
		p.fail(w, r, "TDR", err)
		return
	}
	form := views.TDRSitePage{Reason: r.PostFormValue("reason"), LateMinutes: strings.TrimSpace(r.PostFormValue("late_minutes")), Note: r.PostFormValue("note")}
	c := tdr.Claim{Reason: form.Reason, Note: form.Note}
	if form.Reason == tdr.TrainLate {
		if c.LateMinutes, err = strconv.Atoi(form.LateMinutes); err != nil {
			c.LateMinutes = -1 // refused by File with the rule's words
		}
	}
	if _, err := p.tdrService().File(r.Context(), sessionOf(r).UserID, id, c); err != nil {
		if booking.ErrorCode(err) == booking.EINTERNAL {
			p.fail(w, r, "TDR", err)
			return
		}
		p.renderTDR(w, r, http.StatusBadRequest, views.SiteFrame{Error: booking.ErrorMessage(err)}, form)
		return
	}
	http.Redirect(w, r, "/bookings/"+id.String()+"/tdr", http.StatusSeeOther)
}

func (p *Pages) renderTDR(w http.ResponseWriter, r *http.Request, status int, f views.SiteFrame, page views.TDRSitePage) {
	bp, _, _, err := p.loadBooking(r)
	if err != nil {
		p.fail(w, r, "TDR", err)
		return
	}
	id, _ := holdIDOf(r)
	t, err := p.tdrService().ForHold(r.Context(), sessionOf(r).UserID, id)
	if err != nil {
		p.fail(w, r, "TDR", err)
		return
	}
	page.HoldID, page.PNR, page.Journey, page.Amount = bp.HoldID, bp.PNR, bp.Train+" "+bp.From+" → "+bp.To+", "+bp.Date, bp.Total
	if t != nil {
		page.State, page.Answer, page.Amount = t.Status, t.Answer, india.Decimal(t.AmountPaise)
		if t.Status == tdr.Approved && t.RefundState == "PROCESSED" {
			page.State = "REFUNDED"
		}
	}
	f.Active = "bookings"
	p.render(w, r, status, "TDR", f, views.SiteTDR(views.SiteFrame{CSRF: p.csrfToken(r)}, page))
}

// unresolvedOn is the deadline (IST) of the caller's latest payment for a
// hold on the shard that the bank has not settled; "" when none. One
// indexed read (the account's holds).
func (p *Pages) unresolvedOn(r *http.Request, shardID int64) string {
	var by *time.Time
	err := p.cfg.Pool.QueryRow(r.Context(), `SELECT max(p.deadline) FROM holds h JOIN payments p ON p.hold_id = h.id
		WHERE h.user_id = $1 AND h.shard_id = $2 AND p.state IN ('INITIATED', 'AWAITING_USER', 'PENDING_AT_BANK', 'UNKNOWN')`,
		sessionOf(r).UserID, shardID).Scan(&by)
	if err != nil {
		p.cfg.Log.Warn("unresolved payments of the journey", "err", err) // the page goes on without the warning
		return ""
	}
	if by == nil {
		return ""
	}
	return by.In(booking.IST).Format("15:04")
}
