// Package backoffice registers the back office's River jobs:
// reconciliation (resolve, daily fetch, escalation), fraud clustering and
// the enforcement of review decisions. Its workers only call services that
// booking/app builds and hands over (jobs.Services). It sits apart from
// jobs and is handed to booking/app by main.go, so that only the processes
// that should work the back office's jobs (and no test stack unless it
// asks) register them.
package backoffice

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"tatkal/booking"
	"tatkal/booking/fraud"
	"tatkal/booking/fraud/review"
	"tatkal/jobs"
	"tatkal/recon"
)

// Office is the back office's jobs, for app.Options.BackOffice.
type Office struct{}

// New returns the back office for app.Options.BackOffice.
func New() *Office { return &Office{} }

// Jobs registers the workers, over the process's services (booking/app
// fills svc before the workers run), and returns the periodic jobs. Every
// kind the back office inserts is registered here, so River never refuses
// one as unknown.
func (*Office) Jobs(svc *jobs.Services, workers *river.Workers) []*river.PeriodicJob {
	river.AddWorker(workers, &resolveWorker{svc: svc})
	river.AddWorker(workers, &fetchWorker{svc: svc})
	river.AddWorker(workers, &escalateWorker{svc: svc})
	river.AddWorker(workers, &clusterWorker{svc: svc})
	river.AddWorker(workers, &scheduleWorker{svc: svc})
	river.AddWorker(workers, &enforceWorker{svc: svc})
	periodic := []*river.PeriodicJob{
		// Exceptions past their SLA are raised to the finance lead.
		river.NewPeriodicJob(river.PeriodicInterval(15*time.Minute),
			func() (river.JobArgs, *river.InsertOpts) { return recon.EscalateArgs{}, nil }, nil),
		// Each closed window's accounts are clustered once its signals settle.
		river.NewPeriodicJob(river.PeriodicInterval(time.Minute),
			func() (river.JobArgs, *river.InsertOpts) { return fraud.ScheduleArgs{}, nil }, nil),
		// Review decisions whose delay has passed are enforced in a batch.
		river.NewPeriodicJob(river.PeriodicInterval(time.Minute),
			func() (river.JobArgs, *river.InsertOpts) { return review.EnforceArgs{}, nil }, nil),
	}
	// Yesterday's settlement (T+1, IST) per gateway, fetched and reconciled daily.
	for _, gw := range svc.ReconSources.Gateways() {
		periodic = append(periodic, river.NewPeriodicJob(river.PeriodicInterval(24*time.Hour),
			func() (river.JobArgs, *river.InsertOpts) {
				return recon.FetchArgs{Gateway: gw, Date: time.Now().In(booking.IST).AddDate(0, 0, -1)}, nil
			}, &river.PeriodicJobOpts{RunOnStart: true}))
	}
	return periodic
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
