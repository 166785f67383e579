// The chaos tests run the booking stack as several real processes (three
// serve, two workers) on one database and Redis, spread a rush over them
// (package chaos) and break things mid-rush: a serve process and a worker
// killed with SIGKILL, and the shard's seat state wiped from Redis. The
// judge is the invariants, checked against PostgreSQL, Redis and the
// reservation core after the stack has drained, with no manual step in
// between.
package chaos_test

import (
	"context"
	"testing"
	"time"

	"tatkal/booking"
	"tatkal/booking/auth"
	"tatkal/booking/lab/chaos"
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/teststack"
)

func TestMain(m *testing.M) { teststack.Main(m) }

// holdWindow is short, so a hold whose answer died with its serve process
// is swept within the test.
const holdWindow = 20 * time.Second

// env is the processes' environment beside the stack's: the short hold
// window, a sweeper every 2 s, a payment the gateway has no record of
// failed after 15 s, not the default 2 min (a creation lost with a killed
// process or a stopped PostgreSQL; the simulator answers real ones within
// a second), and a payment whose webhook was lost asked after in 3 s, not
// 15, so the drain stays short.
var env = []string{"TATKAL_HOLD_WINDOW=" + holdWindow.String(), teststack.SweepIntervalEnv + "=2s",
	teststack.NotCreatedAfterEnv + "=15s", teststack.InquiryAfterEnv + "=3s"}

func TestSeveralProcessesSurviveKillsAndWipes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs five processes on PostgreSQL and Redis")
	}
	// Beside the PostgreSQL restart only (TestSeveralProcessesSurviveRedisFailover
	// runs before them): two tests' five processes each on the shared server
	// would hold some 90 of its 100 connections.
	t.Parallel()
	ctx := context.Background()
	st, shardID, date, users := newRush(t, teststack.Options{}, 120)
	// The first serve process stops for good inside its fifth group
	// commit, between the batch's statements and COMMIT, where it is killed.
	serves := []*teststack.Process{st.StartProcess(t, true, append(env, teststack.PauseEnv+"=commit.before-commit@5")...)}
	for range 2 {
		serves = append(serves, st.StartProcess(t, true, env...))
	}
	workers := []*teststack.Process{st.StartProcess(t, false, env...), st.StartProcess(t, false, env...)}
	urls := []string{serves[0].URL, serves[1].URL, serves[2].URL}

	c := chaos.NewClient(urls, date)
	travellers := newTravellers(st, users)
	// The faults, at fixed points of the rush.
	c.Rush(ctx, travellers, func(wait func(n int64), done func() int64) {
		if err := serves[0].WaitFor("paused at commit.before-commit", time.Minute); err != nil {
			t.Error(err)
		}
		serves[0].Kill()
		t.Logf("killed serve 1 of 3 mid-group-commit after %d travellers", done())
		wait(int64(len(users)) * 7 / 20)
		workers[0].Kill()
		t.Logf("killed worker 1 of 2 after %d travellers", done())
		wait(int64(len(users)) / 2)
		if err := st.Service.Store().Wipe(ctx, shardID); err != nil {
			t.Errorf("wipe the shard: %v", err)
		}
		t.Logf("wiped the shard's seat state from Redis after %d travellers", done())
	})

	held := report(t, travellers, c)
	checkInvariants(t, st, shardID, date, held)
}

// newRush starts a stack (opts, with the rush's rules and gateways) and
// seeds the rush: a shard of 40 berths and n travellers with money in
// their wallets.
func newRush(t *testing.T, opts teststack.Options, n int) (*teststack.Stack, int64, time.Time, []int64) {
	t.Helper()
	rules := booking.DefaultRules()
	rules.HoldWindow = holdWindow
	// In process: the simulators and the gateways' callback endpoint.
	opts.Rules, opts.Routes = &rules, chaos.Routes()
	st := teststack.New(t, opts)
	ctx := context.Background()
	shardID, date := st.DemoShard(t, 40, 0)
	hash, err := auth.HashPassword("chaos", auth.Argon2Params{MemoryKiB: 64, Time: 1, Threads: 1})
	teststack.Must(t, err, "hash")
	users, err := seed.Users(ctx, st.Pool, seed.UsersSpec{Count: n, Prefix: "chaos_", PasswordHash: hash, WalletRupees: 20_000,
		CreatedAt: time.Now().AddDate(0, 0, -30)})
	teststack.Must(t, err, "seed users")

	return st, shardID, date, users
}

func newTravellers(st *teststack.Stack, users []int64) []*chaos.Traveller {
	travellers := make([]*chaos.Traveller, len(users))
	for i, u := range users {
		travellers[i] = &chaos.Traveller{User: u, Token: st.Token(u)}
	}
	return travellers
}

// report logs what the rush's travellers were told and returns the holds
// answered HELD or WAITLIST_OFFERED; a rush that neither filled nor sold
// out the shard, or that was answered an error other than 503 with
// Retry-After, fails the test.
func report(t *testing.T, travellers []*chaos.Traveller, c *chaos.Client) []string {
	t.Helper()
	o := c.Outcome(travellers)
	t.Logf("rush: %s", o)
	for _, v := range o.Violations() {
		t.Error(v)
	}
	if len(o.Held) == 0 || o.SoldOut == 0 {
		t.FailNow()
	}
	return o.Held
}

// checkInvariants waits for the stack to drain and checks the shard's
// invariants (chaos.Check).
func checkInvariants(t *testing.T, st *teststack.Stack, shardID int64, date time.Time, held []string) {
	t.Helper()
	ctx := context.Background()
	target := chaos.Target{Pool: st.Pool, Store: st.Service.Store(), CoreURL: st.Core.URL, CoreKey: st.CoreKey, HoldWindow: holdWindow}
	if err := chaos.Drain(ctx, target, shardID, holdWindow+150*time.Second, nil); err != nil {
		t.Fatal(err)
	}
	v, err := chaos.Check(ctx, target, shardID, date, held)
	teststack.Must(t, err, "check the invariants")
	t.Logf("invariants after drain:\n%s", v.Report())
	for _, msg := range v.Violations {
		t.Error(msg)
	}
}
