package console_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"tatkal/booking"
	"tatkal/booking/audit"
	"tatkal/booking/auth"
	"tatkal/booking/db"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
	"tatkal/console"
)

// usersCLI runs tatkal users against the database at url, with stdin as
// its standard input (not a terminal: the password is its first line).
func usersCLI(t *testing.T, url, stdin string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := console.UsersCommand(context.Background(), args, strings.NewReader(stdin), &out,
		func(ctx context.Context) (*pgxpool.Pool, error) { return db.Open(ctx, url, 2) })
	return out.String(), err
}

// usersState is every console user (with its password hash, sessions and
// tokens) and the audit log's size: what a refused change must leave alone.
func usersState(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var s string
	if err := pool.QueryRow(context.Background(), `SELECT coalesce(string_agg(concat_ws('|', login, name, role, finance_lead, disabled, password_hash), ',' ORDER BY login), '')
		|| ' sessions ' || (SELECT count(*) FROM console_sessions) || ' live tokens ' || (SELECT count(*) FROM console_api_tokens WHERE revoked_at IS NULL)
		|| ' grants ' || (SELECT count(*) FROM console_admin_grants) || ' audit ' || (SELECT count(*) FROM audit_log) FROM console_users`).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// lastAudit is the newest audit record of action: actor and detail.
func lastAudit(t *testing.T, pool *pgxpool.Pool, action string) (actor, subject, detail string) {
	t.Helper()
	if err := pool.QueryRow(context.Background(), `SELECT actor, subject, detail::text FROM audit_log WHERE action = $1 ORDER BY id DESC LIMIT 1`,
		action).Scan(&actor, &subject, &detail); err != nil {
		t.Fatalf("audit record %s: %v", action, err)
	}
	return actor, subject, detail
}

// On an empty (migrated) database tatkal users makes the first admin from
// a password on standard input, audited as the operating-system user; every
// bad input is refused with a clear error and changes nothing.
func TestUsersCommandMakesTheFirstAdmin(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	out, err := usersCLI(t, env.DatabaseURL, "", "list")
	if err != nil || !strings.Contains(out, "(none: add the first admin") {
		t.Fatalf("list on an empty database: %v\n%s", err, out)
	}
	empty := usersState(t, env.Pool)
	refusals := []struct {
		stdin string
		args  []string
		want  string
		usage bool
	}{
		{"a-long-enough-pass\n", []string{"add", "--login", "asha", "--role", "boss"}, `Unknown role "boss"`, true},
		{"a-long-enough-pass\n", []string{"add", "--login", "asha"}, "Unknown role", true},
		{"a-long-enough-pass\n", []string{"add", "--login", "Asha Rao", "--role", "admin"}, "A login is 3 to 40 characters", true},
		{"a-long-enough-pass\n", []string{"add", "--login", "asha", "--role", "ops", "--finance-lead"}, "Only a finance user can be the finance lead", true},
		{"", []string{"add", "--login", "asha", "--role", "admin", "a-long-enough-pass"}, "the password is never an argument", true},
		{"a-long-enough-pass\n", []string{"add", "--login", "asha", "--role", "admin", "--password", "x"}, "flag provided but not defined", true},
		{"", []string{"add", "--login", "asha", "--role", "admin"}, "no password on standard input", false},
		{"\n", []string{"add", "--login", "asha", "--role", "admin"}, "the password is empty", false},
		{"short\n", []string{"add", "--login", "asha", "--role", "admin"}, "shorter than 12 characters", false},
		{"my-name-is-asha-ok\n", []string{"add", "--login", "asha", "--role", "admin"}, "contains the login", false},
		{"tab\there-is-a-tab\n", []string{"add", "--login", "asha", "--role", "admin"}, "control characters", false},
		{strings.Repeat("x", 257) + "\n", []string{"add", "--login", "asha", "--role", "admin"}, "longer than 256 bytes", false},
		{"", []string{"disable", "--login", "nobody"}, `No console user "nobody"; nothing changed`, false},
		{"", []string{"enable", "--login", "nobody"}, `No console user "nobody"; nothing changed`, false},
		{"a-long-enough-pass\n", []string{"reset-password", "--login", "nobody"}, `No console user "nobody"; nothing changed`, false},
		{"", []string{"promote", "--login", "asha"}, `unknown subcommand "promote"`, true},
		{"", nil, "name a subcommand", true},
	}
	for _, tc := range refusals {
		_, err := usersCLI(t, env.DatabaseURL, tc.stdin, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || errors.Is(err, console.ErrUsage) != tc.usage {
			t.Errorf("users %v: %v; want a refusal saying %q (usage error: %t)", tc.args, err, tc.want, tc.usage)
		}
		if got := usersState(t, env.Pool); got != empty {
			t.Fatalf("users %v changed something: %s, was %s", tc.args, got, empty)
		}
	}

	// The first admin, the password on standard input (CRLF from a
	// Windows editor's file too).
	out, err = usersCLI(t, env.DatabaseURL, "correct horse battery\r\n", "add", "--login", "Asha", "--role", "admin", "--name", "Asha Rao")
	if err != nil || !strings.Contains(out, "console user asha added: admin") {
		t.Fatalf("add the first admin: %v\n%s", err, out)
	}
	var hash, role, name string
	if err := env.Pool.QueryRow(ctx, `SELECT password_hash, role, name FROM console_users WHERE login = 'asha' AND NOT disabled`).Scan(&hash, &role, &name); err != nil {
		t.Fatal(err)
	}
	if ok, err := auth.CheckPassword(hash, "correct horse battery"); !ok || err != nil || role != "admin" || name != "Asha Rao" {
		t.Fatalf("asha: role %s, name %q, password matches %t (%v)", role, name, ok, err)
	}
	actor, subject, detail := lastAudit(t, env.Pool, "console_user.add")
	if actor != audit.CLIActor() || !strings.HasPrefix(actor, "cli:") || subject != "console_user:asha" ||
		!strings.Contains(detail, `"role": "admin"`) || !strings.Contains(detail, `"via": "command line"`) {
		t.Fatalf("audit of the first admin: %s %s %s; want the operating-system user (%s)", actor, subject, detail, audit.CLIActor())
	}

	// Again: the login is taken; nothing changes, and no password is asked.
	one := usersState(t, env.Pool)
	if _, err := usersCLI(t, env.DatabaseURL, "", "add", "--login", "asha", "--role", "ops"); err == nil || !strings.Contains(err.Error(), `The login "asha" is taken`) {
		t.Fatalf("add asha again: %v", err)
	}
	// The last admin is not disabled: nobody could manage the console.
	if _, err := usersCLI(t, env.DatabaseURL, "", "disable", "--login", "asha"); err == nil || !strings.Contains(err.Error(), "asha is the last active admin") {
		t.Fatalf("disable the last admin: %v", err)
	}
	if got := usersState(t, env.Pool); got != one {
		t.Fatalf("a refusal changed something: %s, was %s", got, one)
	}
	out, err = usersCLI(t, env.DatabaseURL, "", "list")
	if err != nil || !strings.Contains(out, "asha   admin  active  0") {
		t.Fatalf("list: %v\n%s", err, out)
	}
}

// tatkal users disable ends the user's console sessions and API tokens at
// once; enabling them again brings neither back; reset-password signs them
// out and the new password works, the old one not.
func TestUsersCommandEndsSessions(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{})
	ops := newBrowser(t, s.Server.URL)
	ops.login("ops1")
	admin := newBrowser(t, s.Server.URL)
	admin.login("admin1")
	tok := admin.newToken("ops1", "ops1 script")
	signedIn := func(b *browser) bool {
		t.Helper()
		code, _, _ := b.get("/console/shards")
		return code == http.StatusOK
	}
	tokenWorks := func() bool {
		t.Helper()
		code, _ := api(t, s.Server.URL, "GET", "/v1/admin/levers", tok, nil)
		return code == http.StatusOK
	}
	if !signedIn(ops) || !tokenWorks() {
		t.Fatal("ops1 is not signed in, or the token does not work, before the change")
	}
	out, err := usersCLI(t, s.DatabaseURL, "", "disable", "--login", "ops1", "--reason", "left the team")
	if err != nil || !strings.Contains(out, "ops1 is disabled") {
		t.Fatalf("disable: %v\n%s", err, out)
	}
	if signedIn(ops) || tokenWorks() {
		t.Fatal("ops1's session or token still works after disable")
	}
	actor, _, detail := lastAudit(t, s.Pool, "console_user.disable")
	if actor != audit.CLIActor() || !strings.Contains(detail, `"sessions_ended": 1`) || !strings.Contains(detail, `"tokens_revoked": 1`) ||
		!strings.Contains(detail, "left the team") {
		t.Fatalf("audit of disable: %s %s", actor, detail)
	}
	before := usersState(t, s.Pool)
	if _, err := usersCLI(t, s.DatabaseURL, "", "disable", "--login", "ops1"); err == nil || !strings.Contains(err.Error(), "disabled already") {
		t.Fatalf("disable twice: %v", err)
	}
	if got := usersState(t, s.Pool); got != before {
		t.Fatalf("disabling twice changed something: %s", got)
	}
	if _, err := usersCLI(t, s.DatabaseURL, "", "enable", "--login", "ops1"); err != nil {
		t.Fatal(err)
	}
	// The session and the token from before stay ended.
	if signedIn(ops) || tokenWorks() {
		t.Fatal("enabling ops1 brought an old session or token back")
	}
	ops.login("ops1")
	if !signedIn(ops) {
		t.Fatal("ops1 cannot sign in again after enable")
	}

	if out, err := usersCLI(t, s.DatabaseURL, "a-brand-new-password\n", "reset-password", "--login", "ops1"); err != nil || !strings.Contains(out, "is set") {
		t.Fatalf("reset-password: %v\n%s", err, out)
	}
	if signedIn(ops) {
		t.Fatal("ops1 is still signed in after a password reset")
	}
	if code := loginWith(t, s.Server.URL, "ops1", password); code != http.StatusUnauthorized {
		t.Fatalf("the old password after reset: %d, want 401", code)
	}
	if code := loginWith(t, s.Server.URL, "ops1", "a-brand-new-password"); code != http.StatusSeeOther {
		t.Fatalf("the new password: %d, want 303", code)
	}
	if actor, _, _ := lastAudit(t, s.Pool, "console_user.password"); actor != audit.CLIActor() {
		t.Fatalf("audit of reset-password by %s", actor)
	}
}

// loginWith signs in with a password in a new browser and returns the
// answer's status.
func loginWith(t *testing.T, base, login, pw string) int {
	t.Helper()
	return signInWith(newBrowser(t, base), login, pw)
}

// signInWith signs b in with a password and returns the answer's status.
func signInWith(b *browser, login, pw string) int {
	t := b.t
	t.Helper()
	_, body, _ := b.get("/console/login")
	m := csrfRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("login page has no csrf token:\n%.500s", body)
	}
	code, _, h := b.post("/console/login", url.Values{"csrf": {m[1]}, "login": {login}, "password": {pw}})
	if code == http.StatusSeeOther {
		b.get(h.Get("Location")) // the page's CSRF token
	}
	return code
}

// grantID is the waiting admin grant for login.
func grantID(t *testing.T, pool *pgxpool.Pool, login string) int64 {
	t.Helper()
	var id int64
	if err := pool.QueryRow(context.Background(), `SELECT id FROM console_admin_grants WHERE login = $1 AND state = 'PENDING'`, login).Scan(&id); err != nil {
		t.Fatalf("waiting admin grant for %s: %v", login, err)
	}
	return id
}

// The user pages: admins only, CSRF-checked; one admin adds, disables,
// changes roles and sets passwords, but making an active admin takes a
// second admin, every change audited with the person's login (both for a
// grant).
func TestUserAdminPages(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{})
	ctx := context.Background()
	admin1, admin2 := newBrowser(t, s.Server.URL), newBrowser(t, s.Server.URL)
	admin1.login("admin1")
	admin2.login("admin2")
	add := func(b *browser, login, role, pw, reason string) (int, string) {
		t.Helper()
		code, body, _ := b.post("/console/users", url.Values{"login": {login}, "name": {"Name of " + login}, "role": {role},
			"password": {pw}, "password2": {pw}, "reason": {reason}})
		return code, body
	}

	// Not an admin: 403, and nothing changes.
	ops := newBrowser(t, s.Server.URL)
	ops.login("ops1")
	before := usersState(t, s.Pool)
	if code, _, _ := ops.get("/console/users"); code != http.StatusForbidden {
		t.Fatalf("ops opens the users page: %d, want 403", code)
	}
	if code, _ := add(ops, "sneaky", "admin", "a-long-enough-pass", "let me in"); code != http.StatusForbidden {
		t.Fatalf("ops adds a user: %d, want 403", code)
	}
	if code, _, _ := ops.post("/console/users/admin1/password", url.Values{"password": {"a-long-enough-pass"}, "password2": {"a-long-enough-pass"}}); code != http.StatusForbidden {
		t.Fatalf("ops sets an admin's password: %d, want 403", code)
	}
	// No CSRF token: refused.
	if code, _, _ := admin1.post("/console/users", url.Values{"csrf": {"forged"}, "login": {"forged"}, "role": {"ops"},
		"password": {"a-long-enough-pass"}, "password2": {"a-long-enough-pass"}}); code != http.StatusForbidden {
		t.Fatalf("a forged form: %d, want 403", code)
	}
	// Bad input: a clear error on the page, nothing changed.
	for _, tc := range []struct {
		form url.Values
		want string
	}{
		{url.Values{"login": {"meera"}, "role": {"ops"}, "password": {"a-long-enough-pass"}, "password2": {"a-long-enough-pazz"}}, "The two passwords differ"},
		{url.Values{"login": {"meera"}, "role": {"boss"}, "password": {"a-long-enough-pass"}, "password2": {"a-long-enough-pass"}}, "Unknown role"},
		{url.Values{"login": {"meera"}, "role": {"ops"}, "password": {""}, "password2": {""}}, "the password is empty"},
		{url.Values{"login": {"admin2"}, "role": {"ops"}, "password": {"a-long-enough-pass"}, "password2": {"a-long-enough-pass"}}, "is taken already"},
		{url.Values{"login": {"x"}, "role": {"ops"}, "password": {"a-long-enough-pass"}, "password2": {"a-long-enough-pass"}}, "A login is 3 to 40"},
		{url.Values{"login": {"meera"}, "role": {"admin"}, "password": {"a-long-enough-pass"}, "password2": {"a-long-enough-pass"}}, "Say why"},
	} {
		code, body, _ := admin1.post("/console/users", tc.form)
		if code < 400 || code >= 500 || !strings.Contains(body, tc.want) {
			t.Errorf("add %v: %d; want a 4xx saying %q\n%.300s", tc.form, code, tc.want, body)
		}
	}
	if code, _, _ := admin1.post("/console/users/nobody/disable", nil); code != http.StatusNotFound {
		t.Errorf("disable an unknown login: %d, want 404", code)
	}
	if got := usersState(t, s.Pool); got != before {
		t.Fatalf("refused forms changed something: %s\nwas %s", got, before)
	}

	// One admin adds a user.
	if code, body := add(admin1, "meera", "fraud", "first-pass-for-m", ""); code != http.StatusSeeOther {
		t.Fatalf("add meera: %d\n%.500s", code, body)
	}
	if actor, subject, _ := lastAudit(t, s.Pool, "console_user.add"); actor != "admin1" || subject != "console_user:meera" {
		t.Fatalf("audit of the add: %s %s", actor, subject)
	}
	meera := newBrowser(t, s.Server.URL)
	if code := signInWith(meera, "meera", "first-pass-for-m"); code != http.StatusSeeOther {
		t.Fatalf("meera signs in: %d", code)
	}
	if code, _, _ := meera.get("/console/fraud"); code != http.StatusOK {
		t.Fatalf("meera (fraud) opens the fraud page: %d", code)
	}
	// ... changes a role; the user's open session has the new role at once.
	if code, body, _ := admin1.post("/console/users/meera/role", url.Values{"role": {"finance"}, "finance_lead": {"1"}}); code != http.StatusSeeOther {
		t.Fatalf("meera to finance lead: %d\n%.500s", code, body)
	}
	var role string
	var lead bool
	s.Pool.QueryRow(ctx, `SELECT role, finance_lead FROM console_users WHERE login = 'meera'`).Scan(&role, &lead) //nolint:errcheck
	if role != "finance" || !lead {
		t.Fatalf("meera is %s (lead %t)", role, lead)
	}
	if actor, _, detail := lastAudit(t, s.Pool, "console_user.role"); actor != "admin1" || !strings.Contains(detail, `"from": "fraud"`) ||
		!strings.Contains(detail, `"to": "finance (finance lead)"`) {
		t.Fatalf("audit of the role change: %s %s", actor, detail)
	}
	if code, _, _ := meera.get("/console/fraud"); code != http.StatusForbidden {
		t.Fatalf("meera (finance now) opens the fraud page: %d, want 403 at once", code)
	}

	// A new admin: proposed by admin1, not created until a second admin approves.
	if code, body := add(admin1, "carol", "admin", "first-pass-for-c", "second on-call admin"); code != http.StatusSeeOther {
		t.Fatalf("propose carol: %d\n%.500s", code, body)
	}
	id := grantID(t, s.Pool, "carol")
	if code := loginWith(t, s.Server.URL, "carol", "first-pass-for-c"); code != http.StatusUnauthorized {
		t.Fatalf("carol signs in before approval: %d, want 401", code)
	}
	_, page, _ := admin1.get("/console/users")
	if !strings.Contains(page, fmt.Sprintf(`data-testid="grant-mine-%d"`, id)) || strings.Contains(page, fmt.Sprintf(`data-testid="approve-grant-%d"`, id)) {
		t.Fatalf("the proposer is offered an approval of their own grant:\n%.3000s", page)
	}
	// Nobody approves their own grant, even by posting the form.
	code, body, _ := admin1.post(fmt.Sprintf("/console/user-grants/%d/approve", id), nil)
	if code != http.StatusForbidden || !strings.Contains(body, "A second admin must approve") {
		t.Fatalf("admin1 approves their own grant: %d\n%.500s", code, body)
	}
	if grantID(t, s.Pool, "carol") != id {
		t.Fatal("the grant is no longer waiting after a self-approval")
	}
	if code, body, _ = admin2.post(fmt.Sprintf("/console/user-grants/%d/approve", id), nil); code != http.StatusSeeOther {
		t.Fatalf("admin2 approves: %d\n%.500s", code, body)
	}
	actor, subject, detail := lastAudit(t, s.Pool, "console_user.admin_grant")
	if actor != "admin2" || subject != "console_user:carol" || !strings.Contains(detail, `"proposed_by": "admin1"`) || !strings.Contains(detail, `"approved_by": "admin2"`) ||
		!strings.Contains(detail, "second on-call admin") {
		t.Fatalf("audit of the grant: %s %s %s", actor, subject, detail)
	}
	carol := newBrowser(t, s.Server.URL)
	if code := signInWith(carol, "carol", "first-pass-for-c"); code != http.StatusSeeOther {
		t.Fatalf("carol signs in after approval: %d", code)
	}
	if code, _, _ := carol.get("/console/users"); code != http.StatusOK {
		t.Fatalf("carol opens the users page: %d", code)
	}

	// A promotion by the role form is a grant too; its proposer may
	// withdraw it.
	if code, body, _ = admin1.post("/console/users/fraud1/role", url.Values{"role": {"admin"}, "reason": {"covering fraud and admin"}}); code != http.StatusSeeOther {
		t.Fatalf("propose fraud1: %d\n%.500s", code, body)
	}
	id = grantID(t, s.Pool, "fraud1")
	if code, _, _ = admin1.post(fmt.Sprintf("/console/user-grants/%d/reject", id), nil); code != http.StatusSeeOther {
		t.Fatalf("withdraw: %d", code)
	}
	s.Pool.QueryRow(ctx, `SELECT role FROM console_users WHERE login = 'fraud1'`).Scan(&role) //nolint:errcheck
	if role != "fraud" {
		t.Fatalf("fraud1 is %s after a withdrawn grant", role)
	}
	// A grant whose proposer is no longer an admin is not approved.
	if code, _, _ = admin1.post("/console/users/fraud1/role", url.Values{"role": {"admin"}, "reason": {"again, for the weekend"}}); code != http.StatusSeeOther {
		t.Fatal("propose fraud1 again")
	}
	id = grantID(t, s.Pool, "fraud1")
	if code, _, _ = admin2.post("/console/users/admin1/role", url.Values{"role": {"ops"}}); code != http.StatusSeeOther {
		t.Fatal("admin2 makes admin1 ops")
	}
	code, body, _ = admin2.post(fmt.Sprintf("/console/user-grants/%d/approve", id), nil)
	if code != http.StatusForbidden && code != http.StatusConflict || !strings.Contains(body, "is no longer an active admin") {
		t.Fatalf("approve a grant whose proposer was demoted: %d\n%.500s", code, body)
	}
	if code, _, _ = admin1.get("/console/users"); code != http.StatusForbidden {
		t.Fatalf("admin1, now ops, opens the users page: %d, want 403 at once", code)
	}

	// One admin may not set another admin's password, nor their own role,
	// nor disable themselves.
	var hash string
	s.Pool.QueryRow(ctx, `SELECT password_hash FROM console_users WHERE login = 'carol'`).Scan(&hash) //nolint:errcheck
	code, body, _ = admin2.post("/console/users/carol/password", url.Values{"password": {"admin2-knows-this"}, "password2": {"admin2-knows-this"}})
	if code != http.StatusForbidden || !strings.Contains(body, "set by that admin") {
		t.Fatalf("admin2 sets carol's password: %d\n%.500s", code, body)
	}
	var after string
	s.Pool.QueryRow(ctx, `SELECT password_hash FROM console_users WHERE login = 'carol'`).Scan(&after) //nolint:errcheck
	if after != hash {
		t.Fatal("carol's password changed")
	}
	if code, _, _ = admin2.post("/console/users/admin2/disable", nil); code != http.StatusForbidden {
		t.Fatalf("admin2 disables themselves: %d, want 403", code)
	}
	if code, _, _ = admin2.post("/console/users/admin2/role", url.Values{"role": {"ops"}}); code != http.StatusForbidden {
		t.Fatalf("admin2 demotes themselves: %d, want 403", code)
	}
	// Their own password they set; their session stays, others end.
	if code, body, _ = admin2.post("/console/users/admin2/password", url.Values{"password": {"new-pass-for-a2"}, "password2": {"new-pass-for-a2"}}); code != http.StatusSeeOther {
		t.Fatalf("admin2 sets their own password: %d\n%.500s", code, body)
	}
	if code, _, _ = admin2.get("/console/users"); code != http.StatusOK {
		t.Fatalf("admin2 after setting their own password: %d, want still signed in", code)
	}
	// Another's (not an admin's) password, one admin; their session ends.
	if code, _, _ = admin2.post("/console/users/meera/password", url.Values{"password": {"second-pass-for-m"}, "password2": {"second-pass-for-m"}}); code != http.StatusSeeOther {
		t.Fatal("admin2 sets meera's password")
	}
	if code := loginWith(t, s.Server.URL, "meera", "second-pass-for-m"); code != http.StatusSeeOther {
		t.Fatal("meera's new password does not work")
	}

	// Disabling an admin is one admin's; enabling one is a grant.
	if code, _, _ = admin2.post("/console/users/carol/disable", url.Values{"reason": {"on leave"}}); code != http.StatusSeeOther {
		t.Fatal("admin2 disables carol")
	}
	if code, _, _ := carol.get("/console/users"); code == http.StatusOK {
		t.Fatal("carol's session survived her being disabled")
	}
	if code, _, _ = admin2.post("/console/users/carol/enable", url.Values{"reason": {"back from leave"}}); code != http.StatusSeeOther {
		t.Fatal("admin2 proposes enabling carol")
	}
	var disabled bool
	s.Pool.QueryRow(ctx, `SELECT disabled FROM console_users WHERE login = 'carol'`).Scan(&disabled) //nolint:errcheck
	if !disabled {
		t.Fatal("one admin enabled another admin without a second admin")
	}
	grantID(t, s.Pool, "carol")
	// The last active admin stays.
	if code, body, _ = admin2.post("/console/users/admin2/disable", nil); code != http.StatusForbidden {
		t.Fatalf("disable the last admin: %d\n%.300s", code, body)
	}
}

// Two changes that would each leave one admin, at once, never leave none:
// both wait for the admins' lock (held here until both wait), and the
// second sees the first.
func TestLastAdminUnderConcurrentDisables(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	if _, err := console.SeedUsers(ctx, env.Pool, []console.DemoUser{{Login: "admin1", Password: password, Role: console.Admin},
		{Login: "admin2", Password: password, Role: console.Admin}}, auth.Argon2Params{MemoryKiB: 64, Time: 1, Threads: 1}); err != nil {
		t.Fatal(err)
	}
	users := console.NewUsers(env.Pool, auth.Argon2Params{MemoryKiB: 64, Time: 1, Threads: 1})
	tx, err := env.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	if _, err := tx.Exec(ctx, `SELECT id FROM console_users WHERE role = 'admin' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	for _, login := range []string{"admin1", "admin2"} {
		go func() { errs <- users.Disable(ctx, console.CLIOperator(), login, "") }()
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var waiting int
		if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of the two disables wait for the admins' lock", waiting)
		}
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	var refused int
	for range 2 {
		err := <-errs
		switch {
		case err == nil:
		case booking.ErrorReason(err) == "LAST_ADMIN":
			refused++
		default:
			t.Fatalf("disable: %v", err)
		}
	}
	var active int
	if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM console_users WHERE role = 'admin' AND NOT disabled`).Scan(&active); err != nil {
		t.Fatal(err)
	}
	if active != 1 || refused != 1 {
		t.Fatalf("%d active admins, %d refusals; want 1 and 1", active, refused)
	}
}
