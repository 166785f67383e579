package rehearse_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"tatkal/booking/app"
	"tatkal/booking/auth"
	"tatkal/booking/lab/rehearse"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
	"tatkal/console"
)

// TestBrowserLab drives the console's Lab page in headless Chromium: ops
// starts a small rehearsal (direct mode, 60 travellers, 12 berths, 12 s),
// watches its live chart gain points while it runs, sees the backend's
// capacity drawn beside the load, and reads the
// comparison table and the followed traveller when it ends; the run is in
// the list and the start is in the audit log. Screenshots go to
// $TATKAL_SCREENSHOTS when set.
func TestBrowserLab(t *testing.T) {
	testenv.Chromium(t)
	t.Parallel()
	s := teststack.New(t, teststack.Options{Lab: func(a *app.App) app.LabCloser { return rehearse.NewLab(a) }})
	const password = "console-test"
	if _, err := console.SeedUsers(context.Background(), s.Pool, []console.DemoUser{{Login: "ops1", Password: password, Role: console.Ops}},
		auth.Argon2Params{MemoryKiB: 64, Time: 1, Threads: 1}); err != nil {
		t.Fatal(err)
	}
	b := testenv.NewBrowser(t, testenv.BrowserOptions{Width: 1280, Height: 1400, Timeout: 150 * time.Second})
	base := s.Server.URL
	do, text, attr, submit, shot := b.Do, b.Text, b.Attr, b.Submit, b.Shot
	do("open login", chromedp.Navigate(base+"/console/login"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=login]`)),
		chromedp.SetValue(chromedp.CSS(`[data-testid=login-name]`), "ops1"), chromedp.SetValue(chromedp.CSS(`[data-testid=login-password]`), password))
	submit("sign in", `[data-testid=login-submit]`)
	do("open the lab", chromedp.Navigate(base+"/console/lab"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=lab-form]`)))
	do("fill the form", chromedp.SetValue(chromedp.CSS(`input[name=travellers]`), "60"), chromedp.SetValue(chromedp.CSS(`input[name=berths]`), "12"),
		chromedp.SetValue(chromedp.CSS(`input[name=duration]`), "12"), chromedp.SetValue(chromedp.CSS(`select[name=mode]`), "direct"))
	submit("start", `[data-testid=lab-start]`)
	if got := text(`[data-testid=lab-state]`); got != "RUNNING" {
		t.Fatalf("after starting: state %q", got)
	}
	// The live chart gains points while it runs (the page reloads itself).
	first, moved := -1, false
	testenv.Eventually(t, 60*time.Second, "the live chart moving or the run ended", func() error {
		// The page reloads itself every 2 s: an empty answer is a page
		// between loads.
		state := attr(`[data-testid=lab-run]`, "data-state")
		if state == "DONE" || state == "FAILED" {
			return nil
		}
		n, _ := strconv.Atoi(attr(`[data-testid=chart-lab-backend] polyline[data-line=direct]`, "data-points"))
		if first < 0 {
			first = n
		} else if moved = n > first; moved {
			shot("lab-live")
			return nil
		}
		return fmt.Errorf("%d points, state %q", n, state)
	})
	if !moved {
		shot("lab-not-moving")
		t.Fatalf("the live chart never gained points (first %d); the run says: %s", first, text(`[data-testid=lab-run]`))
	}
	// When it ends: the table, read.
	testenv.Eventually(t, 90*time.Second, "the rehearsal ended", func() error {
		st := attr(`[data-testid=lab-run]`, "data-state")
		return testenv.Want(st == "DONE" || st == "FAILED", "state %q", st)
	})
	do("wait for the table", chromedp.WaitVisible(chromedp.CSS(`[data-testid=lab-table]`)))
	shot("lab-done")
	// The backend chart draws the backend's capacity beside the mode's
	// load: a line over every second the run recorded, named in the legend.
	const capLine = `[data-testid=chart-lab-backend] polyline[data-line=capacity]`
	n, _ := strconv.Atoi(attr(capLine, "data-points"))
	if direct, _ := strconv.Atoi(attr(`[data-testid=chart-lab-backend] polyline[data-line=direct]`, "data-points")); n < 2 || n != direct {
		t.Errorf("the capacity line draws %d seconds, the direct line %d", n, direct)
	}
	if pts := attr(capLine, "points"); strings.Count(pts, ",") < 2 {
		t.Errorf("the capacity line's points: %q", pts)
	}
	if got := text(`[data-testid=chart-lab-backend] .legend`); !strings.Contains(got, "backend capacity") {
		t.Errorf("the backend chart's legend: %q", got)
	}
	if got := text(`[data-testid=lab-state]`); got != "DONE" {
		t.Fatalf("ended %q: %s", got, text(`[data-testid=lab-run]`))
	}
	// The live figures besides the load: holds, payments and (in
	// queue mode) admissions, second by second.
	for _, c := range []string{"lab-holds", "lab-payments"} {
		if n, _ := strconv.Atoi(attr(`[data-testid=chart-`+c+`] polyline[data-line=direct]`, "data-points")); n < 2 {
			t.Errorf("chart %s draws %d seconds of the direct run", c, n)
		}
	}
	table := text(`[data-testid=lab-table]`)
	for _, row := range []string{"Successful bookings", "Oversold berth-legs", "Payments unresolved after drain", "Money in and out"} {
		if !strings.Contains(table, row) {
			t.Errorf("the table lacks %q:\n%s", row, table)
		}
	}
	if !strings.Contains(table, "Oversold berth-legs\t0") && !strings.Contains(table, "Oversold berth-legs 0") {
		t.Logf("table:\n%s", table)
	}
	if steps := text(`[data-testid=lab-follow]`); !strings.Contains(steps, "arrives") {
		t.Errorf("followed traveller: %q", steps)
	}
	do("back to the list", chromedp.Navigate(base+"/console/lab"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=lab-runs]`)))
	if got := text(`[data-testid=lab-runs]`); !strings.Contains(got, "DONE") || !strings.Contains(got, "ops1") {
		t.Fatalf("runs list: %q", got)
	}
	var audited int
	if err := s.Pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_log WHERE action = 'rehearsal.start'`).Scan(&audited); err != nil {
		t.Fatal(err)
	}
	if audited != 1 {
		t.Fatalf("%d audited starts, want 1", audited)
	}
}
