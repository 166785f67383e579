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
	"tatkal/booking/india"
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
		row.Amount, row.Age, row.Deadline = india.Decimal(amount), now.Sub(at).Truncate(time.Second).String(), ist(deadline)
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
			Login: v.Login, Purpose: v.Purpose, Method: v.Method, State: v.State, Amount: india.Decimal(v.AmountPaise), PNR: v.PNR,
			Age: now.Sub(v.CreatedAt).Truncate(time.Second).String(), WalletFallback: v.Kind == payment.ReviewRefundRefused,
			Proposal: proposalLabel(v.Proposal), ProposedBy: v.ProposedBy, ProposalNote: v.ProposalNote})
	}
	p.CanResolve, p.Me = u.Role == Finance || u.Role == Admin, u.Login
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	c.render(w, r, "Stuck payments", views.ConsolePayments(p, u.CSRF))
}

// paymentReview acts on an open payment review, four eyes: one person
// proposes (action=resolve with a note saying what was done, or, for a
// refused refund, action=wallet: credit it to the wallet); a second person
// approves (action=approve), which asks the gateway first and goes ahead
// only on its answer, and above the approval limit only a finance lead
// may; the proposer withdraws or another person rejects (action=reject).
// Finance and admin only. Every step audited, refused ones too.
func (c *Console) paymentReview(w http.ResponseWriter, r *http.Request) {
	u, _ := userFrom(r.Context())
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	ctx := r.Context()
	action, note := r.PostFormValue("action"), strings.TrimSpace(r.PostFormValue("note"))
	detail := map[string]any{"action": action, "note": note}
	var done string
	switch action {
	case "wallet", "resolve":
		err = c.cfg.Payments.ProposeReview(ctx, id, u.Login, strings.ToUpper(action), note)
		done = fmt.Sprintf("Review %d: proposed; a second person approves it.", id)
	case "approve":
		var lead bool
		if err = c.pool.QueryRow(ctx, `SELECT finance_lead FROM console_users WHERE id = $1`, u.ID).Scan(&lead); err != nil {
			c.serverError(w, r, err)
			return
		}
		var answer payment.GatewayAnswer
		answer, err = c.cfg.Payments.ApproveReview(ctx, id, payment.Approver{Login: u.Login, Lead: lead})
		detail["gateway"] = answer.String()
		done = fmt.Sprintf("Review %d: approved and carried out (%s).", id, answer)
	case "reject":
		err, done = c.cfg.Payments.RejectReview(ctx, id, u.Login), fmt.Sprintf("Review %d: proposal cleared.", id)
	default:
		err = booking.Errorf(booking.EINVALID, "BAD_ACTION", "Choose propose, approve or reject.")
	}
	if err != nil && booking.ErrorCode(err) == booking.EINTERNAL {
		c.serverError(w, r, err)
		return
	}
	if err != nil {
		detail["refused"] = booking.ErrorMessage(err)
	}
	if aerr := levers.Audit(ctx, c.pool, u.Login, "payment.review."+action, fmt.Sprint(id), detail); aerr != nil {
		c.serverError(w, r, aerr)
		return
	}
	if err != nil {
		c.renderPayments(w, r, views.PaymentsPage{Error: booking.ErrorMessage(err)}, statusOf(err))
		return
	}
	c.redirectNotice(w, r, "/console/payments", done)
}

// proposalLabel is a review proposal as the page names it.
func proposalLabel(p string) string {
	switch p {
	case payment.ProposeWallet:
		return "Credit the refund to the wallet"
	case payment.ProposeResolve:
		return "Close the review"
	}
	return ""
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
