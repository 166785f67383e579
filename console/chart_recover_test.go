package console_test

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"tatkal/booking"
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/teststack"
	"tatkal/booking/payment"
	"tatkal/booking/prs"
)

// A send of the chart from the console whose process dies after claiming
// it (forced: the claim's pause point ends the sending goroutine) leaves
// the chart PENDING. Within the lease it is shown in hand and a retry is
// refused; once the lease has run out the console offers it again, and of
// two operators retrying at once one sends it, once.
func TestChartSendCutOffIsSentAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := &sendGate{}
	var crash atomic.Bool
	s := setup(t, teststack.Options{Pause: func(ctx context.Context, point string) {
		if point == "chart.retry-claimed" && crash.CompareAndSwap(true, false) {
			runtime.Goexit() // the process dies here, its claim committed
		}
		g.pause(ctx, point)
	}})
	shardID, date := s.DemoShard(t, 2, 0)
	users := s.Users(t, "cc", 1)
	h, err := s.Service.Hold(ctx, teststack.Caller(users[0]), booking.HoldRequest{UserID: users[0], IdempotencyKey: "cc-hold-1", Train: "12951",
		Date: date, Class: "3A", From: "MMCT", To: "NDLS", Passengers: []booking.Passenger{{Name: "Meera Pillai", Age: 41, Gender: "F",
			IDType: "PAN", IDRef: "ABCDE1234F"}}})
	if err != nil || h.Status != "HELD" {
		t.Fatalf("hold: %+v %v", h, err)
	}
	_, err = s.Service.Confirm(ctx, h.HoldID)
	teststack.Must(t, err, "confirm")
	s.Recorded(t, h.HoldID)
	_, err = s.Service.Chart(ctx, shardID)
	teststack.Must(t, err, "chart")
	s.SetCoreFaults(t, prs.Faults{Outage: true})
	if err := s.Service.ChartJob(ctx, shardID, true, booking.ChartMaxAttempts, booking.ChartMaxAttempts); err == nil {
		t.Fatal("the send job's last attempt succeeded against a core that is down")
	}
	s.SetCoreFaults(t, prs.Faults{})
	state := func() string {
		t.Helper()
		var core string
		teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT chart_core_state FROM inventory_shards WHERE id = $1`, shardID).Scan(&core), "chart")
		return core
	}
	if core := state(); core != "FAILED" {
		t.Fatalf("after the job gave up: %s, want FAILED", core)
	}

	// An operator's send dies after its claim.
	before := g.sends.Load()
	crash.Store(true)
	died := make(chan struct{})
	go func() {
		defer close(died)
		s.Service.RetryChartSend(ctx, shardID) //nolint:errcheck // it never returns
	}()
	<-died
	if core, n := state(), g.sends.Load()-before; core != "PENDING" || n != 0 {
		t.Fatalf("after the send died: %s with %d sends, want PENDING and none", core, n)
	}
	path := "/console/shards/" + itoa(shardID) + "/chart/retry"
	retry := `data-testid="chart-retry-` + itoa(shardID) + `"`
	ops := newBrowser(t, s.Server.URL)
	ops.login("ops1")
	if _, page, _ := ops.get("/console/shards"); strings.Contains(page, retry) {
		t.Fatalf("within the lease the page offers a retry of a chart in hand:\n%.3000s", page)
	}
	if code, page, _ := ops.post(path, nil); code != http.StatusConflict || !strings.Contains(page, "being sent now") {
		t.Fatalf("retry within the lease: %d, want 409 in hand\n%.3000s", code, page)
	}

	// The lease runs out.
	_, err = s.Pool.Exec(ctx, `UPDATE inventory_shards SET chart_sending_since = now() - make_interval(secs => $2) - interval '1 second' WHERE id = $1`,
		shardID, booking.ChartSendLease.Seconds())
	teststack.Must(t, err, "let the lease run out")
	if _, page, _ := ops.get("/console/shards"); !strings.Contains(page, retry) || !strings.Contains(page, "never finished") {
		t.Fatalf("after the lease the page offers no retry:\n%.3000s", page)
	}
	admin := newBrowser(t, s.Server.URL)
	admin.login("admin1")
	admin.get("/console/shards")
	a, b := race(t, g, ops, admin, path)
	if b.code != http.StatusConflict || !strings.Contains(b.page, "being sent now") {
		t.Fatalf("second retry while the first is sending: %d\n%.3000s", b.code, b.page)
	}
	if a.code != http.StatusSeeOther {
		t.Fatalf("retry after the lease: %d\n%.3000s", a.code, a.page)
	}
	if core, n := state(), g.sends.Load()-before; core != "SENT" || n != 1 {
		t.Fatalf("after the retry: %s with %d sends, want SENT and one", core, n)
	}
	var charts, ok, refused int
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM prs.charts`).Scan(&charts), "core charts")
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE action = 'chart.retry_send'),
		count(*) FILTER (WHERE action = 'chart.retry_send_failed') FROM audit_log WHERE subject = $1`, itoa(shardID)).Scan(&ok, &refused), "audit")
	if charts != 1 || ok != 1 || refused != 2 {
		t.Fatalf("%d charts at the core, audit %d sent and %d refused; want 1, 1 and 2", charts, ok, refused)
	}
}

// A chart whose preparation FAILED (its job gave up) is prepared again
// from the console: the free berth goes to the first waitlisted ticket,
// the second is cancelled and refunded, the chart is queued for the core.
// Two operators at once (the first held inside its preparation) cause one
// preparation: the second is told it is in hand; a retry after is refused
// as charted, and finance cannot. Each is audited.
func TestChartPreparationRetryFromTheConsole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := &sendGate{point: "chart.after-promote"}
	s := setup(t, teststack.Options{Pause: g.pause})
	shardID, date := s.DemoShard(t, 1, 5)
	users, err := seed.Users(ctx, s.Pool, seed.UsersSpec{Count: 3, Prefix: "cp", PasswordHash: "x", WalletRupees: 10000})
	teststack.Must(t, err, "users")
	book := func(i int, want string) uuid.UUID {
		h, err := s.Service.Hold(ctx, teststack.Caller(users[i]), booking.HoldRequest{UserID: users[i], IdempotencyKey: fmt.Sprintf("cp-hold-%d", i),
			Train: "12951", Date: date, Class: "3A", From: "MMCT", To: "NDLS", Passengers: []booking.Passenger{{Name: fmt.Sprintf("Passenger %c", 'A'+i),
				Age: 30 + i, Gender: "M", IDType: "PAN", IDRef: "ABCDE1234F"}}})
		if err != nil || h.Status != want {
			t.Fatalf("hold %d: %+v %v, want %s", i, h, err, want)
		}
		pay, err := s.Payments.Initiate(ctx, teststack.Caller(users[i]), payment.InitiateRequest{HoldID: h.HoldID, Method: payment.Wallet,
			IdempotencyKey: fmt.Sprintf("cp-pay-%d", i)})
		if err != nil || pay.State != payment.Success {
			t.Fatalf("pay %d: %+v %v", i, pay, err)
		}
		return h.HoldID
	}
	seat := book(0, "HELD")
	w1, w2 := book(1, "WAITLIST_OFFERED"), book(2, "WAITLIST_OFFERED")
	s.Recorded(t, seat)
	_, err = s.Service.CancelBooking(ctx, users[0], seat, nil)
	teststack.Must(t, err, "cancel the seat")
	// The chart job gave up, as booking.ChartJob records it: FAILED, the
	// window closed, the reason kept, nothing of the preparation done.
	_, err = s.Pool.Exec(ctx, `UPDATE inventory_shards SET chart_state = 'FAILED', chart_error = 'gave up after 20 attempts: boom',
		window_closes_at = least(window_closes_at, now()) WHERE id = $1`, shardID)
	teststack.Must(t, err, "the chart job gave up")

	path := "/console/shards/" + itoa(shardID) + "/chart/prepare"
	ops := newBrowser(t, s.Server.URL)
	ops.login("ops1")
	if _, page, _ := ops.get("/console/shards"); !strings.Contains(page, `data-testid="chart-prepare-`+itoa(shardID)+`"`) || !strings.Contains(page, "chart FAILED: gave up") {
		t.Fatalf("the shards page offers no new preparation of the FAILED chart:\n%.3000s", page)
	}
	fin := newBrowser(t, s.Server.URL)
	fin.login("finance1")
	fin.get("/console/audit")
	if code, _, _ := fin.post(path, nil); code != http.StatusForbidden {
		t.Fatalf("finance prepared the chart: %d, want 403", code)
	}
	admin := newBrowser(t, s.Server.URL)
	admin.login("admin1")
	admin.get("/console/shards")

	a, b := race(t, g, ops, admin, path)
	if b.code != http.StatusConflict || !strings.Contains(b.page, "being prepared now") {
		t.Fatalf("second preparation while the first runs: %d\n%.3000s", b.code, b.page)
	}
	if a.code != http.StatusSeeOther {
		t.Fatalf("preparation: %d\n%.3000s", a.code, a.page)
	}
	if _, page, _ := ops.get(a.loc); !strings.Contains(page, "1 promoted from the waitlist, 1 waitlisted cancelled and refunded") {
		t.Fatalf("the result is not shown:\n%.3000s", page)
	}
	if code, page, _ := ops.post(path, nil); code != http.StatusConflict || !strings.Contains(page, "already prepared") {
		t.Fatalf("preparation of a charted shard: %d\n%.2000s", code, page)
	}
	if n := g.sends.Load(); n != 1 {
		t.Fatalf("the chart was prepared %d times, want once", n)
	}
	var chart, core, why string
	var sendJobs, refunds int
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT chart_state, chart_core_state, chart_error FROM inventory_shards WHERE id = $1`, shardID).
		Scan(&chart, &core, &why), "chart")
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'chart_send' AND args->>'shard_id' = $1`, itoa(shardID)).
		Scan(&sendJobs), "send job")
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM refunds r JOIN payments p ON p.id = r.payment_id WHERE p.hold_id = $1`, w2).
		Scan(&refunds), "refunds")
	if chart != "CHARTED" || core != "PENDING" || why != "" || sendJobs != 1 || refunds != 1 {
		t.Fatalf("after the preparation: %s, core %s, error %q, %d send jobs, %d refunds of TQWL/2; want CHARTED, PENDING, none, 1, 1",
			chart, core, why, sendJobs, refunds)
	}
	v1, err := s.Service.Status(ctx, users[1], w1)
	teststack.Must(t, err, "status 1")
	v2, err := s.Service.Status(ctx, users[2], w2)
	teststack.Must(t, err, "status 2")
	if v1.BookingStat != booking.BookingConfirmed || v2.BookingStat != booking.BookingCancelled {
		t.Fatalf("TQWL/1 %s, TQWL/2 %s; want CONFIRMED and CANCELLED", v1.BookingStat, v2.BookingStat)
	}
	var ok, refused int
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE action = 'chart.retry_prepare'),
		count(*) FILTER (WHERE action = 'chart.retry_prepare_failed') FROM audit_log WHERE subject = $1 AND actor IN ('ops1', 'admin1')`, itoa(shardID)).
		Scan(&ok, &refused), "audit")
	if ok != 1 || refused != 2 {
		t.Fatalf("audit: %d prepared, %d refused; want 1 and 2", ok, refused)
	}
}
