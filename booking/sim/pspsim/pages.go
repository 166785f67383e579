package pspsim

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"

	"github.com/jackc/pgx/v5"

	"tatkal/booking/india"
	"tatkal/booking/payment/pspapi"
)

//go:embed page.html
var pageFS embed.FS

func parsePages() (*template.Template, error) {
	t, err := template.ParseFS(pageFS, "page.html")
	if err != nil {
		return nil, fmt.Errorf("pspsim: parse pay page: %w", err)
	}
	return t, nil
}

// payPage is the view model of the customer's page.
type payPage struct {
	Title         string
	Gateway       string
	PSPRef        string
	MerchantRef   string
	Method        string
	Amount        string
	VPA           string
	Bank          string
	Status        string
	ExpiresAt     string
	ApproveAction string
	DeclineAction string
	Error         string // the last form post was wrong; nothing changed
	Message       string // no decision can be taken: says why
	ReturnURL     string
}

func pageTitle(method string) string {
	switch method {
	case pspapi.UPI:
		return "Approve UPI collect request"
	case pspapi.Card:
		return "3-D Secure verification"
	}
	return "NetBanking login"
}

func newPayPage(p *payment) payPage {
	path := payPath(p.Gateway, p.PSPRef)
	pg := payPage{
		Title: pageTitle(p.Method), Gateway: p.Gateway, PSPRef: p.PSPRef, MerchantRef: p.MerchantRef,
		Method: p.Method, Amount: india.Rupees(p.AmountPaise), Status: p.Status,
		ExpiresAt:     p.ExpiresAt.In(india.IST).Format("15:04:05 MST, 2 Jan 2006"),
		ApproveAction: path + "/approve", DeclineAction: path + "/decline",
	}
	switch p.Method {
	case pspapi.UPI:
		pg.VPA = p.VPA
	case pspapi.NetBanking:
		pg.Bank = p.Bank
	}
	if p.Status != pspapi.StatusCreated {
		pg.Message = decidedMessage(p)
		pg.ReturnURL = returnURL(p)
	}
	return pg
}

func decidedMessage(p *payment) string {
	switch p.Status {
	case pspapi.StatusSuccess:
		return "This payment is already complete (SUCCESS). Nothing was changed."
	case pspapi.StatusPending:
		return "Your bank is processing this payment (PENDING). Nothing was changed; the merchant will be told the result."
	}
	if p.FailureReason == pspapi.ReasonExpired {
		return "This payment request has expired (FAILED: EXPIRED). Nothing was changed; start again from the merchant."
	}
	return fmt.Sprintf("This payment has already failed (FAILED: %s). Nothing was changed.", p.FailureReason)
}

// returnURL is where the customer's browser goes after deciding.
func returnURL(p *payment) string {
	u, err := url.Parse(p.ReturnURL)
	if err != nil {
		return p.ReturnURL
	}
	q := u.Query()
	q.Set("psp_ref", p.PSPRef)
	q.Set("status", p.Status)
	u.RawQuery = q.Encode()
	return u.String()
}

func (s *Server) renderPage(w http.ResponseWriter, r *http.Request, status int, pg payPage) {
	var buf bytes.Buffer
	if err := s.pages.Execute(&buf, pg); err != nil {
		s.log.ErrorContext(r.Context(), "render pay page", "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(buf.Bytes()) //nolint:errcheck // the browser may be gone
}

func (s *Server) renderNotice(w http.ResponseWriter, r *http.Request, status int, title, msg string) {
	s.renderPage(w, r, status, payPage{Title: title, Gateway: chiParam(r, "gw"), Message: msg})
}

// loadForPage finds the payment of a page request and checks its route is
// up; false means an answer was written.
func (s *Server) loadForPage(w http.ResponseWriter, r *http.Request) (*payment, pspapi.RouteConfig, bool) {
	ctx := r.Context()
	gw, ref := chiParam(r, "gw"), chiParam(r, "ref")
	var rc pspapi.RouteConfig
	p, err := s.paymentByRef(ctx, s.pool, gw, ref)
	if errors.Is(err, errNoRow) {
		s.renderNotice(w, r, http.StatusNotFound, "Payment not found", "There is no payment "+ref+" at "+gw+".")
		return nil, rc, false
	}
	if err != nil {
		s.log.ErrorContext(ctx, "pay page", "err", err)
		s.renderNotice(w, r, http.StatusInternalServerError, "Something went wrong", "Please try again.")
		return nil, rc, false
	}
	rc, _, err = s.route(ctx, s.pool, p.Gateway, p.Method)
	if err != nil {
		s.log.ErrorContext(ctx, "pay page", "err", err)
		s.renderNotice(w, r, http.StatusInternalServerError, "Something went wrong", "Please try again.")
		return nil, rc, false
	}
	if rc.Outage {
		w.Header().Set("Retry-After", "1")
		s.renderNotice(w, r, http.StatusServiceUnavailable, "Service unavailable", gw+" is not reachable right now. Please try again shortly.")
		return nil, rc, false
	}
	return p, rc, true
}

// handlePayPage is GET /gw/{gw}/pay/{ref}: the customer's collect request,
// 3-D Secure or bank login page. Plain HTML forms, no JavaScript needed.
func (s *Server) handlePayPage(w http.ResponseWriter, r *http.Request) {
	p, _, ok := s.loadForPage(w, r)
	if !ok {
		return
	}
	s.renderPage(w, r, http.StatusOK, newPayPage(p))
}

// errDecided means the payment was decided before this form post.
var errDecided = errors.New("payment already decided")

// handleDecision is POST /gw/{gw}/pay/{ref}/approve|decline. A decision
// redirects (303) to the merchant's return_url; a post on a payment that
// is already decided shows why and changes nothing.
func (s *Server) handleDecision(approve bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		p, rc, ok := s.loadForPage(w, r)
		if !ok {
			return
		}
		if p.Status != pspapi.StatusCreated {
			s.renderPage(w, r, http.StatusConflict, newPayPage(p))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		if err := r.ParseForm(); err != nil {
			pg := newPayPage(p)
			pg.Error = "The form could not be read. Please try again."
			s.renderPage(w, r, http.StatusBadRequest, pg)
			return
		}
		// approve is shared by every request of this route; decide locally.
		approved, reason := approve, pspapi.ReasonCustomerDeclined
		var card string
		if approved && p.Method == pspapi.Card && r.PostFormValue("card_number") != "" {
			var ok bool
			if card, ok = cardNumber(r.PostFormValue("card_number")); !ok {
				pg := newPayPage(p)
				pg.Error = "Enter the card's number (12 to 19 digits)."
				s.renderPage(w, r, http.StatusBadRequest, pg)
				return
			}
		}
		if approved && p.Method == pspapi.Card {
			otp := r.PostFormValue("otp")
			if !sixDigits(otp) {
				pg := newPayPage(p)
				pg.Error = "Enter the 6-digit one-time password."
				s.renderPage(w, r, http.StatusBadRequest, pg)
				return
			}
			if otp == "000000" {
				approved, reason = false, pspapi.ReasonAuthenticationFailed
			}
		}

		// The customer pressed the button: the decision stands even if the
		// browser goes away mid-request.
		wctx := context.WithoutCancel(ctx)
		var after *payment
		err := s.transact(wctx, func(tx pgx.Tx) error {
			cur, err := s.lockPayment(wctx, tx, p.Gateway, p.PSPRef)
			if err != nil {
				return err
			}
			after = cur
			if cur.Status != pspapi.StatusCreated {
				return errDecided
			}
			now := s.now()
			switch {
			case !cur.ExpiresAt.After(now):
				cur.fail(now, pspapi.ReasonExpired)
			case approved:
				s.payWith(cur, card, r.PostFormValue("user_id"))
				s.approve(cur, rc, now)
			default:
				cur.fail(now, reason)
			}
			return s.commitMove(wctx, tx, cur, pspapi.StatusCreated, rc, now)
		})
		switch {
		case errors.Is(err, errDecided):
			s.renderPage(w, r, http.StatusConflict, newPayPage(after))
			return
		case err != nil:
			s.log.ErrorContext(ctx, "pay page decision", "psp_ref", p.PSPRef, "err", err)
			s.renderNotice(w, r, http.StatusInternalServerError, "Something went wrong", "Nothing was changed. Please try again.")
			return
		case after.FailureReason == pspapi.ReasonExpired:
			s.renderPage(w, r, http.StatusConflict, newPayPage(after))
			return
		}
		s.log.DebugContext(ctx, "customer decided", "psp_ref", p.PSPRef, "approve", approved, "status", after.Status)
		http.Redirect(w, r, returnURL(after), http.StatusSeeOther)
	}
}

func sixDigits(s string) bool {
	if len(s) != 6 {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
