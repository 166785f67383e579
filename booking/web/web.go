package web

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"tatkal/booking/banner"
	"time"

	"github.com/a-h/templ"
	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"tatkal/booking"
	"tatkal/booking/admission"
	"tatkal/booking/auth"
	"tatkal/booking/i18n"
	"tatkal/booking/payment"
	"tatkal/booking/signup"
	"tatkal/static"
	"tatkal/views"
)

// Config wires the pages.
type Config struct {
	Booking   *booking.Service
	Payments  *payment.Service
	Admission *admission.Service // nil: no device binding, no waiting room
	Pool      *pgxpool.Pool
	Signer    *auth.Signer
	// Guard and Revocations are the JSON API's (api.API.Guard and
	// Revocations), so a sign-in here and there share one backoff and a
	// logout anywhere ends the session everywhere.
	Guard       *auth.Guard
	Revocations *auth.Revocations
	SessionTTL  time.Duration
	// SecureCookies: browsers reach us over https.
	SecureCookies bool
	// MaxInFlight bounds pages being served at once; beyond it, the static
	// high-demand page (seeds/000 section 4.7, last resort).
	MaxInFlight int
	Log         *slog.Logger
	Now         func() time.Time
	// Banners are the operators' status banners shown above every page
	// (nil: none).
	Banners *banner.Store
	// Signup opens accounts (signup.go); nil: its pages are not mounted.
	Signup *signup.Service
}

// Pages are the passenger pages.
type Pages struct {
	cfg      Config
	inflight chan struct{}
}

// New returns the pages.
func New(cfg Config) *Pages {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 12 * time.Hour
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 512
	}
	return &Pages{cfg: cfg, inflight: make(chan struct{}, cfg.MaxInFlight)}
}

// Routes mounts the pages, top to bottom.
func (p *Pages) Routes(r chi.Router) {
	r.Handle("/static/*", static.Handler())
	r.Group(func(r chi.Router) {
		r.Use(p.gate, p.session)
		outer := r
		r.Get("/", p.home)
		r.Get("/signin", p.signInPage)
		r.With(p.checkCSRF).Post("/signin", p.signIn)
		r.With(p.checkCSRF).Post("/lang", p.setLang)
		r.Get("/search", p.search)
		r.Get("/payments/return", p.paymentReturn)
		if p.cfg.Signup != nil { // signup.go
			r.Get("/signup", p.signupPage)
			r.With(p.checkCSRF).Post("/signup/code", p.signupCode)
			r.With(p.checkCSRF).Post("/signup", p.signupFinish)
			r.Get("/reset", p.resetPage)
			r.With(p.checkCSRF).Post("/reset/code", p.resetCode)
			r.With(p.checkCSRF).Post("/reset", p.reset)
		}
		r.Group(func(r chi.Router) {
			r.Use(p.requireSignIn, p.checkCSRF)
			r.Post("/signout", p.signOut)
			r.Get("/verify", p.verifyPage)
			r.Post("/verify/send", p.verifySend)
			r.Post("/verify", p.verify)
			if p.cfg.Signup != nil {
				r.Get("/identity", p.identityPage) // signup.go
				r.Post("/identity", p.identity)
			}
			r.Get("/passengers", p.passengers)
			r.Post("/passengers", p.addPassenger)
			r.Post("/passengers/{id}/remove", p.removePassenger)
			r.Post("/preferences", p.savePreference)
			r.Get("/book", p.window)
			r.Post("/book", p.hold)
			r.Post("/book/challenge", p.challenge)
			r.Post("/book/otp", p.challengeOTP)
			r.Post("/queue/enter", p.queueEnter)
			r.Get("/queue", p.queue)
			r.Get("/bookings", p.history)
			r.Get("/bookings/{hold_id}", p.booking)
			r.Post("/bookings/{hold_id}/pay", p.pay)
			r.Post("/bookings/{hold_id}/release", p.release)
			r.Get("/bookings/{hold_id}/ticket", p.ticket)
			r.Get("/bookings/{hold_id}/ticket.pdf", p.ticketPDF)
			r.Get("/bookings/{hold_id}/cancel", p.cancelPage)
			r.Post("/bookings/{hold_id}/cancel", p.cancel)
			r.Get("/wallet", p.wallet)
			r.Post("/wallet/topup", p.topUp)
			r.Get("/appeal", p.appealPage) // appeal.go
			r.Post("/appeal", p.appeal)
			p.tdrRoutes(outer, r) // tdr.go
		})
	})
}

// render writes a page in the site's frame.
func (p *Pages) render(w http.ResponseWriter, r *http.Request, status int, title string, f views.SiteFrame, c templ.Component) {
	s := sessionOf(r)
	f.Login, f.Verified, f.CSRF = s.login, s.Verified, p.csrfToken(r)
	for _, b := range p.cfg.Banners.Live(r.Context(), banner.Site) {
		f.Banners = append(f.Banners, views.SiteBanner{ID: b.ID, Severity: b.Severity, Text: b.Text})
	}
	if f.Path == "" {
		f.Path = r.URL.RequestURI()
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if err := views.SitePage(title, f, c).Render(r.Context(), w); err != nil {
		p.cfg.Log.Error("render page", "path", r.URL.Path, "err", err)
	}
}

// errText is a domain error as the passenger reads it: in English its own
// message, with its details; in Hindi the catalogue's words for its reason
// (err.REASON), else the catalogue's general refusal, never English.
func errText(r *http.Request, err error) string {
	l := langOf(r)
	if l != "hi" {
		if booking.ErrorCode(err) == booking.EINTERNAL {
			return "Internal error. Nothing was changed; please try again."
		}
		return booking.ErrorMessage(err)
	}
	if booking.ErrorCode(err) == booking.EINTERNAL {
		return i18n.Text(l, "err.INTERNAL")
	}
	if k := "err." + booking.ErrorReason(err); i18n.Has(k) {
		return i18n.Text(l, k)
	}
	return i18n.Text(l, "err.GENERIC")
}

// fail answers a domain error on a page: the error's own words for what
// the passenger can act on, the high-demand page for overload, "Internal
// error." (the detail logged) for the rest.
func (p *Pages) fail(w http.ResponseWriter, r *http.Request, title string, err error) {
	switch booking.ErrorCode(err) {
	case booking.EOVERLOADED, booking.EUNAVAIL:
		p.busy(w, r)
		return
	case booking.EINTERNAL:
		p.cfg.Log.Error("page failed", "method", r.Method, "path", r.URL.Path, "err", err)
		p.render(w, r, http.StatusInternalServerError, title, views.SiteFrame{}, views.SiteMessage(title, errText(r, err)))
		return
	case booking.ENOTFOUND:
		p.render(w, r, http.StatusNotFound, title, views.SiteFrame{}, views.SiteMessage(title, errText(r, err)))
		return
	}
	p.render(w, r, http.StatusBadRequest, title, views.SiteFrame{}, views.SiteMessage(title, errText(r, err)))
}

// busyPage is the static high-demand page: rendered once, served without
// any work (English and Hindi on one page, since even the language cookie
// is not read).
var busyPage = func() []byte {
	var b bytes.Buffer
	views.SitePage("Very high demand", views.SiteFrame{}, views.SiteBusy()).Render(views.WithLang(context.Background(), "en"), &b) //nolint:errcheck
	return b.Bytes()
}()

func (p *Pages) busy(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Retry-After", "5")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusServiceUnavailable)
	w.Write(busyPage) //nolint:errcheck
}

// gate bounds the pages in flight and turns a panic into the high-demand
// page: a passenger never sees a stack trace or a blank page.
func (p *Pages) gate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case p.inflight <- struct{}{}:
			defer func() { <-p.inflight }()
		default:
			p.busy(w, r)
			return
		}
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				p.cfg.Log.Error("page panicked", "path", r.URL.Path, "panic", v)
				p.busy(w, r)
			}
		}()
		next.ServeHTTP(w, r)
	})
}

func (p *Pages) home(w http.ResponseWriter, r *http.Request) {
	if sessionOf(r).UserID == 0 {
		http.Redirect(w, r, "/signin", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/search", http.StatusSeeOther)
}
