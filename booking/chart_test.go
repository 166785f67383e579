package booking_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"tatkal/booking"
	"tatkal/booking/india"
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/teststack"
	"tatkal/booking/payment"
	"tatkal/booking/prs"
)

// At charting a shard with one free berth and two paid waitlisted tickets:
// the first is confirmed, the second cancelled and refunded the fare less
// clerkage, once, though the chart is prepared three times at once (a
// retried or doubled job); the shard is CHARTED and takes no more holds.
func TestChartConfirmsWhatFitsAndRefundsTheRestOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{})
	shardID, date := s.DemoShard(t, 1, 5)
	users, err := seed.Users(ctx, s.Pool, seed.UsersSpec{Count: 4, Prefix: "ch", PasswordHash: "x", WalletRupees: 10000})
	teststack.Must(t, err, "users")
	book := func(i int, want string) uuid.UUID {
		h, err := s.Service.Hold(ctx, teststack.Caller(users[i]), holdReq(users[i], fmt.Sprintf("chart-%04d", i), date, "MMCT", "NDLS",
			pax(fmt.Sprintf("Passenger %c", 'A'+i), 30+i, "M")))
		if err != nil || h.Status != want {
			t.Fatalf("hold %d: %+v %v, want %s", i, h, err, want)
		}
		pay, err := s.Payments.Initiate(ctx, teststack.Caller(users[i]), payment.InitiateRequest{HoldID: h.HoldID, Method: payment.Wallet,
			IdempotencyKey: fmt.Sprintf("chart-pay-%04d", i)})
		if err != nil || pay.State != payment.Success {
			t.Fatalf("pay %d: %+v %v", i, pay, err)
		}
		return h.HoldID
	}
	seat := book(0, "HELD")
	w1, w2 := book(1, "WAITLIST_OFFERED"), book(2, "WAITLIST_OFFERED")
	// The confirmed berth is cancelled with no worker running: its
	// promotion job waits, and the chart does the promotion instead.
	s.Recorded(t, seat)
	_, err = s.Service.CancelBooking(ctx, users[0], seat, nil)
	teststack.Must(t, err, "cancel the seat")

	var wg sync.WaitGroup
	reps := make([]booking.ChartReport, 3)
	errs := make([]error, 3)
	for i := range 3 {
		wg.Go(func() { reps[i], errs[i] = s.Service.Chart(ctx, shardID) })
	}
	wg.Wait()
	charted := 0
	for i := range 3 {
		teststack.Must(t, errs[i], "chart %d", i)
		if !reps[i].Already {
			charted++
			if len(reps[i].Promoted) != 1 || len(reps[i].Cancelled) != 1 {
				t.Fatalf("chart: %+v, want one promoted and one cancelled", reps[i])
			}
		}
	}
	if charted != 1 {
		t.Fatalf("%d of 3 concurrent charts did the work, want 1", charted)
	}
	v1, err := s.Service.Status(ctx, users[1], w1)
	teststack.Must(t, err, "status 1")
	v2, err := s.Service.Status(ctx, users[2], w2)
	teststack.Must(t, err, "status 2")
	if v1.BookingStat != booking.BookingConfirmed || v2.BookingStat != booking.BookingCancelled {
		t.Fatalf("TQWL/1 %s, TQWL/2 %s; want CONFIRMED and CANCELLED", v1.BookingStat, v2.BookingStat)
	}
	shard, err := s.Service.Catalog().ByID(ctx, shardID)
	teststack.Must(t, err, "shard")
	var refunds int
	var amount int64
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*), coalesce(sum(r.amount_paise), 0) FROM refunds r JOIN payments p ON p.id = r.payment_id
		WHERE p.hold_id = $1`, w2).Scan(&refunds, &amount), "refunds")
	if want := v2.Fare.TotalPaise - shard.Fare.Clerkage; refunds != 1 || amount != want {
		t.Fatalf("%d refunds of Rs %s for the waitlisted ticket left at charting, want one of Rs %s", refunds, india.Decimal(amount), india.Decimal(want))
	}
	var others int
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM refunds r JOIN payments p ON p.id = r.payment_id WHERE p.hold_id <> $1`, w2).
		Scan(&others), "other refunds")
	if others != 0 {
		t.Fatalf("%d refunds for tickets that were not waitlisted at charting", others)
	}
	var state string
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT chart_state FROM inventory_shards WHERE id = $1`, shardID).Scan(&state), "chart state")
	if state != "CHARTED" {
		t.Fatalf("shard %s after charting", state)
	}
	s.CheckInvariants(t, shardID)
	// The chart reaches the core (twice at once, as a doubled job would):
	// one chart there, seating the promoted ticket, which SendChart syncs
	// first (its own sync job has not run: no workers here).
	for range 2 {
		wg.Go(func() { teststack.Must(t, s.Service.SendChart(ctx, shardID), "send the chart") })
	}
	wg.Wait()
	wantChartAtCore(t, s, shardID, 1, 1)
	v1, err = s.Service.Status(ctx, users[1], w1)
	teststack.Must(t, err, "status 1")
	if v1.ChartState != "CHARTED" || v1.ChartCore != "SENT" || v1.ChartedAt.IsZero() {
		t.Fatalf("the promoted ticket's chart: %q at the core %q (%v), want CHARTED and SENT", v1.ChartState, v1.ChartCore, v1.ChartedAt)
	}
	// Frozen: no hold after the chart.
	s.Service.Catalog().Forget()
	if _, err := s.Service.Hold(ctx, teststack.Caller(users[3]), holdReq(users[3], "chart-late-1", date, "MMCT", "NDLS", pax("Late Comer", 40, "M"))); err == nil {
		t.Fatal("a hold was granted on a charted shard")
	}
}

// wantChartAtCore checks the shard's chart reached the core once, seating
// the given passengers and cancelling the given waitlisted PNRs.
func wantChartAtCore(t *testing.T, s *teststack.Stack, shardID int64, seated, cancelled int) {
	t.Helper()
	ctx := context.Background()
	var state, ref string
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT chart_core_state, chart_core_ref FROM inventory_shards WHERE id = $1`, shardID).
		Scan(&state, &ref), "chart core state")
	var charts, pax, cancels int
	var coreID string
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*), coalesce(max(passengers), 0), coalesce(max(cancelled), 0),
		coalesce(max(core_chart_id), '') FROM prs.charts`).Scan(&charts, &pax, &cancels, &coreID), "core charts")
	if state != "SENT" || charts != 1 || ref != coreID || pax != seated || cancels != cancelled {
		t.Fatalf("chart at the core: state %s ref %q; %d charts (%q) seating %d, cancelling %d; want SENT, 1 chart seating %d, cancelling %d",
			state, ref, charts, coreID, pax, cancels, seated, cancelled)
	}
}

// departIn moves the shard's journey to today with the train leaving in d
// (negative: left already), as the clock would by chart time.
func departIn(t *testing.T, s *teststack.Stack, shardID int64, d time.Duration) {
	t.Helper()
	at := time.Now().Add(d).In(booking.IST)
	if at.Day() != time.Now().In(booking.IST).Day() {
		t.Skip("the departure would cross midnight IST")
	}
	ctx := context.Background()
	_, err := s.Pool.Exec(ctx, `UPDATE inventory_shards SET journey_date = $2::date WHERE id = $1`, shardID, at.Format(time.DateOnly))
	teststack.Must(t, err, "move the journey")
	_, err = s.Pool.Exec(ctx, `UPDATE trains SET departs_at = $1::time WHERE number = '12951'`, at.Format("15:04:05"))
	teststack.Must(t, err, "move the departure")
	s.Service.Catalog().Forget()
}

// waitlistedAndPaid books one paid TQWL ticket on a shard of no berths.
func waitlistedAndPaid(t *testing.T, s *teststack.Stack, user int64, key string, date time.Time) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	h, err := s.Service.Hold(ctx, teststack.Caller(user), holdReq(user, key, date, "MMCT", "NDLS", pax("Waiting Passenger", 40, "F")))
	if err != nil || h.Status != "WAITLIST_OFFERED" {
		t.Fatalf("hold: %+v %v, want WAITLIST_OFFERED", h, err)
	}
	pay, err := s.Payments.Initiate(ctx, teststack.Caller(user), payment.InitiateRequest{HoldID: h.HoldID, Method: payment.Wallet,
		IdempotencyKey: key + "-pay"})
	if err != nil || pay.State != payment.Success {
		t.Fatalf("pay: %+v %v", pay, err)
	}
	return h.HoldID
}

func walletUsers(t *testing.T, s *teststack.Stack, prefix string, n int) []int64 {
	t.Helper()
	users, err := seed.Users(context.Background(), s.Pool, seed.UsersSpec{Count: n, Prefix: prefix, PasswordHash: "x", WalletRupees: 10000})
	teststack.Must(t, err, "users")
	return users
}

// A chart job that runs within 30 minutes of departure (a worker down at
// chart time) still charts: the waitlisted ticket is cancelled and refunded
// less clerkage, though a passenger could no longer cancel it; it does not
// fail and retry for ever on the passenger's deadline.
func TestChartNearDepartureStillSettlesTheWaitlist(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{})
	shardID, date := s.DemoShard(t, 1, 5)
	users := walletUsers(t, s, "cn", 2)
	booked(t, s, users[1], "chart-near-seat", date)
	w := waitlistedAndPaid(t, s, users[0], "chart-near-1", date)
	departIn(t, s, shardID, 20*time.Minute)
	if q, err := s.Service.CancelPreview(ctx, users[0], w); err != nil || q.Allowed || q.Reason != "TOO_LATE" {
		t.Fatalf("the passenger's own cancel 20 minutes before departure: %+v %v, want TOO_LATE", q, err)
	}
	err := s.Service.ChartJob(ctx, shardID, false, 1, booking.ChartMaxAttempts)
	teststack.Must(t, err, "chart 20 minutes before departure")
	v, err := s.Service.Status(ctx, users[0], w)
	teststack.Must(t, err, "status")
	if v.BookingStat != booking.BookingCancelled || v.ChartState != "CHARTED" {
		t.Fatalf("TQWL ticket after a late chart: %s, shard %s; want CANCELLED and CHARTED", v.BookingStat, v.ChartState)
	}
	shard, err := s.Service.Catalog().ByID(ctx, shardID)
	teststack.Must(t, err, "shard")
	var refunds int
	var amount int64
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*), coalesce(sum(r.amount_paise), 0) FROM refunds r JOIN payments p ON p.id = r.payment_id
		WHERE p.hold_id = $1`, w).Scan(&refunds, &amount), "refunds")
	if want := v.Fare.TotalPaise - shard.Fare.Clerkage; refunds != 1 || amount != want {
		t.Fatalf("%d refunds of Rs %s, want one of Rs %s", refunds, india.Decimal(amount), india.Decimal(want))
	}
	teststack.Must(t, s.Service.ChartJob(ctx, shardID, true, 1, booking.ChartMaxAttempts), "send the chart")
	wantChartAtCore(t, s, shardID, 1, 1)
}

// A chart job that cannot succeed ends: FAILED with its reason once the
// train has left or the attempts are spent, or at once when the core
// refuses the chart; the job is cancelled in River (JobCancel), never
// retried for ever; and a transient failure before departure is retried.
func TestChartJobEndsInATerminalState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{})
	users := walletUsers(t, s, "cf", 3)
	wantCancel := func(err error, what string) {
		t.Helper()
		if _, ok := errors.AsType[*river.JobCancelError](err); !ok {
			t.Fatalf("%s: %v, want the job cancelled", what, err)
		}
	}
	chartState := func(shardID int64) (string, string, string) {
		t.Helper()
		var st, core, why string
		teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT chart_state, chart_core_state, chart_error FROM inventory_shards WHERE id = $1`, shardID).
			Scan(&st, &core, &why), "chart state")
		return st, core, why
	}

	// Preparing: a waitlisted ticket the chart cannot read.
	shardID, date := s.DemoShard(t, 1, 5)
	booked(t, s, users[2], "chart-fail-seat", date)
	w := waitlistedAndPaid(t, s, users[0], "chart-fail-1", date)
	_, err := s.Pool.Exec(ctx, `UPDATE holds SET passengers = '{}' WHERE id = $1`, w)
	teststack.Must(t, err, "break the ticket")
	if err := s.Service.ChartJob(ctx, shardID, false, 1, booking.ChartMaxAttempts); err == nil {
		t.Fatal("a chart that cannot read a ticket succeeded")
	} else if _, ok := errors.AsType[*river.JobCancelError](err); ok {
		t.Fatalf("a failing chart days before departure: %v, want an error to retry", err)
	}
	if st, _, _ := chartState(shardID); st != "OPEN" {
		t.Fatalf("shard %s after one failed chart attempt, want OPEN (retried)", st)
	}
	departIn(t, s, shardID, -10*time.Minute)
	wantCancel(s.Service.ChartJob(ctx, shardID, false, 2, booking.ChartMaxAttempts), "a failing chart after departure")
	if st, _, why := chartState(shardID); st != "FAILED" || why == "" {
		t.Fatalf("shard %s (%q) after the chart gave up, want FAILED with the reason", st, why)
	}
	teststack.Must(t, s.Service.ChartJob(ctx, shardID, false, 3, booking.ChartMaxAttempts), "a FAILED shard's chart job again")
	if st, _, _ := chartState(shardID); st != "FAILED" {
		t.Fatalf("shard %s after a rerun, want FAILED", st)
	}

	// Delivering: a core down until the last attempt; a core refusing.
	other, date2 := secondShard(t, s)
	b, err := s.Service.Hold(ctx, teststack.Caller(users[1]), holdReq(users[1], "chart-fail-2", date2, "MMCT", "NDLS", pax("Seated", 33, "M")))
	if err != nil || b.Status != "HELD" {
		t.Fatalf("hold: %+v %v", b, err)
	}
	_, err = s.Service.Confirm(ctx, b.HoldID)
	teststack.Must(t, err, "confirm")
	teststack.Must(t, s.Service.ChartJob(ctx, other, false, 1, booking.ChartMaxAttempts), "chart")
	s.SetCoreFaults(t, prs.Faults{Outage: true})
	if err := s.Service.ChartJob(ctx, other, true, 1, booking.ChartMaxAttempts); err == nil || !prs.IsRetryable(err) {
		t.Fatalf("delivery during an outage: %v, want a retryable error", err)
	}
	wantCancel(s.Service.ChartJob(ctx, other, true, booking.ChartMaxAttempts, booking.ChartMaxAttempts), "the last attempt in an outage")
	if _, core, why := chartState(other); core != "FAILED" || why == "" {
		t.Fatalf("chart delivery %s (%q) after the last attempt, want FAILED with the reason", core, why)
	}
	s.SetCoreFaults(t, prs.Faults{})
	// The core refusing: the booking withdrawn there behind our back.
	teststack.Must(t, s.Service.SyncToCore(ctx, bookingID(t, s, b.HoldID)), "sync")
	_, err = s.Pool.Exec(ctx, `UPDATE inventory_shards SET chart_core_state = 'PENDING', chart_error = '' WHERE id = $1`, other)
	teststack.Must(t, err, "reset")
	_, err = s.Pool.Exec(ctx, `UPDATE prs.passengers SET active = false; UPDATE prs.bookings SET cancelled_at = now()`)
	teststack.Must(t, err, "withdraw at the core")
	wantCancel(s.Service.ChartJob(ctx, other, true, 1, booking.ChartMaxAttempts), "a chart the core refuses")
	if _, core, why := chartState(other); core != "FAILED" || why == "" {
		t.Fatalf("chart delivery %s (%q) after the core's refusal, want FAILED with the reason", core, why)
	}
}

// secondShard seeds another 3A shard of one berth, a day after DemoShard's.
func secondShard(t *testing.T, s *teststack.Stack) (int64, time.Time) {
	t.Helper()
	date := time.Now().In(booking.IST).AddDate(0, 0, 6)
	date = time.Date(date.Year(), date.Month(), date.Day(), 0, 0, 0, 0, booking.IST)
	wl := 5
	id, err := seed.Shard(context.Background(), s.Pool, seed.ShardSpec{Train: "12951", Date: date, Class: "3A", Berths: 1,
		OpensAt: time.Now().Add(-time.Minute), WaitlistCap: &wl})
	teststack.Must(t, err, "seed shard")
	_, err = s.Service.Rebuild(context.Background(), id)
	teststack.Must(t, err, "load shard")
	return id, date
}

// A chart job killed between two steps (after the promotion, before the
// waitlist's cancellation; after the bookings' sync, before the chart
// reaches the core) and run again ends with one chart: one promotion, one
// refund, one message each, one chart at the core.
func TestChartKilledBetweenStepsAndRerun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := &pauser{}
	s := teststack.New(t, teststack.Options{Pause: p.pause})
	shardID, date := s.DemoShard(t, 1, 5)
	users := walletUsers(t, s, "ck", 3)
	h, err := s.Service.Hold(ctx, teststack.Caller(users[0]), holdReq(users[0], "chart-kill-0", date, "MMCT", "NDLS", pax("Seated", 30, "M")))
	if err != nil || h.Status != "HELD" {
		t.Fatalf("hold: %+v %v", h, err)
	}
	_, err = s.Service.Confirm(ctx, h.HoldID)
	teststack.Must(t, err, "confirm")
	w1 := waitlistedAndPaid(t, s, users[1], "chart-kill-1", date)
	w2 := waitlistedAndPaid(t, s, users[2], "chart-kill-2", date)
	s.Recorded(t, h.HoldID)
	_, err = s.Service.CancelBooking(ctx, users[0], h.HoldID, nil)
	teststack.Must(t, err, "cancel the seat")

	kill := func(point string, run func(context.Context) error) {
		t.Helper()
		reached, _ := p.arm(point)
		jobCtx, die := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- run(jobCtx) }()
		waitFor(t, reached, point)
		die() // the worker dies here: its connection and transaction go with it
		if err := <-done; err == nil {
			t.Fatalf("a job killed at %s reported success", point)
		}
	}
	kill("chart.after-promote", func(c context.Context) error { _, err := s.Service.Chart(c, shardID); return err })
	var st string
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT chart_state FROM inventory_shards WHERE id = $1`, shardID).Scan(&st), "state")
	if st != "OPEN" {
		t.Fatalf("shard %s after a chart killed half way, want OPEN (nothing kept)", st)
	}
	rep, err := s.Service.Chart(ctx, shardID)
	teststack.Must(t, err, "chart again")
	if len(rep.Promoted) != 1 || len(rep.Cancelled) != 1 {
		t.Fatalf("rerun chart: %+v, want one promoted, one cancelled", rep)
	}
	kill("chart.before-send", func(c context.Context) error { return s.Service.SendChart(c, shardID) })
	teststack.Must(t, s.Service.SendChart(ctx, shardID), "send again")
	teststack.Must(t, s.Service.SendChart(ctx, shardID), "send a third time")
	wantChartAtCore(t, s, shardID, 1, 1)

	var refunds, promotedMsgs, chartMsgs int
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM refunds r JOIN payments p ON p.id = r.payment_id WHERE p.hold_id = $1),
		(SELECT count(*) FROM notifications WHERE kind = 'PROMOTED'), (SELECT count(*) FROM notifications WHERE kind = 'CHART')`, w2).
		Scan(&refunds, &promotedMsgs, &chartMsgs), "counts")
	if refunds != 1 || promotedMsgs != 2 || chartMsgs != 4 {
		t.Fatalf("%d refunds of the ticket left waitlisted, %d promotion and %d chart messages; want 1, 2 (SMS and e-mail) and 4",
			refunds, promotedMsgs, chartMsgs)
	}
	v1, err := s.Service.Status(ctx, users[1], w1)
	teststack.Must(t, err, "status")
	if v1.BookingStat != booking.BookingConfirmed || len(v1.Berths) != 1 {
		t.Fatalf("TQWL/1 after the chart: %s %+v, want CONFIRMED on one berth", v1.BookingStat, v1.Berths)
	}
	s.CheckInvariants(t, shardID)
}

// seatedAndPaid books one paid berth on the shard, by wallet: its booking
// is CONFIRMED and its sync to the core queued (no workers run it).
func seatedAndPaid(t *testing.T, s *teststack.Stack, user int64, key string, date time.Time) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	h, err := s.Service.Hold(ctx, teststack.Caller(user), holdReq(user, key, date, "MMCT", "NDLS", pax("Seated Passenger", 35, "M")))
	if err != nil || h.Status != "HELD" {
		t.Fatalf("hold: %+v %v, want HELD", h, err)
	}
	pay, err := s.Payments.Initiate(ctx, teststack.Caller(user), payment.InitiateRequest{HoldID: h.HoldID, Method: payment.Wallet,
		IdempotencyKey: key + "-pay"})
	if err != nil || pay.State != payment.Success {
		t.Fatalf("pay: %+v %v", pay, err)
	}
	return h.HoldID
}

// A booking on a prepared chart whose sync to the core was still queued
// (its job held back) is rejected by the core during the chart's send: it
// is cancelled and refunded in full, and the chart reaches the core
// without it, seating the passenger who travels. The chart used to be sent
// as frozen, still listing the rejected booking, and the core refused it
// (CHART_MISMATCH) on that send and on every send again.
func TestChartDeliveredWithoutABookingTheCoreRejectedDuringItsSend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{})
	shardID, date := s.DemoShard(t, 2, 0)
	users := walletUsers(t, s, "cj", 2)
	seated, rejected := seatedAndPaid(t, s, users[0], "chart-rej-0", date), seatedAndPaid(t, s, users[1], "chart-rej-1", date)
	s.Recorded(t, seated) // at the core; the other's sync job waits
	rep, err := s.Service.Chart(ctx, shardID)
	teststack.Must(t, err, "chart")
	if len(rep.Chart.Confirmed) != 2 {
		t.Fatalf("prepared chart lists %d bookings, want both", len(rep.Chart.Confirmed))
	}

	// The core refuses the queued booking when the chart's send syncs it.
	s.SetCoreFaults(t, prs.Faults{RejectRate: 1})
	err = s.Service.ChartJob(ctx, shardID, true, 1, booking.ChartMaxAttempts)
	s.SetCoreFaults(t, prs.Faults{})
	teststack.Must(t, err, "send the chart")
	wantChartAtCore(t, s, shardID, 1, 0)

	sv, err := s.Service.Status(ctx, users[0], seated)
	teststack.Must(t, err, "status of the seated")
	rv, err := s.Service.Status(ctx, users[1], rejected)
	teststack.Must(t, err, "status of the rejected")
	if rv.BookingStat != booking.BookingCancelled || rv.CoreState != "REJECTED" {
		t.Fatalf("the rejected booking is %s/%s, want CANCELLED/REJECTED", rv.BookingStat, rv.CoreState)
	}
	var atCore, kept string
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT (SELECT string_agg(e->>'pnr', ',') FROM prs.charts, jsonb_array_elements(body->'confirmed') e),
		(SELECT string_agg(e->>'pnr', ',') FROM inventory_shards, jsonb_array_elements(chart_body->'confirmed') e WHERE id = $1)`, shardID).
		Scan(&atCore, &kept), "charts")
	if atCore != sv.PNR || kept != sv.PNR {
		t.Fatalf("the core's chart seats %q and ours lists %q, want only %s (not the rejected %s)", atCore, kept, sv.PNR, rv.PNR)
	}
	var refunds int
	var amount int64
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*), coalesce(sum(r.amount_paise), 0) FROM refunds r JOIN payments p ON p.id = r.payment_id
		WHERE p.hold_id = $1`, rejected).Scan(&refunds, &amount), "refunds")
	if refunds != 1 || amount != rv.Fare.TotalPaise {
		t.Fatalf("%d refunds of Rs %s for the booking the core rejected, want one of the full Rs %s", refunds, india.Decimal(amount), india.Decimal(rv.Fare.TotalPaise))
	}
	// A send again (a doubled job) finds it delivered.
	teststack.Must(t, s.Service.SendChart(ctx, shardID), "send again")
	wantChartAtCore(t, s, shardID, 1, 0)
	s.CheckInvariants(t, shardID)
}
