package console_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"tatkal/booking"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
	"tatkal/console/levers"
)

// TestBrowserOpsAndApproval drives the console in headless Chromium: ops
// signs in and watches the funnel change live while a rush runs, proposes
// extending a closed window (dangerous: it waits for approval), a second
// admin approves it, the audit log shows it, and a hold that was refused
// before now succeeds. Screenshots go to $TATKAL_SCREENSHOTS when set.
func TestBrowserOpsAndApproval(t *testing.T) {
	testenv.Chromium(t)
	t.Parallel()
	s := setup(t, teststack.Options{})
	shard, date := s.DemoShard(t, 6, 0)
	users := s.Users(t, "br", 9)
	b := testenv.NewBrowser(t, testenv.BrowserOptions{Width: 1440, Height: 1000, Timeout: 45 * time.Second})
	base := s.Server.URL
	do, text, submit, shot := b.Do, b.Text, b.Submit, b.Shot
	login := func(who string) { t.Helper(); signIn(t, b, base, who) }

	// 1. Ops watches the funnel change live during a small rush.
	login("ops1")
	heldSel := fmt.Sprintf(`[data-testid="total-%d-held"]`, shard)
	// Before the rush the shard is quiet: its panel is one line, its table folded away.
	do("open funnel", chromedp.Navigate(base+"/console/funnel"), chromedp.WaitReady(chromedp.CSS(heldSel)))
	testenv.Eventually(t, 10*time.Second, "the funnel live over the websocket", func() error {
		got := text(`[data-testid=live-state]`)
		return testenv.Want(got == "live", "%q", got)
	})
	if got, err := chromedp.Run(b.Ctx, chromedp.TextContent(chromedp.CSS(heldSel))); err != nil || got != "0" {
		t.Fatalf("held before the rush: %q (%v)", got, err)
	}
	go rush(t, s, users, date, "br")
	testenv.Eventually(t, 15*time.Second, "the rush on the page, no seats left", func() error {
		held, soldOut := text(heldSel), text(fmt.Sprintf(`[data-testid="total-%d-sold_out"]`, shard))
		left := text(fmt.Sprintf(`[data-testid="shard-%d"] [data-testid="seats-left"]`, shard))
		return testenv.Want(held == "6" && soldOut == "3" && left == "0", "held %s, sold out %s, seats left %s", held, soldOut, left)
	})
	// An operator throttles the shard: the open page shows it, live.
	throttleSel := fmt.Sprintf(`[data-testid="throttle-%d"]`, shard)
	if got := text(throttleSel); got != "off" {
		t.Fatalf("throttle before any lever: %q, want off", got)
	}
	setThrottle := func(v string) {
		t.Helper()
		if _, err := s.Console.Levers().Propose(context.Background(), actor(t, s, "ops1"),
			propose(levers.ShardThrottle, fmt.Sprintf("shard:%d", shard), v)); err != nil {
			t.Fatal(err)
		}
	}
	setThrottle("11")
	testenv.Eventually(t, 10*time.Second, "the throttle on the page", func() error {
		got := text(throttleSel)
		return testenv.Want(got == "11 holds + 11 payments /s", "%q", got)
	})
	shot("funnel")
	setThrottle("off")

	// 2. The window closes; a hold is refused.
	ctxb := context.Background()
	if _, err := s.Pool.Exec(ctxb, `UPDATE inventory_shards SET window_closes_at = now() - interval '1 second' WHERE id = $1`, shard); err != nil {
		t.Fatal(err)
	}
	s.Service.Catalog().Forget()
	late := s.Users(t, "late", 1)[0]
	// Free a seat so the late hold could succeed once the window reopens.
	holder, holdID := anyHold(t, s, shard)
	if _, err := s.Service.Cancel(ctxb, holder, holdID); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if _, err := s.Service.Hold(ctxb, teststack.Caller(late), holdReq(late, "late-00001", date)); booking.ErrorReason(err) != "WINDOW_CLOSED" {
		t.Fatalf("hold after close: %v, want WINDOW_CLOSED", err)
	}

	// 3. Ops proposes extending the window: preview, typed confirmation.
	scope := fmt.Sprintf("shard:%d", shard)
	closes := time.Now().Add(30 * time.Minute).In(booking.IST).Format(time.RFC3339)
	do("open levers", chromedp.Navigate(base+"/console/levers"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=lever-form]`)),
		chromedp.SetValue(chromedp.CSS(`[data-testid=lever-name]`), "window_closes_at"),
		chromedp.SetValue(chromedp.CSS(`[data-testid=lever-scope]`), scope),
		chromedp.SetValue(chromedp.CSS(`[data-testid=lever-value]`), closes),
		chromedp.SetValue(chromedp.CSS(`[data-testid=lever-reason]`), "gateway outage at 10:00, reopen for 30 min"))
	submit("preview", `[data-testid=lever-preview-btn]`)
	if got := text(`[data-testid=needs-approval]`); !strings.Contains(got, "second admin") {
		t.Fatalf("preview does not say it needs approval: %q", got)
	}
	shot("lever-preview")
	do("confirm", chromedp.SetValue(chromedp.CSS(`[data-testid=lever-confirm]`), "window_closes_at "+scope))
	submit("propose", `[data-testid=lever-propose]`)
	if got := text(`[data-testid=notice]`); !strings.Contains(got, "waits for a second admin") {
		t.Fatalf("after propose: %q", got)
	}
	var id int64
	if err := s.Pool.QueryRow(ctxb, `SELECT id FROM lever_changes WHERE state = 'PENDING'`).Scan(&id); err != nil {
		t.Fatalf("pending change: %v", err)
	}
	submit("sign out", `[data-testid=logout]`)

	// 4. A second person, an admin, approves.
	login("admin2")
	do("levers as admin", chromedp.Navigate(base+"/console/levers"), chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`[data-testid=approve-%d]`, id))))
	shot("lever-pending")
	submit("approve", fmt.Sprintf(`[data-testid=approve-%d]`, id))
	if got := text(`[data-testid=notice]`); !strings.Contains(got, "APPLIED") {
		t.Fatalf("after approve: %q", got)
	}

	// 5. The audit log shows it, with proposer and approver.
	do("audit", chromedp.Navigate(base+"/console/audit?action=lever.change"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=audit-rows]`)))
	row := text(`[data-action="lever.change"]`)
	if !strings.Contains(row, "window_closes_at "+scope) || !strings.Contains(row, `"approver": "admin2"`) || !strings.Contains(row, "ops1") {
		t.Fatalf("audit row: %s", row)
	}
	do("audit all", chromedp.Navigate(base+"/console/audit"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=audit-rows]`)))
	shot("audit")

	// 6. It takes effect: the refused hold now succeeds (within a second).
	start := time.Now()
	for {
		res, err := s.Service.Hold(ctxb, teststack.Caller(late), holdReq(late, fmt.Sprintf("late-%d", time.Now().UnixNano()), date))
		if err == nil && res.Status == "HELD" {
			break
		}
		if time.Since(start) > time.Second {
			t.Fatalf("hold after approval: %v %+v", err, res)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The other pages read well too.
	for _, p := range []string{"shards", "payments", "lookup?q=late00001", "trace?login=late00001", "finance", "fraud"} {
		do("open "+p, chromedp.Navigate(base+"/console/"+p), chromedp.WaitVisible(chromedp.CSS(`main`)))
		shot(strings.NewReplacer("?", "-", "=", "-").Replace(p))
	}

	// 7. admin2 gives ops1 a personal API token: shown once, then revoked.
	do("tokens", chromedp.Navigate(base+"/console/tokens"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=token-form]`)),
		chromedp.SetValue(chromedp.CSS(`[data-testid=token-user]`), "ops1"),
		chromedp.SetValue(chromedp.CSS(`[data-testid=token-label]`), "ops1 deploy script"))
	submit("create token", `[data-testid=token-create]`)
	tok := text(`[data-testid=new-token]`)
	if !strings.HasPrefix(tok, "tkc_") {
		t.Fatalf("new token: %q", tok)
	}
	shot("token-created")
	var tokenID int64
	if err := s.Pool.QueryRow(ctxb, `SELECT id FROM console_api_tokens WHERE label = 'ops1 deploy script'`).Scan(&tokenID); err != nil {
		t.Fatal(err)
	}
	submit("revoke token", fmt.Sprintf(`[data-testid=revoke-%d]`, tokenID))
	if got := text(`[data-testid=notice]`); !strings.Contains(got, "revoked") {
		t.Fatalf("after revoking: %q", got)
	}
	shot("token-revoked")
}

func anyHold(t *testing.T, s *teststack.Stack, shard int64) (int64, uuid.UUID) {
	t.Helper()
	var user int64
	var id uuid.UUID
	if err := s.Pool.QueryRow(context.Background(), `SELECT user_id, id FROM holds WHERE shard_id = $1 AND state = 'HELD' LIMIT 1`, shard).Scan(&user, &id); err != nil {
		t.Fatalf("a hold of shard %d: %v", shard, err)
	}
	return user, id
}

// TestBrowserFunnelFallsBackToPolling: with no websocket at all, the page
// says it is polling and still shows a rush from /console/funnel.json.
func TestBrowserFunnelFallsBackToPolling(t *testing.T) {
	testenv.Chromium(t)
	t.Parallel()
	s := setup(t, teststack.Options{})
	shard, date := s.DemoShard(t, 3, 0)
	users := s.Users(t, "poll", 4)
	ctx := testenv.NewBrowser(t, testenv.BrowserOptions{Timeout: 30 * time.Second}).Ctx
	// Every page of this browser has no WebSocket.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
		Source: `window.WebSocket = function () { throw new Error("no websockets here"); };`}); err != nil {
		t.Fatal(err)
	}
	base := s.Server.URL
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/console/login"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=login]`)),
		chromedp.SetValue(chromedp.CSS(`[data-testid=login-name]`), "ops1"), chromedp.SetValue(chromedp.CSS(`[data-testid=login-password]`), password)); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Click(chromedp.CSS(`[data-testid=login-submit]`)))); err != nil {
		t.Fatal(err)
	}
	heldSel := fmt.Sprintf(`[data-testid="total-%d-held"]`, shard)
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/console/funnel"), chromedp.WaitReady(chromedp.CSS(heldSel))); err != nil {
		t.Fatal(err)
	}
	rush(t, s, users, date, "poll")
	testenv.Eventually(t, 12*time.Second, "the rush shown by polling, without websockets", func() error {
		held, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(heldSel)))
		if err != nil {
			t.Fatal(err)
		}
		state, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`[data-testid=live-state]`)))
		return testenv.Want(held == "3" && state == "polling", "state %q, held %q; want polling and 3", state, held)
	})
}
