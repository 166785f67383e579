// Package backoffice wires the back office's River jobs: reconciliation
// (resolve, daily fetch, escalation) and fraud clustering. It sits apart
// from jobs and is handed to booking/app by main.go, so that only the
// processes that should work the back office's jobs (and no test stack
// unless it asks) register them.
package backoffice

import (
	"context"
	"time"

	"github.com/riverqueue/river"

	"tatkal/booking"
	"tatkal/booking/fraud"
	"tatkal/booking/fraud/review"
	"tatkal/booking/payment"
	"tatkal/recon"
)

// Services are what the workers call. Workers keep a pointer to it, so it
// may be filled after the River client is built (the services need the
// client to enqueue in their transactions).
type Services struct {
	Booking  *booking.Service
	Payments *payment.Service
	Recon    *recon.Service
	Fraud    *fraud.Service
	// FraudEnforcer carries out review decisions in batches.
	FraudEnforcer *review.Enforcer
	// Sources is where the daily fetch reads the gateways' settlement
	// files, the bank statement and the core's export.
	Sources recon.Sources
}

// Jobs registers the workers and returns the periodic jobs: the function
// jobs.Config.More takes. Every kind the back office inserts is
// registered here, so River never refuses one as unknown.
func Jobs(svc *Services) func(*river.Workers) []*river.PeriodicJob {
	return func(workers *river.Workers) []*river.PeriodicJob {
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
		for _, gw := range svc.Sources.Gateways() {
			periodic = append(periodic, river.NewPeriodicJob(river.PeriodicInterval(24*time.Hour),
				func() (river.JobArgs, *river.InsertOpts) {
					return recon.FetchArgs{Gateway: gw, Date: time.Now().In(booking.IST).AddDate(0, 0, -1)}, nil
				}, &river.PeriodicJobOpts{RunOnStart: true}))
		}
		return periodic
	}
}

// The workers are recon's and fraud's own, built per job from the services
// filled in after the client.

type resolveWorker struct {
	river.WorkerDefaults[recon.ResolveArgs]
	svc *Services
}

func (w *resolveWorker) Work(ctx context.Context, job *river.Job[recon.ResolveArgs]) error {
	return (&recon.ResolveWorker{Recon: w.svc.Recon, Payments: w.svc.Payments, Bookings: w.svc.Booking}).Work(ctx, job)
}

type fetchWorker struct {
	river.WorkerDefaults[recon.FetchArgs]
	svc *Services
}

func (w *fetchWorker) Work(ctx context.Context, job *river.Job[recon.FetchArgs]) error {
	return (&recon.FetchWorker{Recon: w.svc.Recon, Sources: w.svc.Sources}).Work(ctx, job)
}

type escalateWorker struct {
	river.WorkerDefaults[recon.EscalateArgs]
	svc *Services
}

func (w *escalateWorker) Work(ctx context.Context, job *river.Job[recon.EscalateArgs]) error {
	return (&recon.EscalateWorker{Recon: w.svc.Recon}).Work(ctx, job)
}

type clusterWorker struct {
	river.WorkerDefaults[fraud.ClusterWindowArgs]
	svc *Services
}

func (w *clusterWorker) Work(ctx context.Context, job *river.Job[fraud.ClusterWindowArgs]) error {
	return (&fraud.ClusterWorker{Svc: w.svc.Fraud}).Work(ctx, job)
}

func (w *clusterWorker) Timeout(job *river.Job[fraud.ClusterWindowArgs]) time.Duration {
	return (&fraud.ClusterWorker{}).Timeout(job)
}

type scheduleWorker struct {
	river.WorkerDefaults[fraud.ScheduleArgs]
	svc *Services
}

func (w *scheduleWorker) Work(ctx context.Context, job *river.Job[fraud.ScheduleArgs]) error {
	return (&fraud.ScheduleWorker{Svc: w.svc.Fraud}).Work(ctx, job)
}

type enforceWorker struct {
	river.WorkerDefaults[review.EnforceArgs]
	svc *Services
}

func (w *enforceWorker) Work(ctx context.Context, job *river.Job[review.EnforceArgs]) error {
	return (&review.EnforceWorker{Enforcer: w.svc.FraudEnforcer}).Work(ctx, job)
}
