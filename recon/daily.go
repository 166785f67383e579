package recon

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"tatkal/booking"
	"tatkal/booking/db"
)

// DailyArgs is the daily reconciliation of the IST day On (jobs/schedule
// inserts it at its time of day): the bank statement of yesterday by its
// date and each earlier statement date back to T+RerunDays still open,
// and on every gateway yesterday (T+1) and each earlier day back to
// T+RerunDays that still has open items (OpenDays), each its own job.
// Unique per day: a day planned once is not planned again by a second
// leader or a process catching the day up.
type DailyArgs struct {
	On        time.Time `json:"on" river:"unique"`
	RerunDays int       `json:"rerun_days"`
}

// NewDailyArgs is the daily run of slot's IST day.
func NewDailyArgs(slot time.Time, rerunDays int) DailyArgs {
	return DailyArgs{On: istMidnight(slot), RerunDays: rerunDays}
}

func (DailyArgs) Kind() string { return "recon_daily" }
func (DailyArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: booking.QueueMoney, MaxAttempts: 10, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// StatementArgs fetches and ingests the bank's statement of one date (a
// whole day once the day is over), then runs the bank leg of that
// statement date (a credit or debit no payout explains). On is the day the
// daily reconciliation planned it: unique by both, so a statement date
// still open is fetched and run again on each later day, and once a day.
type StatementArgs struct {
	Date time.Time `json:"date"`
	On   time.Time `json:"on,omitzero"`
}

func (StatementArgs) Kind() string { return "recon_statement" }
func (StatementArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: booking.QueueMoney, MaxAttempts: 20, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// StatementWorker runs StatementArgs.
type StatementWorker struct {
	river.WorkerDefaults[StatementArgs]
	Recon   *Service
	Sources Sources
}

func (w *StatementWorker) Work(ctx context.Context, job *river.Job[StatementArgs]) error {
	by := "job:" + job.Kind
	if _, err := w.Recon.FetchBank(ctx, w.Sources, job.Args.Date, by); err != nil {
		return err
	}
	// The statement as it stands now, against every settlement file
	// fetched so far: a late file or a corrected statement explains what
	// an earlier run of the date could not.
	_, err := w.Recon.Run(ctx, RunRequest{Gateway: Bank, Date: job.Args.Date, By: by})
	return err
}

// DailyWorker runs DailyArgs over the gateways whose files can be fetched,
// listed when it runs (never when the job was scheduled).
type DailyWorker struct {
	river.WorkerDefaults[DailyArgs]
	Recon   *Service
	Sources Sources
}

func (w *DailyWorker) Work(ctx context.Context, job *river.Job[DailyArgs]) error {
	gateways := w.Sources.Gateways()
	if len(gateways) == 0 {
		// Said loudly (the job fails, the schedules page shows it): a day
		// planned over no gateway reconciles nothing, silently.
		return fmt.Errorf("daily reconciliation of %s: no gateway to fetch from", istMidnight(job.Args.On).Format(time.DateOnly))
	}
	plan, err := w.Recon.PlanDaily(ctx, gateways, job.Args)
	if err != nil {
		return err
	}
	for _, st := range plan.Statements {
		w.Recon.log.InfoContext(ctx, "recon statement planned", "date", st.Date.Format(time.DateOnly), "on", st.On.Format(time.DateOnly))
	}
	for _, f := range plan.Days {
		w.Recon.log.InfoContext(ctx, "recon day planned", "gateway", f.Gateway, "date", f.Date.Format(time.DateOnly), "on", f.On.Format(time.DateOnly))
	}
	return nil
}

// DailyPlan is what a day's reconciliation planned, oldest first: the
// bank statement dates (StatementArgs) and per gateway its days (FetchArgs).
type DailyPlan struct {
	Statements []StatementArgs
	Days       []FetchArgs
}

// PlanDaily inserts the jobs of a's day in one transaction: the bank
// statement of yesterday and of each open statement date from T+2 to
// T+RerunDays (OpenDays of Bank: never reconciled, or an unexplained line
// still open), and per gateway a FetchArgs for yesterday and for each
// open day from T+2 to T+RerunDays. Money that never arrives is caught
// so: a day stays open while anything of it is unmatched, is run again
// each day, and once past T+3 the run names what is missing. Planning a
// day again inserts nothing (each job is unique by its day and On).
func (s *Service) PlanDaily(ctx context.Context, gateways []string, a DailyArgs) (DailyPlan, error) {
	if a.On.IsZero() {
		return DailyPlan{}, booking.Errorf(booking.EINVALID, "NO_DATE", "Name the day of the daily reconciliation.")
	}
	on := istMidnight(a.On)
	yesterday := on.AddDate(0, 0, -1)
	// open is the scope's days still open from T+RerunDays to T+2, then yesterday.
	open := func(scope string) ([]time.Time, error) {
		if a.RerunDays < 2 {
			return []time.Time{yesterday}, nil
		}
		days, err := s.OpenDays(ctx, scope, on.AddDate(0, 0, -a.RerunDays), on.AddDate(0, 0, -2))
		return append(days, yesterday), err
	}
	var plan DailyPlan
	var params []river.InsertManyParams
	dates, err := open(Bank)
	if err != nil {
		return DailyPlan{}, err
	}
	for _, d := range dates {
		st := StatementArgs{Date: d, On: on}
		plan.Statements = append(plan.Statements, st)
		params = append(params, river.InsertManyParams{Args: st})
	}
	for _, gw := range gateways {
		days, err := open(gw)
		if err != nil {
			return DailyPlan{}, err
		}
		for _, d := range days {
			f := FetchArgs{Gateway: gw, Date: d, On: on}
			plan.Days = append(plan.Days, f)
			params = append(params, river.InsertManyParams{Args: f})
		}
	}
	if err := db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		_, err := s.cfg.Jobs.InsertManyTx(ctx, tx, params)
		return err
	}); err != nil {
		return DailyPlan{}, fmt.Errorf("plan reconciliation of %s: %w", on.Format(time.DateOnly), err)
	}
	return plan, nil
}

// OpenDays are a gateway's business dates from first to last (IST days)
// that still have open items: a day never reconciled; a day whose latest
// run left one of our captures or refunds, or one of its payouts, neither
// matched nor raised as an exception (still waiting for its line or its
// bank credit); or a day with an exception still open (a corrected file or
// a late line may clear it). Of Bank, the statement dates never
// reconciled or with an unexplained line still open (a late settlement
// file or a corrected statement may explain it): no payment or payout is
// the bank's own.
func (s *Service) OpenDays(ctx context.Context, gateway string, first, last time.Time) ([]time.Time, error) {
	var open []time.Time
	for d := istMidnight(first); !d.After(istMidnight(last)); d = d.AddDate(0, 0, 1) {
		var pending int
		// $1 gateway, $2 the day, $3 its start, $4 its end (IST), $5 our
		// payments' psp column.
		err := s.pool.QueryRow(ctx, `WITH run AS (SELECT id FROM recon_runs WHERE gateway = $1 AND business_date = $2
		                                         ORDER BY id DESC LIMIT 1)
			SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM run) THEN 1
			            WHEN EXISTS (SELECT 1 FROM reconciliation_exceptions WHERE gateway = $1 AND business_date = $2
			                         AND state IN ('OPEN', 'INVESTIGATING')) THEN 1
			            ELSE
			  (SELECT count(*) FROM payments p
			   WHERE p.psp = $5 AND p.initiated_at >= $3 AND p.initiated_at < $4 AND p.state IN ('SUCCESS', 'REFUNDED') AND p.method <> 'WALLET'
			     AND NOT EXISTS (SELECT 1 FROM recon_matches m WHERE m.run_id = (SELECT id FROM run) AND m.our_ref = p.id::text)
			     AND NOT EXISTS (SELECT 1 FROM reconciliation_exceptions e WHERE e.payment_id = p.id))
			+ (SELECT count(*) FROM refunds r JOIN payments p ON p.id = r.payment_id
			   WHERE p.psp = $5 AND r.initiated_at >= $3 AND r.initiated_at < $4 AND r.state = 'PROCESSED'
			     AND NOT EXISTS (SELECT 1 FROM recon_matches m WHERE m.run_id = (SELECT id FROM run) AND m.our_ref = r.id::text)
			     AND NOT EXISTS (SELECT 1 FROM reconciliation_exceptions e WHERE e.refund_id = r.id))
			+ (SELECT count(*) FROM (SELECT DISTINCT l.payout_id FROM recon_lines l
			                         WHERE l.file_id IN (SELECT f.id FROM recon_files f WHERE f.source = 'SETTLEMENT' AND f.gateway = $1
			                                             AND f.business_date = $2 AND f.superseded_by IS NULL)
			                           AND l.current AND l.source = 'SETTLEMENT' AND l.payout_id <> '') po
			   WHERE NOT EXISTS (SELECT 1 FROM recon_matches m WHERE m.run_id = (SELECT id FROM run) AND m.our_ref = po.payout_id)
			     AND NOT EXISTS (SELECT 1 FROM reconciliation_exceptions e WHERE e.payout_id = po.payout_id))
			END`, gateway, pgDate(d), d, d.AddDate(0, 0, 1), pspOf(gateway)).Scan(&pending)
		if err != nil {
			return nil, fmt.Errorf("open items of %s %s: %w", gateway, d.Format(time.DateOnly), err)
		}
		if pending > 0 {
			open = append(open, d)
		}
	}
	return open, nil
}

// istMidnight is midnight IST of t's IST day.
func istMidnight(t time.Time) time.Time {
	y, m, d := t.In(booking.IST).Date()
	return time.Date(y, m, d, 0, 0, 0, 0, booking.IST)
}
