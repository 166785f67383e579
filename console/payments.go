package console

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"tatkal/booking"
	"tatkal/booking/payment"
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
	rows, err := c.pool.Query(r.Context(), `SELECT p.id::text, coalesce(p.hold_id::text, ''), p.method, p.psp, p.state, p.amount_paise, p.initiated_at,
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
		row.Amount, row.Age, row.Deadline = booking.Rupees(amount), now.Sub(at).Truncate(time.Second).String(), ist(deadline)
		row.Overdue = now.After(deadline)
		p.Rows = append(p.Rows, row)
	}
	if err := rows.Err(); err != nil {
		c.serverError(w, r, err)
		return
	}
	u, _ := userFrom(r.Context())
	var reviews []payment.Review
	if c.cfg.Payments != nil {
		var err error
		if reviews, err = c.cfg.Payments.OpenReviews(r.Context(), 500); err != nil {
			c.serverError(w, r, err)
			return
		}
	}
	for _, v := range reviews {
		p.Reviews = append(p.Reviews, views.ReviewRow{ID: fmt.Sprint(v.ID), PaymentID: v.PaymentID.String(), Kind: v.Kind, Detail: v.Detail,
			Login: v.Login, Purpose: v.Purpose, Method: v.Method, State: v.State, Amount: booking.Rupees(v.AmountPaise), PNR: v.PNR,
			Age: now.Sub(v.CreatedAt).Truncate(time.Second).String(), WalletFallback: v.Kind == payment.ReviewRefundRefused})
	}
	p.CanResolve = u.Role == Finance || u.Role == Admin
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	c.render(w, r, "Stuck payments", views.ConsolePayments(p, u.CSRF))
}

// paymentReview resolves an open payment review (action=resolve, with a
// note) or, for a refused refund, credits it to the wallet (action=wallet;
// once: payment.RefundToWallet says why that is a person's decision).
// Finance and admin only. Audited.
func (c *Console) paymentReview(w http.ResponseWriter, r *http.Request) {
	u, _ := userFrom(r.Context())
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	action, note := r.PostFormValue("action"), strings.TrimSpace(r.PostFormValue("note"))
	switch action {
	case "wallet":
		err = c.cfg.Payments.RefundToWallet(r.Context(), id, u.Login)
		note = "refund credited to the wallet"
	case "resolve":
		err = c.cfg.Payments.ResolveReview(r.Context(), id, u.Login, note)
	default:
		err = booking.Errorf(booking.EINVALID, "BAD_ACTION", "Choose resolve or wallet.")
	}
	if err != nil && booking.ErrorCode(err) == booking.EINTERNAL {
		c.serverError(w, r, err)
		return
	}
	detail := map[string]any{"action": action, "note": note}
	if err != nil {
		detail["refused"] = booking.ErrorMessage(err)
	}
	if aerr := levers.Audit(r.Context(), c.pool, u.Login, "payment.review."+action, fmt.Sprint(id), detail); aerr != nil {
		c.serverError(w, r, aerr)
		return
	}
	if err != nil {
		c.renderPayments(w, r, views.PaymentsPage{Error: booking.ErrorMessage(err)}, http.StatusConflict)
		return
	}
	c.redirectNotice(w, r, "/console/payments", fmt.Sprintf("Review %d: %s.", id, note))
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
