package web

import (
	"net/http"

	"tatkal/booking"
	"tatkal/booking/fraud/review"
	"tatkal/views"
)

// The appeal page: a member whose booking a fraud review cancelled, or
// whose account it banned or made harder to book from, says why the
// decision is wrong and follows the answer. It calls the same review
// service as POST /v1/fraud/appeals.

// appealPage shows the member's appeals and the form.
func (p *Pages) appealPage(w http.ResponseWriter, r *http.Request) {
	p.renderAppeal(w, r, http.StatusOK, views.SiteFrame{}, "")
}

// appeal files one.
func (p *Pages) appeal(w http.ResponseWriter, r *http.Request) {
	statement := r.PostFormValue("statement")
	_, err := review.New(p.cfg.Pool).FileAppeal(r.Context(), sessionOf(r).UserID, statement)
	if err != nil {
		if booking.ErrorCode(err) == booking.EINTERNAL {
			p.fail(w, r, "Appeal", err)
			return
		}
		p.renderAppeal(w, r, http.StatusBadRequest, views.SiteFrame{Error: booking.ErrorMessage(err)}, statement)
		return
	}
	p.renderAppeal(w, r, http.StatusOK, views.SiteFrame{Notice: "Your appeal is with the reviewers. The answer will appear here."}, "")
}

func (p *Pages) renderAppeal(w http.ResponseWriter, r *http.Request, status int, f views.SiteFrame, statement string) {
	mine, err := review.New(p.cfg.Pool).MyAppeals(r.Context(), sessionOf(r).UserID)
	if err != nil {
		p.fail(w, r, "Appeal", err)
		return
	}
	var banned bool
	if err := p.cfg.Pool.QueryRow(r.Context(), `SELECT banned_at IS NOT NULL FROM users WHERE id = $1`, sessionOf(r).UserID).Scan(&banned); err != nil {
		p.fail(w, r, "Appeal", err)
		return
	}
	page := views.AppealPage{Statement: statement, Suspended: banned}
	for _, a := range mine {
		page.Appeals = append(page.Appeals, views.AppealRow{ID: a.ID, Filed: a.CreatedAt.In(booking.IST).Format("02 Jan 2006 15:04"),
			What: appealWhat[a.Outcome], Statement: a.Statement, Status: a.Status, Answer: a.Note})
		if a.Status == "OPEN" {
			page.Open = true
		}
	}
	p.render(w, r, status, "Appeal", f, views.SiteAppeal(f, page))
}

var appealWhat = map[string]string{
	review.CancelBookings: "Bookings cancelled after a review",
	review.Ban:            "Account suspended after a review",
	review.ExtraChallenge: "Harder checks when booking, after a review",
}
