package views

import "strings"

// UsersPage is the admins' page of console users: who may sign in with
// which role, the admin grants waiting for a second admin, and the form
// that adds a user.
type UsersPage struct {
	Me     string // the signed-in admin's login
	Users  []UserRow
	Grants []GrantRow // waiting ones first, then the latest decided
	Form   UserForm
	Roles  []string
	Teams  []string // the owning teams a team member may work
	Error  string
	// MinPassword is the shortest password the rules take (characters).
	MinPassword int
}

// UserRow is one console user.
type UserRow struct {
	Login, Name, Role string
	FinanceLead       bool
	Teams             []string // a team member's teams
	Disabled          bool
	Sessions          int
	Created           string
}

// RoleText is the role as people read it.
func (u UserRow) RoleText() string {
	switch {
	case u.FinanceLead:
		return u.Role + " (finance lead)"
	case len(u.Teams) > 0:
		return u.Role + " (" + strings.Join(u.Teams, ", ") + ")"
	}
	return u.Role
}

// GrantRow is one proposal to make someone an active admin.
type GrantRow struct {
	ID                     int64
	Login, What, Reason    string
	ProposedBy, ProposedAt string
	State                  string
	DecidedBy, DecidedAt   string
	// Mine: the signed-in admin proposed it, so only a withdrawal is offered.
	Mine bool
}

// UserForm is the add form's fields as sent (never the password).
type UserForm struct {
	Login, Name, Role, Reason string
	FinanceLead               bool
	Teams                     []string
}

// UserPage is one console user with the forms that change them.
type UserPage struct {
	User  UserRow
	Roles []string
	Teams []string // the owning teams a team member may work
	// Self: the signed-in admin's own account (role and disabling are
	// another admin's to change). AdminOther: another admin, whose
	// password only they, or the command line, set.
	Self, AdminOther bool
	// Pending is a waiting admin grant for this user, if any.
	Pending     *GrantRow
	Error       string
	MinPassword int
}
