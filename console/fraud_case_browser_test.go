package console_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"tatkal/booking/auth"
	"tatkal/booking/fraud/review"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
	"tatkal/console"
)

// TestBrowserFraudCaseWalk drives an analyst's case in headless Chromium:
// fraud1 takes a flagged cluster from the queue, reads what its members
// share (masked, with how many share it), bans the two ring accounts (a
// decision on those members only) and hands the claim to fraud2; fraud2,
// now holding the case, clears the other two, approves fraud1's ban and
// closes the case. Enforced, the ban reaches the two alone; one of them
// appeals, and admin1, who took no part, opens the appeal from the queue,
// reads the statement with its ID numbers masked beside the case's
// evidence, claims it and answers it; the member is told. Screenshots go
// to $TATKAL_SCREENSHOTS when set.
func TestBrowserFraudCaseWalk(t *testing.T) {
	testenv.Chromium(t)
	t.Parallel()
	s := setup(t, teststack.Options{})
	ctx0 := context.Background()
	if _, err := console.SeedUsers(ctx0, s.Pool, []console.DemoUser{{Login: "fraud2", Password: password, Role: console.Fraud}},
		auth.Argon2Params{MemoryKiB: 64, Time: 1, Threads: 1}); err != nil {
		t.Fatal(err)
	}
	var fraud2 int64
	if err := s.Pool.QueryRow(ctx0, `SELECT id FROM console_users WHERE login = 'fraud2'`).Scan(&fraud2); err != nil {
		t.Fatal(err)
	}
	cluster, members, holds := fraudRing(t, s)
	shareSignals(t, s, holds)
	cid := fmt.Sprint(cluster)
	logins := make([]string, len(members))
	for i, m := range members {
		if err := s.Pool.QueryRow(ctx0, `SELECT login FROM users WHERE id = $1`, m).Scan(&logins[i]); err != nil {
			t.Fatal(err)
		}
	}

	b := testenv.NewBrowser(t, testenv.BrowserOptions{Width: 1440, Height: 1000, Timeout: 90 * time.Second})
	ctx := b.Ctx
	base := s.Server.URL
	do, text, count, submit := b.Do, b.Text, b.Count, b.Submit
	shot := func(name string) { b.Shot("fraudcase-" + name) }
	login := func(who string) {
		t.Helper()
		if _, err := chromedp.Call(ctx, network.ClearBrowserCookies, cdp.Empty{}); err != nil {
			t.Fatalf("sign out: %v", err)
		}
		signIn(t, b, base, who)
	}
	page := func(what string) {
		t.Helper()
		do(what, chromedp.Navigate(base+"/console/fraud/clusters/"+cid), chromedp.WaitVisible(chromedp.CSS(`[data-testid=fraud-cluster]`)))
	}
	pick := func(i int) {
		t.Helper()
		do("tick "+logins[i], chromedp.Click(chromedp.CSS(`[data-testid="fraud-pick-`+logins[i]+`"]`)))
	}
	decide := func(outcome, reason, note string) {
		t.Helper()
		do("decide form", chromedp.SetValue(chromedp.CSS(`[data-testid=fraud-outcome]`), outcome),
			chromedp.SetValue(chromedp.CSS(`[data-testid=fraud-reason]`), reason),
			chromedp.SetValue(chromedp.CSS(`[data-testid=fraud-decide] input[name=note]`), note))
		submit("decide "+outcome, `[data-testid=fraud-decide-submit]`)
	}

	// 1. From the queue to the case: what the members share, masked.
	login("fraud1")
	do("queue", chromedp.Navigate(base+"/console/fraud"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="fraud-cluster-`+cid+`"]`)))
	shot("1-queue")
	submit("claim from queue", `[data-testid="fraud-claim-`+cid+`"]`)
	page("case")
	shared := text(`[data-testid=fraud-shared]`)
	for _, want := range []string{"••@okicici", "203.0.113.0/24", "R. K., 41", "device ••7f3a"} {
		if !strings.Contains(shared, want) {
			t.Errorf("shared: no %q in %q", want, shared)
		}
	}
	if strings.Contains(shared, "touts.desk99") || strings.Contains(strings.ToLower(shared), "ramesh") {
		t.Errorf("shared shows an address or a name in full: %q", shared)
	}
	shot("2-case-shared")

	// 2. A decision on two members: the ring's pair is banned.
	pick(0)
	pick(1)
	decide(review.Ban, "PASSENGER_RESALE", "one UPI address and one phone for both, the same passenger resold")
	if got := text(`[data-testid=fraud-decisions]`); !strings.Contains(got, "BAN") || !strings.Contains(got, logins[0]+", "+logins[1]) ||
		!strings.Contains(got, "labelled CONFIRMED") || !strings.Contains(got, "Awaits a second analyst") || strings.Contains(got, logins[2]) {
		t.Fatalf("decisions after the ban: %q", got)
	}
	if got := text(`[data-testid="fraud-member-` + logins[0] + `"] [data-testid=fraud-member-decided]`); !strings.Contains(got, "BAN (awaits approval)") {
		t.Errorf("member %s decided: %q", logins[0], got)
	}
	if got := text(`[data-testid="fraud-member-` + logins[2] + `"] [data-testid=fraud-member-decided]`); got != "" {
		t.Errorf("member %s decided: %q, want nothing yet", logins[2], got)
	}
	if count(`[data-testid=fraud-approve]`) != 0 {
		t.Fatal("the author is offered the approval of their own ban")
	}
	shot("3-per-member-ban")

	// 3. fraud1 hands the case to fraud2.
	do("choose fraud2", chromedp.SetValue(chromedp.CSS(`[data-testid=fraud-handover-to]`), fmt.Sprint(fraud2)))
	submit("hand over", `[data-testid=fraud-handover-submit]`)
	if got := text(`[data-testid=fraud-claimed-by]`); got != "fraud2" {
		t.Fatalf("after the hand-over claimed by %q, want fraud2", got)
	}
	if count(`[data-testid=fraud-decide]`) != 0 {
		t.Fatal("fraud1 can still decide after handing the case over")
	}
	shot("4-handed-over")

	// 4. fraud2 clears the other two, approves the ban, closes the case.
	login("fraud2")
	page("case as fraud2")
	pick(2)
	pick(3)
	decide(review.Clear, "FAMILY_OR_OFFICE", "the uncle and the cousin: own travel, own card")
	submit("approve the ban", `[data-testid=fraud-approve]`)
	if got := text(`[data-testid=fraud-decisions]`); !strings.Contains(got, "Approved by fraud2") || !strings.Contains(got, "labelled CLEAR") {
		t.Fatalf("decisions after the approval: %q", got)
	}
	submit("close", `[data-testid=fraud-close]`)
	if count(`[data-testid=fraud-decide]`) != 0 || !strings.Contains(text(`h1`), "CLOSED") {
		t.Fatalf("case not closed: %q", text(`h1`))
	}
	shot("5-closed")

	// 5. Enforced after the delay: the two are banned, the others are not.
	enf := &review.Enforcer{Review: review.New(s.Pool), Booking: s.Service}
	if _, err := s.Pool.Exec(ctx0, `UPDATE fraud_decisions SET enforce_after = now() - interval '1 second' WHERE cluster_id = $1`, cluster); err != nil {
		t.Fatal(err)
	}
	if n, err := enf.RunDue(ctx0); err != nil || n != 2 {
		t.Fatalf("enforced %d (%v), want 2", n, err)
	}
	var banned []int64
	if err := s.Pool.QueryRow(ctx0, `SELECT coalesce(array_agg(id ORDER BY id), '{}') FROM users WHERE banned_at IS NOT NULL AND id = ANY($1)`, members).Scan(&banned); err != nil {
		t.Fatal(err)
	}
	if len(banned) != 2 || banned[0] != members[0] || banned[1] != members[1] {
		t.Fatalf("banned %v, want %v", banned, members[:2])
	}

	// 6. The member appeals; admin1 answers it with the evidence beside it.
	a, err := review.New(s.Pool).FileAppeal(ctx0, members[0], "I book for my own family. My PAN is ABCDE1234F, call me on 9876543210.")
	if err != nil {
		t.Fatal(err)
	}
	aid := fmt.Sprint(a.ID)
	login("admin1")
	do("queue as admin1", chromedp.Navigate(base+"/console/fraud"), chromedp.WaitVisible(chromedp.CSS(`[data-testid="fraud-appeal-`+aid+`"]`)))
	if got := text(`[data-testid="fraud-appeal-` + aid + `"] [data-testid=fraud-appeal-statement]`); strings.Contains(got, "ABCDE1234F") ||
		strings.Contains(got, "9876543210") || !strings.Contains(got, "I book for my own family. My PAN is ••••••••4F, call me on ••••••••10.") {
		t.Fatalf("statement in the queue: %q", got)
	}
	shot("6-appeal-queue")
	submit("open the appeal", `[data-testid="fraud-appeal-open-`+aid+`"]`)
	if got := text(`[data-testid=fraud-appeal-page] [data-testid=fraud-shared]`); !strings.Contains(got, "••@okicici") {
		t.Fatalf("no evidence beside the appeal: %q", got)
	}
	if got := text(`[data-testid=fraud-appeal-page] [data-testid="fraud-member-` + logins[0] + `"]`); !strings.Contains(got, "BAN (enforced)") {
		t.Errorf("the appellant's decisions beside the appeal: %q", got)
	}
	submit("claim the appeal", `[data-testid=fraud-appeal-claim]`)
	if got := text(`[data-testid=notice]`); !strings.Contains(got, "claimed") {
		t.Errorf("after claiming: %q", got)
	}
	shot("7-appeal-with-evidence")
	do("answer", chromedp.SetValue(chromedp.CSS(`[data-testid=fraud-appeal-note]`), "One address paid for three accounts' tickets; the ban stands."))
	submit("reject", `[data-testid=fraud-appeal-reject]`)
	var status, body string
	if err := s.Pool.QueryRow(ctx0, `SELECT a.status, n.body FROM fraud_appeals a JOIN notifications n ON n.ref = 'appeal:' || a.id AND n.channel = 'EMAIL'
		WHERE a.id = $1`, a.ID).Scan(&status, &body); err != nil || status != "REJECTED" || !strings.Contains(body, "ban stands") {
		t.Fatalf("appeal %s, member told %q (%v)", status, body, err)
	}
	do("appeal after", chromedp.Navigate(base+"/console/fraud/appeals/"+aid), chromedp.WaitVisible(chromedp.CSS(`[data-testid=fraud-appeal-answered]`)))
	shot("8-appeal-answered")
}
