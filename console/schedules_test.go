package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/riverqueue/river"

	"tatkal/booking"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
	"tatkal/jobs/backoffice"
	"tatkal/jobs/schedule"
	"tatkal/recon"
)

// TestBrowserSchedules: an operator opens the Schedules page of a working
// process with the back office, in Chromium. Every job of the schedule is
// a row, with when it runs; the daily reconciliation says 06:00 IST and
// its next run; the sweep's last run completed; a day's fetch that failed
// for good shows as discarded with its error. The page passes axe-core.
// Screenshots go to $TATKAL_SCREENSHOTS when set.
func TestBrowserSchedules(t *testing.T) {
	testenv.Chromium(t)
	s := setup(t, teststack.Options{Work: true, BackOffice: backoffice.New()})
	ctx := context.Background()
	count := func(sql string) int {
		t.Helper()
		var n int
		if err := s.Pool.QueryRow(ctx, sql).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); !ok(); time.Sleep(200 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within a minute", what)
			}
		}
	}
	// The process started its schedule: the sweep ran, and the daily
	// reconciliation caught today up with its days' fetches.
	waitFor("the first sweep and the day's plan", func() bool {
		return count(`SELECT count(*) FROM river_job WHERE kind IN ('hold_sweep', 'recon_daily') AND state = 'completed'`) >= 2 &&
			count(`SELECT count(*) FROM river_job WHERE kind LIKE 'recon%' AND finalized_at IS NULL`) == 0
	})
	// Then a day's fetch from a gateway nobody has a key for, with no retry.
	yesterday := time.Now().In(booking.IST).AddDate(0, 0, -1)
	if _, err := s.River.Insert(ctx, recon.FetchArgs{Gateway: "nosuchpay", Date: yesterday}, &river.InsertOpts{MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	waitFor("the failed fetch", func() bool {
		return count(`SELECT count(*) FROM river_job WHERE kind = 'recon_fetch' AND state = 'discarded'`) == 1
	})

	b := testenv.NewBrowser(t, testenv.BrowserOptions{Width: 1440, Height: 1000, Timeout: 45 * time.Second})
	base := s.Server.URL
	signIn(t, b, base, "ops1")
	b.Do("open schedules", chromedp.Navigate(base+"/console/schedules"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=schedule-rows]`)))
	if n, want := b.Count(`[data-testid=schedule-rows] tbody tr`), len(s.App.Schedule); n != want || want < 10 {
		t.Fatalf("%d rows, want one per job of the schedule (%d)", n, want)
	}
	row := func(kind, cell string) string {
		t.Helper()
		return b.Text(`[data-testid="schedule-` + kind + `"] [data-testid=` + cell + `]`)
	}
	next := schedule.Daily(schedule.DefaultReconAt).Next(time.Now()).In(booking.IST).Format("02 Jan 15:04:05")
	if got := row("recon_daily", "when"); got != "daily at 06:00 IST" {
		t.Errorf("the reconciliation runs %q", got)
	}
	if got := row("recon_daily", "next"); got != next {
		t.Errorf("the reconciliation's next run %q, want %q", got, next)
	}
	if got := row("recon_daily", "outcome"); got != "completed" {
		t.Errorf("the reconciliation's last run: %q", got)
	}
	if got := row("hold_sweep", "when"); got != "every 30s" {
		t.Errorf("the sweep runs %q", got)
	}
	if got := row("hold_sweep", "outcome"); got != "completed" || row("hold_sweep", "last") == "none kept" {
		t.Errorf("the sweep's last run: %q at %q", got, row("hold_sweep", "last"))
	}
	if got := row("recon_fetch", "outcome"); !strings.HasPrefix(got, "discarded") || !strings.Contains(got, `No API key for gateway "nosuchpay"`) {
		t.Errorf("the failed fetch: %q", got)
	}
	if got := row("chart_prepare", "when"); got != "at each shard's chart time before departure" {
		t.Errorf("charting: %q", got)
	}
	b.Accessible("schedules")
	b.Shot("schedules")
}
