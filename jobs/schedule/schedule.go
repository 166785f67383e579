// Package schedule is every periodic job of the product in one list
// (List), each with when it runs: a time of day in IST where the business
// means one (the daily reconciliation), an interval where the job only
// looks for work that has come due (sweeps, relays, the planners of charts
// and of fraud clustering), and the jobs those planners insert at their own
// times (a shard's chart, a window's fairness figures and clustering, a
// day's reconciliation). jobs registers the booking stack's entries with
// River, jobs/backoffice the back office's, and the console lists them all
// with their next and last runs.
//
// Once across all processes: River inserts periodic jobs only on its
// elected leader, and every process registers this same list. A daily
// entry's job names its day (Entry.Args gets the slot) and is unique by its
// arguments, so a leader elected in the middle of a day, or a process that
// starts after the day's time and catches the day up (RunOnStart), never
// runs a day twice.
package schedule

import (
	"fmt"
	"strings"
	"tatkal/booking/winreview"
	"time"

	"github.com/riverqueue/river"

	"tatkal/booking"
	"tatkal/booking/admission"
	"tatkal/booking/fraud"
	"tatkal/booking/fraud/review"
	"tatkal/booking/india"
	"tatkal/booking/notify"
	"tatkal/console/alarms"
	"tatkal/recon"
)

// Clock is a time of day in IST, as the time since midnight.
type Clock time.Duration

// ParseClock reads HH:MM or HH:MM:SS (00:00 to 23:59:59), IST.
func ParseClock(s string) (Clock, error) {
	for _, layout := range []string{"15:04", "15:04:05"} {
		if t, err := time.Parse(layout, s); err == nil {
			return Clock(time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute +
				time.Duration(t.Second())*time.Second), nil
		}
	}
	return 0, fmt.Errorf("%q is not a time of day: want HH:MM or HH:MM:SS (IST), e.g. 06:00", s)
}

// String is HH:MM, or HH:MM:SS when the seconds are not zero.
func (c Clock) String() string {
	d := time.Duration(c)
	h, m, s := int(d/time.Hour), int(d%time.Hour/time.Minute), int(d%time.Minute/time.Second)
	if s != 0 {
		return fmt.Sprintf("%02d:%02d:%02d", h, m, s)
	}
	return fmt.Sprintf("%02d:%02d", h, m)
}

// When says when a job runs. It is River's PeriodicSchedule.
type When struct {
	every time.Duration // Every
	at    Clock         // Daily, when daily is set
	daily bool
	by    string // Triggered: what inserts the job
}

// Every runs a job at an interval from the leader's start: for work that
// looks for what has come due.
func Every(d time.Duration) When { return When{every: d} }

// Daily runs a job once a day at a time of day in IST.
func Daily(at Clock) When { return When{at: at, daily: true} }

// Triggered is a job no schedule inserts: other work does, at its own time
// (by says what, for the console).
func Triggered(by string) When { return When{by: by} }

// Periodic says whether River inserts the job on this schedule.
func (w When) Periodic() bool { return w.daily || w.every > 0 }

// IsDaily says whether the job runs at a time of day.
func (w When) IsDaily() bool { return w.daily }

// Next is the first run after t: for a daily job, its time of day in IST
// on t's IST day if still ahead, else on the next (IST has no daylight
// saving, so a day is always 24 hours); for an interval, t plus it. A
// triggered job has none (the zero time).
func (w When) Next(t time.Time) time.Time {
	switch {
	case w.daily:
		if n := w.dayStart(t).Add(time.Duration(w.at)); n.After(t) {
			return n
		}
		return w.dayStart(t).AddDate(0, 0, 1).Add(time.Duration(w.at))
	case w.every > 0:
		return t.Add(w.every)
	}
	return time.Time{}
}

// Slot is the run that t belongs to: for a daily job the latest of its
// times at or before t, so a run that River starts a moment early or late,
// or that a process catches up after starting late in the day, names the
// same day; for any other, t itself.
func (w When) Slot(t time.Time) time.Time {
	if !w.daily {
		return t
	}
	if s := w.dayStart(t).Add(time.Duration(w.at)); !s.After(t) {
		return s
	}
	return w.dayStart(t).AddDate(0, 0, -1).Add(time.Duration(w.at))
}

// dayStart is midnight IST of t's IST day.
func (w When) dayStart(t time.Time) time.Time {
	y, m, d := t.In(india.IST).Date()
	return time.Date(y, m, d, 0, 0, 0, 0, india.IST)
}

func (w When) String() string {
	switch {
	case w.daily:
		return "daily at " + w.at.String() + " IST"
	case w.every > 0:
		return "every " + shortDuration(w.every)
	}
	return w.by
}

// shortDuration is 30s, 5m, 1h30m: time.Duration's text without zero units.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// slotMargin: River inserts a periodic job up to 100 ms before its time,
// so the slot is taken a little after the moment it is called.
const slotMargin = time.Second

// Entry is one job of the schedule.
type Entry struct {
	// Kind is the River job kind: the periodic job's ID, and the console's
	// row (the last and next runs are that kind's rows in River's table).
	Kind string
	Name string
	What string // what a run does, for a person
	When When
	// Office: the back office's (jobs/backoffice registers it with its
	// workers); otherwise every working process's (jobs).
	Office bool
	// Args is the job of the run at slot (When.Slot); nil for a triggered
	// entry.
	Args func(slot time.Time) river.JobArgs
}

// Config is what the deployment may set of the schedule; zero values are
// the defaults.
type Config struct {
	Sweep time.Duration // the hold sweeper's interval (0: 30s)
	Relay time.Duration // the outbox relay's and the fraud signals' (0: 1s)
	// ReconAt is the daily reconciliation's time of day, IST (nil:
	// DefaultReconAt): yesterday's files are whole by then.
	ReconAt *Clock
	// ReconRerunDays: a day with open items is reconciled again every day
	// until T+ReconRerunDays (0: DefaultReconRerunDays).
	ReconRerunDays int
	// Watch is the invariant watch's interval (0: DefaultWatch).
	Watch time.Duration
}

// DefaultWatch: a shard whose seats disagree is frozen within half a
// minute, while one pass (a read of every open shard's holds) stays cheap.
const DefaultWatch = 30 * time.Second

// DefaultReconAt is 06:00 IST: the gateways' settlement files and the
// bank's statement of yesterday are complete by then.
const DefaultReconAt = Clock(6 * time.Hour)

// DefaultReconRerunDays: settlement may lag three days (T+3) and a bank
// credit a weekend more; a week catches what is late and names what never
// came.
const DefaultReconRerunDays = 7

// List is every periodic job of the product and what it sets off: the one
// place a schedule is declared.
func List(c Config) []Entry {
	if c.Sweep <= 0 {
		c.Sweep = 30 * time.Second
	}
	if c.Relay <= 0 {
		c.Relay = time.Second
	}
	reconAt := DefaultReconAt
	if c.ReconAt != nil {
		reconAt = *c.ReconAt
	}
	if c.ReconRerunDays <= 0 {
		c.ReconRerunDays = DefaultReconRerunDays
	}
	if c.Watch <= 0 {
		c.Watch = DefaultWatch
	}
	fixed := func(args river.JobArgs) func(time.Time) river.JobArgs {
		return func(time.Time) river.JobArgs { return args }
	}
	return []Entry{
		{Kind: booking.SweepArgs{}.Kind(), Name: "Hold sweep", When: Every(c.Sweep), Args: fixed(booking.SweepArgs{}),
			What: "expires overdue holds, releases Redis holds without a row, rebuilds shards whose Redis state is gone"},
		{Kind: booking.ChartScheduleArgs{}.Kind(), Name: "Chart planning", When: Every(5 * time.Minute), Args: fixed(booking.ChartScheduleArgs{}),
			What: "schedules each shard departing within two days for charting at its chart time"},
		{Kind: booking.ChartArgs{}.Kind(), Name: "Charting", When: Triggered("at each shard's chart time before departure"),
			What: "freezes the shard, cancels its waitlist with refunds and prepares the chart"},
		{Kind: booking.ChartSendArgs{}.Kind(), Name: "Chart sending", When: Triggered("after each chart is prepared"),
			What: "sends the prepared chart to the reservation core"},
		{Kind: notify.RelayArgs{}.Kind(), Name: "Message relay", When: Every(c.Relay), Args: fixed(notify.RelayArgs{}),
			What: "queues the notifications outbox for sending"},
		{Kind: fraud.DrainArgs{}.Kind(), Name: "Fraud signal drain", When: Every(c.Relay), Args: fixed(fraud.DrainArgs{}),
			What: "writes the fraud signals the booking path queued"},
		{Kind: alarms.WatchArgs{}.Kind(), Name: "Invariant watch", When: Every(c.Watch), Args: fixed(alarms.WatchArgs{}),
			What: "checks every open shard's seats (Redis against PostgreSQL) and the money, freezes a shard whose seats may sell twice, and raises or clears the alarms"},
		{Kind: winreview.Args{}.Kind(), Name: "Post-window review", When: Every(time.Minute), Args: fixed(winreview.Args{}),
			What: "writes each closed window's review (funnel, fairness, money, incidents, levers) once it has settled"},
		{Kind: admission.FairnessArgs{}.Kind(), Name: "Fairness figures", When: Triggered("ten minutes after each window's draw is sealed"),
			What: "computes a window's success by client type, account age and arrival second"},

		// The back office's.
		{Kind: recon.DailyArgs{}.Kind(), Name: "Reconciliation", When: Daily(reconAt), Office: true,
			Args: func(slot time.Time) river.JobArgs { return recon.NewDailyArgs(slot, c.ReconRerunDays) },
			What: fmt.Sprintf("reconciles yesterday's bank statement and yesterday on every gateway, and again each earlier statement "+
				"date and day with open items until T+%d", c.ReconRerunDays)},
		{Kind: recon.StatementArgs{}.Kind(), Name: "Bank statement", When: Triggered("by the daily reconciliation, per statement date"), Office: true,
			What: "fetches a day's bank statement by its date and finds the credits and debits no payout explains"},
		{Kind: recon.FetchArgs{}.Kind(), Name: "Reconciliation of a day", When: Triggered("by the daily reconciliation, per gateway and day"), Office: true,
			What: "fetches a day's settlement file, the bank statements after it and the core's exports, and reconciles the day"},
		{Kind: recon.EscalateArgs{}.Kind(), Name: "Exception escalation", When: Every(15 * time.Minute), Office: true, Args: fixed(recon.EscalateArgs{}),
			What: "raises reconciliation exceptions past their SLA to the finance lead"},
		{Kind: fraud.ScheduleArgs{}.Kind(), Name: "Fraud clustering planning", When: Every(time.Minute), Office: true, Args: fixed(fraud.ScheduleArgs{}),
			What: "queues each window for clustering 10 and 30 minutes after it opens (TATKAL_FRAUD_EARLY_PASSES) and once it closes, when signals came since its last run"},
		{Kind: fraud.ClusterWindowArgs{}.Kind(), Name: "Fraud clustering", When: Triggered("minutes after each window opens, and after it closes"), Office: true,
			What: "clusters a window's linked accounts for review"},
		{Kind: review.EnforceArgs{}.Kind(), Name: "Fraud enforcement", When: Every(time.Minute), Office: true, Args: fixed(review.EnforceArgs{}),
			What: "carries out review decisions whose delay has passed, in a batch"},
	}
}

// Periodic is River's periodic jobs of the entries that are the back
// office's (office) or not. Each is inserted once as its scheduler starts
// (RunOnStart): an interval's work is looked for at once, and a daily job
// catches up a day whose time passed with no leader (unique per day, so a
// day that ran is not run again).
func Periodic(entries []Entry, office bool) []*river.PeriodicJob {
	var out []*river.PeriodicJob
	for _, e := range entries {
		if e.Office != office || !e.When.Periodic() || e.Args == nil {
			continue
		}
		out = append(out, river.NewPeriodicJob(e.When, func() (river.JobArgs, *river.InsertOpts) {
			return e.Args(e.When.Slot(time.Now().Add(slotMargin))), nil
		}, &river.PeriodicJobOpts{ID: e.Kind, RunOnStart: true}))
	}
	return out
}
