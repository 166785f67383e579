package recon

import (
	"slices"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
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
		planned, err := w.svc.PlanDaily(w.ctx, []string{gw}, DailyArgs{On: on, RerunDays: 7})
		w.must(err)
		var days []string
		for _, f := range planned {
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
		if n := w.count(`SELECT count(*) FROM river_job WHERE kind = 'recon_fetch' AND (args->>'on')::timestamptz = $1`, on); n != len(again) {
			t.Fatalf("T+%d: planning twice left %d jobs", k, n)
		}
		// The workers run them.
		for _, f := range planned {
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
