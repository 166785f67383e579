package backoffice_test

import (
	"context"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"tatkal/booking"
	"tatkal/booking/fraud"
	"tatkal/booking/fraud/review"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
	"tatkal/jobs/backoffice"
	"tatkal/jobs/schedule"
	"tatkal/recon"
)

// TestWorkersCallTheProcessServices runs the back office's jobs on a
// process booking/app builds with the back office: each must complete, so
// each worker was handed the service booking/app built for it (a worker
// without one fails its job). The fetch reads yesterday's files from the
// stack's simulators through the sources booking/app built from its
// configuration.
func TestWorkersCallTheProcessServices(t *testing.T) {
	st := teststack.New(t, teststack.Options{Work: true, BackOffice: backoffice.New()})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	events, stop := st.River.Subscribe(river.EventKindJobCompleted, river.EventKindJobFailed,
		river.EventKindJobCancelled, river.EventKindJobSnoozed)
	defer stop()
	yesterday := time.Now().In(booking.IST).AddDate(0, 0, -1)
	want := map[int64]string{}
	for _, args := range []river.JobArgs{recon.EscalateArgs{}, fraud.ScheduleArgs{}, review.EnforceArgs{},
		recon.FetchArgs{Gateway: st.Gateways[0].ID, Date: yesterday}, recon.StatementArgs{Date: yesterday},
		recon.NewDailyArgs(yesterday.AddDate(0, 0, -30), 2)} {
		res, err := st.River.Insert(ctx, args, nil)
		if err != nil {
			t.Fatalf("insert %s: %v", args.Kind(), err)
		}
		want[res.Job.ID] = args.Kind()
	}
	for len(want) > 0 {
		select {
		case ev := <-events:
			kind, ok := want[ev.Job.ID]
			if !ok {
				continue
			}
			if ev.Kind != river.EventKindJobCompleted {
				t.Fatalf("%s: %s: %v", kind, ev.Kind, ev.Job.Errors)
			}
			delete(want, ev.Job.ID)
		case <-ctx.Done():
			t.Fatalf("still waiting for %v: %v", want, ctx.Err())
		}
	}
}

// TestDailyReconciliationRunsByItself starts two processes of one
// deployment, both with the back office, the daily reconciliation set a
// few seconds ahead (IST, to the second), and lets them run: at that time
// the day's plan is inserted once across both (River's leader, a job
// unique per day), and yesterday is fetched from the gateway simulator and
// reconciled on every gateway, with yesterday's bank statement, with no
// one asking. (Before the fix, the fetch jobs were scheduled from the
// gateways the process had not yet filled in: none ever ran.)
func TestDailyReconciliationRunsByItself(t *testing.T) {
	env := testenv.New(t)
	ctx := context.Background()
	start := time.Now()
	// Far enough ahead for both processes to start and elect a leader.
	const lead = 10 * time.Second
	ist := start.Add(lead).In(booking.IST)
	at := schedule.Clock(time.Duration(ist.Hour())*time.Hour + time.Duration(ist.Minute())*time.Minute + time.Duration(ist.Second())*time.Second)
	slot := schedule.Daily(at).Next(start)
	on := time.Date(slot.In(booking.IST).Year(), slot.In(booking.IST).Month(), slot.In(booking.IST).Day(), 0, 0, 0, 0, booking.IST)
	yesterday := on.AddDate(0, 0, -1)

	first := teststack.Start(t, env, teststack.Options{Work: true, BackOffice: backoffice.New(), ReconAt: &at})
	teststack.Start(t, env, teststack.Options{Work: true, BackOffice: backoffice.New(), ReconAt: &at, SimulatorsOf: first})
	if late := time.Since(start); late > lead-2*time.Second {
		t.Fatalf("the processes took %v to start: the daily time %v ahead came before the schedule could show it runs at its time", late, lead)
	}

	count := func(sql string, args ...any) int {
		t.Helper()
		var n int
		if err := env.Pool.QueryRow(ctx, sql, args...).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	gateways := len(first.Gateways)
	// River records a job's end a moment after it (its completer batches):
	// wait for the jobs' rows, not only for their effects.
	fetched := func() int {
		return count(`SELECT count(*) FROM river_job WHERE kind = 'recon_fetch' AND (args->>'on')::timestamptz = $1
			AND (args->>'date')::timestamptz = $2 AND state = 'completed'`, on, yesterday)
	}
	statement := func() int {
		return count(`SELECT count(*) FROM river_job WHERE kind = 'recon_statement' AND (args->>'date')::timestamptz = $1
			AND state = 'completed'`, yesterday)
	}
	for deadline := slot.Add(90 * time.Second); fetched() < gateways || statement() < 1; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after the daily time %s: %d of %d gateways' fetches of yesterday (%s) completed, %d bank statements",
				slot.In(booking.IST).Format(time.TimeOnly), fetched(), gateways, yesterday.Format(time.DateOnly), statement())
		}
	}
	// One plan of the day across both processes, inserted at its time, done.
	var scheduled time.Time
	var state string
	if err := env.Pool.QueryRow(ctx, `SELECT scheduled_at, state FROM river_job WHERE kind = 'recon_daily' AND (args->>'on')::timestamptz = $1`,
		on).Scan(&scheduled, &state); err != nil {
		t.Fatalf("the plan of %s (exactly one): %v", on.Format(time.DateOnly), err)
	}
	if !scheduled.Equal(slot) {
		t.Fatalf("the plan was scheduled at %s, want %s", scheduled, slot)
	}
	// Yesterday on each gateway once, and nothing of the day before its time.
	if n := count(`SELECT count(*) FROM river_job WHERE kind = 'recon_fetch' AND (args->>'on')::timestamptz = $1
		AND (args->>'date')::timestamptz = $2`, on, yesterday); n != gateways {
		t.Fatalf("%d fetches of yesterday, want one per gateway (%d)", n, gateways)
	}
	if n := count(`SELECT count(*) FROM river_job WHERE kind IN ('recon_daily', 'recon_fetch') AND (args->>'on')::timestamptz = $1
		AND created_at < $2`, on, slot.Add(-time.Second)); n != 0 {
		t.Fatalf("%d jobs of the day were inserted before its time", n)
	}
	// Yesterday reconciled on every gateway by the job, from the files it fetched.
	if n := count(`SELECT count(DISTINCT gateway) FROM recon_runs WHERE business_date = $1 AND run_by = 'job:recon_fetch'
		AND started_at >= $2`, yesterday.Format(time.DateOnly), slot); n != gateways {
		t.Fatalf("%d gateways reconciled yesterday after the daily time", n)
	}
	if n := count(`SELECT count(*) FROM recon_files WHERE business_date = $1 AND source = 'SETTLEMENT' AND ingested_by = 'job:recon_fetch'`,
		yesterday.Format(time.DateOnly)); n != gateways {
		t.Fatalf("%d settlement files of yesterday fetched", n)
	}
	// (A fetch of an earlier day may have taken the statement first: the
	// same bytes again change nothing.)
	if n := count(`SELECT count(*) FROM recon_files WHERE business_date = $1 AND source = 'BANK'`, yesterday.Format(time.DateOnly)); n != 1 {
		t.Fatalf("%d bank statements of yesterday", n)
	}
}
