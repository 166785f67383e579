package console_test

import (
	"context"
	"testing"
	"time"

	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
	"tatkal/console/levers"
)

// TestLeverRevertIsAJob: applying a change with an automatic revert
// schedules one River job for the revert time, in the same transaction;
// the levers reader never writes, however often it refreshes past that
// time; a process running workers reverts the change once, audited as the
// system acting for the change's author; the job run again changes nothing.
func TestLeverRevertIsAJob(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{}) // no workers: nothing may revert here
	ops := actor(t, s, "ops1")
	ctx := context.Background()
	svc := s.Console.Levers()
	p := propose(levers.HoldWindow, "UPI", "420")
	p.RevertAfter = time.Second
	ch, err := svc.Propose(ctx, ops, p)
	if err != nil || ch.State != "APPLIED" || ch.RevertAt == nil {
		t.Fatalf("propose: %v %+v", err, ch)
	}
	var jobs int
	var scheduled time.Time
	if err := s.Pool.QueryRow(ctx, `SELECT count(*), max(scheduled_at) FROM river_job WHERE kind = 'lever_revert' AND (args->>'change_id')::bigint = $1`,
		ch.ID).Scan(&jobs, &scheduled); err != nil {
		t.Fatal(err)
	}
	if jobs != 1 || !scheduled.Equal(*ch.RevertAt) {
		t.Fatalf("%d revert jobs scheduled at %s, want 1 at the revert time %s", jobs, scheduled, ch.RevertAt)
	}
	// Past the revert time, refreshes read and write nothing.
	time.Sleep(time.Until(*ch.RevertAt) + 200*time.Millisecond)
	for range 5 {
		s.Levers.Refresh(ctx)
	}
	if d, ok := s.Levers.HoldWindow("UPI"); !ok || d != 7*time.Minute {
		t.Fatalf("the reader sees %s %v, want the change still in force", d, ok)
	}
	var state string
	var reverts int
	if err := s.Pool.QueryRow(ctx, `SELECT state, (SELECT count(*) FROM audit_log WHERE action = 'lever.revert') FROM lever_changes WHERE id = $1`,
		ch.ID).Scan(&state, &reverts); err != nil {
		t.Fatal(err)
	}
	if state != "APPLIED" || reverts != 0 {
		t.Fatalf("after refreshes: change %s, %d revert records; the reader wrote", state, reverts)
	}
	// A process with workers runs the job.
	teststack.Start(t, s.Env, teststack.Options{Work: true})
	testenv.Eventually(t, 10*time.Second, "the change reverted by a worker", func() error {
		if err := s.Pool.QueryRow(ctx, `SELECT state FROM lever_changes WHERE id = $1`, ch.ID).Scan(&state); err != nil {
			t.Fatal(err)
		}
		return testenv.Want(state == "REVERTED", "still %s", state)
	})
	// Run again, as a redelivered job would be: nothing more happens.
	if wait, err := svc.Revert(ctx, ch.ID); err != nil || wait != 0 {
		t.Fatalf("second revert: %s %v", wait, err)
	}
	var actor, onBehalf string
	if err := s.Pool.QueryRow(ctx, `SELECT count(*), max(actor), max(detail->>'on_behalf_of') FROM audit_log WHERE action = 'lever.revert'`).
		Scan(&reverts, &actor, &onBehalf); err != nil {
		t.Fatal(err)
	}
	if reverts != 1 || actor != "system:lever-revert" || onBehalf != "ops1" {
		t.Fatalf("%d revert records by %q for %q, want 1 by system:lever-revert for ops1", reverts, actor, onBehalf)
	}
	s.Levers.Refresh(ctx)
	if d, ok := s.Levers.HoldWindow("UPI"); ok && d == 7*time.Minute {
		t.Fatal("the hold window is still the changed one after the revert")
	}
	// River marks the job completed shortly after it returns.
	testenv.Eventually(t, 10*time.Second, "the revert job completed", func() error {
		var completed int
		if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'lever_revert' AND state = 'completed'`).Scan(&completed); err != nil {
			t.Fatal(err)
		}
		return testenv.Want(completed == 1, "%d completed revert jobs, want 1", completed)
	})
}
