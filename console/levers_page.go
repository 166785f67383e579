package console

import (
	"cmp"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"tatkal/booking"
	"tatkal/console/levers"
	"tatkal/views"
)

var leverScopes = map[string]string{
	levers.KillSwitch: strings.Join(levers.KillScopes, ", "), levers.HoldWindow: strings.Join(levers.HoldWindowMethods, ", "),
	levers.AdmissionPaused: "global, shard:N", levers.AdmissionRate: "global, shard:N", levers.Route: "gateway/METHOD",
	levers.WindowClosesAt: "shard:N", levers.ShardThrottle: "global, shard:N",
}

// leversPage shows the levers in force and the changes.
// A suggestion's link (suggest.go) pre-fills the form from the query; the
// person still previews and confirms.
func (c *Console) leversPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := views.LeverForm{Name: q.Get("name"), Scope: q.Get("scope"), Value: q.Get("value"), Reason: q.Get("reason"), RevertAfter: q.Get("revert_after")}
	c.renderLevers(w, r, views.LeversPage{Form: f}, http.StatusOK)
}

func (c *Console) renderLevers(w http.ResponseWriter, r *http.Request, p views.LeversPage, status int) {
	u, _ := userFrom(r.Context())
	for _, d := range levers.Defs {
		p.Defs = append(p.Defs, views.LeverDef{Name: d.Name, Title: d.Title, Help: d.Help, Scopes: cmp.Or(leverScopes[d.Name], d.Scopes)})
	}
	vals, err := c.levers.InForce(r.Context())
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	for _, v := range vals {
		p.InForce = append(p.InForce, views.LeverValue{Name: v.Name, Scope: v.Scope, Value: v.Value, UpdatedBy: v.UpdatedBy, UpdatedAt: ist(v.UpdatedAt)})
	}
	changes, err := c.levers.Changes(r.Context(), 50)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	for _, ch := range changes {
		p.Changes = append(p.Changes, changeView(ch))
	}
	p.CanApprove, p.Me = u.Role == Admin, u.Login
	if p.Suggestions, err = c.suggestions(r.Context()); err != nil {
		c.log.Warn("lever suggestions", "err", err) // advice only: the page stands without it
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	c.render(w, r, "Levers", views.ConsoleLevers(p, u.CSRF))
}

func changeView(ch levers.Change) views.LeverChange {
	v := views.LeverChange{ID: ch.ID, Name: ch.Name, Scope: ch.Scope, Old: ch.Old, New: ch.New, Reason: ch.Reason, State: ch.State,
		ProposedBy: ch.ProposedBy, ProposedAt: ist(ch.ProposedAt), ApprovedBy: ch.ApprovedBy, Dangerous: ch.Dangerous}
	if ch.RevertAt != nil && ch.State == "APPLIED" {
		v.RevertAt = ist(*ch.RevertAt)
	}
	return v
}

func leverForm(r *http.Request) (views.LeverForm, levers.Proposal, error) {
	f := views.LeverForm{Name: r.PostFormValue("name"), Scope: strings.TrimSpace(r.PostFormValue("scope")),
		Value: strings.TrimSpace(r.PostFormValue("value")), Reason: r.PostFormValue("reason"), Confirm: r.PostFormValue("confirm"),
		RevertAfter: strings.TrimSpace(r.PostFormValue("revert_after"))}
	p := levers.Proposal{Name: f.Name, Scope: f.Scope, Value: f.Value, Reason: f.Reason, Confirm: f.Confirm}
	if f.RevertAfter != "" {
		d, err := time.ParseDuration(f.RevertAfter)
		if err != nil {
			return f, p, booking.Errorf(booking.EINVALID, "BAD_REVERT", "Give the revert delay like 15m or 1h30m.")
		}
		p.RevertAfter = d
	}
	return f, p, nil
}

func previewView(pv levers.Preview) *views.LeverPreview {
	return &views.LeverPreview{Old: orDefault(pv.Old), New: pv.New, Effect: pv.Effect, ConfirmWord: pv.ConfirmWord, Dangerous: pv.Dangerous, Why: pv.DangerousWhy}
}

func orDefault(v string) string {
	if v == "" {
		return "(default)"
	}
	return v
}

// leverPreview validates the form and shows the effect and the word to type.
func (c *Console) leverPreview(w http.ResponseWriter, r *http.Request) {
	f, p, err := leverForm(r)
	page := views.LeversPage{Form: f}
	if err == nil {
		var pv levers.Preview
		pv, err = c.levers.Preview(r.Context(), p)
		if err == nil {
			page.Preview = previewView(pv)
		}
	}
	if err != nil {
		if booking.ErrorCode(err) == booking.EINTERNAL {
			c.serverError(w, r, err)
			return
		}
		page.Error = userError(err)
		c.renderLevers(w, r, page, http.StatusUnprocessableEntity)
		return
	}
	c.renderLevers(w, r, page, http.StatusOK)
}

// leverPropose records the change: applied now, or waiting for a second admin.
func (c *Console) leverPropose(w http.ResponseWriter, r *http.Request) {
	u, _ := userFrom(r.Context())
	f, p, err := leverForm(r)
	var ch levers.Change
	if err == nil {
		ch, err = c.levers.Propose(r.Context(), u.Actor(), p)
	}
	if err != nil {
		if booking.ErrorCode(err) == booking.EINTERNAL {
			c.serverError(w, r, err)
			return
		}
		page := views.LeversPage{Form: f, Error: userError(err)}
		if pv, perr := c.levers.Preview(r.Context(), p); perr == nil {
			page.Preview = previewView(pv)
		}
		status := http.StatusUnprocessableEntity
		if booking.ErrorCode(err) == booking.EFORBIDDEN {
			status = http.StatusForbidden
		}
		c.renderLevers(w, r, page, status)
		return
	}
	notice := "Change " + strconv.FormatInt(ch.ID, 10) + " applied: " + ch.Name + " " + ch.Scope + " = " + ch.New + "."
	if ch.State == "PENDING" {
		notice = "Change " + strconv.FormatInt(ch.ID, 10) + " waits for a second admin's approval."
	}
	c.redirectNotice(w, r, "/console/levers", notice)
}

func (c *Console) changeAction(w http.ResponseWriter, r *http.Request, approve bool) {
	u, _ := userFrom(r.Context())
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	var ch levers.Change
	if approve {
		ch, err = c.levers.Approve(r.Context(), u.Actor(), id)
	} else {
		ch, err = c.levers.Reject(r.Context(), u.Actor(), id, r.PostFormValue("reason"))
	}
	if err != nil {
		if booking.ErrorCode(err) == booking.EINTERNAL {
			c.serverError(w, r, err)
			return
		}
		status := http.StatusConflict
		if booking.ErrorCode(err) == booking.EFORBIDDEN {
			status = http.StatusForbidden
		}
		c.renderLevers(w, r, views.LeversPage{Error: userError(err)}, status)
		return
	}
	notice := "Change " + strconv.FormatInt(ch.ID, 10) + " is " + ch.State + "."
	c.redirectNotice(w, r, "/console/levers", notice)
}

func (c *Console) leverApprove(w http.ResponseWriter, r *http.Request) { c.changeAction(w, r, true) }
func (c *Console) leverReject(w http.ResponseWriter, r *http.Request)  { c.changeAction(w, r, false) }
