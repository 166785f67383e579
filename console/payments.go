package console

import (
	"fmt"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"tatkal/console/levers"
	"tatkal/views"
)

type timeT struct{ t time.Time }

// paymentsPage lists payments still unresolved (INITIATED, AWAITING_USER,
// PENDING_AT_BANK, UNKNOWN) older than min_age, oldest first.
func (c *Console) paymentsPage(w http.ResponseWriter, r *http.Request) {
	c.renderPayments(w, r, views.PaymentsPage{}, http.StatusOK)
}

func (c *Console) renderPayments(w http.ResponseWriter, r *http.Request, p views.PaymentsPage, status int) {
	minAge := time.Minute
	if v := r.URL.Query().Get("min_age"); v != "" {
		if d, err := time.ParseDuration(v); err == nil && d >= 0 {
			minAge = d
		} else {
			p.Error = "Give the age like 30s, 5m or 1h."
		}
	}
	p.MinAge = minAge.String()
	rows, err := c.pool.Query(r.Context(), `SELECT p.id::text, p.hold_id::text, p.method, p.psp, p.state, p.amount_paise, p.initiated_at,
		p.deadline, p.inquiries, u.login FROM payments p JOIN users u ON u.id = p.user_id
		WHERE p.state IN ('INITIATED', 'AWAITING_USER', 'PENDING_AT_BANK', 'UNKNOWN') AND p.initiated_at <= now() - $1::interval
		ORDER BY p.initiated_at LIMIT 500`, minAge)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	defer rows.Close()
	now := time.Now()
	for rows.Next() {
		var row views.PaymentRow
		var amount int64
		var at, deadline time.Time
		if err := rows.Scan(&row.ID, &row.HoldID, &row.Method, &row.Gateway, &row.State, &amount, &at, &deadline, &row.Inquiries, &row.Login); err != nil {
			c.serverError(w, r, err)
			return
		}
		row.Amount, row.Age, row.Deadline = rupees(amount), now.Sub(at).Truncate(time.Second).String(), ist(deadline)
		row.Overdue = now.After(deadline)
		p.Rows = append(p.Rows, row)
	}
	if err := rows.Err(); err != nil {
		c.serverError(w, r, err)
		return
	}
	u, _ := userFrom(r.Context())
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	c.render(w, r, "Stuck payments", views.ConsolePayments(p, u.CSRF))
}

// paymentInquire asks the gateway for the payment's status now. Audited.
func (c *Console) paymentInquire(w http.ResponseWriter, r *http.Request) {
	u, _ := userFrom(r.Context())
	id, err := uuid.Parse(chi.URLParam(r, "id"))
	if err != nil {
		http.NotFound(w, r)
		return
	}
	_, ierr := c.cfg.Payments.Inquire(r.Context(), id)
	detail := map[string]any{}
	if ierr != nil {
		detail["error"] = ierr.Error()
	}
	state := ""
	c.pool.QueryRow(r.Context(), `SELECT state FROM payments WHERE id = $1`, id).Scan(&state) //nolint:errcheck
	detail["state_after"] = state
	if err := levers.Audit(r.Context(), c.pool, u.Login, "payment.inquire", id.String(), detail); err != nil {
		c.serverError(w, r, err)
		return
	}
	notice := fmt.Sprintf("Asked the gateway about %s: it is now %s.", id, state)
	if ierr != nil {
		notice = fmt.Sprintf("Inquiry about %s did not finish (%v); it stays %s and the inquiry job keeps trying.", id, userError(ierr), state)
	}
	c.redirectNotice(w, r, "/console/payments", notice)
}
