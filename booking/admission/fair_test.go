package admission

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tatkal/booking/admission/token"
	"tatkal/booking/lab/testenv"
)

// TestFairOrder: thousands enter across the pre-queue and the randomisation
// window, a few after it. The admitted order is the order recomputed from
// the revealed seed, a cohort member's place does not depend on when they
// arrived, and later entrants follow in arrival order.
func TestFairOrder(t *testing.T) { testenv.EachRedis(t, testFairOrder) }

func testFairOrder(t *testing.T, redisURL string) {
	b := setupOn(t, redisURL, func(c *Config) { c.anyPlaces = true })
	ctx := context.Background()
	opens := time.Now().Add(time.Hour).Truncate(time.Second)
	shard := b.shard(t, "3A", 0, opens, "queue")
	const cohort, late = 3000, 40

	// Before the window: the commitment is public, the seed is not.
	b.clock.Set(opens.Add(-20 * time.Minute))
	if _, err := b.svc.Enter(ctx, b.caller(1), intentOf(shard)); booking_reason(err) != "QUEUE_NOT_OPEN" {
		t.Fatalf("entering before the pre-queue: %v", err)
	}
	f, err := b.svc.Fairness(ctx, shard.ID, false)
	if err != nil || len(f.SeedSHA256) != 64 || f.Seed != "" {
		t.Fatalf("fairness before: %+v %v", f, err)
	}

	arrival := map[int64]int{} // user -> arrival index
	for i := range cohort + late {
		uid := int64(1000 + i)
		// The cohort spreads from 10 minutes before opening to 9 s after; the
		// late ones come after the randomisation window.
		at := opens.Add(-10*time.Minute + time.Duration(i)*(10*time.Minute+9*time.Second)/cohort)
		if i >= cohort {
			at = opens.Add(11*time.Second + time.Duration(i-cohort)*10*time.Millisecond)
		}
		b.clock.Set(at)
		v, err := b.svc.Enter(ctx, b.caller(uid), intentOf(shard))
		if err != nil {
			t.Fatalf("enter %d: %v", i, err)
		}
		if v.Status != Waiting {
			t.Fatalf("enter %d: %+v", i, v)
		}
		if i < cohort && v.PositionHint != nil {
			t.Fatalf("a cohort member was told a place before the draw: %+v", v)
		}
		arrival[uid] = i
	}
	// Entering again gives the same ticket and changes nothing.
	again, err := b.svc.Enter(ctx, b.caller(1000), intentOf(shard))
	if err != nil || again.Ticket != b.svc.Ticket(shard.ID, 1000) || !again.AlreadyInQueue {
		t.Fatalf("second entry: %+v %v", again, err)
	}
	if n, _ := b.env.Redis.ZCard(ctx, b.svc.qkey(shard.ID, "z")).Result(); n != cohort+late {
		t.Fatalf("%d in the queue, want %d", n, cohort+late)
	}

	// After the window the controller admits everyone, in batches.
	ctl := b.svc.NewController(ControllerConfig{BaseRate: 5000, MaxRate: 20000, Tick: 100 * time.Millisecond})
	b.clock.Set(opens.Add(12 * time.Second))
	for i := 0; ; i++ {
		if err := ctl.Step(ctx); err != nil {
			t.Fatal(err)
		}
		if a, l := b.admitted(t, shard.ID); a == cohort+late && l == a {
			break
		}
		if i > 500 {
			a, l := b.admitted(t, shard.ID)
			t.Fatalf("admitted %d, logged %d after %d steps", a, l, i)
		}
		time.Sleep(5 * time.Millisecond)
	}

	rep, err := VerifyWindow(ctx, b.env.Pool, shard.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.Cohort != cohort || rep.Admitted != cohort+late {
		t.Fatalf("verify-window: %s", rep)
	}
	f, err = b.svc.Fairness(ctx, shard.ID, true)
	if err != nil || f.Seed == "" || len(f.Entrants) != cohort {
		t.Fatalf("fairness after: seed %q, %d entrants, %v", f.Seed, len(f.Entrants), err)
	}

	// Rank against arrival: Spearman's rho over the cohort must be near 0.
	order := b.admissionOrder(t, shard.ID)
	ranks := make([]int, cohort)
	for seq, u := range order[:cohort] {
		a := arrival[u]
		if a >= cohort {
			t.Fatalf("late entrant %d admitted at %d, inside the cohort", u, seq)
		}
		ranks[a] = seq
	}
	rho := spearman(ranks)
	if limit := 4 / math.Sqrt(cohort); math.Abs(rho) > limit {
		t.Fatalf("rank depends on arrival: rho = %.4f (limit %.4f)", rho, limit)
	}
	// The same statistic on first-come-first-served would fail: the test can.
	fifo := make([]int, cohort)
	for i := range fifo {
		fifo[i] = i
	}
	if spearman(fifo) < 0.99 {
		t.Fatal("spearman is broken")
	}
	// Early arrivals (the first tenth) do no better than the rest on average.
	var early float64
	for a := range cohort / 10 {
		early += float64(ranks[a])
	}
	if mean := early / float64(cohort/10); math.Abs(mean-float64(cohort-1)/2) > 0.1*cohort {
		t.Fatalf("the earliest tenth averages place %.0f of %d", mean, cohort)
	}
	for i, u := range order[cohort:] {
		if arrival[u] != cohort+i {
			t.Fatalf("late entrant at place %d arrived %d-th", cohort+i, arrival[u])
		}
	}
	t.Logf("cohort %d, rho %.4f, %s", cohort, rho, rep)

	// A tampered log is caught.
	for _, q := range []string{`UPDATE admission_log SET seq = -1 WHERE shard_id = $1 AND seq = 0`,
		`UPDATE admission_log SET seq = 0 WHERE shard_id = $1 AND seq = 1`, `UPDATE admission_log SET seq = 1 WHERE shard_id = $1 AND seq = -1`} {
		if _, err := b.env.Pool.Exec(ctx, q, shard.ID); err != nil {
			t.Fatal(err)
		}
	}
	if rep, _ := VerifyWindow(ctx, b.env.Pool, shard.ID); rep.OK() {
		t.Fatalf("verify-window missed a swapped pair: %s", rep)
	}
}

func booking_reason(err error) string { return reasonOf(err) }

// spearman is the rank correlation of x[i] with i (x a permutation).
func spearman(x []int) float64 {
	n := float64(len(x))
	var d2 float64
	for i, r := range x {
		d := float64(i - r)
		d2 += d * d
	}
	return 1 - 6*d2/(n*(n*n-1))
}

// TestTokenSingleUseUnderReplays: many goroutines replay one token; it is
// used exactly once.
func TestTokenSingleUseUnderReplays(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	c := b.caller(5)
	claims := token.Claims{TokenID: token.TokenID(9, 5, 0), UserID: 5, ShardID: 9, Session: token.SessionHash(c.SessionToken),
		Device: "dev5", ExpiresAt: time.Now().Add(time.Minute)}
	tok := b.svc.Keyring().Issue(claims)
	var used atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				cl, err := b.svc.Verifier().Verify(tok, token.SessionInfo{UserID: 5, SessionToken: c.SessionToken, DeviceToken: c.DeviceToken}, token.Intent{ShardID: 9}, time.Now())
				if err != nil {
					t.Errorf("verify: %v", err)
					return
				}
				if ok, err := b.svc.Consume(ctx, cl); err != nil {
					t.Errorf("consume: %v", err)
				} else if ok {
					used.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if used.Load() != 1 {
		t.Fatalf("token used %d times", used.Load())
	}
	ttl, _ := b.env.Redis.PTTL(ctx, token.UsedKey(b.env.KeyPrefix, claims)).Result()
	if ttl < time.Minute {
		t.Fatalf("used mark lives %v, less than the token", ttl)
	}
}
