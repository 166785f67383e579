package recon_test

import (
	"context"
	"testing"

	"github.com/riverqueue/river"

	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
	"tatkal/booking/payment/pspapi"
	"tatkal/booking/sim/pspsim"
	"tatkal/jobs"
	"tatkal/jobs/schedule"
	"tatkal/recon"
)

// The resolution tests run on app processes built by booking/teststack,
// which imports recon and so cannot be imported by recon's own tests:
// their bodies are in resolve_test.go.

func TestAutomaticResolutions(t *testing.T) {
	t.Parallel()
	recon.AutomaticResolutions(t, liveStack(t))
}

func TestUploadedCaptureIsEvidenceNotTheTruth(t *testing.T) {
	t.Parallel()
	recon.UploadedCaptureIsEvidenceNotTheTruth(t, liveStack(t))
}

func TestResolvingNeedsEvidence(t *testing.T) {
	t.Parallel()
	recon.ResolvingNeedsEvidence(t, liveStack(t))
}

func TestResolutionHoldsTheExceptionsLock(t *testing.T) {
	t.Parallel()
	recon.ResolutionHoldsTheExceptionsLock(t, liveStack(t))
}

func TestReopenedExceptionIsResolvedAgain(t *testing.T) {
	t.Parallel()
	recon.ReopenedExceptionIsResolvedAgain(t, liveStack(t))
}

func TestResolutionWorkerKilled(t *testing.T) {
	t.Parallel()
	recon.ResolutionWorkerKilled(t, liveStack(t))
}

// liveStack starts app processes on one fresh database: the first with
// the simulators, the later ones on the first's, as the processes of one
// deployment share the gateways and the core.
func liveStack(t *testing.T) recon.StartProc {
	env := testenv.New(t)
	var first *teststack.Stack
	return func(t *testing.T, o recon.ProcOptions) *recon.Proc {
		t.Helper()
		opts := teststack.Options{Work: true, Routes: liveRoutes(), Pause: o.Pause, RescueStuckJobsAfter: o.RescueAfter, SimulatorsOf: first}
		if o.Resolver {
			opts.BackOffice = &resolver{}
		}
		s := teststack.Start(t, env, opts)
		if first == nil {
			first = s
		}
		return &recon.Proc{Env: env, Service: s.Service, Payments: s.Payments, Recon: s.App.Recon, River: s.River,
			PSPURL: s.PSP.URL, Gateways: s.Gateways}
	}
}

// liveRoutes approve every payment at once, with the contracts' fees.
func liveRoutes() []pspapi.RouteConfig {
	var routes []pspapi.RouteConfig
	for _, gw := range pspsim.GatewayIDs {
		for _, m := range []string{pspapi.UPI, pspapi.Card, pspapi.NetBanking} {
			our := m
			if m == pspapi.NetBanking {
				our = "NB"
			}
			routes = append(routes, pspapi.RouteConfig{Gateway: gw, Method: m, AutoApproveMs: 5, ExpireAfterMs: 60000,
				FeeBps: recon.DefaultContracts()[gw][our]})
		}
	}
	return routes
}

// resolver is the back office's resolution worker alone: the whole back
// office (jobs/backoffice) would also fetch yesterday's files at start and
// cluster fraud signals beside these tests.
type resolver struct{}

func (*resolver) Jobs(svc *jobs.Services, ws *river.Workers, _ []schedule.Entry) []*river.PeriodicJob {
	river.AddWorker(ws, &resolveJob{svc: svc})
	return nil
}

type resolveJob struct {
	river.WorkerDefaults[recon.ResolveArgs]
	svc *jobs.Services
}

func (w *resolveJob) Work(ctx context.Context, job *river.Job[recon.ResolveArgs]) error {
	return (&recon.ResolveWorker{Recon: w.svc.Recon, Payments: w.svc.Payments, Bookings: w.svc.Booking}).Work(ctx, job)
}
