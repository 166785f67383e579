package recon

import (
	"slices"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"tatkal/booking/sim/pspsim"
)

// Money that never arrives is caught: the daily reconciliation runs
// yesterday and, every day until T+7, each earlier day that still has an
// open item. A capture the gateway never settles keeps its day open; the
// day is reconciled again on T+2 ... T+7 (raising MISSING_IN_SETTLEMENT
// once past T+3) and no more from T+8 on. A day whose items all matched is
// run once, at T+1.
func TestDailyRerunsOpenDaysUntilT7(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	const gw = "swiftpay"
	// The week before is reconciled and clean, as the daily job left it.
	for i := 1; i <= 7; i++ {
		_, err := w.svc.Run(w.ctx, RunRequest{Gateway: gw, Date: w.day.AddDate(0, 0, -i), By: "job:recon_fetch"})
		w.must(err)
	}
	// Day T: two clean payments and one we took as SUCCESS that the
	// gateway never captured: its money never arrives.
	lost := spec{gateway: gw, method: "UPI", amount: 98765, ours: "SUCCESS", booked: true, synced: true}
	made := w.make(clean(gw, "UPI", 120000), clean(gw, "CARD", 130000), lost)

	fetch := &FetchWorker{Recon: w.svc, Sources: w.src}
	runsOfT := 0
	for k := 1; k <= 9; k++ {
		on := w.day.AddDate(0, 0, k)
		plan, err := w.svc.PlanDaily(w.ctx, []string{gw}, DailyArgs{On: on, RerunDays: 7})
		w.must(err)
		var days []string
		for _, f := range plan.Days {
			if f.Gateway != gw || !f.On.Equal(on) {
				t.Fatalf("T+%d: planned %+v", k, f)
			}
			days = append(days, f.Date.Format(time.DateOnly))
		}
		want := []string{on.AddDate(0, 0, -1).Format(time.DateOnly)} // yesterday, always
		if k >= 2 && k <= 7 {
			want = append([]string{w.day.Format(time.DateOnly)}, want...) // T, still open
		}
		if !slices.Equal(days, want) {
			t.Fatalf("on T+%d the daily reconciliation planned %v, want %v", k, days, want)
		}
		// The plan is River's jobs: the days, and yesterday's bank statement by its date.
		if n := w.count(`SELECT count(*) FROM river_job WHERE kind = 'recon_fetch' AND (args->>'on')::timestamptz = $1`, on); n != len(want) {
			t.Fatalf("T+%d: %d fetch jobs inserted, want %d", k, n, len(want))
		}
		if n := w.count(`SELECT count(*) FROM river_job WHERE kind = 'recon_statement' AND (args->>'date')::timestamptz = $1`,
			on.AddDate(0, 0, -1)); n != 1 {
			t.Fatalf("T+%d: %d statement jobs for yesterday", k, n)
		}
		// The same day planned again (a second leader, a catch-up) adds nothing.
		again, err := w.svc.PlanDaily(w.ctx, []string{gw}, DailyArgs{On: on, RerunDays: 7})
		w.must(err)
		if n := w.count(`SELECT count(*) FROM river_job WHERE kind = 'recon_fetch' AND (args->>'on')::timestamptz = $1`, on); n != len(again.Days) {
			t.Fatalf("T+%d: planning twice left %d jobs", k, n)
		}
		// The workers run them.
		for _, f := range plan.Days {
			w.must(fetch.Work(w.ctx, &river.Job[FetchArgs]{JobRow: &rivertype.JobRow{Kind: f.Kind()}, Args: f}))
			if f.Date.Equal(w.day) {
				runsOfT++
			}
		}
	}
	if runsOfT != 7 {
		t.Fatalf("day T was reconciled %d times, want 7 (T+1 to T+7)", runsOfT)
	}
	var missing []string
	for _, e := range w.exceptions(gw) {
		missing = append(missing, e.Kind+" "+e.PaymentID.String())
	}
	if want := []string{MissingInSettlement + " " + made[2].ID.String()}; !slices.Equal(missing, want) {
		t.Fatalf("exceptions of T: %v, want the capture that never arrived: %v", missing, want)
	}
	// Past the window the day stays as the last run left it.
	open, err := w.svc.OpenDays(w.ctx, gw, w.day, w.day)
	w.must(err)
	if len(open) != 1 {
		t.Fatalf("day T with its exception open: open days %v", open)
	}
}

// A day is open while anything of it waits: never reconciled; a capture
// not yet in the file or a payout not yet credited (before T+3, neither is
// an exception yet); and closed once its money has arrived.
func TestOpenDaysUntilTheMoneyArrives(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	const gw = "swiftpay"
	isOpen := func(what string, want bool) {
		t.Helper()
		open, err := w.svc.OpenDays(w.ctx, gw, w.day, w.day)
		w.must(err)
		if got := len(open) == 1; got != want {
			t.Fatalf("%s: open %t, want %t", what, got, want)
		}
	}
	w.make(clean(gw, "UPI", 120000), clean(gw, "NB", 140000))
	isOpen("never reconciled", true)

	// T+1: the file is fetched before a late capture reaches the gateway's
	// day, and the bank has no statement of T+1 yet.
	_, err := w.svc.FetchSettlement(w.ctx, w.src, gw, w.day, "job:test")
	w.must(err)
	w.make(clean(gw, "CARD", 150000))
	_, err = w.svc.Run(w.ctx, RunRequest{Gateway: gw, Date: w.day, AsOf: w.day.AddDate(0, 0, 1).Add(6 * time.Hour), By: "job:test"})
	w.must(err)
	if ex := w.exceptions(gw); len(ex) != 0 {
		t.Fatalf("before T+3 nothing is an exception yet: %+v", ex)
	}
	isOpen("a capture and the payout still to come", true)

	// T+2: the gateway's file now has it and the payout is credited.
	_, err = w.svc.FetchSettlement(w.ctx, w.src, gw, w.day, "job:test")
	w.must(err)
	for i := 1; i <= 3; i++ {
		_, err = w.svc.FetchBank(w.ctx, w.src, w.day.AddDate(0, 0, i), "job:test")
		w.must(err)
	}
	_, err = w.svc.Run(w.ctx, RunRequest{Gateway: gw, Date: w.day, AsOf: w.day.AddDate(0, 0, 2).Add(6 * time.Hour), By: "job:test"})
	w.must(err)
	isOpen("everything matched", false)
}

// The bank leg runs by itself and again while open (issue 35): the daily
// plan fetches yesterday's statement and runs its bank leg, and plans
// again each earlier statement date of the window whose bank leg is still
// open (an unexplained line open, or never run); not one beyond the
// window, not one whose line was resolved, not a clean one. A re-planned
// statement is fetched again and its bank leg re-run, so the bank's
// corrected statement clears what it corrects; a date still open is
// planned again on the next day, once a day.
func TestDailyRerunsOpenStatementDates(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	const gw = "swiftpay"
	// Day T (Wednesday 4 June) has clean payments: their payout is on the
	// statement of T+1, announced by T's settlement file.
	w.make(cleanSet(gw, 4)...)
	_, err := w.svc.FetchSettlement(w.ctx, w.src, gw, w.day, "job:test")
	w.must(err)
	on := w.day.AddDate(0, 0, 5) // Monday 9 June: the window is 4 to 7 June
	date := func(back int) time.Time { return on.AddDate(0, 0, -back) }
	beyond, corrected, resolved, never, yesterday := date(6), date(4), date(3), date(2), date(1)
	stray := func(d time.Time, paise int64) pspsim.StrayCredit {
		return pspsim.StrayCredit{Date: d.Format(time.DateOnly), Paise: paise, Narration: "NEFT CR-ACME TRAVELS-INV " + d.Format("0102")}
	}
	w.settlementFaults(gw, pspsim.SettlementFaults{StrayCredits: []pspsim.StrayCredit{
		stray(beyond, 11100), stray(corrected, 22200), stray(resolved, 33300), stray(yesterday, 77700)}})
	bankExceptions := func(d time.Time) []Exception {
		t.Helper()
		ex, err := w.svc.Exceptions(w.ctx, Filter{Gateway: Bank, BusinessDate: d, Limit: 100})
		w.must(err)
		return ex
	}
	// The earlier days as the daily job left them: every statement date
	// from 3 to 6 June reconciled (4 June clean), 7 June never.
	for d := beyond; d.Before(never); d = d.AddDate(0, 0, 1) {
		_, err := w.svc.FetchBank(w.ctx, w.src, d, "job:test")
		w.must(err)
		_, err = w.svc.Run(w.ctx, RunRequest{Gateway: Bank, Date: d, By: "job:recon_statement"})
		w.must(err)
	}
	for d, want := range map[time.Time]int{beyond: 1, date(5): 0, corrected: 1, resolved: 1} {
		if ex := bankExceptions(d); len(ex) != want {
			t.Fatalf("statement of %s: %d exceptions, want %d: %+v", d.Format(time.DateOnly), len(ex), want, ex)
		}
	}
	w.must(w.svc.ResolveManually(w.ctx, bankExceptions(resolved)[0].ID, "treasury1", "RETURNED_TO_SENDER", "sent back to ACME", nil))

	dates := func(plan DailyPlan, on time.Time) []string {
		t.Helper()
		var out []string
		for _, st := range plan.Statements {
			if !st.On.Equal(on) {
				t.Fatalf("statement %s planned on %s, want %s", st.Date.Format(time.DateOnly), st.On, on)
			}
			out = append(out, st.Date.Format(time.DateOnly))
		}
		return out
	}
	ymd := func(ds ...time.Time) []string {
		var out []string
		for _, d := range ds {
			out = append(out, d.Format(time.DateOnly))
		}
		return out
	}
	plan, err := w.svc.PlanDaily(w.ctx, []string{gw}, DailyArgs{On: on, RerunDays: 5})
	w.must(err)
	if got, want := dates(plan, on), ymd(corrected, never, yesterday); !slices.Equal(got, want) {
		t.Fatalf("statements planned on %s: %v, want %v", on.Format(time.DateOnly), got, want)
	}
	statementJobs := `SELECT count(*) FROM river_job WHERE kind = 'recon_statement' AND (args->>'on')::timestamptz = $1`
	if n := w.count(statementJobs, on); n != 3 {
		t.Fatalf("%d statement jobs inserted, want 3", n)
	}
	again, err := w.svc.PlanDaily(w.ctx, []string{gw}, DailyArgs{On: on, RerunDays: 5})
	w.must(err)
	if n := w.count(statementJobs, on); n != 3 || len(again.Statements) != 3 {
		t.Fatalf("planning the day twice: %d statement jobs", n)
	}

	// The bank corrects its statement of 5 June (the ₹222 was never
	// ours), then the workers run the plan.
	w.settlementFaults(gw, pspsim.SettlementFaults{StrayCredits: []pspsim.StrayCredit{
		stray(beyond, 11100), stray(resolved, 33300), stray(yesterday, 77700)}})
	worker := &StatementWorker{Recon: w.svc, Sources: w.src}
	for _, st := range plan.Statements {
		w.must(worker.Work(w.ctx, &river.Job[StatementArgs]{JobRow: &rivertype.JobRow{Kind: st.Kind()}, Args: st}))
	}
	for _, d := range plan.Statements {
		if n := w.count(`SELECT count(*) FROM recon_runs WHERE gateway = 'bank' AND business_date = $1 AND run_by = 'job:recon_statement'`,
			pgDate(d.Date)); n < 1 {
			t.Fatalf("the bank leg of %s was not run by the statement job", d.Date.Format(time.DateOnly))
		}
	}
	if ex := bankExceptions(corrected); len(ex) != 1 || ex[0].State != StateResolved || ex[0].Resolution != ClearedOnRerun {
		t.Fatalf("the corrected statement's credit: %+v", ex)
	}
	if run, err := w.svc.RunByID(w.ctx, bankExceptions(corrected)[0].LastRunID); err != nil || run.Matched != 1 || run.Exceptions != 0 {
		t.Fatalf("the corrected statement's run matched the payout: %+v %v", run, err)
	}
	if ex := bankExceptions(yesterday); len(ex) != 1 || ex[0].Kind != UnexplainedCredit || ex[0].StakePaise != 77700 || ex[0].State != StateOpen {
		t.Fatalf("yesterday's statement: %+v", ex)
	}
	if ex := bankExceptions(never); len(ex) != 0 {
		t.Fatalf("a clean statement never reconciled before: %+v", ex)
	}

	// The next day: yesterday's credit is still open, so its date is
	// planned again (a second job for it); 5 June is clear, 7 June clean.
	next := on.AddDate(0, 0, 1)
	plan, err = w.svc.PlanDaily(w.ctx, []string{gw}, DailyArgs{On: next, RerunDays: 5})
	w.must(err)
	if got, want := dates(plan, next), ymd(yesterday, on); !slices.Equal(got, want) {
		t.Fatalf("statements planned on %s: %v, want %v", next.Format(time.DateOnly), got, want)
	}
	if n := w.count(`SELECT count(*) FROM river_job WHERE kind = 'recon_statement' AND (args->>'date')::timestamptz = $1`, yesterday); n != 2 {
		t.Fatalf("the open statement date has %d jobs, want one per day it was planned (2)", n)
	}
}
