package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5"

	"tatkal/booking/india"
	"tatkal/booking/winreview"
	"tatkal/views"
)

// The post-window reviews the window_review job kept (booking/winreview).

func (c *Console) reviewsPage(w http.ResponseWriter, r *http.Request) {
	rows, err := c.pool.Query(r.Context(), `SELECT figures FROM window_reviews ORDER BY written_at DESC, shard_id DESC LIMIT 100`)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	raws, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	var p views.WindowReviewsPage
	for _, raw := range raws {
		var rv winreview.Review
		if err := json.Unmarshal(raw, &rv); err != nil {
			c.serverError(w, r, fmt.Errorf("read review: %w", err))
			return
		}
		p.Rows = append(p.Rows, views.WindowReviewRow{ShardID: rv.ShardID, Label: rv.Label, ClosesAt: ist(rv.ClosesAt), WrittenAt: ist(rv.WrittenAt),
			Sold: sold(rv.Funnel), Incidents: len(rv.Incidents)})
	}
	c.render(w, r, "Window reviews", views.ConsoleWindowReviews(p))
}

func sold(f winreview.Funnel) string {
	return fmt.Sprintf("%d of %d berths (%.0f%%)", f.SeatsConfirmed, f.BerthsOnSale, f.SoldShare*100)
}

func (c *Console) reviewPage(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	var raw []byte
	if err == nil {
		err = c.pool.QueryRow(r.Context(), `SELECT figures FROM window_reviews WHERE shard_id = $1`, id).Scan(&raw)
	}
	var rv winreview.Review
	if err == nil {
		err = json.Unmarshal(raw, &rv)
	}
	if err != nil {
		var ne *strconv.NumError
		if errors.Is(err, pgx.ErrNoRows) || errors.As(err, &ne) {
			w.WriteHeader(http.StatusNotFound)
			c.render(w, r, "Window review", views.ConsoleMessages("", "No review of that window (yet): a review is written once the window has closed and settled."))
			return
		}
		c.serverError(w, r, err)
		return
	}
	f, m := rv.Funnel, rv.Money
	n := func(v int64) string { return strconv.FormatInt(v, 10) }
	p := views.WindowReviewPage{ShardID: rv.ShardID, Label: rv.Label, Opens: ist(rv.OpensAt), Closes: ist(rv.ClosesAt), Written: ist(rv.WrittenAt),
		Incidents: rv.Incidents}
	p.Funnel = []views.KV{{K: "berths on sale (expected sold)", V: strconv.Itoa(f.BerthsOnSale)}, {K: "queue entrants", V: n(f.QueueEntrants)},
		{K: "admitted", V: n(f.Admitted)}, {K: "holds granted", V: n(f.Holds)}, {K: "seats held", V: n(f.SeatsHeld)},
		{K: "holds expired", V: n(f.Expired)}, {K: "bookings confirmed", V: n(f.Bookings)}, {K: "seats sold", V: sold(f)}}
	if fr := rv.Fairness; fr != nil {
		rho := "— (fewer than 3 arrivals)"
		if fr.SpearmanRho != nil {
			rho = fmt.Sprintf("%.3f", *fr.SpearmanRho)
		}
		p.Fairness = []views.KV{{K: "entrants", V: n(fr.Entrants)}, {K: "arrival against outcome (Spearman ρ)", V: rho},
			{K: "draw verified", V: strconv.FormatBool(fr.Verified)}}
	} else {
		p.Fairness = []views.KV{{K: "figures", V: "not computed for this window"}}
	}
	for _, s := range m.Payments {
		p.Money = append(p.Money, views.KV{K: "payments " + s.State, V: fmt.Sprintf("%d, %s", s.Count, india.Rupees(s.Paise))})
	}
	for _, s := range m.Refunds {
		p.Money = append(p.Money, views.KV{K: "refunds " + s.State, V: fmt.Sprintf("%d, %s", s.Count, india.Rupees(s.Paise))})
	}
	p.Money = append(p.Money, views.KV{K: "money in", V: india.Rupees(m.CapturedPaise)}, views.KV{K: "refunded", V: india.Rupees(m.RefundedPaise)},
		views.KV{K: "unknown", V: fmt.Sprintf("%d, %s", m.UnknownPayments, india.Rupees(m.UnknownPaise))})
	for _, l := range rv.LeversPulls {
		by := l.ProposedBy
		if l.ApprovedBy != "" {
			by += ", approved by " + l.ApprovedBy
		}
		p.Levers = append(p.Levers, views.KV{K: fmt.Sprintf("#%d %s %s: %s → %s (%s)", l.ID, l.Name, l.Scope, l.Old, l.New, l.State),
			V: fmt.Sprintf("%s at %s: %s", by, ist(l.At), l.Reason)})
	}
	c.render(w, r, "Window review", views.ConsoleWindowReview(p))
}
