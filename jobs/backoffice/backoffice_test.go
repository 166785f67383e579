package backoffice_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"tatkal/booking"
	"tatkal/booking/fraud"
	"tatkal/booking/fraud/review"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
	"tatkal/booking/sim/pspsim"
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
// few seconds ahead (IST, to the second), and lets them run. The bank's
// statement of yesterday has a credit nobody announced (a stray NEFT),
// and so had the one of three days ago. Started after yesterday's time,
// the leader first catches yesterday's plan up: every day and statement
// date of its window, none reconciled yet, so all open; its bank run of
// three days ago raises that credit. The bank then corrects that
// statement. At the day's time the day's plan is inserted once across both
// (River's leader, a job unique per day), and with no one asking yesterday
// is fetched from the gateway simulator and reconciled on every gateway;
// the bank leg of yesterday's statement raises its stray credit, the one
// exception left open; and of the earlier dates only the one still open
// is run again: its corrected statement is fetched and the credit clears.
// (Before, the fetch jobs were scheduled from the gateways the process had
// not yet filled in, and nothing ran the bank leg by itself.)
func TestDailyReconciliationRunsByItself(t *testing.T) {
	env := testenv.New(t)
	ctx := context.Background()
	start := time.Now()
	// Far enough ahead for the processes to start, elect a leader and
	// catch yesterday's plan up.
	const lead = 15 * time.Second
	ist := start.Add(lead).In(booking.IST)
	at := schedule.Clock(time.Duration(ist.Hour())*time.Hour + time.Duration(ist.Minute())*time.Minute + time.Duration(ist.Second())*time.Second)
	slot := schedule.Daily(at).Next(start)
	on := time.Date(slot.In(booking.IST).Year(), slot.In(booking.IST).Month(), slot.In(booking.IST).Day(), 0, 0, 0, 0, booking.IST)
	yesterday, earlier := on.AddDate(0, 0, -1), on.AddDate(0, 0, -3)

	// The simulators (in a process that works no jobs) and the bank's
	// statements, before any process fetches one.
	sims := teststack.Start(t, env, teststack.Options{})
	gw := sims.Gateways[0].ID
	stray := pspsim.StrayCredit{Date: yesterday.Format(time.DateOnly), Paise: 77700, Narration: "NEFT CR-ACME TRAVELS-INV 4411"}
	sims.SetSettlementFaults(t, gw, pspsim.SettlementFaults{StrayCredits: []pspsim.StrayCredit{
		stray, {Date: earlier.Format(time.DateOnly), Paise: 22200}}})

	// A day or statement date stays open until T+4.
	const rerunDays = 4
	opts := teststack.Options{Work: true, BackOffice: backoffice.New(), ReconAt: &at, ReconRerunDays: rerunDays, SimulatorsOf: sims}
	teststack.Start(t, env, opts)
	teststack.Start(t, env, opts)
	if late := time.Since(start); late > lead/2 {
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
	gateways := len(sims.Gateways)
	// River records a job's end a moment after it (its completer batches):
	// wait for the jobs' rows, not only for their effects.
	jobs := func(kind string, on time.Time, state string) int {
		return count(`SELECT count(*) FROM river_job WHERE kind = $1 AND (args->>'on')::timestamptz = $2
			AND ($3::text = '' OR state::text = $3)`, kind, on, state)
	}
	// Yesterday's plan, caught up as the leader started: all its days and
	// statement dates (T+1 to T+4) planned, none reconciled before.
	for deadline := slot.Add(-2 * time.Second); jobs("recon_daily", yesterday, "completed") < 1 ||
		jobs("recon_fetch", yesterday, "completed") < gateways*rerunDays || jobs("recon_statement", yesterday, "completed") < rerunDays; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("yesterday's plan was not caught up before the daily time; its jobs:\n%s", jobsOf(t, env, yesterday))
		}
	}
	if n, m := jobs("recon_fetch", yesterday, ""), jobs("recon_statement", yesterday, ""); n != gateways*rerunDays || m != rerunDays {
		t.Fatalf("yesterday's plan planned %d gateway days and %d statements, want %d and %d", n, m, gateways*rerunDays, rerunDays)
	}

	// The bank corrects the statement of three days ago: the ₹222 was never ours.
	if n := count(`SELECT count(*) FROM reconciliation_exceptions WHERE gateway = 'bank' AND business_date = $1 AND state = 'OPEN'`,
		earlier.Format(time.DateOnly)); n != 1 {
		t.Fatalf("yesterday's plan left %d exceptions open of the statement of %s, want its stray credit", n, earlier.Format(time.DateOnly))
	}
	sims.SetSettlementFaults(t, gw, pspsim.SettlementFaults{StrayCredits: []pspsim.StrayCredit{stray}})
	if time.Now().After(slot.Add(-time.Second)) {
		t.Fatalf("the statement was corrected only at %s, the daily time is %s", time.Now(), slot)
	}

	// The day's plan: yesterday on every gateway, yesterday's statement and
	// the earlier one still open.
	for deadline := slot.Add(90 * time.Second); jobs("recon_fetch", on, "completed") < gateways || jobs("recon_statement", on, "completed") < 2; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after the daily time %s, the day's jobs:\n%s", slot.In(booking.IST).Format(time.TimeOnly), jobsOf(t, env, on))
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
	// Yesterday on each gateway once; of the earlier days, reconciled
	// clean by yesterday's plan, none again; yesterday's statement and the
	// earlier one still open, each once; nothing of the day before its time.
	if n := count(`SELECT count(*) FROM river_job WHERE kind = 'recon_fetch' AND (args->>'on')::timestamptz = $1
		AND (args->>'date')::timestamptz = $2`, on, yesterday); n != gateways || jobs("recon_fetch", on, "") != gateways {
		t.Fatalf("%d fetches of yesterday of %d, want one per gateway (%d)", n, jobs("recon_fetch", on, ""), gateways)
	}
	for _, d := range []time.Time{earlier, yesterday} {
		if n := count(`SELECT count(*) FROM river_job WHERE kind = 'recon_statement' AND (args->>'on')::timestamptz = $1
			AND (args->>'date')::timestamptz = $2`, on, d); n != 1 {
			t.Fatalf("%d statement jobs of %s, want 1", n, d.Format(time.DateOnly))
		}
	}
	if n := jobs("recon_statement", on, ""); n != 2 {
		t.Fatalf("%d statements planned, want yesterday's and the open one's:\n%s", n, jobsOf(t, env, on))
	}
	if n := count(`SELECT count(*) FROM river_job WHERE kind IN ('recon_daily', 'recon_fetch', 'recon_statement')
		AND (args->>'on')::timestamptz = $1 AND created_at < $2`, on, slot.Add(-time.Second)); n != 0 {
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

	// The one exception open in the deployment: yesterday's ₹777, found by
	// the statement job's bank run of yesterday, owned by treasury.
	rows, err := env.Pool.Query(ctx, `SELECT e.kind || ' ' || e.ref || ' ' || e.owner_team || ' ' || e.stake_paise || ' of ' ||
		e.business_date || ' found by ' || r.run_by
		FROM reconciliation_exceptions e JOIN recon_runs r ON r.id = e.first_run_id
		WHERE e.state IN ('OPEN', 'INVESTIGATING') ORDER BY e.detected_at`)
	teststack.Must(t, err, "open exceptions")
	open, err := pgx.CollectRows(rows, pgx.RowTo[string])
	teststack.Must(t, err, "open exceptions")
	day := yesterday.Format(time.DateOnly)
	if len(open) != 1 || !strings.HasPrefix(open[0], recon.UnexplainedCredit+" "+day+"|HDFCN") ||
		!strings.HasSuffix(open[0], " treasury 77700 of "+day+" found by job:recon_statement") {
		t.Fatalf("open exceptions, want only yesterday's ₹777 credit found by the statement job:\n%s", strings.Join(open, "\n"))
	}
	// The earlier statement's credit, gone from the corrected statement,
	// cleared by the job's run of its date at the day's time.
	var resolution, clearedBy string
	var clearedAt time.Time
	if err := env.Pool.QueryRow(ctx, `SELECT e.resolution, r.run_by, r.started_at FROM reconciliation_exceptions e
		JOIN recon_runs r ON r.id = e.last_run_id WHERE e.gateway = 'bank' AND e.business_date = $1`,
		earlier.Format(time.DateOnly)).Scan(&resolution, &clearedBy, &clearedAt); err != nil ||
		resolution != recon.ClearedOnRerun || clearedBy != "job:recon_statement" || clearedAt.Before(slot) {
		t.Fatalf("the corrected statement's credit: %s by %s at %s (%v)", resolution, clearedBy, clearedAt, err)
	}
}

// jobsOf lists the reconciliation jobs of the day on, with their last
// errors, for a failure's message.
func jobsOf(t *testing.T, env *testenv.Env, on time.Time) string {
	t.Helper()
	rows, err := env.Pool.Query(context.Background(), `SELECT kind || ' ' || args::text || ' ' || state || ' ' || coalesce(errors[array_upper(errors, 1)]->>'error', '')
		FROM river_job WHERE kind LIKE 'recon_%' AND (args->>'on')::timestamptz = $1 ORDER BY id`, on)
	if err != nil {
		return err.Error()
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err.Error()
	}
	return strings.Join(lines, "\n")
}
