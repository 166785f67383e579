package console

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"tatkal/booking"
	"tatkal/booking/banner"
	"tatkal/views"
)

// The status banners page (booking/banner has the rules): ops and admins
// publish, a second person approves a critical one, anyone of them
// withdraws; every change audited with the person's name.

const bannerTimeLayout = "2006-01-02T15:04" // datetime-local, read in IST

func (c *Console) bannersPage(w http.ResponseWriter, r *http.Request) {
	now := time.Now().In(booking.IST)
	f := views.BannerForm{Severity: banner.Info, Scope: banner.Both, Starts: now.Format(bannerTimeLayout), Ends: now.Add(time.Hour).Format(bannerTimeLayout)}
	c.renderBanners(w, r, views.BannersPage{Form: f}, http.StatusOK)
}

func (c *Console) renderBanners(w http.ResponseWriter, r *http.Request, p views.BannersPage, status int) {
	u, _ := userFrom(r.Context())
	list, err := c.cfg.Banners.List(r.Context(), 50)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	for _, b := range list {
		p.Banners = append(p.Banners, views.BannerRow{ID: b.ID, Text: b.Text, Severity: b.Severity, Scope: b.Scope, State: b.State,
			Starts: ist(b.StartsAt), Ends: ist(b.EndsAt), CreatedBy: b.CreatedBy, ApprovedBy: b.ApprovedBy, WithdrawnBy: b.WithdrawnBy,
			CanApprove: b.State == "PENDING" && b.CreatedByID != u.ID, CanWithdraw: b.State != "WITHDRAWN" && time.Now().Before(b.EndsAt)})
	}
	p.Me = u.Login
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	c.render(w, r, "Status banners", views.ConsoleBanners(p, u.CSRF))
}

func bannerActor(u User) banner.Actor { return banner.Actor{ID: u.ID, Login: u.Login} }

func (c *Console) bannerCreate(w http.ResponseWriter, r *http.Request) {
	u, _ := userFrom(r.Context())
	f := views.BannerForm{Text: r.PostFormValue("text"), Severity: r.PostFormValue("severity"), Scope: r.PostFormValue("scope"),
		Starts: strings.TrimSpace(r.PostFormValue("starts")), Ends: strings.TrimSpace(r.PostFormValue("ends"))}
	in := banner.Input{Text: f.Text, Severity: f.Severity, Scope: f.Scope}
	var err error
	if in.StartsAt, err = time.ParseInLocation(bannerTimeLayout, f.Starts, booking.IST); err != nil {
		err = booking.Errorf(booking.EINVALID, "BAD_TIME", "Give the start as a date and time (IST).")
	} else if in.EndsAt, err = time.ParseInLocation(bannerTimeLayout, f.Ends, booking.IST); err != nil {
		err = booking.Errorf(booking.EINVALID, "BAD_TIME", "Give the end as a date and time (IST).")
	}
	var b banner.Banner
	if err == nil {
		b, err = c.cfg.Banners.Create(r.Context(), bannerActor(u), in)
	}
	if err != nil {
		if booking.ErrorCode(err) == booking.EINTERNAL {
			c.serverError(w, r, err)
			return
		}
		c.renderBanners(w, r, views.BannersPage{Form: f, Error: userError(err)}, http.StatusUnprocessableEntity)
		return
	}
	msg := "Banner " + strconv.FormatInt(b.ID, 10) + " published."
	if b.State == "PENDING" {
		msg = "Banner " + strconv.FormatInt(b.ID, 10) + " is critical: it shows once someone else approves it."
	}
	c.redirectNotice(w, r, "/console/banners", msg)
}

func (c *Console) bannerApprove(w http.ResponseWriter, r *http.Request) {
	c.bannerChange(w, r, "approved", c.cfg.Banners.Approve)
}

func (c *Console) bannerWithdraw(w http.ResponseWriter, r *http.Request) {
	c.bannerChange(w, r, "withdrawn", c.cfg.Banners.Withdraw)
}

func (c *Console) bannerChange(w http.ResponseWriter, r *http.Request, done string, do func(ctx context.Context, by banner.Actor, id int64) error) {
	u, _ := userFrom(r.Context())
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil {
		err = booking.Errorf(booking.ENOTFOUND, "NO_SUCH_BANNER", "No such banner.")
	} else {
		err = do(r.Context(), bannerActor(u), id)
	}
	if err != nil {
		if booking.ErrorCode(err) == booking.EINTERNAL {
			c.serverError(w, r, err)
			return
		}
		c.renderBanners(w, r, views.BannersPage{Error: userError(err)}, http.StatusConflict)
		return
	}
	c.redirectNotice(w, r, "/console/banners", "Banner "+strconv.FormatInt(id, 10)+" "+done+".")
}
