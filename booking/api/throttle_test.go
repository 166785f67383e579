package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"tatkal/booking/auth"
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/teststack"
	"tatkal/console"
	"tatkal/console/levers"
)

// setThrottle sets the shard_throttle lever as an ops person would, and
// puts it in force in the stack's process at once.
func setThrottle(t *testing.T, s *teststack.Stack, scope, value string) {
	t.Helper()
	ctx := context.Background()
	var a levers.Actor
	err := s.Pool.QueryRow(ctx, `SELECT id, login, role FROM console_users WHERE login = 'ops-throttle'`).Scan(&a.UserID, &a.Login, &a.Role)
	if err != nil {
		if _, err := console.SeedUsers(ctx, s.Pool, []console.DemoUser{{Login: "ops-throttle", Password: "ops-throttle-pw", Role: console.Ops}},
			auth.Argon2Params{MemoryKiB: 64, Time: 1, Threads: 1}); err != nil {
			t.Fatal(err)
		}
		if err := s.Pool.QueryRow(ctx, `SELECT id, login, role FROM console_users WHERE login = 'ops-throttle'`).Scan(&a.UserID, &a.Login, &a.Role); err != nil {
			t.Fatal(err)
		}
	}
	a.Via = "console"
	ch, err := s.Console.Levers().Propose(ctx, a, levers.Proposal{Name: levers.ShardThrottle, Scope: scope, Value: value,
		Reason: "pace the core", Confirm: levers.ConfirmWord(levers.ShardThrottle, scope)})
	if err != nil || ch.State != "APPLIED" {
		t.Fatalf("set %s %s = %s: %v %+v", levers.ShardThrottle, scope, value, err, ch)
	}
	s.Levers.Refresh(ctx)
}

// burst sends n requests at once (each goroutine waits for the same start)
// and returns the answers and how long the burst took.
func burst(n int, do func(i int) reply) ([]reply, time.Duration) {
	out := make([]reply, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out[i] = do(i)
		}()
	}
	began := time.Now()
	close(start)
	wg.Wait()
	return out, time.Since(began)
}

// mostAdmitted is what a GCRA limiter at rate with a one-interval burst may
// admit over a burst that lasted took: rate+1 in any second (one more for
// the span's edge when it ran longer).
func mostAdmitted(rate int, took time.Duration) int {
	if took < time.Second {
		return rate + 1
	}
	return 2 + int(float64(rate)*took.Seconds())
}

// checkThrottled: a refusal over the throttle is 503 THROTTLED, shed like
// HIGH_DEMAND (code overloaded), with a Retry-After of whole seconds.
func checkThrottled(t *testing.T, what string, r reply) {
	t.Helper()
	ra, err := strconv.Atoi(r.header.Get("Retry-After"))
	if r.status != http.StatusServiceUnavailable || r.body["reason"] != "THROTTLED" || r.body["code"] != "overloaded" ||
		err != nil || ra < 1 || ra > 2 || r.header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("%s: %d Retry-After %q %s, want 503 THROTTLED with Retry-After", what, r.status, r.header.Get("Retry-After"), r.raw)
	}
}

// With shard_throttle at 5/s, 40 holds at once: at most 6 reach the core
// (HELD or SOLD_OUT), the rest are told THROTTLED with Retry-After, and
// nothing is held that the answers did not say. Off again, holds pass.
func TestThrottleHoldsOverHTTP(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{MaxHoldsInFlight: 200})
	shard, date := s.DemoShard(t, 20, 0)
	uids := s.Users(t, "thr", 41)
	scope := "shard:" + strconv.FormatInt(shard, 10)
	const rate = 5
	setThrottle(t, s, scope, strconv.Itoa(rate))

	answers, took := burst(40, func(i int) reply {
		return newClient(s, uids[i]).hold(t, fmt.Sprintf("thr-hold-%04d", i), holdBody(date, "MMCT", "NDLS", 1))
	})
	var core, throttled int
	var held []heldAnswer
	for i, r := range answers {
		switch r.body["status"] {
		case "HELD":
			core++
			held = append(held, heldAnswer{user: uids[i], holdID: r.body["hold_id"].(string), from: 0, to: 3, berths: berthsOf(r)})
		case "SOLD_OUT":
			core++
		default:
			throttled++
			checkThrottled(t, fmt.Sprintf("hold %d", i), r)
		}
	}
	t.Logf("burst of 40 holds in %v: %d reached the core, %d throttled", took, core, throttled)
	if most := mostAdmitted(rate, took); core > most || core < 1 {
		t.Fatalf("%d holds reached the core at %d/s in %v, want 1..%d", core, rate, took, most)
	}
	// The database holds exactly what the answers said.
	var n int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM holds WHERE shard_id = $1`, shard).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != len(held) {
		t.Fatalf("%d holds in PostgreSQL, %d answered HELD", n, len(held))
	}
	shardInfo, err := s.Service.Catalog().ByID(ctx, shard)
	if err != nil {
		t.Fatal(err)
	}
	for i := range held {
		held[i].from, _ = shardInfo.StopSeq("MMCT")
		held[i].to, _ = shardInfo.StopSeq("NDLS")
	}
	verifyHeldAnswers(t, s, shard, held)
	if rep := s.CheckInvariants(t, shard); !rep.OK() {
		t.Fatalf("invariants after the throttled burst: %+v", rep)
	}
	// Those whose HELD answer was lost ask again at once, over the rate:
	// their repeats are answered from the record, never THROTTLED, and
	// spend no slot (a new attempt right after is still paced).
	for round := range 3 {
		for i, r := range answers {
			if r.body["status"] != "HELD" {
				continue
			}
			again := newClient(s, uids[i]).hold(t, fmt.Sprintf("thr-hold-%04d", i), holdBody(date, "MMCT", "NDLS", 1))
			if again.body["status"] != "HELD" || again.body["hold_id"] != r.body["hold_id"] {
				t.Fatalf("repeat %d of hold %d: %d %s, want its HELD answer again", round, i, again.status, again.raw)
			}
		}
	}

	// Off again: a hold passes at once, however many were just refused.
	setThrottle(t, s, scope, "off")
	if r := newClient(s, uids[40]).hold(t, "thr-hold-after", holdBody(date, "MMCT", "NDLS", 1)); r.status != http.StatusCreated || r.body["status"] != "HELD" {
		t.Fatalf("hold with the throttle off: %d %s", r.status, r.raw)
	}
}

// The same for payment initiations: at 1/s, 8 wallet payments at once for
// 8 holds let at most 2 through (a payment row each), the rest are
// THROTTLED with nothing charged; a replay of a payment made is answered,
// never refused; with the lever off the refused ones pay.
func TestThrottlePaymentsOverHTTP(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{MaxHoldsInFlight: 200})
	shard, date := s.DemoShard(t, 20, 0)
	ids, err := seed.Users(ctx, s.Pool, seed.UsersSpec{Count: 8, Prefix: "thrpay", PasswordHash: "x", WalletRupees: 10000})
	if err != nil {
		t.Fatal(err)
	}
	holds := make([]string, len(ids))
	for i, id := range ids {
		r := newClient(s, id).hold(t, fmt.Sprintf("thr-pay-hold-%d", i), holdBody(date, "MMCT", "NDLS", 1))
		if r.status != http.StatusCreated {
			t.Fatalf("hold %d: %d %s", i, r.status, r.raw)
		}
		holds[i] = r.body["hold_id"].(string)
	}
	scope := "shard:" + strconv.FormatInt(shard, 10)
	const rate = 1
	setThrottle(t, s, scope, strconv.Itoa(rate))
	pay := func(i int) reply {
		return newClient(s, ids[i]).do(t, "POST", "/v1/payments/initiate", nil,
			fmt.Sprintf(`{"hold_id":%q,"method":"WALLET","idempotency_key":"thr-pay-%d"}`, holds[i], i))
	}
	answers, took := burst(len(ids), pay)
	var paid, refused []int
	for i, r := range answers {
		if r.status == http.StatusCreated && r.body["state"] == "SUCCESS" {
			paid = append(paid, i)
			continue
		}
		refused = append(refused, i)
		checkThrottled(t, fmt.Sprintf("payment %d", i), r)
	}
	t.Logf("burst of %d payments in %v: %d paid, %d throttled", len(ids), took, len(paid), len(refused))
	if most := mostAdmitted(rate, took); len(paid) > most || len(paid) < 1 {
		t.Fatalf("%d payments reached the core at %d/s in %v, want 1..%d", len(paid), rate, took, most)
	}
	var rows, debits int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE state = 'SUCCESS') FROM payments`).Scan(&rows, &debits); err != nil {
		t.Fatal(err)
	}
	if rows != len(paid) || debits != len(paid) {
		t.Fatalf("%d payments (%d paid) in PostgreSQL, %d answered paid", rows, debits, len(paid))
	}
	// A replay of a payment made is answered from its record, throttle or not.
	if r := pay(paid[0]); r.status != http.StatusOK || r.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay of payment %d under the throttle: %d %s", paid[0], r.status, r.raw)
	}
	setThrottle(t, s, scope, "off")
	for _, i := range refused {
		if r := pay(i); r.status != http.StatusCreated || r.body["state"] != "SUCCESS" {
			t.Fatalf("payment %d with the throttle off: %d %s", i, r.status, r.raw)
		}
	}
}
