package console_test

import (
	"context"
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"tatkal/booking"
	"tatkal/booking/auth"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
	"tatkal/console"
	"tatkal/recon"
)

// TestBrowserClerkClearsADay drives the exception list in headless
// Chromium as a clerk clearing a day's exceptions with bulk actions: run
// the day, filter, select several rows, assign them to themselves, find
// them in their queue, resolve two at once, propose writing two off (their
// own approval is refused row by row), a second person approves them, and
// the filtered list downloads as CSV. Screenshots go to
// $TATKAL_SCREENSHOTS when set.
func TestBrowserClerkClearsADay(t *testing.T) {
	testenv.Chromium(t)
	t.Parallel()
	s := setup(t, teststack.Options{Routes: teststack.QuietRoutes()})
	d := seedWorklistDay(t, s)
	b := testenv.NewBrowser(t, testenv.BrowserOptions{Width: 1600, Height: 1100, Timeout: 90 * time.Second})
	base := s.Server.URL
	do, text, count, submit, shot := b.Do, b.Text, b.Count, b.Submit, b.Shot
	row := func(id string) string { return `[data-testid="exception-` + id + `"]` }
	tick := func(ids ...string) {
		t.Helper()
		for _, id := range ids {
			do("select "+id, chromedp.Click(chromedp.CSS(row(id)+` [data-testid=select]`)))
		}
	}
	bulk := func(action string, fields map[string]string) {
		t.Helper()
		steps := []chromedp.Action[chromedp.Void]{chromedp.SetValue(chromedp.CSS(`[data-testid=bulk-action]`), action)}
		for sel, v := range fields {
			steps = append(steps, chromedp.SetValue(chromedp.CSS(sel), v))
		}
		do("bulk "+action, steps...)
		submit("apply "+action, `[data-testid=bulk-submit]`)
	}

	// Run the day.
	signIn(t, b, base, "finance1")
	do("finance home", chromedp.Navigate(base+"/console/finance"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=run-form]`)),
		chromedp.SetValue(chromedp.CSS(`[data-testid=run-gateway]`), "swiftpay"),
		chromedp.SetValue(chromedp.CSS(`[data-testid=run-date]`), financeDay))
	submit("run", `[data-testid=run-submit]`)
	ex := exceptionsOf(t, s)
	orphans := []string{ex["swp_orphan_1"], ex["swp_orphan_2"], ex[formulaRef]}

	// Filter the unresolved orphan lines, select them all, assign them to me.
	do("exceptions", chromedp.Navigate(base+"/console/finance/exceptions?state=UNRESOLVED"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=exceptions]`)))
	shot("worklist-all")
	do("filter", chromedp.SetValue(chromedp.CSS(`[data-testid=filter-kind]`), recon.OrphanLine))
	submit("filter", `[data-testid=filter-submit]`)
	if n := count(`[data-testid=exceptions] tbody tr`); n != 3 {
		t.Fatalf("orphan lines listed: %d", n)
	}
	if got := text(row(ex["swp_orphan_2"]) + ` [data-testid=gateway-ref]`); got != "swp_orphan_2" {
		t.Fatalf("gateway txn id: %q", got)
	}
	tick(orphans...)
	bulk("assign", map[string]string{`[data-testid=bulk-assignee]`: "finance1"})
	if got := text(`[data-testid=bulk-outcomes] h2`); got != "3 done, 0 refused" {
		t.Fatalf("bulk assign: %q", got)
	}
	shot("worklist-assigned")

	// My queue holds them; sort by the amount at stake, largest first.
	submit("my queue", `[data-testid=my-queue]`)
	if n := count(`[data-testid=exceptions] tbody tr`); n != 3 {
		t.Fatalf("my queue: %d rows", n)
	}
	submit("sort by stake", `[data-testid=sort-stake]`)
	submit("sort by stake, largest first", `[data-testid=sort-stake]`)
	if got := text(`[data-testid=exceptions] tbody tr:first-child [data-testid=stake]`); got != "₹3,000.00" {
		t.Fatalf("largest stake first: %q", got)
	}
	shot("worklist-my-queue")

	// Resolve the two lines of another merchant at once.
	tick(ex["swp_orphan_1"], ex["swp_orphan_2"])
	bulk("resolve", map[string]string{`[data-testid=bulk-code]`: "NOT_OUR_LINE", `[data-testid=bulk-note]`: "swiftpay: another merchant's test lines"})
	if got := text(`[data-testid=bulk-outcomes] h2`); got != "2 done, 0 refused" {
		t.Fatalf("bulk resolve: %q", got)
	}
	shot("worklist-resolved")

	// Propose writing off the formula line and the ₹10 short payout; my own
	// approval is refused row by row and changes nothing.
	do("unresolved", chromedp.Navigate(base+"/console/finance/exceptions?state=UNRESOLVED"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=exceptions]`)))
	tick(ex[formulaRef], ex[recon.PayoutMismatch])
	bulk("writeoff", map[string]string{`[data-testid=bulk-note]`: "below the cost of chasing"})
	if got := text(`[data-testid=bulk-outcomes] h2`); got != "2 done, 0 refused" {
		t.Fatalf("bulk write-off proposal: %q", got)
	}
	tick(ex[formulaRef], ex[recon.PayoutMismatch])
	bulk("approve-writeoff", nil)
	if got := text(`[data-testid=bulk-outcomes] h2`); got != "0 done, 2 refused" {
		t.Fatalf("self-approval: %q", got)
	}
	if got := text(`[data-testid="outcome-` + ex[recon.PayoutMismatch] + `"]`); !strings.Contains(got, "needs a second person") {
		t.Fatalf("refusal's reason: %q", got)
	}
	shot("worklist-self-approval-refused")
	submit("sign out", `[data-testid=logout]`)

	// A second person approves both.
	signIn(t, b, base, "finance2")
	do("unresolved", chromedp.Navigate(base+"/console/finance/exceptions?state=UNRESOLVED"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=exceptions]`)))
	tick(ex[formulaRef], ex[recon.PayoutMismatch])
	bulk("approve-writeoff", map[string]string{`[data-testid=bulk-note]`: "agreed"})
	if got := text(`[data-testid=bulk-outcomes] h2`); got != "2 done, 0 refused" {
		t.Fatalf("second person's approval: %q", got)
	}
	for _, id := range []string{ex[formulaRef], ex[recon.PayoutMismatch]} {
		if st, _, _ := exceptionState(t, s, id); st != recon.StateWrittenOff {
			t.Fatalf("%s: %s", id, st)
		}
	}
	shot("worklist-approved")

	// The unpaid payment's page offers the actions on its money.
	do("exception page", chromedp.Navigate(base+"/console/finance/exceptions/"+ex[d.unpaid.String()]),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=form-ask]`)), chromedp.WaitVisible(chromedp.CSS(`[data-testid=form-refund]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=form-team]`)))
	shot("exception-money-actions")

	// The day's orphan lines, whatever their state, download as CSV.
	do("orphans", chromedp.Navigate(base+"/console/finance/exceptions?kind=ORPHAN_LINE&sort=stake"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=export-csv]`)))
	downloads := filepath.Join(t.TempDir(), "downloads")
	os.MkdirAll(downloads, 0o755) //nolint:errcheck
	progress := chromedp.Events(b.Ctx, cdpbrowser.DownloadProgress)
	do("download", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, cdpbrowser.SetDownloadBehavior, cdpbrowser.SetDownloadBehaviorParams{
			Behavior: cdpbrowser.SetDownloadBehaviorBehaviorAllowAndName, DownloadPath: downloads, EventsEnabled: new(true)})
		return err
	}), chromedp.Click(chromedp.CSS(`[data-testid=export-csv]`)))
	var file string
	for ev, err := range progress {
		if err != nil {
			t.Fatalf("download: %v", err)
		}
		if ev.State == cdpbrowser.DownloadProgressStateCompleted {
			file = filepath.Join(downloads, ev.GUID)
			break
		}
		if ev.State == cdpbrowser.DownloadProgressStateCanceled {
			t.Fatal("download cancelled")
		}
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil || len(recs) != 4 {
		t.Fatalf("downloaded CSV: %v %v", recs, err)
	}
	if recs[1][2] != "swp_orphan_1" || recs[1][9] != recon.StateResolved || recs[3][2] != "'"+formulaRef || recs[3][9] != recon.StateWrittenOff {
		t.Fatalf("downloaded CSV rows: %v", recs[1:])
	}
}

// TestBrowserTeamMemberSelectsAll signs a treasury person in through the
// login page in headless Chromium: they land on their team's exceptions,
// the menu offers nothing of finance's, and the select-all box ticks every
// row shown (one row cleared leaves it half-ticked), so one bulk action
// takes all their rows. Screenshots go to $TATKAL_SCREENSHOTS when set.
func TestBrowserTeamMemberSelectsAll(t *testing.T) {
	testenv.Chromium(t)
	t.Parallel()
	s := setup(t, teststack.Options{Routes: teststack.QuietRoutes()})
	ctx := context.Background()
	if _, err := console.SeedUsers(ctx, s.Pool, teamUsers, auth.Argon2Params{MemoryKiB: 64, Time: 1, Threads: 1}); err != nil {
		t.Fatal(err)
	}
	seedWorklistDay(t, s)
	day, _ := time.ParseInLocation(time.DateOnly, financeDay, booking.IST)
	if _, err := s.App.Recon.Run(ctx, recon.RunRequest{Gateway: "swiftpay", Date: day, By: "finance1"}); err != nil {
		t.Fatal(err)
	}
	ex := exceptionsOf(t, s)
	// Finance hands two orphan lines to treasury: three rows are theirs.
	for _, k := range []string{"swp_orphan_1", "swp_orphan_2"} {
		teststack.Must(t, s.App.Recon.HandTo(ctx, uuid.MustParse(ex[k]), "finance1", "treasury", "a bank line?"), "hand to treasury")
	}
	mine := []string{ex["swp_orphan_1"], ex["swp_orphan_2"], ex[recon.PayoutMismatch]}

	b := testenv.NewBrowser(t, testenv.BrowserOptions{Width: 1500, Height: 900, Timeout: 90 * time.Second})
	base := s.Server.URL
	do, count, submit, shot := b.Do, b.Count, b.Submit, b.Shot
	signIn(t, b, base, "treasury1")
	do("landing", chromedp.WaitVisible(chromedp.CSS(`[data-testid=my-teams]`)))
	if n := count(`[data-testid=exceptions] tbody tr`); n != len(mine) {
		t.Fatalf("treasury's rows: %d, want %d", n, len(mine))
	}
	if n := count(`[data-testid=finance-tabs]`); n != 0 {
		t.Fatal("a team member is offered finance's tabs")
	}
	nav := b.Text(`header.cbar`)
	if strings.Contains(nav, "Finance") || strings.Contains(nav, "Audit") || !strings.Contains(nav, "Team exceptions") {
		t.Fatalf("the team member's menu: %q", nav)
	}
	shot("team-member-list")

	eval := func(js string) any {
		t.Helper()
		v, err := chromedp.Run(b.Ctx, chromedp.Evaluate[any](js))
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		return v
	}
	checked := func() int {
		t.Helper()
		return int(eval(`document.querySelectorAll('input[name=id][form=bulk]:checked').length`).(float64))
	}
	do("select all", chromedp.Click(chromedp.CSS(`[data-testid=select-all]`)))
	if n := checked(); n != len(mine) {
		t.Fatalf("select-all ticked %d rows, want %d", n, len(mine))
	}
	do("clear one", chromedp.Click(chromedp.CSS(`[data-testid="exception-`+mine[0]+`"] [data-testid=select]`)))
	half := eval(`document.querySelector('[data-testid=select-all]').indeterminate`) == true
	if !half || checked() != len(mine)-1 {
		t.Fatalf("one row cleared: select-all indeterminate %t, %d ticked", half, checked())
	}
	do("select all again", chromedp.Click(chromedp.CSS(`[data-testid=select-all]`)))
	shot("team-member-all-selected")
	do("take them", chromedp.SetValue(chromedp.CSS(`[data-testid=bulk-action]`), "assign"))
	submit("apply", `[data-testid=bulk-submit]`)
	if h2 := b.Text(`[data-testid=bulk-outcomes] h2`); h2 != "3 done, 0 refused" {
		t.Fatalf("bulk take: %q", h2)
	}
	shot("team-member-took-all")
	for _, id := range mine {
		if st, who, _ := exceptionState(t, s, id); st != recon.StateInvestigating || who != "treasury1" {
			t.Fatalf("%s: %s %s", id, st, who)
		}
	}
}
