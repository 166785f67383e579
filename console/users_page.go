package console

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"

	"tatkal/booking"
	"tatkal/booking/auth"
	"tatkal/recon"
	"tatkal/views"
)

// The admins' user management pages (/console/users); the rules are
// Users' (users.go).

const grantsShown = 10 // decided admin grants listed under the waiting ones

func userRow(u ConsoleUser) views.UserRow {
	return views.UserRow{Login: u.Login, Name: u.Name, Role: u.Role, FinanceLead: u.FinanceLead, Teams: u.Teams, Disabled: u.Disabled,
		Sessions: u.Sessions, Created: ist(u.CreatedAt)}
}

func grantRow(g Grant, me int64) views.GrantRow {
	what := "existing user → admin"
	if g.NewUser {
		what = "new admin"
	}
	return views.GrantRow{ID: g.ID, Login: g.Login, What: what, Reason: g.Reason, ProposedBy: g.ProposedBy, ProposedAt: ist(g.ProposedAt),
		State: g.State, DecidedBy: g.DecidedBy, DecidedAt: ist(g.DecidedAt), Mine: g.proposedByID == me}
}

// usersPage lists the console users and the admin grants.
func (c *Console) usersPage(w http.ResponseWriter, r *http.Request) {
	c.renderUsers(w, r, views.UsersPage{Form: views.UserForm{Role: Ops}}, http.StatusOK)
}

func (c *Console) renderUsers(w http.ResponseWriter, r *http.Request, p views.UsersPage, status int) {
	ctx := r.Context()
	me, _ := userFrom(ctx)
	users, err := c.users.List(ctx)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	for _, u := range users {
		p.Users = append(p.Users, userRow(u))
	}
	grants, err := c.users.Grants(ctx, grantsShown)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	for _, g := range grants {
		p.Grants = append(p.Grants, grantRow(g, me.ID))
	}
	p.Me, p.Roles, p.Teams, p.MinPassword = me.Login, Roles, recon.Teams(), auth.MinPasswordRunes
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	c.render(w, r, "Console users", views.ConsoleUsers(p, me.CSRF))
}

// userPage shows one user with the forms that change them.
func (c *Console) userPage(w http.ResponseWriter, r *http.Request) {
	c.renderUser(w, r, chi.URLParam(r, "login"), "", http.StatusOK)
}

func (c *Console) renderUser(w http.ResponseWriter, r *http.Request, login, errText string, status int) {
	ctx := r.Context()
	me, _ := userFrom(ctx)
	u, err := c.users.Get(ctx, login)
	if booking.ErrorCode(err) == booking.ENOTFOUND || booking.ErrorCode(err) == booking.EINVALID {
		http.NotFound(w, r)
		return
	}
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	p := views.UserPage{User: userRow(u), Roles: Roles, Teams: recon.Teams(), Self: u.ID == me.ID, AdminOther: u.Role == Admin && u.ID != me.ID,
		Error: errText, MinPassword: auth.MinPasswordRunes}
	grants, err := c.users.Grants(ctx, 0)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	for _, g := range grants {
		if g.Login == u.Login && g.State == "PENDING" {
			row := grantRow(g, me.ID)
			p.Pending = &row
		}
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	c.render(w, r, u.Login, views.ConsoleUser(p, me.CSRF))
}

var errPasswordsDiffer = booking.Errorf(booking.EINVALID, "PASSWORDS_DIFFER", "The two passwords differ; type the same one twice.")

// userAdd adds a user, or proposes a new admin for a second admin's approval.
func (c *Console) userAdd(w http.ResponseWriter, r *http.Request) {
	me, _ := userFrom(r.Context())
	f := views.UserForm{Login: r.PostFormValue("login"), Name: r.PostFormValue("name"), Role: r.PostFormValue("role"),
		Reason: r.PostFormValue("reason"), FinanceLead: r.PostFormValue("finance_lead") != "", Teams: r.PostForm["team"]}
	nu := NewUser{Login: f.Login, Name: f.Name, Role: f.Role, FinanceLead: f.FinanceLead, Teams: f.Teams, Password: r.PostFormValue("password"),
		Reason: f.Reason}
	var err error
	var notice string
	switch {
	case nu.Password != r.PostFormValue("password2"):
		err = errPasswordsDiffer
	case f.Role == Admin:
		var id int64
		if id, err = c.users.ProposeNewAdmin(r.Context(), me.Operator(), nu); err == nil {
			notice = fmt.Sprintf("Admin grant %d for the new user %s waits for a second admin's approval.", id, f.Login)
		}
	default:
		var u ConsoleUser
		if u, err = c.users.Add(r.Context(), me.Operator(), nu); err == nil {
			notice = fmt.Sprintf("Console user %s added (%s).", u.Login, teamsText(roleText(u.Role, u.FinanceLead), u.Teams))
		}
	}
	if err != nil {
		if booking.ErrorCode(err) == booking.EINTERNAL {
			c.serverError(w, r, err)
			return
		}
		c.renderUsers(w, r, views.UsersPage{Form: f, Error: userError(err)}, statusOf(err))
		return
	}
	c.redirectNotice(w, r, "/console/users", notice)
}

// userChange runs one change to the user in the URL and answers with the
// user's page: a notice after a redirect, or the refusal.
func (c *Console) userChange(w http.ResponseWriter, r *http.Request, change func(by Operator, login string) (string, error)) {
	me, _ := userFrom(r.Context())
	login := chi.URLParam(r, "login")
	notice, err := change(me.Operator(), login)
	if err != nil {
		switch booking.ErrorCode(err) {
		case booking.EINTERNAL:
			c.serverError(w, r, err)
		case booking.ENOTFOUND:
			http.NotFound(w, r)
		default:
			c.renderUser(w, r, login, userError(err), statusOf(err))
		}
		return
	}
	c.redirectNotice(w, r, "/console/users/"+login, notice)
}

// userRole changes a role; making an admin is proposed for approval.
func (c *Console) userRole(w http.ResponseWriter, r *http.Request) {
	role, lead, reason, teams := r.PostFormValue("role"), r.PostFormValue("finance_lead") != "", r.PostFormValue("reason"), r.PostForm["team"]
	c.userChange(w, r, func(by Operator, login string) (string, error) {
		if role == Admin {
			u, err := c.users.Get(r.Context(), login)
			if err != nil {
				return "", err
			}
			if u.Role != Admin {
				if lead {
					return "", checkLead(Admin, true)
				}
				id, err := c.users.ProposeAdmin(r.Context(), by, login, reason)
				return fmt.Sprintf("Admin grant %d for %s waits for a second admin's approval.", id, login), err
			}
		}
		err := c.users.SetRole(r.Context(), by, login, role, lead, teams, reason)
		clean, _ := CleanTeams(role, teams)
		return fmt.Sprintf("%s is now %s.", login, teamsText(roleText(role, lead), clean)), err
	})
}

// userDisable disables a user, ending their sessions and tokens.
func (c *Console) userDisable(w http.ResponseWriter, r *http.Request) {
	reason := r.PostFormValue("reason")
	c.userChange(w, r, func(by Operator, login string) (string, error) {
		err := c.users.Disable(r.Context(), by, login, reason)
		return login + " is disabled; their console sessions and API tokens ended.", err
	})
}

// userEnable enables a user; enabling an admin is proposed for approval.
func (c *Console) userEnable(w http.ResponseWriter, r *http.Request) {
	reason := r.PostFormValue("reason")
	c.userChange(w, r, func(by Operator, login string) (string, error) {
		err := c.users.Enable(r.Context(), by, login, reason)
		if booking.ErrorReason(err) == "NEEDS_GRANT" {
			id, err := c.users.ProposeAdmin(r.Context(), by, login, reason)
			return fmt.Sprintf("Admin grant %d to enable %s waits for a second admin's approval.", id, login), err
		}
		return login + " is enabled.", err
	})
}

// userPassword sets a user's password.
func (c *Console) userPassword(w http.ResponseWriter, r *http.Request) {
	pw := r.PostFormValue("password")
	again := r.PostFormValue("password2")
	c.userChange(w, r, func(by Operator, login string) (string, error) {
		if pw != again {
			return "", errPasswordsDiffer
		}
		err := c.users.ResetPassword(r.Context(), by, login, pw)
		return "The password of " + login + " is set; their other console sessions ended.", err
	})
}

// grantAction approves or rejects an admin grant.
func (c *Console) grantAction(w http.ResponseWriter, r *http.Request, approve bool) {
	me, _ := userFrom(r.Context())
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	var g Grant
	if approve {
		g, err = c.users.Approve(r.Context(), me.Operator(), id)
	} else {
		g, err = c.users.Reject(r.Context(), me.Operator(), id, r.PostFormValue("reason"))
	}
	action := map[bool]string{true: "console_user.admin_grant", false: "console_user.admin_reject"}[approve]
	if c.refuse(w, r, action, fmt.Sprintf("admin_grant:%d", id), nil, err) {
		return
	}
	if err != nil {
		c.renderUsers(w, r, views.UsersPage{Form: views.UserForm{Role: Ops}, Error: userError(err)}, statusOf(err))
		return
	}
	notice := fmt.Sprintf("Admin grant %d is %s: %s is an active admin, approved by %s after %s proposed it.", id, g.State, g.Login, g.DecidedBy, g.ProposedBy)
	if !approve {
		notice = fmt.Sprintf("Admin grant %d for %s is %s.", id, g.Login, g.State)
	}
	c.redirectNotice(w, r, "/console/users", notice)
}

func (c *Console) grantApprove(w http.ResponseWriter, r *http.Request) { c.grantAction(w, r, true) }
func (c *Console) grantReject(w http.ResponseWriter, r *http.Request)  { c.grantAction(w, r, false) }
