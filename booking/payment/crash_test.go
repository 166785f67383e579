package payment_test

import (
	"context"
	"testing"
	"time"

	"tatkal/booking/lab/teststack"
	"tatkal/booking/payment"
	"tatkal/booking/prs"
)

func TestMain(m *testing.M) { teststack.Main(m) }

// The worker is killed (SIGKILL) in the middle of sending a booking to the
// reservation core; a new worker resumes the job, and the booking reaches
// the core exactly once.
func TestWorkerKilledMidJobResumesOnce(t *testing.T) {
	t.Parallel()
	w := newWorld(t, teststack.Options{Routes: fastRoutes(nil)}, 4, 1)
	ctx := context.Background()
	w.s.SetCoreFaults(t, prs.Faults{LatencyMs: 5000})
	h := w.hold(t, w.users[0], "crash-hold-1")
	if _, err := w.pay(t, w.users[0], h.HoldID, payment.Wallet, "crash-pay-1"); err != nil {
		t.Fatal(err)
	}
	first := w.s.StartProcess(t, false)
	jobState := func() (string, int) {
		var state string
		var attempt int
		w.s.Pool.QueryRow(ctx, `SELECT state, attempt FROM river_job WHERE kind = 'core_sync'`).Scan(&state, &attempt) //nolint:errcheck
		return state, attempt
	}
	deadline := time.Now().Add(20 * time.Second)
	for st, _ := jobState(); st != "running"; st, _ = jobState() {
		if time.Now().After(deadline) {
			t.Fatalf("the core sync job never started (state %s)", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(700 * time.Millisecond) // mid-call: the core takes 5 s to answer
	first.Kill()
	if st, _ := jobState(); st != "running" {
		t.Fatalf("after the kill the job is %s; the crash left nothing to resume", st)
	}
	var prsState string
	w.s.Pool.QueryRow(ctx, `SELECT prs_state FROM bookings`).Scan(&prsState) //nolint:errcheck
	if prsState != "PENDING" {
		t.Fatalf("booking %s before any worker finished", prsState)
	}

	w.s.SetCoreFaults(t, prs.Faults{})
	w.s.StartProcess(t, false)
	deadline = time.Now().Add(90 * time.Second)
	for {
		w.s.Pool.QueryRow(ctx, `SELECT prs_state FROM bookings`).Scan(&prsState) //nolint:errcheck
		if prsState == "SYNCED" {
			break
		}
		if time.Now().After(deadline) {
			st, a := jobState()
			t.Fatalf("booking still %s; job %s attempt %d", prsState, st, a)
		}
		time.Sleep(200 * time.Millisecond)
	}
	st, attempt := jobState()
	for deadline := time.Now().Add(10 * time.Second); st == "running" && time.Now().Before(deadline); st, attempt = jobState() {
		time.Sleep(50 * time.Millisecond) // the worker records completion just after the effect
	}
	if st != "completed" || attempt < 2 {
		t.Fatalf("job %s after %d attempts, want completed after a retry", st, attempt)
	}
	exported, err := prs.NewClient(w.s.Core.URL, w.s.CoreKey, nil).Export(ctx, w.date)
	if err != nil {
		t.Fatal(err)
	}
	if len(exported) != 1 {
		t.Fatalf("the core holds %d bookings, want exactly 1", len(exported))
	}
}
