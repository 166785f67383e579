package chaos_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tatkal/booking/testenv"
	"tatkal/booking/teststack"
)

// pgDown is how long PostgreSQL stays down mid-rush.
const pgDown = 4 * time.Second

// PostgreSQL is stopped mid-rush (a fast shutdown: every connection
// dropped, open transactions rolled back) and started again a few seconds
// later. While it is down, holds and payments answer 503 with Retry-After,
// never 500 and never a wrong answer; afterwards the processes recover by
// themselves, and after drain the invariants hold.
func TestSeveralProcessesSurvivePostgresRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a private PostgreSQL and four processes")
	}
	ctx := context.Background()
	pg := testenv.StartPostgres(t)
	st, shardID, date, users := newRush(t, teststack.Options{Postgres: pg}, 100)
	serves := []*teststack.Process{st.StartProcess(t, true, env...), st.StartProcess(t, true, env...)}
	workers := []*teststack.Process{st.StartProcess(t, false, env...), st.StartProcess(t, false, env...)}

	c := newClient([]string{serves[0].URL, serves[1].URL}, date)
	// What was answered while PostgreSQL was down, and after it was back.
	var down, up atomic.Bool
	var mu sync.Mutex
	whileDown, afterUp, reasons := map[int]int{}, map[int]int{}, map[string]int{}
	c.seen = func(status int, reason string) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case down.Load():
			whileDown[status]++
			if reason != "" {
				reasons[reason]++
			}
		case up.Load():
			afterUp[status]++
		}
	}
	travellers := newTravellers(st, users)
	c.rushWith(ctx, travellers, func(wait func(n int64), done func() int64) {
		wait(int64(len(users)) / 4)
		down.Store(true)
		if err := pg.Stop(); err != nil {
			t.Error(err)
		}
		t.Logf("stopped PostgreSQL after %d travellers", done())
		time.Sleep(pgDown)
		if err := pg.Start(); err != nil {
			t.Error(err)
		}
		down.Store(false)
		up.Store(true)
		t.Logf("started PostgreSQL again after %d travellers", done())
	})

	mu.Lock()
	t.Logf("answers while PostgreSQL was down (0: no answer): %v, reasons %v; after: %v", whileDown, reasons, afterUp)
	if whileDown[http.StatusServiceUnavailable] == 0 {
		t.Errorf("no request was answered 503 while PostgreSQL was down: %v", whileDown)
	}
	ok := 0
	for status, n := range afterUp {
		if status >= 200 && status < 300 {
			ok += n
		}
	}
	if ok == 0 {
		t.Errorf("nothing succeeded after PostgreSQL came back: %v", afterUp)
	}
	mu.Unlock()
	held := report(t, travellers, c)
	checkInvariants(t, st, shardID, date, held)
	// Every process outlived the outage: none needed a restart.
	for i, p := range append(serves, workers...) {
		if !p.Alive() {
			t.Errorf("process %d of 4 did not survive PostgreSQL's restart", i+1)
		}
	}
}
