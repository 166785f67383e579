package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"tatkal/booking/winreview"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"tatkal/booking"
	"tatkal/booking/admission"
	"tatkal/booking/fraud"
	"tatkal/booking/fraud/review"
	"tatkal/booking/notify"
	"tatkal/booking/payment"
	"tatkal/console/alarms"
	"tatkal/console/levers"
	"tatkal/jobs/schedule"
	"tatkal/recon"
)

// DefaultRescueStuckJobsAfter is how long a job may stay running before
// River takes it for one a dead worker left and runs it again. River's own
// default is an hour: a worker killed mid-job at 10:00 would leave its
// expiries, refunds and seat syncs stuck until 11:00. Two minutes is twice
// River's default job timeout (one minute, which every job here but
// clustering keeps; River counts a worker's own longer timeout before
// rescuing its jobs), and every job is idempotent, so a rescue that races
// a slow run does no harm.
const DefaultRescueStuckJobsAfter = 2 * time.Minute

// Config sets how the River client runs.
type Config struct {
	Work    bool // run workers here (false: insert-only client)
	Workers int  // per queue
	Logger  *slog.Logger
	// Schedule is every periodic job (jobs/schedule.List; nil: its
	// defaults). The client registers the booking stack's; More the back
	// office's.
	Schedule []schedule.Entry
	// RescueStuckJobsAfter: a job left running by a dead process is retried
	// after this long (zero: DefaultRescueStuckJobsAfter).
	RescueStuckJobsAfter time.Duration
	// JobTimeout bounds one run of a job (River's default: a minute).
	JobTimeout time.Duration
	// More adds the back office's workers and returns its periodic jobs of
	// the schedule (see jobs/backoffice), over the same Services; nil: the
	// booking stack's alone.
	More func(*river.Workers, []schedule.Entry) []*river.PeriodicJob
}

// Services are the domain services the workers call, the back office's
// (jobs/backoffice) among them; booking/app builds them all. Workers keep a
// pointer to it, so it may be filled after the client is built.
type Services struct {
	Booking   *booking.Service
	Payments  *payment.Service
	Levers    *levers.Service
	Notify    *notify.Service
	Admission *admission.Service
	// Alarms runs the invariant watch (console/alarms).
	Alarms *alarms.Service

	// The back office's.
	Recon *recon.Service
	// Fraud clusters each closed window's accounts.
	Fraud *fraud.Service
	// FraudEnforcer carries out review decisions in batches.
	FraudEnforcer *review.Enforcer
	// ReconSources is where the daily fetch reads the gateways' settlement
	// files, the bank statement and the core's export. Read when a job
	// runs, never when the client is built: it is filled in after.
	ReconSources recon.Sources
}

// NewClient returns a River client. With cfg.Work it runs the workers and
// the periodic jobs; without, it only inserts (the services need one to
// enqueue effects in their transactions before the workers exist).
func NewClient(pool *pgxpool.Pool, svc *Services, cfg Config) (*river.Client[pgx.Tx], error) {
	if cfg.RescueStuckJobsAfter == 0 {
		cfg.RescueStuckJobsAfter = DefaultRescueStuckJobsAfter
	}
	rc := &river.Config{Logger: cfg.Logger, RescueStuckJobsAfter: cfg.RescueStuckJobsAfter, JobTimeout: cfg.JobTimeout}
	if cfg.Work {
		if cfg.Workers == 0 {
			cfg.Workers = 20
		}
		if cfg.Schedule == nil {
			cfg.Schedule = schedule.List(schedule.Config{})
		}
		workers := river.NewWorkers()
		river.AddWorker(workers, &expireHoldWorker{svc: svc})
		river.AddWorker(workers, &seatSyncWorker{svc: svc})
		river.AddWorker(workers, &seatSyncGroupWorker{svc: svc})
		river.AddWorker(workers, &expireHoldGroupWorker{svc: svc})
		river.AddWorker(workers, &sweepWorker{svc: svc})
		river.AddWorker(workers, &coreSyncWorker{svc: svc})
		river.AddWorker(workers, &coreSyncGroupWorker{svc: svc})
		river.AddWorker(workers, &refundWorker{svc: svc})
		river.AddWorker(workers, &inquiryWorker{svc: svc})
		river.AddWorker(workers, &lateSuccessWorker{svc: svc})
		river.AddWorker(workers, &leverRevertWorker{svc: svc})
		river.AddWorker(workers, &promoteWorker{svc: svc})
		river.AddWorker(workers, &chartWorker{svc: svc})
		river.AddWorker(workers, &chartScheduleWorker{svc: svc})
		river.AddWorker(workers, &chartSendWorker{svc: svc})
		river.AddWorker(workers, &relayWorker{svc: svc})
		river.AddWorker(workers, &sendWorker{svc: svc})
		river.AddWorker(workers, &fairnessWorker{svc: svc})
		river.AddWorker(workers, &fraud.DrainWorker{Pool: pool})
		river.AddWorker(workers, &watchWorker{svc: svc})
		river.AddWorker(workers, &winreview.Worker{Pool: pool})
		rc.Workers = workers
		rc.Queues = map[string]river.QueueConfig{
			river.QueueDefault:   {MaxWorkers: cfg.Workers},
			booking.QueueHolds:   {MaxWorkers: cfg.Workers},
			booking.QueueMoney:   {MaxWorkers: cfg.Workers},
			notify.QueueMessages: {MaxWorkers: cfg.Workers},
		}
		// River inserts them on its elected leader alone: once across the
		// processes, each of which registers the same schedule.
		rc.PeriodicJobs = schedule.Periodic(cfg.Schedule, false)
		if cfg.More != nil {
			rc.PeriodicJobs = append(rc.PeriodicJobs, cfg.More(workers, cfg.Schedule)...)
		}
		rc.FetchCooldown = 20 * time.Millisecond
		rc.FetchPollInterval = 200 * time.Millisecond
	}
	client, err := river.NewClient(riverpgxv5.New(pool), rc)
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	return client, nil
}

type expireHoldWorker struct {
	river.WorkerDefaults[booking.ExpireHoldArgs]
	svc *Services
}

func (w *expireHoldWorker) Work(ctx context.Context, job *river.Job[booking.ExpireHoldArgs]) error {
	return snoozeAfter(w.svc.Booking.Lifecycle.ExpireHold(ctx, job.Args.HoldID))
}

type expireHoldGroupWorker struct {
	river.WorkerDefaults[booking.ExpireHoldGroupArgs]
	svc *Services
}

func (w *expireHoldGroupWorker) Work(ctx context.Context, job *river.Job[booking.ExpireHoldGroupArgs]) error {
	return w.svc.Booking.Lifecycle.ExpireHolds(ctx, job.Args.Holds)
}

type seatSyncWorker struct {
	river.WorkerDefaults[booking.SeatSyncArgs]
	svc *Services
}

func (w *seatSyncWorker) Work(ctx context.Context, job *river.Job[booking.SeatSyncArgs]) error {
	return w.svc.Booking.Lifecycle.SyncSeat(ctx, job.Args.HoldID)
}

type seatSyncGroupWorker struct {
	river.WorkerDefaults[booking.SeatSyncGroupArgs]
	svc *Services
}

func (w *seatSyncGroupWorker) Work(ctx context.Context, job *river.Job[booking.SeatSyncGroupArgs]) error {
	return w.svc.Booking.Lifecycle.SyncSeats(ctx, job.Args.Holds)
}

type sweepWorker struct {
	river.WorkerDefaults[booking.SweepArgs]
	svc *Services
}

func (w *sweepWorker) Work(ctx context.Context, job *river.Job[booking.SweepArgs]) error {
	rep, err := w.svc.Booking.Sweep(ctx)
	if err != nil {
		return err
	}
	if rep != (booking.SweepReport{}) {
		slog.Info("sweep", "expired", rep.Expired, "orphans", rep.Orphans, "synced", rep.Synced, "rebuilt", rep.Rebuilt)
	}
	return nil
}

type coreSyncWorker struct {
	river.WorkerDefaults[booking.CoreSyncArgs]
	svc *Services
}

func (w *coreSyncWorker) Work(ctx context.Context, job *river.Job[booking.CoreSyncArgs]) error {
	return w.svc.Booking.CoreSync.SyncToCore(ctx, job.Args.BookingID)
}

// NextRetry keeps trying the reservation core for hours, never faster than
// every few seconds nor slower than every five minutes.
func (w *coreSyncWorker) NextRetry(job *river.Job[booking.CoreSyncArgs]) time.Time {
	return coreRetry(job.Attempt)
}

func coreRetry(attempt int) time.Time {
	return time.Now().Add(min(time.Duration(attempt*attempt)*time.Second+2*time.Second, 5*time.Minute))
}

type coreSyncGroupWorker struct {
	river.WorkerDefaults[booking.CoreSyncGroupArgs]
	svc *Services
}

func (w *coreSyncGroupWorker) Work(ctx context.Context, job *river.Job[booking.CoreSyncGroupArgs]) error {
	return w.svc.Booking.CoreSync.SyncGroupToCore(ctx, job.Args.Bookings)
}

// NextRetry: a group is retried only when its failed bookings' own jobs
// could not be enqueued, as a single booking's job is.
func (w *coreSyncGroupWorker) NextRetry(job *river.Job[booking.CoreSyncGroupArgs]) time.Time {
	return coreRetry(job.Attempt)
}

type refundWorker struct {
	river.WorkerDefaults[payment.RefundArgs]
	svc *Services
}

func (w *refundWorker) Work(ctx context.Context, job *river.Job[payment.RefundArgs]) error {
	return snoozeAfter(w.svc.Payments.ExecuteRefund(ctx, job.Args.RefundID))
}

func (w *refundWorker) NextRetry(job *river.Job[payment.RefundArgs]) time.Time {
	return time.Now().Add(min(time.Duration(job.Attempt*job.Attempt)*time.Second+time.Second, 5*time.Minute))
}

type inquiryWorker struct {
	river.WorkerDefaults[payment.InquiryArgs]
	svc *Services
}

func (w *inquiryWorker) Work(ctx context.Context, job *river.Job[payment.InquiryArgs]) error {
	wait, err := w.svc.Payments.Inquire(ctx, job.Args.PaymentID)
	if job.Args.Prompt {
		if err != nil {
			// One early look only: the payment's own inquiry keeps asking.
			return river.JobCancel(err)
		}
		return nil
	}
	return snoozeAfter(wait, err)
}

// NextRetry asks again soon after an inquiry that failed (PostgreSQL
// restarting, the gateway down): River's default waits hours by the tenth
// attempt, while the payment's traveller and its hold are waiting now.
func (w *inquiryWorker) NextRetry(job *river.Job[payment.InquiryArgs]) time.Time {
	return time.Now().Add(min(time.Duration(job.Attempt*job.Attempt)*time.Second+time.Second, 5*time.Minute))
}

type lateSuccessWorker struct {
	river.WorkerDefaults[payment.LateSuccessArgs]
	svc *Services
}

func (w *lateSuccessWorker) Work(ctx context.Context, job *river.Job[payment.LateSuccessArgs]) error {
	return w.svc.Payments.ResolveLateSuccess(ctx, job.Args.PaymentID)
}

type leverRevertWorker struct {
	river.WorkerDefaults[levers.RevertArgs]
	svc *Services
}

func (w *leverRevertWorker) Work(ctx context.Context, job *river.Job[levers.RevertArgs]) error {
	return snoozeAfter(w.svc.Levers.Revert(ctx, job.Args.ChangeID))
}

type relayWorker struct {
	river.WorkerDefaults[notify.RelayArgs]
	svc *Services
}

func (w *relayWorker) Work(ctx context.Context, job *river.Job[notify.RelayArgs]) error {
	_, err := w.svc.Notify.Relay(ctx)
	return err
}

type sendWorker struct {
	river.WorkerDefaults[notify.SendArgs]
	svc *Services
}

func (w *sendWorker) Work(ctx context.Context, job *river.Job[notify.SendArgs]) error {
	again, err := w.svc.Notify.Deliver(ctx, job.Args.NotificationID)
	if err != nil {
		if job.Attempt >= job.MaxAttempts {
			return errors.Join(err, w.svc.Notify.GiveUp(ctx, job.Args.NotificationID, err))
		}
		return err
	}
	return snoozeAfter(again, nil)
}

func (w *sendWorker) NextRetry(job *river.Job[notify.SendArgs]) time.Time {
	return time.Now().Add(w.svc.Notify.Backoff(job.Attempt))
}

type promoteWorker struct {
	river.WorkerDefaults[booking.PromoteArgs]
	svc *Services
}

func (w *promoteWorker) Work(ctx context.Context, job *river.Job[booking.PromoteArgs]) error {
	_, err := w.svc.Booking.Waitlist.Promote(ctx, job.Args.ShardID)
	return err
}

type chartWorker struct {
	river.WorkerDefaults[booking.ChartArgs]
	svc *Services
}

func (w *chartWorker) Work(ctx context.Context, job *river.Job[booking.ChartArgs]) error {
	return w.svc.Booking.Charts.ChartJob(ctx, job.Args.ShardID, false, job.Attempt, job.MaxAttempts)
}

type chartSendWorker struct {
	river.WorkerDefaults[booking.ChartSendArgs]
	svc *Services
}

func (w *chartSendWorker) Work(ctx context.Context, job *river.Job[booking.ChartSendArgs]) error {
	return w.svc.Booking.Charts.ChartJob(ctx, job.Args.ShardID, true, job.Attempt, job.MaxAttempts)
}

type chartScheduleWorker struct {
	river.WorkerDefaults[booking.ChartScheduleArgs]
	svc *Services
}

func (w *chartScheduleWorker) Work(ctx context.Context, job *river.Job[booking.ChartScheduleArgs]) error {
	_, err := w.svc.Booking.Charts.ScheduleCharts(ctx)
	return err
}

// fairnessWorker computes a sealed window's fairness figures
// (admission.Service.ComputeFairness), after its offers have played out.
type fairnessWorker struct {
	river.WorkerDefaults[admission.FairnessArgs]
	svc *Services
}

func (w *fairnessWorker) Work(ctx context.Context, job *river.Job[admission.FairnessArgs]) error {
	_, err := w.svc.Admission.ComputeFairness(ctx, job.Args.ShardID)
	return err
}

// watchWorker runs one pass of the invariant watch.
type watchWorker struct {
	river.WorkerDefaults[alarms.WatchArgs]
	svc *Services
}

func (w *watchWorker) Work(ctx context.Context, job *river.Job[alarms.WatchArgs]) error {
	p, err := w.svc.Alarms.Watch(ctx)
	if len(p.Raised) > 0 || len(p.Frozen) > 0 || p.Resolved > 0 {
		slog.Info("invariant watch", "raised", len(p.Raised), "frozen", p.Frozen, "resolved", p.Resolved)
	}
	return err
}

// snoozeAfter turns a service's answer "ask me again in d" (0: done) into
// River's snooze, so every worker that polls something says it one way.
func snoozeAfter(again time.Duration, err error) error {
	if err != nil {
		return err
	}
	if again > 0 {
		return river.JobSnooze(again)
	}
	return nil
}
