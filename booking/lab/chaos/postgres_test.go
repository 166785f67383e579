package chaos_test

import (
	"context"
	"testing"

	"tatkal/booking/lab/chaos"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
)

// PostgreSQL is stopped mid-rush (a fast shutdown: every connection
// dropped, open transactions rolled back) and started again a few seconds
// later. While it is down, holds and payments answer 503 with Retry-After,
// never 500 and never a wrong answer; afterwards the processes recover by
// themselves, and after drain the invariants hold.
func TestSeveralProcessesSurvivePostgresRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a private PostgreSQL and four processes")
	}
	// Beside one other chaos test: its processes' connections are on its
	// private server, not the shared one.
	t.Parallel()
	ctx := context.Background()
	pg := testenv.StartPostgres(t)
	st, shardID, date, users := newRush(t, teststack.Options{Postgres: pg}, 100)
	serves := []*teststack.Process{st.StartProcess(t, true, env...), st.StartProcess(t, true, env...)}
	workers := []*teststack.Process{st.StartProcess(t, false, env...), st.StartProcess(t, false, env...)}

	c := chaos.NewClient([]string{serves[0].URL, serves[1].URL}, date)
	// What was answered while PostgreSQL was down, and after it was back.
	tally := chaos.NewTally()
	c.Seen = tally.Seen
	travellers := newTravellers(st, users)
	c.Rush(ctx, travellers, func(wait func(n int64), done func() int64) {
		wait(int64(len(users)) / 4)
		if err := chaos.RestartPostgres(pg, chaos.PostgresDown, tally, done, t.Logf); err != nil {
			t.Error(err)
		}
	})

	during, after := tally.Counts()
	t.Logf("answers while PostgreSQL was down (0: no answer): %v; after: %v", during, after)
	for _, v := range tally.OutageViolations("PostgreSQL") {
		t.Error(v)
	}
	held := report(t, travellers, c)
	checkInvariants(t, st, shardID, date, held)
	// Every process outlived the outage: none needed a restart.
	for i, p := range append(serves, workers...) {
		if !p.Alive() {
			t.Errorf("process %d of 4 did not survive PostgreSQL's restart", i+1)
		}
	}
}
