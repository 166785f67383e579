package console_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"

	"tatkal/booking/funnel"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
)

// TestBrowserFunnelCharts: ops opens the funnel before a small rush. Every
// shard is quiet: one summed line per chart and one-line shard panels.
// During the rush the rushed shard gets its own line, the charts move
// over the websocket and its panel opens; the hold p95 chart rises and,
// once the holds are paid by UPI, a payment route's answered line and the
// payment p95 move too, and a breaker opening is noted on its route's
// chart; the checkbox shows each quiet shard's own line. axe-core finds nothing serious, at desktop and phone
// width. Screenshots go to $TATKAL_SCREENSHOTS when set.
func TestBrowserFunnelCharts(t *testing.T) {
	testenv.Chromium(t)
	t.Parallel()
	s := setup(t, teststack.Options{})
	shard, date := s.DemoShard(t, 6, 0)
	users := s.Users(t, "ch", 9)
	b := testenv.NewBrowser(t, testenv.BrowserOptions{Width: 1440, Height: 1000, Timeout: 90 * time.Second})
	base := s.Server.URL
	signIn(t, b, base, "ops1")
	b.Do("open funnel", chromedp.Navigate(base+"/console/funnel"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=chart-held]`)))
	waitFor := func(what string, d time.Duration, ok func() bool) {
		t.Helper()
		testenv.Eventually(t, d, what, func() error { return testenv.Want(ok(), "not yet") })
	}
	waitFor("the funnel goes live", 10*time.Second, func() bool { return b.Text(`[data-testid=live-state]`) == "live" })
	own := fmt.Sprintf(`[data-chart=held] polyline[data-line="%d"]`, shard)
	sum := `[data-chart=held] polyline[data-line="-1"]`
	panel := fmt.Sprintf(`[data-testid="shard-%d"]`, shard)
	shown := func(sel string) bool {
		v, err := chromedp.Run(b.Ctx, chromedp.Evaluate[bool](`(e => !!e && getComputedStyle(e).display !== "none")(document.querySelector(`+jsString(sel)+`))`))
		if err != nil {
			t.Fatalf("is %s shown: %v", sel, err)
		}
		return v
	}
	open := func() bool {
		v, err := chromedp.Run(b.Ctx, chromedp.Evaluate[bool](`document.querySelector(`+jsString(panel)+`).open`))
		if err != nil {
			t.Fatalf("is %s open: %v", panel, err)
		}
		return v
	}
	if shown(own) || !shown(sum) || open() || b.Text(`[data-testid=peak-held]`) != "0/s" {
		t.Fatalf("before the rush: own line shown %v, sum shown %v, panel open %v, held peak %s; want the shard quiet in the sum",
			shown(own), shown(sum), open(), b.Text(`[data-testid=peak-held]`))
	}
	quietBefore := b.Text(`[data-testid=quiet-count]`)
	flat := b.Attr(own, "points")
	if got := b.Text(`[data-testid=peak-p95-hold_attempt]`); got != "0 ms" {
		t.Fatalf("before the rush the hold p95 chart peaks at %s", got)
	}
	if n := b.Count(`[data-testid=route-charts] [data-chart^=route-]`); n == 0 {
		t.Fatal("no payment route charts")
	}
	b.Shot("funnel-charts-before")

	go rush(t, s, users, date, "ch")
	// The charts show complete 5-second buckets: the rush is drawn within about 6 s.
	waitFor("the rushed shard gets its own moving line", 20*time.Second, func() bool {
		return shown(own) && b.Attr(own, "points") != flat && b.Text(`[data-testid=peak-held]`) != "0/s"
	})
	if !open() {
		t.Fatal("the rushed shard's panel stayed collapsed")
	}
	if got := b.Text(`[data-testid=quiet-count]`); got == quietBefore {
		t.Fatalf("quiet shards still %s after one turned busy", got)
	}
	if !strings.Contains(b.Text(`[data-testid=chart-legend]`), fmt.Sprintf("%d 12951", shard)) {
		t.Fatalf("the legend does not name the busy shard: %s", b.Text(`[data-testid=chart-legend]`))
	}
	// The rush's holds are timed: their p95 over time rises off zero. Paying
	// for them by UPI calls a gateway: a route's answered line moves, and
	// payment initiation gets its p95.
	waitFor("the hold p95 chart moves", 20*time.Second, func() bool {
		return b.Text(`[data-testid=peak-p95-hold_attempt]`) != "0 ms"
	})
	rows, err := s.Pool.Query(context.Background(), `SELECT id::text FROM holds WHERE shard_id = $1 AND state = 'HELD'`, shard)
	if err != nil {
		t.Fatal(err)
	}
	holds, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(holds) == 0 {
		t.Fatalf("held after the rush: %v %v", holds, err)
	}
	for _, h := range holds {
		var user int64
		if err := s.Pool.QueryRow(context.Background(), `SELECT user_id FROM holds WHERE id = $1`, h).Scan(&user); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Payments.Initiate(context.Background(), teststack.Caller(user), paymentReq(h, "UPI")); err != nil {
			t.Fatalf("pay hold %s: %v", h, err)
		}
	}
	// A breaker opening (as a process records it) is noted on its route's chart, live.
	hs, err := s.Payments.Healths(context.Background())
	if err != nil || len(hs) == 0 {
		t.Fatalf("routes: %v %v", hs, err)
	}
	route := hs[0].Gateway + "/" + hs[0].Method
	note := `[data-testid="note-route-` + hs[0].Gateway + "-" + hs[0].Method + `"]`
	if got := b.Text(note); got != "" {
		t.Fatalf("%s's breaker never opened, yet its chart says %q", route, got)
	}
	s.Funnel.RouteEvent(route, funnel.RouteBreakerOpened)
	answered := `[data-testid=route-charts] polyline[data-line=answered]`
	waitFor("a route's answered line, the payment p95 and the breaker note move", 20*time.Second, func() bool {
		v, err := chromedp.Run(b.Ctx, chromedp.Evaluate[bool](`[...document.querySelectorAll(`+jsString(answered)+`)].some(e => e.getAttribute("points") !== "0,99 480,99")`))
		return err == nil && v && b.Text(`[data-testid=peak-p95-pay_initiated]`) != "0 ms" && b.Text(note) == "breaker opened 1×"
	})
	b.Shot("funnel-charts")

	// Expanding the quiet shards shows their own lines instead of the sum.
	quietOne := `[data-chart=held] polyline[data-quiet="1"]`
	b.Do("expand quiet shards", chromedp.Click(chromedp.CSS(`[data-testid=expand-quiet]`)))
	if !shown(quietOne) || shown(sum) || !shown(own) {
		t.Fatalf("expanded: a quiet line shown %v, the sum shown %v, the busy line shown %v", shown(quietOne), shown(sum), shown(own))
	}
	b.Shot("funnel-charts-expanded")
	b.Accessible("funnel, desktop")

	b.Do("phone width", chromedp.EmulateViewport(390, 844))
	b.Do("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`[data-testid=chart-held]`)))
	waitFor("live again", 10*time.Second, func() bool { return b.Text(`[data-testid=live-state]`) == "live" })
	if !shown(own) {
		t.Fatal("at phone width the busy shard's line is gone")
	}
	b.Shot("funnel-charts-phone")
	// Nothing but the routes' own scroll box is wider than the phone.
	if w, err := chromedp.Run(b.Ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth - innerWidth`)); err != nil || w > 0 {
		t.Fatalf("at phone width the page is %d px too wide (%v)", w, err)
	}
	b.Accessible("funnel, phone")
}

func jsString(s string) string { return "`" + strings.ReplaceAll(s, "`", "\\`") + "`" }
