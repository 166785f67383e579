package console_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"tatkal/booking"
	"tatkal/booking/auth"
	"tatkal/booking/lab/teststack"
	"tatkal/console"
	"tatkal/recon"
)

// teamUsers are team members: treasury's and reservations' people.
var teamUsers = []console.DemoUser{
	{Login: "treasury1", Password: password, Role: console.Team, Teams: []string{"treasury"}},
	{Login: "treasury2", Password: password, Role: console.Team, Teams: []string{"treasury"}},
	{Login: "resv1", Password: password, Role: console.Team, Teams: []string{"reservations"}},
}

// ownerOf is the owning team of an exception now.
func ownerOf(t *testing.T, s *teststack.Stack, id string) string {
	t.Helper()
	var owner string
	teststack.Must(t, s.Pool.QueryRow(context.Background(), `SELECT owner_team FROM reconciliation_exceptions WHERE id = $1`, id).Scan(&owner), "owner")
	return owner
}

// A treasury person signs in, sees only treasury's exceptions, works one
// (takes it, proposes its write-off, which their colleague approves) and
// is refused, with a 403 that changes nothing, on a reservations one,
// alone or among others in a bulk action; no finance-only page opens for
// them. Finance keeps seeing every team, and recon refuses the other
// team's exception under its lock (recon.ForTeams) as well.
func TestTeamMemberWorksOnlyTheirTeamsExceptions(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{Routes: teststack.QuietRoutes()})
	ctx := context.Background()
	if _, err := console.SeedUsers(ctx, s.Pool, teamUsers, auth.Argon2Params{MemoryKiB: 64, Time: 1, Threads: 1}); err != nil {
		t.Fatal(err)
	}
	seedWorklistDay(t, s)
	clerk := newBrowser(t, s.Server.URL)
	clerk.login("finance1")
	if code, body, _ := clerk.post("/console/finance/runs", url.Values{"gateway": {"swiftpay"}, "date": {financeDay}}); code != http.StatusSeeOther {
		t.Fatalf("run: %d\n%.1000s", code, body)
	}
	ex := exceptionsOf(t, s)
	payout, resv, settle := ex[recon.PayoutMismatch], ex["swp_orphan_1"], ex["swp_orphan_2"]
	if ownerOf(t, s, payout) != "treasury" {
		t.Fatalf("the payout mismatch is %s's", ownerOf(t, s, payout))
	}
	// Finance hands one orphan line to reservations.
	if code, _, _ := clerk.post("/console/finance/exceptions/"+resv+"/team", url.Values{"team": {"reservations"}, "note": {"a PNR of the core's?"}}); code != http.StatusSeeOther {
		t.Fatalf("hand to reservations: %d", code)
	}

	tr := newBrowser(t, s.Server.URL)
	tr.login("treasury1")
	// Their home is their team's list; finance's tabs are not offered.
	code, body, _ := tr.get("/console/")
	if code != http.StatusSeeOther {
		t.Fatalf("home: %d", code)
	}
	code, body, _ = tr.get("/console/finance/exceptions?state=UNRESOLVED")
	if code != 200 || !strings.Contains(body, `data-testid="my-teams"`) || strings.Contains(body, `data-testid="finance-tabs"`) ||
		strings.Contains(body, `href="/console/finance/month"`) {
		t.Fatalf("treasury's list: %d\n%.3000s", code, body)
	}
	ids := listed(body)
	if len(ids) == 0 || !slices.Contains(ids, payout) {
		t.Fatalf("treasury's list misses the payout mismatch: %v", ids)
	}
	for _, id := range ids {
		if o := ownerOf(t, s, id); o != "treasury" {
			t.Fatalf("treasury's list shows %s's exception %s", o, id)
		}
	}
	if strings.Contains(body, "swp_orphan_1") {
		t.Fatal("treasury's list names a reservations exception's reference")
	}
	// Asking for another team's list is refused, and shows none of it.
	if code, body, _ := tr.get("/console/finance/exceptions?owner=reservations"); code != http.StatusBadRequest || len(listed(body)) != 0 ||
		!strings.Contains(body, "you work the exceptions of treasury only") {
		t.Fatalf("treasury asks for reservations' list: %d %v", code, listed(body))
	}
	// The export is theirs too.
	code, csvBody, _ := tr.get("/console/finance/exceptions.csv?state=UNRESOLVED")
	if code != 200 || !strings.Contains(csvBody, payout) || strings.Contains(csvBody, resv) || strings.Contains(csvBody, settle) {
		t.Fatalf("treasury's export: %d\n%s", code, csvBody)
	}

	// Their own exception: the page, taking it, proposing its write-off.
	if code, body, _ := tr.get("/console/finance/exceptions/" + payout); code != 200 || !strings.Contains(body, `data-testid="form-assign"`) {
		t.Fatalf("treasury's exception page: %d", code)
	}
	if code, _, _ := tr.post("/console/finance/exceptions/"+payout+"/assign", url.Values{"assignee": {"finance1"}}); code != http.StatusForbidden {
		t.Fatalf("a team member assigns to someone else: %d", code)
	}
	if code, body, _ := tr.post("/console/finance/exceptions/"+payout+"/assign", nil); code != http.StatusSeeOther {
		t.Fatalf("treasury takes its exception: %d\n%.2000s", code, body)
	}
	if st, who, _ := exceptionState(t, s, payout); st != recon.StateInvestigating || who != "treasury1" {
		t.Fatalf("after treasury1 took it: %s %s", st, who)
	}

	// Another team's exception: its page and every action are refused
	// (403), the refusal audited, the exception unchanged.
	before, hist := exceptionSnapshot(t, s, resv), historyCount(t, s, resv)
	if code, body, _ := tr.get("/console/finance/exceptions/" + resv); code != http.StatusForbidden ||
		!strings.Contains(body, `data-testid="not-your-team"`) || !strings.Contains(body, "belongs to reservations") || strings.Contains(body, "swp_orphan_1") {
		t.Fatalf("treasury opens a reservations exception: %d\n%.2000s", code, body)
	}
	for _, a := range []struct {
		action string
		form   url.Values
	}{
		{"assign", nil},
		{"resolve", url.Values{"code": {"NOT_OUR_LINE"}, "note": {"not ours"}}},
		{"writeoff", url.Values{"note": {"small"}}},
		{"note", url.Values{"note": {"looking"}}},
		{"team", url.Values{"team": {"treasury"}}},
		{"ask", nil},
		{"refund", url.Values{"note": {"give it back"}}},
	} {
		code, body, _ := tr.post("/console/finance/exceptions/"+resv+"/"+a.action, a.form)
		if code != http.StatusForbidden || !strings.Contains(body, "belongs to reservations") {
			t.Fatalf("treasury's %s on a reservations exception: %d\n%.1500s", a.action, code, body)
		}
	}
	if after := exceptionSnapshot(t, s, resv); after != before || historyCount(t, s, resv) != hist {
		t.Fatalf("a refused action changed the exception: %s, was %s", after, before)
	}
	var refused int
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE actor = 'treasury1' AND subject = $1 AND detail ? 'refused'`,
		"recon_exception:"+resv).Scan(&refused), "audit")
	if refused < 8 {
		t.Fatalf("%d refusals audited, want the page and each of 7 actions", refused)
	}

	// In bulk: their own row goes ahead, the other team's is refused and
	// named by no more than its id.
	form := url.Values{"action": {"writeoff"}, "id": {payout, resv}, "note": {"below the cost of chasing"}, "back": {"state=UNRESOLVED"}}
	code, body, _ = tr.post("/console/finance/exceptions/bulk", form)
	if code != 200 || !strings.Contains(body, "1 done, 1 refused") || !strings.Contains(body, "belongs to reservations") || strings.Contains(body, "swp_orphan_1") {
		t.Fatalf("treasury's bulk write-off: %d\n%.3000s", code, body)
	}
	if after := exceptionSnapshot(t, s, resv); after != before || historyCount(t, s, resv) != hist {
		t.Fatalf("the refused bulk row changed: %s, was %s", after, before)
	}
	// Four eyes as ever: not the proposer, and not someone of another
	// team; a finance person approves what treasury proposed.
	rv := newBrowser(t, s.Server.URL)
	rv.login("resv1")
	approve := func() url.Values { return url.Values{"approve": {"1"}} } // post adds each browser's own CSRF token
	if code, body, _ := tr.post("/console/finance/exceptions/"+payout+"/writeoff", approve()); code != http.StatusForbidden || !strings.Contains(body, "A finance person approves") {
		t.Fatalf("the proposer approves their own write-off: %d\n%.1500s", code, body)
	}
	if code, body, _ := rv.post("/console/finance/exceptions/"+payout+"/writeoff", approve()); code != http.StatusForbidden || !strings.Contains(body, "belongs to treasury") {
		t.Fatalf("reservations approves treasury's write-off: %d\n%.1500s", code, body)
	}
	if st, _, _ := exceptionState(t, s, payout); st != recon.StateInvestigating {
		t.Fatalf("after refused approvals: %s", st)
	}
	tr2 := newBrowser(t, s.Server.URL)
	tr2.login("treasury2")
	if code, body, _ := tr2.post("/console/finance/exceptions/"+payout+"/writeoff", approve()); code != http.StatusForbidden || !strings.Contains(body, "A finance person approves") {
		t.Fatalf("treasury's second person approves money written off: %d\n%.2000s", code, body)
	}
	if st, _, _ := exceptionState(t, s, payout); st != recon.StateInvestigating {
		t.Fatalf("after a team member's approval: %s", st)
	}
	fin2 := newBrowser(t, s.Server.URL)
	fin2.login("finance2")
	if code, body, _ := fin2.post("/console/finance/exceptions/"+payout+"/writeoff", approve()); code != http.StatusSeeOther {
		t.Fatalf("a second finance person approves: %d\n%.2000s", code, body)
	}
	if st, _, res := exceptionState(t, s, payout); st != recon.StateWrittenOff || res != "WRITTEN_OFF" {
		t.Fatalf("written off: %s %s", st, res)
	}
	// reservations works its own.
	if code, _, _ := rv.post("/console/finance/exceptions/"+resv+"/assign", nil); code != http.StatusSeeOther {
		t.Fatalf("reservations takes its exception: %d", code)
	}

	// No finance-only page opens for a team member, nor does a finance
	// form do anything.
	for _, p := range []string{"/console/finance", "/console/finance/month", "/console/finance/files", "/console/finance/books",
		"/console/finance/runs/1", "/console/finance/month/2025-06/workbook.xlsx", "/console/audit", "/console/payments"} {
		if code, _, _ := tr.get(p); code != http.StatusForbidden {
			t.Fatalf("treasury opens %s: %d", p, code)
		}
	}
	for _, p := range []string{"/console/finance/runs", "/console/finance/month/2025-06/sign", "/console/finance/files"} {
		if code, _, _ := tr.post(p, url.Values{"gateway": {"swiftpay"}, "date": {financeDay}}); code != http.StatusForbidden {
			t.Fatalf("treasury posts %s: %d", p, code)
		}
	}

	// Finance sees every team's.
	_, body, _ = clerk.get("/console/finance/exceptions?state=UNRESOLVED")
	if ids := listed(body); !slices.Contains(ids, resv) || !slices.Contains(ids, settle) || !strings.Contains(body, `data-testid="finance-tabs"`) {
		t.Fatalf("finance's list: %v", ids)
	}

	// Under the lock: recon refuses the other team's exception to a
	// person scoped to treasury whatever the console asked before.
	scoped := recon.ForTeams(ctx, []string{"treasury"})
	err := s.App.Recon.Assign(scoped, uuid.MustParse(settle), "treasury1", "treasury1")
	if booking.ErrorReason(err) != "NOT_YOUR_TEAM" || booking.ErrorCode(err) != booking.EFORBIDDEN {
		t.Fatalf("recon assigns another team's exception in a treasury scope: %v", err)
	}
	if err := s.App.Recon.AddNote(scoped, uuid.MustParse(settle), "treasury1", "x"); booking.ErrorReason(err) != "NOT_YOUR_TEAM" {
		t.Fatalf("recon notes another team's exception in a treasury scope: %v", err)
	}
	if st, who, _ := exceptionState(t, s, settle); st != recon.StateOpen || who != "" {
		t.Fatalf("the scoped refusal changed it: %s %s", st, who)
	}
}

// exceptionSnapshot is everything a refused action must leave alone.
func exceptionSnapshot(t *testing.T, s *teststack.Stack, id string) string {
	t.Helper()
	var out string
	teststack.Must(t, s.Pool.QueryRow(context.Background(), `SELECT concat_ws('|', state, owner_team, assignee, writeoff_by, approved_by, resolution)
		FROM reconciliation_exceptions WHERE id = $1`, id).Scan(&out), "snapshot")
	return out
}

// tatkal users add --team makes a team member who signs in to their
// team's exceptions; an unknown team, no team for the team role, or a
// team for another role, is refused and changes nothing.
func TestUsersCommandAddsATeamMember(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{Routes: teststack.QuietRoutes()})
	before := usersState(t, s.Pool)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"add", "--login", "meera", "--role", "team"}, "at least one team"},
		{[]string{"add", "--login", "meera", "--role", "team", "--team", "catering"}, `Unknown team "catering"`},
		{[]string{"add", "--login", "meera", "--role", "team", "--team", "treasury,catering"}, `Unknown team "catering"`},
		{[]string{"add", "--login", "meera", "--role", "finance", "--team", "treasury"}, "Only the team role has teams"},
	} {
		_, err := usersCLI(t, s.DatabaseURL, password+"\n", tc.args...)
		if err == nil || !errors.Is(err, console.ErrUsage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("users %v: %v; want a usage refusal saying %q", tc.args, err, tc.want)
		}
	}
	if got := usersState(t, s.Pool); got != before {
		t.Fatalf("a refusal changed something: %s", got)
	}
	out, err := usersCLI(t, s.DatabaseURL, password+"\n", "add", "--login", "meera", "--role", "team", "--team", "treasury,disputes", "--team", "treasury",
		"--name", "Meera Nair")
	if err != nil || !strings.Contains(out, "console user meera added: team (disputes, treasury)") {
		t.Fatalf("add a team member: %v\n%s", err, out)
	}
	_, _, detail := lastAudit(t, s.Pool, "console_user.add")
	if !strings.Contains(detail, `"teams": ["disputes", "treasury"]`) {
		t.Fatalf("audit of the team member: %s", detail)
	}
	if out, err := usersCLI(t, s.DatabaseURL, "", "list"); err != nil || !strings.Contains(out, "team (disputes, treasury)") {
		t.Fatalf("list: %v\n%s", err, out)
	}
	b := newBrowser(t, s.Server.URL)
	b.login("meera")
	code, body, _ := b.get("/console/finance/exceptions?state=UNRESOLVED")
	if code != 200 || !strings.Contains(body, "disputes, treasury") {
		t.Fatalf("meera's list: %d\n%.2000s", code, body)
	}
	if code, _, _ := b.get("/console/finance"); code != http.StatusForbidden {
		t.Fatalf("meera opens the finance home: %d", code)
	}
}

// The admins' page adds a team member with their teams and changes them,
// audited; the team role without a team is refused.
func TestUsersPageEditsTeams(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{Routes: teststack.QuietRoutes()})
	admin := newBrowser(t, s.Server.URL)
	admin.login("admin1")
	add := url.Values{"login": {"anil"}, "role": {"team"}, "password": {password}, "password2": {password}}
	if code, body, _ := admin.post("/console/users", add); code != http.StatusBadRequest || !strings.Contains(body, "at least one team") {
		t.Fatalf("a team member without a team: %d", code)
	}
	add["team"] = []string{"disputes"}
	if code, body, _ := admin.post("/console/users", add); code != http.StatusSeeOther {
		t.Fatalf("add a team member: %d\n%.2000s", code, body)
	}
	code, body, _ := admin.get("/console/users")
	if code != 200 || !strings.Contains(body, `data-testid="user-role-anil">team (disputes)<`) || !strings.Contains(body, `data-testid="user-team-treasury"`) {
		t.Fatalf("the users page: %d\n%.3000s", code, body)
	}
	if code, body, _ := admin.get("/console/users/anil"); code != 200 || !strings.Contains(body, `value="disputes" checked`) {
		t.Fatalf("anil's page: %d\n%.3000s", code, body)
	}
	if code, body, _ := admin.post("/console/users/anil/role", url.Values{"role": {"team"}, "team": {"disputes", "refunds"}, "reason": {"covers refunds too"}}); code != http.StatusSeeOther {
		t.Fatalf("change anil's teams: %d\n%.2000s", code, body)
	}
	_, _, detail := lastAudit(t, s.Pool, "console_user.role")
	if !strings.Contains(detail, `"teams_to": ["disputes", "refunds"]`) || !strings.Contains(detail, `"teams_from": ["disputes"]`) {
		t.Fatalf("audit of the teams change: %s", detail)
	}
	// Made finance: the teams go, finance sees every team.
	if code, _, _ := admin.post("/console/users/anil/role", url.Values{"role": {"finance"}, "team": {"disputes"}}); code != http.StatusBadRequest {
		t.Fatalf("finance with a team: %d", code)
	}
	if code, _, _ := admin.post("/console/users/anil/role", url.Values{"role": {"finance"}}); code != http.StatusSeeOther {
		t.Fatalf("make anil finance: %d", code)
	}
	var teams []string
	teststack.Must(t, s.Pool.QueryRow(context.Background(), `SELECT teams FROM console_users WHERE login = 'anil'`).Scan(&teams), "teams")
	if len(teams) != 0 {
		t.Fatalf("anil, finance, keeps teams %v", teams)
	}
}

// tatkal dev seeds one team member per owning team (team-<team>), who
// signs in to that team's exceptions.
func TestDemoUsersHaveOnePerTeam(t *testing.T) {
	t.Parallel()
	for _, team := range recon.Teams() {
		i := slices.IndexFunc(console.DemoUsers, func(u console.DemoUser) bool { return u.Login == "team-"+team })
		if i < 0 || console.DemoUsers[i].Role != console.Team || !slices.Equal(console.DemoUsers[i].Teams, []string{team}) {
			t.Fatalf("no demo team member of %s: %+v", team, console.DemoUsers)
		}
	}
	s := setup(t, teststack.Options{Routes: teststack.QuietRoutes()})
	demo := slices.Clone(console.DemoUsers)
	for i := range demo {
		demo[i].Password = password // the browser helper's
	}
	if _, err := console.SeedUsers(context.Background(), s.Pool, demo, auth.Argon2Params{MemoryKiB: 64, Time: 1, Threads: 1}); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, s.Server.URL)
	b.login("team-reservations")
	if code, body, _ := b.get("/console/finance/exceptions?state=UNRESOLVED"); code != 200 || !strings.Contains(body, "owned by <b>reservations</b>") {
		t.Fatalf("team-reservations' list: %d\n%.2000s", code, body)
	}
}
