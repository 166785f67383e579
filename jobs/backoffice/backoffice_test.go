package backoffice_test

import (
	"context"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"tatkal/booking"
	"tatkal/booking/fraud"
	"tatkal/booking/fraud/review"
	"tatkal/booking/lab/teststack"
	"tatkal/jobs/backoffice"
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
		recon.FetchArgs{Gateway: st.Gateways[0].ID, Date: yesterday}} {
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
