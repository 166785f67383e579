package console

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"tatkal/booking"
	"tatkal/booking/audit"
	"tatkal/booking/auth"
	"tatkal/booking/db"
	"tatkal/recon"
)

// Console users: who may sign in to the console, and with which role.
// An admin changes them on /console/users (users_page.go), an operator
// with tatkal users (users_cli.go); both go through Users, and every change
// is audited in its own transaction.
//
// Making someone an active admin (a new admin, a promotion, enabling a
// disabled admin) takes two admins on the console: one proposes a grant, a
// different one approves it. For the same reason one admin may not set
// another admin's password (they could then sign in as that admin and
// approve their own grant). The command line is the way in on an empty
// database and the way back when every admin is locked out: whoever runs it
// holds the database's credentials already, so it needs no grant, and it is
// audited as cli:<operating-system user>.

// Operator is who changes console users: a console admin, or an operator
// at the command line (UserID 0, Login cli:NAME).
type Operator struct {
	UserID int64
	Login  string
	// session is the console session in use (SHA-256), kept when its
	// owner sets their own password; nil at the command line.
	session []byte
}

// CLIOperator is the operator running this process at the command line.
func CLIOperator() Operator { return Operator{Login: audit.CLIActor()} }

// Operator is the signed-in user as the one changing console users.
func (u User) Operator() Operator { return Operator{UserID: u.ID, Login: u.Login, session: u.session} }

func (o Operator) onConsole() bool { return o.UserID != 0 }

func (o Operator) via() string {
	if o.onConsole() {
		return "console"
	}
	return "command line"
}

// ConsoleUser is one console user as the user pages and tatkal users list
// them.
type ConsoleUser struct {
	ID          int64
	Login, Name string
	Role        string
	FinanceLead bool
	Teams       []string // a team member's owning teams (role team)
	Disabled    bool
	CreatedAt   time.Time
	Sessions    int // live console sessions
}

// NewUser is a console user to create. Password is the first password
// (auth.CheckNewPassword); Reason is asked when the console grants admin.
type NewUser struct {
	Login, Name, Role string
	FinanceLead       bool
	Teams             []string // role team: the owning teams they work (recon.Teams)
	Password          string
	Reason            string
}

// Grant is a proposal to make Login an active admin.
type Grant struct {
	ID                     int64
	Login, Name            string
	NewUser                bool // the user is created on approval
	Reason                 string
	State                  string // PENDING, APPROVED or REJECTED
	ProposedBy, DecidedBy  string
	ProposedAt, DecidedAt  time.Time
	proposedByID, targetID int64
	passwordHash           string
}

// Users changes console users.
type Users struct {
	pool   *pgxpool.Pool
	params auth.Argon2Params
}

// NewUsers returns the console users' service; passwords are hashed with p.
func NewUsers(pool *pgxpool.Pool, p auth.Argon2Params) *Users {
	return &Users{pool: pool, params: p}
}

var loginRE = regexp.MustCompile(`^[a-z0-9._-]{3,40}$`)

// CleanLogin is login as stored (trimmed, lower case), or a person's error.
func CleanLogin(login string) (string, error) {
	l := strings.ToLower(strings.TrimSpace(login))
	if !loginRE.MatchString(l) {
		return "", booking.Errorf(booking.EINVALID, "BAD_LOGIN",
			"A login is 3 to 40 characters: lower-case letters, digits, dot, underscore or hyphen (%q is not).", audit.CleanText(login, 60))
	}
	return l, nil
}

// CheckRole says whether role is a console role.
func CheckRole(role string) error {
	if !slices.Contains(Roles, role) {
		return booking.Errorf(booking.EINVALID, "BAD_ROLE", "Unknown role %q: choose one of %s.", audit.CleanText(role, 40), strings.Join(Roles, ", "))
	}
	return nil
}

// CleanTeams checks a team member's teams against the known owning teams
// (recon.Teams) and returns them sorted, each once: role team takes at
// least one, every other role none (finance and admin see every team).
func CleanTeams(role string, teams []string) ([]string, error) {
	var out []string
	for _, t := range teams {
		t = strings.TrimSpace(t)
		if t == "" || slices.Contains(out, t) {
			continue
		}
		if !slices.Contains(recon.Teams(), t) {
			return nil, booking.Errorf(booking.EINVALID, "UNKNOWN_TEAM", "Unknown team %q: choose among %s.",
				audit.CleanText(t, 40), strings.Join(recon.Teams(), ", "))
		}
		out = append(out, t)
	}
	slices.Sort(out)
	switch {
	case role == Team && len(out) == 0:
		return nil, booking.Errorf(booking.EINVALID, "NO_TEAM", "A team member works at least one team's exceptions: choose among %s.",
			strings.Join(recon.Teams(), ", "))
	case role != Team && len(out) > 0:
		return nil, booking.Errorf(booking.EINVALID, "TEAMS_NOT_TEAM_ROLE",
			"Only the team role has teams: %s sees every team's exceptions or none.", role)
	}
	if out == nil {
		out = []string{}
	}
	return out, nil
}

func checkLead(role string, lead bool) error {
	if lead && role != Finance {
		return booking.Errorf(booking.EINVALID, "LEAD_NOT_FINANCE", "Only a finance user can be the finance lead.")
	}
	return nil
}

func cleanName(name, login string) (string, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return login, nil
	}
	if len(name) > 80 || audit.CleanText(name, 80) != name {
		return "", booking.Errorf(booking.EINVALID, "BAD_NAME", "A name is up to 80 plain characters.")
	}
	return name, nil
}

func cleanReason(reason string, required bool) (string, error) {
	reason = strings.TrimSpace(reason)
	if reason == "" && !required {
		return "", nil
	}
	if len(reason) < 3 || len(reason) > 500 || audit.CleanText(reason, 500) != reason {
		return "", booking.Errorf(booking.EINVALID, "BAD_REASON", "Say why in 3 to 500 plain characters.")
	}
	return reason, nil
}

// hash checks password against the rules and hashes it.
func (s *Users) hash(login, password string) (string, error) {
	if err := auth.CheckNewPassword(login, password); err != nil {
		return "", booking.Errorf(booking.EINVALID, "BAD_PASSWORD", "Choose another password: %s (at least %d characters, at most %d bytes).",
			err.Error(), auth.MinPasswordRunes, auth.MaxPasswordBytes)
	}
	h, err := auth.HashPassword(password, s.params)
	if err != nil {
		return "", fmt.Errorf("hash password of %s: %w", login, err)
	}
	return h, nil
}

func subject(login string) string { return "console_user:" + login }

var errNeedsGrant = booking.Errorf(booking.EFORBIDDEN, "NEEDS_GRANT",
	"Making someone an active admin takes two admins: propose it, and a second admin approves.")

// Get returns the user with login.
func (s *Users) Get(ctx context.Context, login string) (ConsoleUser, error) {
	l, err := CleanLogin(login)
	if err != nil {
		return ConsoleUser{}, err
	}
	us, err := s.list(ctx, l)
	if err != nil {
		return ConsoleUser{}, err
	}
	if len(us) == 0 {
		return ConsoleUser{}, noSuchUser(l)
	}
	return us[0], nil
}

// List returns every console user, by login.
func (s *Users) List(ctx context.Context) ([]ConsoleUser, error) { return s.list(ctx, "") }

func (s *Users) list(ctx context.Context, login string) ([]ConsoleUser, error) {
	rows, err := s.pool.Query(ctx, `SELECT u.id, u.login, u.name, u.role, u.finance_lead, u.teams, u.disabled, u.created_at,
		(SELECT count(*) FROM console_sessions c WHERE c.user_id = u.id AND c.expires_at > now())::int
		FROM console_users u WHERE $1 = '' OR u.login = $1 ORDER BY u.login`, login)
	if err != nil {
		return nil, fmt.Errorf("list console users: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[ConsoleUser])
}

func noSuchUser(login string) error {
	return booking.Errorf(booking.ENOTFOUND, "NO_SUCH_USER", "No console user %q.", login)
}

// Exists reports whether login is taken (a user, or a waiting admin grant).
func (s *Users) Exists(ctx context.Context, login string) (bool, error) {
	var taken bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM console_users WHERE login = $1)
		OR EXISTS (SELECT 1 FROM console_admin_grants WHERE login = $1 AND state = 'PENDING')`, login).Scan(&taken)
	if err != nil {
		return false, fmt.Errorf("console user %s: %w", login, err)
	}
	return taken, nil
}

func loginTaken(login string) error {
	return booking.Errorf(booking.ECONFLICT, "LOGIN_TAKEN", "The login %q is taken already (a console user, or an admin grant waiting for approval).", login)
}

// lockAdmins locks every active admin, in id order, and returns their ids:
// every change that could leave the console without an admin, or that
// rests on someone being one, takes this lock first, so two of them never
// both count the other as still there.
func lockAdmins(ctx context.Context, tx pgx.Tx) ([]int64, error) {
	rows, err := tx.Query(ctx, `SELECT id FROM console_users WHERE role = 'admin' AND NOT disabled ORDER BY id FOR UPDATE`)
	if err != nil {
		return nil, fmt.Errorf("lock console admins: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// lockUser locks the user with login (after lockAdmins).
func lockUser(ctx context.Context, tx pgx.Tx, login string) (ConsoleUser, error) {
	var u ConsoleUser
	err := tx.QueryRow(ctx, `SELECT id, login, name, role, finance_lead, teams, disabled, created_at FROM console_users WHERE login = $1 FOR UPDATE`,
		login).Scan(&u.ID, &u.Login, &u.Name, &u.Role, &u.FinanceLead, &u.Teams, &u.Disabled, &u.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return u, noSuchUser(login)
	}
	if err != nil {
		return u, fmt.Errorf("lock console user %s: %w", login, err)
	}
	return u, nil
}

// acting checks, inside the change's transaction, that a console operator
// is still an active admin (the routes let only admins in, but a role can
// change between the page and the click).
func acting(by Operator, admins []int64) error {
	if by.onConsole() && !slices.Contains(admins, by.UserID) {
		return booking.Errorf(booking.EFORBIDDEN, "ROLE", "Only an active admin may change console users.")
	}
	return nil
}

// change runs fn in one transaction once the active admins are locked and
// a console operator is found to be one still: every change to console
// users goes through it.
func (s *Users) change(ctx context.Context, by Operator, fn func(tx pgx.Tx, admins []int64) error) error {
	return db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		admins, err := lockAdmins(ctx, tx)
		if err != nil {
			return err
		}
		if err := acting(by, admins); err != nil {
			return err
		}
		return fn(tx, admins)
	})
}

// changeUser is change with the user login locked too.
func (s *Users) changeUser(ctx context.Context, by Operator, login string, fn func(tx pgx.Tx, admins []int64, u ConsoleUser) error) error {
	return s.change(ctx, by, func(tx pgx.Tx, admins []int64) error {
		u, err := lockUser(ctx, tx, login)
		if err != nil {
			return err
		}
		return fn(tx, admins, u)
	})
}

// Add creates a console user. On the console an admin is not created
// this way: ProposeNewAdmin.
func (s *Users) Add(ctx context.Context, by Operator, nu NewUser) (ConsoleUser, error) {
	login, err := CleanLogin(nu.Login)
	if err != nil {
		return ConsoleUser{}, err
	}
	if err := CheckRole(nu.Role); err != nil {
		return ConsoleUser{}, err
	}
	if err := checkLead(nu.Role, nu.FinanceLead); err != nil {
		return ConsoleUser{}, err
	}
	teams, err := CleanTeams(nu.Role, nu.Teams)
	if err != nil {
		return ConsoleUser{}, err
	}
	if nu.Role == Admin && by.onConsole() {
		return ConsoleUser{}, errNeedsGrant
	}
	name, err := cleanName(nu.Name, login)
	if err != nil {
		return ConsoleUser{}, err
	}
	reason, err := cleanReason(nu.Reason, false)
	if err != nil {
		return ConsoleUser{}, err
	}
	hash, err := s.hash(login, nu.Password)
	if err != nil {
		return ConsoleUser{}, err
	}
	u := ConsoleUser{Login: login, Name: name, Role: nu.Role, FinanceLead: nu.FinanceLead, Teams: teams}
	err = s.change(ctx, by, func(tx pgx.Tx, admins []int64) error {
		var pending bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM console_admin_grants WHERE login = $1 AND state = 'PENDING')`, login).Scan(&pending); err != nil {
			return fmt.Errorf("admin grants of %s: %w", login, err)
		}
		if pending {
			return loginTaken(login)
		}
		err := tx.QueryRow(ctx, `INSERT INTO console_users (login, name, role, password_hash, finance_lead, teams) VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (login) DO NOTHING RETURNING id, created_at`, login, name, nu.Role, hash, nu.FinanceLead, teams).Scan(&u.ID, &u.CreatedAt)
		if errors.Is(err, pgx.ErrNoRows) {
			return loginTaken(login)
		}
		if err != nil {
			return fmt.Errorf("add console user %s: %w", login, err)
		}
		return audit.Write(ctx, tx, by.Login, "console_user.add", subject(login), map[string]any{
			"role": nu.Role, "finance_lead": nu.FinanceLead, "teams": teams, "name": name, "reason": reason, "via": by.via()})
	})
	return u, err
}

// SetRole changes a user's role, finance lead flag and teams (role team
// only). Making someone an admin on the console is a grant (ProposeAdmin).
func (s *Users) SetRole(ctx context.Context, by Operator, login, role string, lead bool, teams []string, reason string) error {
	login, err := CleanLogin(login)
	if err != nil {
		return err
	}
	if err := CheckRole(role); err != nil {
		return err
	}
	if err := checkLead(role, lead); err != nil {
		return err
	}
	if teams, err = CleanTeams(role, teams); err != nil {
		return err
	}
	if reason, err = cleanReason(reason, false); err != nil {
		return err
	}
	return s.changeUser(ctx, by, login, func(tx pgx.Tx, admins []int64, u ConsoleUser) error {
		switch {
		case u.Role == role && u.FinanceLead == lead && slices.Equal(u.Teams, teams):
			return booking.Errorf(booking.ECONFLICT, "NO_CHANGE", "%s is %s already.", login, teamsText(roleText(role, lead), teams))
		case by.onConsole() && u.ID == by.UserID:
			return booking.Errorf(booking.EFORBIDDEN, "SELF", "Another admin changes your role, not you.")
		case role == Admin && by.onConsole() && u.Role != Admin:
			return errNeedsGrant
		case u.Role == Admin && role != Admin && !u.Disabled && len(admins) <= 1:
			return lastAdmin(login)
		}
		if _, err := tx.Exec(ctx, `UPDATE console_users SET role = $2, finance_lead = $3, teams = $4 WHERE id = $1`, u.ID, role, lead, teams); err != nil {
			return fmt.Errorf("set role of %s: %w", login, err)
		}
		// Sessions read the role and teams on every request: the change
		// holds from the user's next click.
		return audit.Write(ctx, tx, by.Login, "console_user.role", subject(login), map[string]any{
			"from": roleText(u.Role, u.FinanceLead), "to": roleText(role, lead), "teams_from": u.Teams, "teams_to": teams,
			"reason": reason, "via": by.via()})
	})
}

func roleText(role string, lead bool) string {
	if lead {
		return role + " (finance lead)"
	}
	return role
}

// teamsText adds a team member's teams to their role as people read it.
func teamsText(role string, teams []string) string {
	if len(teams) == 0 {
		return role
	}
	return role + " (" + strings.Join(teams, ", ") + ")"
}

func lastAdmin(login string) error {
	return booking.Errorf(booking.ECONFLICT, "LAST_ADMIN",
		"%s is the last active admin: make another admin first (tatkal users add --role admin), or nobody could manage the console.", login)
}

// Disable stops a user signing in and ends their console sessions and
// personal API tokens at once.
func (s *Users) Disable(ctx context.Context, by Operator, login, reason string) error {
	login, err := CleanLogin(login)
	if err != nil {
		return err
	}
	if reason, err = cleanReason(reason, false); err != nil {
		return err
	}
	return s.changeUser(ctx, by, login, func(tx pgx.Tx, admins []int64, u ConsoleUser) error {
		switch {
		case u.Disabled:
			return booking.Errorf(booking.ECONFLICT, "ALREADY_DISABLED", "%s is disabled already.", login)
		case by.onConsole() && u.ID == by.UserID:
			return booking.Errorf(booking.EFORBIDDEN, "SELF", "Another admin disables you, not you.")
		case u.Role == Admin && len(admins) <= 1:
			return lastAdmin(login)
		}
		if _, err := tx.Exec(ctx, `UPDATE console_users SET disabled = true WHERE id = $1`, u.ID); err != nil {
			return fmt.Errorf("disable %s: %w", login, err)
		}
		// Deleted, not only refused while disabled: enabling the user again
		// must not bring back a session or token from before.
		sessions, err := tx.Exec(ctx, `DELETE FROM console_sessions WHERE user_id = $1`, u.ID)
		if err != nil {
			return fmt.Errorf("end sessions of %s: %w", login, err)
		}
		tokens, err := tx.Exec(ctx, `UPDATE console_api_tokens SET revoked_at = now(), revoked_by = nullif($2, 0)
			WHERE user_id = $1 AND revoked_at IS NULL`, u.ID, by.UserID)
		if err != nil {
			return fmt.Errorf("revoke tokens of %s: %w", login, err)
		}
		return audit.Write(ctx, tx, by.Login, "console_user.disable", subject(login), map[string]any{
			"role": u.Role, "sessions_ended": sessions.RowsAffected(), "tokens_revoked": tokens.RowsAffected(), "reason": reason, "via": by.via()})
	})
}

// Enable lets a disabled user sign in again. On the console, enabling an
// admin is a grant (ProposeAdmin).
func (s *Users) Enable(ctx context.Context, by Operator, login, reason string) error {
	login, err := CleanLogin(login)
	if err != nil {
		return err
	}
	if reason, err = cleanReason(reason, false); err != nil {
		return err
	}
	return s.changeUser(ctx, by, login, func(tx pgx.Tx, admins []int64, u ConsoleUser) error {
		switch {
		case !u.Disabled:
			return booking.Errorf(booking.ECONFLICT, "NOT_DISABLED", "%s is not disabled.", login)
		case u.Role == Admin && by.onConsole():
			return errNeedsGrant
		}
		if _, err := tx.Exec(ctx, `UPDATE console_users SET disabled = false WHERE id = $1`, u.ID); err != nil {
			return fmt.Errorf("enable %s: %w", login, err)
		}
		return audit.Write(ctx, tx, by.Login, "console_user.enable", subject(login), map[string]any{
			"role": u.Role, "reason": reason, "via": by.via()})
	})
}

// ResetPassword sets a user's password and ends their other console
// sessions. On the console an admin sets their own password, never
// another admin's.
func (s *Users) ResetPassword(ctx context.Context, by Operator, login, password string) error {
	login, err := CleanLogin(login)
	if err != nil {
		return err
	}
	hash, err := s.hash(login, password)
	if err != nil {
		return err
	}
	return s.changeUser(ctx, by, login, func(tx pgx.Tx, admins []int64, u ConsoleUser) error {
		if by.onConsole() && u.Role == Admin && u.ID != by.UserID {
			return booking.Errorf(booking.EFORBIDDEN, "ADMIN_PASSWORD", "An admin's password is set by that admin, "+
				"or at the command line (tatkal users reset-password): else one admin could sign in as a second and approve their own grants.")
		}
		if _, err := tx.Exec(ctx, `UPDATE console_users SET password_hash = $2 WHERE id = $1`, u.ID, hash); err != nil {
			return fmt.Errorf("set password of %s: %w", login, err)
		}
		// Whoever knew the old password is signed out; the person setting
		// their own keeps the session they are using.
		sessions, err := tx.Exec(ctx, `DELETE FROM console_sessions WHERE user_id = $1 AND token_hash IS DISTINCT FROM $2`, u.ID, by.session)
		if err != nil {
			return fmt.Errorf("end sessions of %s: %w", login, err)
		}
		return audit.Write(ctx, tx, by.Login, "console_user.password", subject(login), map[string]any{
			"role": u.Role, "sessions_ended": sessions.RowsAffected(), "via": by.via()})
	})
}

// ProposeNewAdmin proposes creating nu as an admin; a second admin
// approves (Approve). It returns the grant's id.
func (s *Users) ProposeNewAdmin(ctx context.Context, by Operator, nu NewUser) (int64, error) {
	login, err := CleanLogin(nu.Login)
	if err != nil {
		return 0, err
	}
	if nu.FinanceLead {
		return 0, checkLead(Admin, true)
	}
	if _, err := CleanTeams(Admin, nu.Teams); err != nil {
		return 0, err
	}
	name, err := cleanName(nu.Name, login)
	if err != nil {
		return 0, err
	}
	reason, err := cleanReason(nu.Reason, true)
	if err != nil {
		return 0, err
	}
	hash, err := s.hash(login, nu.Password)
	if err != nil {
		return 0, err
	}
	return s.propose(ctx, by, Grant{Login: login, Name: name, Reason: reason, NewUser: true, passwordHash: hash})
}

// ProposeAdmin proposes making an existing user an active admin (a
// promotion, or enabling a disabled admin); a second admin approves.
func (s *Users) ProposeAdmin(ctx context.Context, by Operator, login, reason string) (int64, error) {
	login, err := CleanLogin(login)
	if err != nil {
		return 0, err
	}
	if reason, err = cleanReason(reason, true); err != nil {
		return 0, err
	}
	return s.propose(ctx, by, Grant{Login: login, Reason: reason})
}

func (s *Users) propose(ctx context.Context, by Operator, g Grant) (int64, error) {
	if !by.onConsole() {
		return 0, booking.Errorf(booking.EFORBIDDEN, "NO_PERSON", "An admin grant is proposed by a console admin.")
	}
	err := s.change(ctx, by, func(tx pgx.Tx, admins []int64) error {
		var target *int64
		detail := map[string]any{"reason": g.Reason, "new_user": g.NewUser, "via": by.via()}
		if g.NewUser {
			var taken bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM console_users WHERE login = $1)`, g.Login).Scan(&taken); err != nil {
				return fmt.Errorf("console user %s: %w", g.Login, err)
			}
			if taken {
				return loginTaken(g.Login)
			}
		} else {
			u, err := lockUser(ctx, tx, g.Login)
			if err != nil {
				return err
			}
			if u.Role == Admin && !u.Disabled {
				return booking.Errorf(booking.ECONFLICT, "ALREADY_ADMIN", "%s is an active admin already.", g.Login)
			}
			target, g.Name = &u.ID, u.Name
			detail["from"], detail["disabled"] = roleText(u.Role, u.FinanceLead), u.Disabled
		}
		err := tx.QueryRow(ctx, `INSERT INTO console_admin_grants (new_user, user_id, login, name, password_hash, reason, proposed_by)
			VALUES ($1, $2, $3, $4, nullif($5, ''), $6, $7) ON CONFLICT (login) WHERE state = 'PENDING' DO NOTHING RETURNING id`,
			g.NewUser, target, g.Login, g.Name, g.passwordHash, g.Reason, by.UserID).Scan(&g.ID)
		if errors.Is(err, pgx.ErrNoRows) {
			return booking.Errorf(booking.ECONFLICT, "GRANT_PENDING", "An admin grant for %s is waiting for approval already.", g.Login)
		}
		if err != nil {
			return fmt.Errorf("propose admin %s: %w", g.Login, err)
		}
		detail["grant_id"] = g.ID
		return audit.Write(ctx, tx, by.Login, "console_user.admin_propose", subject(g.Login), detail)
	})
	return g.ID, err
}

const grantCols = `g.id, g.login, g.name, g.new_user, g.reason, g.state, p.login, coalesce(d.login, ''), g.proposed_at,
	coalesce(g.decided_at, 'epoch'), g.proposed_by, coalesce(g.user_id, 0), coalesce(g.password_hash, '')`

const grantFrom = ` FROM console_admin_grants g JOIN console_users p ON p.id = g.proposed_by LEFT JOIN console_users d ON d.id = g.decided_by`

func scanGrant(row pgx.Row) (Grant, error) {
	var g Grant
	err := row.Scan(&g.ID, &g.Login, &g.Name, &g.NewUser, &g.Reason, &g.State, &g.ProposedBy, &g.DecidedBy, &g.ProposedAt,
		&g.DecidedAt, &g.proposedByID, &g.targetID, &g.passwordHash)
	if g.DecidedAt.Equal(time.Unix(0, 0)) {
		g.DecidedAt = time.Time{}
	}
	return g, err
}

// Grants returns the waiting admin grants, then the latest decided ones.
func (s *Users) Grants(ctx context.Context, decided int) ([]Grant, error) {
	rows, err := s.pool.Query(ctx, `(SELECT `+grantCols+grantFrom+` WHERE g.state = 'PENDING' ORDER BY g.id)
		UNION ALL (SELECT `+grantCols+grantFrom+` WHERE g.state <> 'PENDING' ORDER BY g.id DESC LIMIT $1)`, decided)
	if err != nil {
		return nil, fmt.Errorf("admin grants: %w", err)
	}
	gs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Grant, error) { return scanGrant(row) })
	if err != nil {
		return nil, fmt.Errorf("admin grants: %w", err)
	}
	return gs, nil
}

// lockGrant locks a waiting grant.
func lockGrant(ctx context.Context, tx pgx.Tx, id int64) (Grant, error) {
	g, err := scanGrant(tx.QueryRow(ctx, `SELECT `+grantCols+grantFrom+` WHERE g.id = $1 FOR UPDATE OF g`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return g, booking.Errorf(booking.ENOTFOUND, "NO_SUCH_GRANT", "No admin grant %d.", id)
	}
	if err != nil {
		return g, fmt.Errorf("admin grant %d: %w", id, err)
	}
	if g.State != "PENDING" {
		return g, booking.Errorf(booking.ECONFLICT, "NOT_PENDING", "Admin grant %d is %s, not waiting for approval.", id, g.State)
	}
	return g, nil
}

// Approve is the second admin's word on grant id: the user becomes an
// active admin, audited with both names. Nobody approves their own grant.
func (s *Users) Approve(ctx context.Context, by Operator, id int64) (Grant, error) {
	if !by.onConsole() {
		return Grant{}, booking.Errorf(booking.EFORBIDDEN, "NO_PERSON", "An admin grant is approved by a second console admin.")
	}
	var g Grant
	err := s.change(ctx, by, func(tx pgx.Tx, admins []int64) error {
		var err error
		if g, err = lockGrant(ctx, tx, id); err != nil {
			return err
		}
		switch {
		case g.proposedByID == by.UserID:
			return booking.Errorf(booking.EFORBIDDEN, "SAME_PERSON", "A second admin must approve admin grant %d: you proposed it.", id)
		case !slices.Contains(admins, g.proposedByID):
			return booking.Errorf(booking.ECONFLICT, "PROPOSER_GONE",
				"%s, who proposed admin grant %d, is no longer an active admin: reject it, and propose it again if it is still wanted.", g.ProposedBy, id)
		}
		detail := map[string]any{"grant_id": id, "proposed_by": g.ProposedBy, "approved_by": by.Login, "reason": g.Reason, "new_user": g.NewUser}
		if g.NewUser {
			err := tx.QueryRow(ctx, `INSERT INTO console_users (login, name, role, password_hash) VALUES ($1, $2, 'admin', $3)
				ON CONFLICT (login) DO NOTHING RETURNING id`, g.Login, g.Name, g.passwordHash).Scan(&g.targetID)
			if errors.Is(err, pgx.ErrNoRows) {
				return booking.Errorf(booking.ECONFLICT, "LOGIN_TAKEN", "The login %q was taken meanwhile: reject admin grant %d.", g.Login, id)
			}
			if err != nil {
				return fmt.Errorf("create admin %s: %w", g.Login, err)
			}
		} else {
			u, err := lockUser(ctx, tx, g.Login) // logins are never renamed nor deleted
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE console_users SET role = 'admin', finance_lead = false, teams = '{}', disabled = false WHERE id = $1`, u.ID); err != nil {
				return fmt.Errorf("make %s admin: %w", g.Login, err)
			}
			detail["from"], detail["disabled"] = roleText(u.Role, u.FinanceLead), u.Disabled
		}
		if _, err := tx.Exec(ctx, `UPDATE console_admin_grants SET state = 'APPROVED', decided_by = $2, decided_at = now(),
			password_hash = NULL, user_id = $3 WHERE id = $1`, id, by.UserID, g.targetID); err != nil {
			return fmt.Errorf("approve admin grant %d: %w", id, err)
		}
		g.State, g.DecidedBy = "APPROVED", by.Login
		return audit.Write(ctx, tx, by.Login, "console_user.admin_grant", subject(g.Login), detail)
	})
	return g, err
}

// Reject turns down a waiting grant (another admin, or its proposer
// withdrawing it).
func (s *Users) Reject(ctx context.Context, by Operator, id int64, reason string) (Grant, error) {
	reason, err := cleanReason(reason, false)
	if err != nil {
		return Grant{}, err
	}
	if !by.onConsole() {
		return Grant{}, booking.Errorf(booking.EFORBIDDEN, "NO_PERSON", "An admin grant is rejected by a console admin.")
	}
	var g Grant
	err = s.change(ctx, by, func(tx pgx.Tx, admins []int64) error {
		var err error
		if g, err = lockGrant(ctx, tx, id); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE console_admin_grants SET state = 'REJECTED', decided_by = $2, decided_at = now(),
			password_hash = NULL WHERE id = $1`, id, by.UserID); err != nil {
			return fmt.Errorf("reject admin grant %d: %w", id, err)
		}
		g.State, g.DecidedBy = "REJECTED", by.Login
		return audit.Write(ctx, tx, by.Login, "console_user.admin_reject", subject(g.Login), map[string]any{
			"grant_id": id, "proposed_by": g.ProposedBy, "reason": reason, "withdrawn": g.proposedByID == by.UserID})
	})
	return g, err
}
