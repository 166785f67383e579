package console

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"tatkal/booking"
	"tatkal/console/levers"
	"tatkal/recon"
	"tatkal/views"
)

// Month end: the period view of a month across gateways, the ageing
// report a finance lead signs (recon freezes and audits it; a refusal is
// audited here) and the month's workbook.

// monthParam reads a month ("2026-11"; empty: this month in IST).
func monthParam(v string) (time.Time, error) {
	if v == "" {
		return recon.MonthStart(today()), nil
	}
	return recon.ParseMonth(v)
}

func flowView(f recon.Flow) views.FlowView {
	return views.FlowView{Count: f.Count, Amount: views.INR(f.Paise)}
}

func periodView(r recon.PeriodRow, link string) views.PeriodRowView {
	return views.PeriodRowView{Key: r.Key, Opening: flowView(r.Opening), Found: flowView(r.Found), Resolved: flowView(r.Resolved),
		WrittenOff: flowView(r.WrittenOff), Closing: flowView(r.Closing), Link: link}
}

func ageingView(a recon.AgeingRow) views.AgeingRowView {
	v := views.AgeingRowView{Kind: a.Kind, Total: flowView(a.Total)}
	for _, b := range a.Buckets {
		v.Buckets = append(v.Buckets, flowView(b))
	}
	return v
}

// financeMonth shows a month's period view and ageing report.
func (c *Console) financeMonth(w http.ResponseWriter, r *http.Request) {
	if c.noRecon(w, r) {
		return
	}
	month, err := monthParam(r.URL.Query().Get("month"))
	if err != nil {
		month = recon.MonthStart(today())
	}
	c.renderMonth(w, r, month, err)
}

func (c *Console) renderMonth(w http.ResponseWriter, r *http.Request, month time.Time, refused error) {
	ctx := r.Context()
	u, _ := userFrom(ctx)
	status := http.StatusOK
	p := views.FinanceMonthPage{Month: month.Format("2006-01"), Label: month.Format("January 2006"), CSRF: u.CSRF,
		Prev: month.AddDate(0, -1, 0).Format("2006-01"), Workbook: "/console/finance/month/" + month.Format("2006-01") + "/workbook.xlsx"}
	gws, err := c.gateways(r)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	// Where the money of a month's exceptions was: the gateways, the
	// wallet, the bank and the core's own lines.
	p.Gateways = append(gws, recon.Wallet, recon.Bank, recon.Core)
	if g := r.URL.Query().Get("gateway"); g != "" && r.Method == http.MethodGet {
		if !slices.Contains(p.Gateways, g) {
			if refused == nil {
				refused = booking.Errorf(booking.EINVALID, "UNKNOWN_GATEWAY", "Choose a gateway among %s, not %q.", strings.Join(p.Gateways, ", "), g)
			}
		} else {
			p.Gateway = g
		}
	}
	if next := month.AddDate(0, 1, 0); !next.After(recon.MonthStart(today())) {
		p.Next = next.Format("2006-01")
	}
	for _, b := range recon.MonthBuckets {
		p.Buckets = append(p.Buckets, b.Name)
	}
	rep, err := c.cfg.Recon.MonthOf(ctx, month, p.Gateway)
	if err == nil {
		err = refused
	}
	if err != nil {
		if booking.ErrorCode(err) == booking.EINTERNAL {
			c.serverError(w, r, err)
			return
		}
		p.Error, status = booking.ErrorMessage(err), statusOf(err)
	}
	if rep.Month.IsZero() && p.Error != "" {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(status)
		c.render(w, r, "Month end", views.ConsoleFinanceMonth(p))
		return
	}
	p.From, p.To, p.AsOf, p.Over = ist(rep.From), ist(rep.To), ist(rep.AsOf), rep.Over
	for _, k := range rep.ByKind {
		p.ByKind = append(p.ByKind, periodView(k, "/console/finance/exceptions?"+
			views.ExceptionFilter{Kind: k.Key, State: "UNRESOLVED", Gateway: p.Gateway}.Query(0)))
	}
	for _, o := range rep.ByOwner {
		p.ByOwner = append(p.ByOwner, periodView(o, "/console/finance/exceptions?"+
			views.ExceptionFilter{Owner: o.Key, State: "UNRESOLVED", Gateway: p.Gateway}.Query(0)))
	}
	p.Total, p.TiesOut = periodView(rep.Total, ""), rep.Total.TiesOut()
	for _, a := range rep.Ageing {
		p.Ageing = append(p.Ageing, ageingView(a))
	}
	p.AgeTotal = ageingView(rep.AgeTotal)
	p.SignedBy, p.Drift = rep.SignedBy, rep.Drift
	if rep.SignedAt != nil {
		p.SignedAt = ist(*rep.SignedAt)
	}
	if rep.Over && rep.SignedBy == "" && p.Gateway == "" {
		if err := c.pool.QueryRow(ctx, `SELECT finance_lead FROM console_users WHERE id = $1`, u.ID).Scan(&p.CanSign); err != nil {
			c.serverError(w, r, err)
			return
		}
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	c.render(w, r, "Month end "+p.Label, views.ConsoleFinanceMonth(p))
}

// financeMonthSign is a finance lead's sign-off of a month's report.
func (c *Console) financeMonthSign(w http.ResponseWriter, r *http.Request) {
	if c.noRecon(w, r) {
		return
	}
	month, err := recon.ParseMonth(chi.URLParam(r, "month"))
	if err != nil {
		http.NotFound(w, r)
		return
	}
	u, _ := userFrom(r.Context())
	_, err = c.cfg.Recon.SignMonth(r.Context(), month, u.Login)
	if c.refuse(w, r, "recon.month_signoff", "recon_month:"+month.Format("2006-01"), nil, err) {
		return
	}
	if err != nil {
		c.renderMonth(w, r, month, err)
		return
	}
	c.redirectNotice(w, r, "/console/finance/month?month="+month.Format("2006-01"),
		fmt.Sprintf("%s signed off; its report is frozen as signed.", month.Format("January 2006")))
}

// financeMonthWorkbook downloads the month's workbook (the signed report
// once signed). Audited.
func (c *Console) financeMonthWorkbook(w http.ResponseWriter, r *http.Request) {
	if c.noRecon(w, r) {
		return
	}
	month, err := recon.ParseMonth(chi.URLParam(r, "month"))
	if err != nil || month.After(recon.MonthStart(today())) {
		http.NotFound(w, r)
		return
	}
	u, _ := userFrom(r.Context())
	sub := "recon_month:" + month.Format("2006-01")
	if err := levers.Audit(r.Context(), c.pool, u.Login, "recon.export", sub, map[string]any{"format": "xlsx"}); err != nil {
		c.serverError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="recon-month-%s.xlsx"`, month.Format("2006-01")))
	if err := c.cfg.Recon.WriteMonthXLSX(r.Context(), month, w); err != nil {
		c.log.Error("recon month export", "month", month.Format("2006-01"), "err", err)
	}
}
