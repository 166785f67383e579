package console

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"tatkal/booking"
	"tatkal/booking/india"
	"tatkal/booking/payment"
	"tatkal/booking/pii"
	"tatkal/booking/tdr"
	"tatkal/console/levers"
	"tatkal/views"
)

// TDRs: passengers' claims of a full refund for a train that ran over 3
// hours late or did not run (booking/tdr). Finance decides: two different
// people approve, however small the claim, one refuses; the refund
// goes through the payment refund path. Finance and admin only; every
// step audited, refused ones too.

func (c *Console) tdrRoutes(fin chi.Router) {
	fin.Get("/finance/tdrs", c.tdrPage)
	fin.Post("/finance/tdrs/{id}/{action}", c.tdrAction)
}

func (c *Console) tdrs() *tdr.Service {
	var refunds tdr.Refunds
	if c.cfg.River != nil {
		refunds = payment.NewRefunds(c.cfg.River)
	}
	return &tdr.Service{Pool: c.pool, Refunds: refunds}
}

func (c *Console) tdrPage(w http.ResponseWriter, r *http.Request) {
	c.renderTDRs(w, r, http.StatusOK, "")
}

func (c *Console) renderTDRs(w http.ResponseWriter, r *http.Request, status int, errText string) {
	svc := c.tdrs()
	list, err := svc.List(r.Context(), 200)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	u, _ := userFrom(r.Context())
	p := views.TDRConsolePage{Error: errText}
	for _, t := range list {
		row := views.TDRConsoleRow{ID: t.ID, PNR: t.PNR, Login: t.Login, Journey: t.Journey, Reason: t.Reason, Note: t.Note,
			Amount: india.Rupees(t.AmountPaise), Status: t.Status, FiledAt: ist(t.FiledAt), FirstBy: t.FirstBy, DecidedBy: t.DecidedBy,
			Answer: t.Answer, RefundState: t.RefundState, Mine: t.FirstBy == u.Login}
		if t.LateMinutes > 0 {
			row.Late = (time.Duration(t.LateMinutes) * time.Minute).String()
		}
		if err := c.tdrPassengers(r, t.BookingID, &row); err != nil {
			c.serverError(w, r, err)
			return
		}
		p.Rows = append(p.Rows, row)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	c.render(w, r, "TDRs", views.TDRConsole(p, u.CSRF))
}

// tdrPassengers names the booking's passengers with their ID masked: the
// console never sees a number.
func (c *Console) tdrPassengers(r *http.Request, bookingID int64, row *views.TDRConsoleRow) error {
	rows, err := c.pool.Query(r.Context(), `SELECT name, id_type, id_hint FROM booking_passengers WHERE booking_id = $1 ORDER BY seq`, bookingID)
	if err != nil {
		return fmt.Errorf("passengers of booking %d: %w", bookingID, err)
	}
	defer rows.Close()
	for rows.Next() {
		var name, typ, hint string
		if err := rows.Scan(&name, &typ, &hint); err != nil {
			return err
		}
		if hint != "" {
			name += " (" + typ + " " + pii.Mask(hint) + ")"
		}
		row.Passengers = append(row.Passengers, name)
	}
	return rows.Err()
}

func (c *Console) tdrAction(w http.ResponseWriter, r *http.Request) {
	u, _ := userFrom(r.Context())
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	ctx := r.Context()
	action := chi.URLParam(r, "action")
	detail := map[string]any{}
	var done string
	switch action {
	case "approve":
		var refunded bool
		refunded, err = c.tdrs().Approve(ctx, id, u.Login)
		done = fmt.Sprintf("TDR %d: first approval recorded; a second finance person decides it.", id)
		if refunded {
			done = fmt.Sprintf("TDR %d: approved; the refund is on its way to the passenger.", id)
		}
	case "refuse":
		answer := r.PostFormValue("answer")
		detail["answer"] = answer
		err, done = c.tdrs().Refuse(ctx, id, u.Login, answer), fmt.Sprintf("TDR %d: refused; the passenger sees your answer.", id)
	default:
		err = booking.Errorf(booking.EINVALID, "BAD_ACTION", "Choose approve or refuse.")
	}
	if err != nil && booking.ErrorCode(err) == booking.EINTERNAL {
		c.serverError(w, r, err)
		return
	}
	if err != nil { // a refusal is audited here; what was done, by the service in its transaction
		detail["refused"] = booking.ErrorMessage(err)
		if aerr := levers.Audit(ctx, c.pool, u.Login, "tdr."+action+".refused", fmt.Sprint(id), detail); aerr != nil {
			c.serverError(w, r, aerr)
			return
		}
		c.renderTDRs(w, r, statusOf(err), booking.ErrorMessage(err))
		return
	}
	c.redirectNotice(w, r, "/console/finance/tdrs", done)
}
