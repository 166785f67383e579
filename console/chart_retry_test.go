package console_test

import (
	"cmp"
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tatkal/booking"
	"tatkal/booking/lab/teststack"
	"tatkal/booking/prs"
)

// sendGate counts the passes through one pause point (the chart's sends
// to the core, chart.before-send, unless point says another) and can hold
// one there.
type sendGate struct {
	point   string
	sends   atomic.Int32
	mu      sync.Mutex
	hold    bool
	reached chan struct{}
	release chan struct{}
}

func (g *sendGate) pause(ctx context.Context, point string) {
	if want := cmp.Or(g.point, "chart.before-send"); point != want {
		return
	}
	g.sends.Add(1)
	g.mu.Lock()
	hold := g.hold
	g.hold = false
	g.mu.Unlock()
	if hold {
		close(g.reached)
		select {
		case <-g.release:
		case <-ctx.Done():
		}
	}
}

// answer is a page's answer to a post.
type answer struct {
	code int
	page string
	loc  string
}

// race has first post path and hold there at g's point while second posts
// path, then lets the first go on; it returns both answers.
func race(t *testing.T, g *sendGate, first, second *browser, path string) (answer, answer) {
	t.Helper()
	g.holdNext()
	done := make(chan answer, 1)
	go func() {
		code, page, h := first.post(path, nil)
		done <- answer{code, page, h.Get("Location")}
	}()
	select {
	case <-g.reached:
	case <-time.After(30 * time.Second):
		t.Fatalf("the first post of %s never reached %s", path, cmp.Or(g.point, "chart.before-send"))
	}
	code, page, h := second.post(path, nil)
	close(g.release)
	return <-done, answer{code, page, h.Get("Location")}
}

func (g *sendGate) holdNext() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.hold, g.reached, g.release = true, make(chan struct{}), make(chan struct{})
}

// A chart whose delivery to the core FAILED (its job gave up, the alarm
// raised) is sent again from the console by ops: while the core is still
// down the retry fails, is shown and audited, and the chart stays FAILED;
// once the core is healthy the retry sends it, once: a second operator
// clicking while the first send is in flight is told it is in hand and
// sends nothing, and a retry after success is refused. Finance cannot.
func TestChartRetryFromTheConsole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := &sendGate{}
	s := setup(t, teststack.Options{Pause: g.pause})
	shardID, date := s.DemoShard(t, 2, 0)
	users := s.Users(t, "cr", 1)
	h, err := s.Service.Hold(ctx, teststack.Caller(users[0]), booking.HoldRequest{UserID: users[0], IdempotencyKey: "cr-hold-1", Train: "12951",
		Date: date, Class: "3A", From: "MMCT", To: "NDLS", Passengers: []booking.Passenger{{Name: "Meera Pillai", Age: 41, Gender: "F",
			IDType: "PAN", IDRef: "ABCDE1234F"}}})
	if err != nil || h.Status != "HELD" {
		t.Fatalf("hold: %+v %v", h, err)
	}
	_, err = s.Service.Confirm(ctx, h.HoldID)
	teststack.Must(t, err, "confirm")
	s.Recorded(t, h.HoldID) // the booking is at the core; the chart is what fails
	_, err = s.Service.Chart(ctx, shardID)
	teststack.Must(t, err, "chart")

	// The core is down at chart time; the send job's last attempt gives up.
	s.SetCoreFaults(t, prs.Faults{Outage: true})
	if err := s.Service.ChartJob(ctx, shardID, true, booking.ChartMaxAttempts, booking.ChartMaxAttempts); err == nil {
		t.Fatal("the send job's last attempt succeeded against a core that is down")
	}
	state := func() (string, string) {
		t.Helper()
		var core, why string
		teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT chart_core_state, chart_error FROM inventory_shards WHERE id = $1`, shardID).Scan(&core, &why), "chart")
		return core, why
	}
	if core, _ := state(); core != "FAILED" {
		t.Fatalf("after the job gave up: %s, want FAILED", core)
	}
	path := "/console/shards/" + itoa(shardID) + "/chart/retry"
	retry := "chart-retry-" + itoa(shardID)

	ops := newBrowser(t, s.Server.URL)
	ops.login("ops1")
	if _, page, _ := ops.get("/console/shards"); !strings.Contains(page, `data-testid="`+retry+`"`) || !strings.Contains(page, "NOT at the core") {
		t.Fatalf("the shards page offers no retry for the FAILED chart:\n%.3000s", page)
	}
	fin := newBrowser(t, s.Server.URL)
	fin.login("finance1")
	fin.get("/console/audit")
	if code, _, _ := fin.post(path, nil); code != http.StatusForbidden {
		t.Fatalf("finance retried the chart: %d, want 403", code)
	}
	before := g.sends.Load()

	// Still down: the retry fails, says so, and leaves it FAILED.
	ops.get("/console/shards")
	code, page, _ := ops.post(path, nil)
	if code != http.StatusBadGateway || !strings.Contains(page, "did not take the chart") {
		t.Fatalf("retry while the core is down: %d\n%.3000s", code, page)
	}
	if core, why := state(); core != "FAILED" || !strings.Contains(why, "retry by an operator failed") {
		t.Fatalf("after a failed retry: %s %q, want FAILED with the reason", core, why)
	}
	if n := g.sends.Load() - before; n != 1 {
		t.Fatalf("the failed retry sent %d times, want 1", n)
	}

	// Healthy again: one retry sends it while a second, in flight at the
	// same time, is told it is in hand and sends nothing.
	s.SetCoreFaults(t, prs.Faults{})
	before = g.sends.Load()
	admin := newBrowser(t, s.Server.URL)
	admin.login("admin1")
	admin.get("/console/shards")
	ops.get("/console/shards")
	a, b := race(t, g, ops, admin, path)
	if b.code != http.StatusConflict || !strings.Contains(b.page, "being sent now") {
		t.Fatalf("second retry while the first is sending: %d\n%.3000s", b.code, b.page)
	}
	if a.code != http.StatusSeeOther {
		t.Fatalf("retry once the core is healthy: %d\n%.3000s", a.code, a.page)
	}
	if _, page, _ := ops.get(a.loc); !strings.Contains(page, "is at the reservation core now") {
		t.Fatalf("the result is not shown:\n%.3000s", page)
	}
	if core, _ := state(); core != "SENT" {
		t.Fatalf("after the retry: %s, want SENT", core)
	}
	if code, page, _ := ops.post(path, nil); code != http.StatusConflict || !strings.Contains(page, "already at the core") {
		t.Fatalf("retry of a chart at the core: %d\n%.2000s", code, page)
	}
	if n := g.sends.Load() - before; n != 1 {
		t.Fatalf("the chart was sent %d times after the core healed, want once", n)
	}
	var charts int
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM prs.charts`).Scan(&charts), "core charts")
	if charts != 1 {
		t.Fatalf("%d charts at the core, want 1", charts)
	}
	var ok, failed int
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE action = 'chart.retry_send'),
		count(*) FILTER (WHERE action = 'chart.retry_send_failed') FROM audit_log WHERE subject = $1 AND actor IN ('ops1', 'admin1')`, itoa(shardID)).Scan(&ok, &failed), "audit")
	if ok != 1 || failed != 3 { // down, in hand, already sent
		t.Fatalf("audit: %d retries sent, %d refused or failed; want 1 and 3", ok, failed)
	}
}
