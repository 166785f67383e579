// Package backoffice registers the back office's River jobs:
// reconciliation (resolve, the daily plan, statement and day fetches,
// escalation), fraud clustering and the enforcement of review decisions,
// with their schedules from jobs/schedule. Its workers only call services that
// booking/app builds and hands over (jobs.Services). It sits apart from
// jobs and is handed to booking/app by main.go, so that only the processes
// that should work the back office's jobs (and no test stack unless it
// asks) register them. River inserts periodic jobs on its elected leader,
// which may be any working process: every working process of a deployment
// registers the back office (tatkal serve and worker do), or its schedule
// pauses while one without it leads.
package backoffice

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"tatkal/booking/fraud"
	"tatkal/booking/fraud/review"
	"tatkal/jobs"
	"tatkal/jobs/schedule"
	"tatkal/recon"
)

// Office is the back office's jobs, for app.Options.BackOffice.
type Office struct{}

// New returns the back office for app.Options.BackOffice.
func New() *Office { return &Office{} }

// Jobs registers the workers, over the process's services (booking/app
// fills svc before the workers run), and returns the back office's
// periodic jobs of the process's schedule (jobs/schedule: every schedule
// is declared there). Every kind the back office inserts is registered
// here, so River never refuses one as unknown.
func (*Office) Jobs(svc *jobs.Services, workers *river.Workers, sched []schedule.Entry) []*river.PeriodicJob {
	river.AddWorker(workers, &resolveWorker{svc: svc})
	river.AddWorker(workers, &dailyWorker{svc: svc})
	river.AddWorker(workers, &statementWorker{svc: svc})
	river.AddWorker(workers, &fetchWorker{svc: svc})
	river.AddWorker(workers, &escalateWorker{svc: svc})
	river.AddWorker(workers, &clusterWorker{svc: svc})
	river.AddWorker(workers, &scheduleWorker{svc: svc})
	river.AddWorker(workers, &enforceWorker{svc: svc})
	return schedule.Periodic(sched, true)
}

// The workers are recon's and fraud's own, built per job from the services
// filled in after the client.

type resolveWorker struct {
	river.WorkerDefaults[recon.ResolveArgs]
	svc *jobs.Services
}

func (w *resolveWorker) Work(ctx context.Context, job *river.Job[recon.ResolveArgs]) error {
	return (&recon.ResolveWorker{Recon: w.svc.Recon, Payments: w.svc.Payments, Bookings: w.svc.Booking}).Work(ctx, job)
}

// dailyWorker and statementWorker read the gateways and the sources when
// a day is planned, not when the client was built (before booking/app had
// filled them: the daily fetch was then never scheduled).
type dailyWorker struct {
	river.WorkerDefaults[recon.DailyArgs]
	svc *jobs.Services
}

func (w *dailyWorker) Work(ctx context.Context, job *river.Job[recon.DailyArgs]) error {
	return (&recon.DailyWorker{Recon: w.svc.Recon, Sources: w.svc.ReconSources}).Work(ctx, job)
}

type statementWorker struct {
	river.WorkerDefaults[recon.StatementArgs]
	svc *jobs.Services
}

func (w *statementWorker) Work(ctx context.Context, job *river.Job[recon.StatementArgs]) error {
	return (&recon.StatementWorker{Recon: w.svc.Recon, Sources: w.svc.ReconSources}).Work(ctx, job)
}

type fetchWorker struct {
	river.WorkerDefaults[recon.FetchArgs]
	svc *jobs.Services
}

func (w *fetchWorker) Work(ctx context.Context, job *river.Job[recon.FetchArgs]) error {
	return (&recon.FetchWorker{Recon: w.svc.Recon, Sources: w.svc.ReconSources}).Work(ctx, job)
}

type escalateWorker struct {
	river.WorkerDefaults[recon.EscalateArgs]
	svc *jobs.Services
}

func (w *escalateWorker) Work(ctx context.Context, job *river.Job[recon.EscalateArgs]) error {
	return (&recon.EscalateWorker{Recon: w.svc.Recon}).Work(ctx, job)
}

type clusterWorker struct {
	river.WorkerDefaults[fraud.ClusterWindowArgs]
	svc *jobs.Services
}

func (w *clusterWorker) Work(ctx context.Context, job *river.Job[fraud.ClusterWindowArgs]) error {
	return (&fraud.ClusterWorker{Svc: w.svc.Fraud}).Work(ctx, job)
}

func (w *clusterWorker) Timeout(job *river.Job[fraud.ClusterWindowArgs]) time.Duration {
	return (&fraud.ClusterWorker{}).Timeout(job)
}

type scheduleWorker struct {
	river.WorkerDefaults[fraud.ScheduleArgs]
	svc *jobs.Services
}

func (w *scheduleWorker) Work(ctx context.Context, job *river.Job[fraud.ScheduleArgs]) error {
	return (&fraud.ScheduleWorker{Svc: w.svc.Fraud}).Work(ctx, job)
}

type enforceWorker struct {
	river.WorkerDefaults[review.EnforceArgs]
	svc *jobs.Services
}

func (w *enforceWorker) Work(ctx context.Context, job *river.Job[review.EnforceArgs]) error {
	return (&review.EnforceWorker{Enforcer: w.svc.FraudEnforcer}).Work(ctx, job)
}
