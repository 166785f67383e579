package inventory_test

import (
	"context"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tatkal/booking/inventory"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/redisx"
)

// clock is a test clock the caches read.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func soldOutCache(s *inventory.Store, clk *clock) *inventory.SoldOutCache {
	c := inventory.NewSoldOutCache(s, inventory.SoldOutConfig{Recheck: time.Second, Now: clk.now})
	s.SetSoldOut(c)
	return c
}

// The cache answers SOLD_OUT exactly when the script would for an attempt
// it may answer, and leaves to the script the users with state on the
// shard, admission tokens and broken rules; a seat given back through
// another store (another process) stops it within the recheck bound, one
// given back through its own store at once.
func TestSoldOutCacheAnswersOnlyWhileSoldOut(t *testing.T) {
	t.Parallel()
	testenv.EachRedis(t, testSoldOutCacheAnswersOnlyWhileSoldOut)
}

func testSoldOutCacheAnswersOnlyWhileSoldOut(t *testing.T, redisURL string) {
	ctx := context.Background()
	rdb, err := redisx.Open(redisURL, "", 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	prefix := testenv.RedisPrefix(t, rdb)
	s := inventory.New(rdb, prefix)
	other := inventory.New(rdb, prefix) // a second process on the same Redis
	clk := &clock{t: time.Unix(1e9, 0)}
	c := soldOutCache(s, clk)
	const shard = 31
	mustLoad(t, s, shard, emptyShard(3, 2, 1))

	if c.SoldOut(ctx, req(shard, 9, 0, 3, "-")) {
		t.Fatal("an open shard never primed is answered SOLD_OUT")
	}
	held := mustHeld(t, s, req(shard, 1, 0, 3, "--"))
	wl := req(shard, 2, 0, 3, "-")
	wl.AllowWaitlist = true
	if res := mustHold(t, s, wl); res.Outcome != inventory.WaitlistOffered {
		t.Fatalf("waitlist: %+v", res)
	}
	if c.SoldOut(ctx, req(shard, 9, 0, 3, "-")) {
		t.Fatal("answered SOLD_OUT before any script said so")
	}
	c.Prime(ctx, shard) // as Holds.Hold does after the script's SOLD_OUT

	fresh := func(user int64) inventory.HoldRequest {
		r := req(shard, user, 0, 3, "-")
		r.AllowWaitlist = true
		return r
	}
	for _, r := range []inventory.HoldRequest{fresh(10), req(shard, 11, 1, 2, "L"), fresh(12)} {
		if !c.SoldOut(ctx, r) {
			t.Fatalf("sold-out shard, user %d %d-%d: not answered SOLD_OUT", r.UserID, r.From, r.To)
		}
		if res := mustHold(t, s, r); res.Outcome != inventory.SoldOut {
			t.Fatalf("the cache said SOLD_OUT, the script %s", res.Outcome)
		}
	}
	// Left to the script: the users with state here, a token, rule breaks.
	token := fresh(13)
	token.TokenKey, token.TokenTTL = shardKey(prefix, shard, "tok:x"), time.Minute
	noID := fresh(14)
	noID.IDOK = false
	tooMany := req(shard, 15, 0, 3, "-----")
	retake := fresh(16)
	retake.Retake = true
	for name, r := range map[string]inventory.HoldRequest{
		"live hold": fresh(1), "waitlist offer": fresh(2), "token": token, "no id": noID,
		"too many": tooMany, "past the last leg": req(shard, 17, 1, 4, "-"), "retake": retake,
	} {
		if c.SoldOut(ctx, r) {
			t.Errorf("%s: answered SOLD_OUT from memory; the script decides it", name)
		}
	}

	// Another process releases the waitlist offer: within the bound the
	// view may stand; past it the cache asks Redis and stops.
	mustRelease(t, other, shard, findLive(t, other, shard, 2), inventory.ReleaseHold, 2, "", "RELEASED")
	clk.add(time.Second)
	if c.SoldOut(ctx, fresh(10)) {
		t.Fatal("a waitlist place came back: still SOLD_OUT past the recheck bound")
	}
	if res := mustHold(t, s, fresh(10)); res.Outcome != inventory.WaitlistOffered {
		t.Fatalf("after the release: %+v, want WAITLIST_OFFERED", res)
	}
	c.Prime(ctx, shard)
	if !c.SoldOut(ctx, fresh(18)) {
		t.Fatal("sold out again, primed: not answered")
	}
	// User 2's offer is gone, but its key still replays it: the script's.
	if c.SoldOut(ctx, fresh(2)) {
		t.Fatal("a user whose offer was released is answered SOLD_OUT; its key replays the offer")
	}
	// This store releases the held berths: at once, no bound.
	mustRelease(t, s, shard, held.HoldID, inventory.ReleaseHold, 1, "", "RELEASED")
	if c.SoldOut(ctx, fresh(18)) {
		t.Fatal("this process gave seats back and still answers SOLD_OUT")
	}
	mustHeld(t, s, req(shard, 18, 0, 3, "-"))
}

// findLive is the user's live hold on the shard.
func findLive(tb testing.TB, s *inventory.Store, shard, user int64) string {
	tb.Helper()
	for _, h := range snap(tb, s, shard).Holds {
		if h.UserID == user && (h.State == 'H' || h.State == 'W') {
			return h.ID
		}
	}
	tb.Fatalf("user %d has no live hold on shard %d", user, shard)
	return ""
}

// Random holds, releases, confirmations and reloads on a small fragmented
// shard: whenever the cache answers SOLD_OUT (its view stale by up to a
// recheck, or just read), the script answers the same attempt SOLD_OUT.
func TestSoldOutCacheAgreesWithTheScript(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, rdb, prefix := newStore(t)
	other := inventory.New(rdb, prefix)
	clk := &clock{t: time.Unix(1e9, 0)}
	c := soldOutCache(s, clk)
	const shard, legs = 32, 4
	mustLoad(t, s, shard, emptyShard(legs, 6, 2))
	rng := rand.New(rand.NewSource(7))
	var live []inventory.HoldRequest
	answered, agreed := 0, 0
	for step := range 1500 {
		from := rng.Intn(legs)
		to := from + 1 + rng.Intn(legs-from)
		r := req(shard, int64(100+rng.Intn(40)), from, to, "--"[:1+rng.Intn(2)])
		r.AllowWaitlist = rng.Intn(2) == 0
		switch op := rng.Intn(10); {
		case op < 6: // an attempt: the cache first, then the script
			if rng.Intn(3) == 0 {
				clk.add(time.Second) // the view must be vouched for again
			}
			cached := c.SoldOut(ctx, r)
			res := mustHold(t, s, r)
			if cached {
				answered++
				if res.Outcome != inventory.SoldOut {
					t.Fatalf("step %d: cache SOLD_OUT, script %s for %+v", step, res.Outcome, r)
				}
				agreed++
			}
			switch res.Outcome {
			case inventory.SoldOut:
				c.Prime(ctx, shard)
			case inventory.Held, inventory.WaitlistOffered:
				live = append(live, r)
			}
		case op < 8 && len(live) > 0: // a release, by either process
			i := rng.Intn(len(live))
			by := s
			if rng.Intn(2) == 0 {
				by = other
				clk.add(time.Second) // another process's release shows within the bound
			}
			if _, err := by.Release(ctx, shard, live[i].HoldID, inventory.ReleaseHold, live[i].UserID, ""); err != nil {
				t.Fatal(err)
			}
			live = append(live[:i], live[i+1:]...)
		case op < 9 && len(live) > 0: // a payment: the user's state stays
			i := rng.Intn(len(live))
			if _, err := s.Confirm(ctx, shard, live[i].HoldID); err != nil {
				t.Fatal(err)
			}
			live = append(live[:i], live[i+1:]...)
		case step%300 == 299: // a rebuild from the records, under a new epoch
			st := emptyShard(legs, 6, 2)
			st.Epoch = int64(2 + step)
			mustLoad(t, other, shard, st)
			clk.add(time.Second)
			live = nil
		}
	}
	if answered < 50 {
		t.Fatalf("the cache answered only %d attempts; the test does not exercise it", answered)
	}
	t.Logf("%d SOLD_OUT answers from memory, each the script's", agreed)
}

// Many goroutines on two processes' caches while one process gives a
// seat back: no attempt that begins a recheck bound after the release
// returned is answered SOLD_OUT, and a hold then succeeds.
func TestSoldOutCacheStopsWithinTheBoundAcrossProcesses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, rdb, prefix := newStore(t)
	const shard, bound = 33, 20 * time.Millisecond
	mustLoad(t, s, shard, emptyShard(2, 1, 0))
	held := mustHeld(t, s, req(shard, 1, 0, 2, "-"))
	var caches []*inventory.SoldOutCache
	for range 2 {
		st := inventory.New(rdb, prefix)
		c := inventory.NewSoldOutCache(st, inventory.SoldOutConfig{Recheck: bound})
		st.SetSoldOut(c)
		if res := mustHold(t, st, req(shard, 2, 0, 2, "-")); res.Outcome != inventory.SoldOut {
			t.Fatalf("want SOLD_OUT, got %+v", res)
		}
		c.Prime(ctx, shard)
		caches = append(caches, c)
	}
	releaser := inventory.New(rdb, prefix) // a third process
	var releasedAt atomic.Int64            // unix ns once the release returned
	var late, cachedAnswers atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(300 * time.Millisecond)
	for g := range 16 {
		wg.Go(func() {
			c := caches[g%2]
			for n := 0; time.Now().Before(stop); n++ {
				begin := time.Now()
				if !c.SoldOut(ctx, req(shard, int64(1000+g), 0, 2, "-")) {
					continue
				}
				cachedAnswers.Add(1)
				if r := releasedAt.Load(); r != 0 && begin.After(time.Unix(0, r).Add(bound)) {
					late.Add(1)
				}
			}
		})
	}
	time.Sleep(100 * time.Millisecond)
	mustRelease(t, releaser, shard, held.HoldID, inventory.ReleaseHold, 1, "", "RELEASED")
	releasedAt.Store(time.Now().UnixNano())
	wg.Wait()
	if cachedAnswers.Load() == 0 {
		t.Fatal("no attempt was answered from memory")
	}
	if n := late.Load(); n > 0 {
		t.Fatalf("%d attempts begun more than %v after the release were answered SOLD_OUT", n, bound)
	}
	time.Sleep(bound)
	for i, c := range caches {
		if c.SoldOut(ctx, req(shard, 4, 0, 2, "-")) {
			t.Errorf("cache %d: SOLD_OUT with a seat free", i)
		}
	}
	mustHeld(t, s, req(shard, 3, 0, 2, "-"))
}

// A sold-out shard that loses part of its state (here a berth-type
// bitmap) is left to the script, which refuses it NOT_READY and so has it
// rebuilt, once the view needs vouching for.
func TestSoldOutCacheLeavesAPartlyLostShardToTheScript(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, rdb, prefix := newStore(t)
	clk := &clock{t: time.Unix(1e9, 0)}
	c := soldOutCache(s, clk)
	const shard = 34
	mustLoad(t, s, shard, emptyShard(2, 1, 0))
	mustHeld(t, s, req(shard, 1, 0, 2, "-"))
	c.Prime(ctx, shard)
	if !c.SoldOut(ctx, req(shard, 2, 0, 2, "L")) {
		t.Fatal("sold out, primed: not answered")
	}
	if err := rdb.Del(ctx, shardKey(prefix, shard, "type:L")).Err(); err != nil {
		t.Fatal(err)
	}
	clk.add(time.Second)
	if c.SoldOut(ctx, req(shard, 2, 0, 2, "L")) {
		t.Fatal("a partly lost shard is answered SOLD_OUT from memory")
	}
	if res := mustHold(t, s, req(shard, 2, 0, 2, "L")); res.Outcome != inventory.NotReady {
		t.Fatalf("the script on the partly lost shard: %+v, want NOT_READY", res)
	}
}

// After a failover the promoted replica's copy of a shard is refused by
// HOLD (it was loaded on another node) and rebuilt; the cache must not go
// on answering SOLD_OUT from it either.
func TestSoldOutCacheRefusesAShardLoadedOnAnotherNode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, rdb, prefix := newStore(t)
	clk := &clock{t: time.Unix(1e9, 0)}
	c := soldOutCache(s, clk)
	const shard = 32
	mustLoad(t, s, shard, emptyShard(3, 1, 0))
	mustHeld(t, s, req(shard, 1, 0, 3, "-"))
	if res := mustHold(t, s, req(shard, 2, 0, 3, "-")); res.Outcome != inventory.SoldOut {
		t.Fatalf("second hold on a one-berth shard: %+v", res)
	}
	c.Prime(ctx, shard)
	if !c.SoldOut(ctx, req(shard, 3, 0, 3, "-")) {
		t.Fatal("a sold-out shard, primed, is not answered from memory")
	}
	rdb.HSet(ctx, shardKey(prefix, shard, "meta"), "node", "a-node-that-failed-over")
	clk.add(2 * time.Second) // past the recheck bound
	if c.SoldOut(ctx, req(shard, 3, 0, 3, "-")) {
		t.Fatal("the cache answered SOLD_OUT for a shard HOLD refuses as loaded on another node")
	}
}

// A caller waiting for another's re-check must not answer from what that
// check read when it was sent longer ago than the bound: with Redis slow,
// a seat given back meanwhile in another process would be refused past
// the bound. Forced: the first re-check is held at soldout.checked while
// the seat comes back and the clock passes the bound.
func TestSoldOutWaiterDoesNotTakeAStaleRecheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, rdb, prefix := newStore(t)
	other := inventory.New(rdb, prefix)
	clk := &clock{t: time.Unix(1e9, 0)}
	hold, release := make(chan struct{}), make(chan struct{})
	var armed atomic.Bool
	c := inventory.NewSoldOutCache(s, inventory.SoldOutConfig{Recheck: time.Second, Now: clk.now,
		Pause: func(ctx context.Context, point string) {
			if point == "soldout.checked" && armed.CompareAndSwap(true, false) {
				close(hold)
				<-release
			}
		}})
	s.SetSoldOut(c)
	const shard = 33
	mustLoad(t, s, shard, emptyShard(3, 1, 0))
	held := mustHeld(t, other, req(shard, 1, 0, 3, "-"))
	if res := mustHold(t, s, req(shard, 2, 0, 3, "-")); res.Outcome != inventory.SoldOut {
		t.Fatalf("second hold on a one-berth shard: %+v", res)
	}
	c.Prime(ctx, shard)
	clk.add(2 * time.Second) // the view needs a re-check

	armed.Store(true)
	first := make(chan bool)
	go func() { first <- c.SoldOut(ctx, req(shard, 3, 0, 3, "-")) }()
	<-hold // its SOLDOUT has read the shard still sold out
	waiter := make(chan bool)
	go func() { waiter <- c.SoldOut(ctx, req(shard, 4, 0, 3, "-")) }()
	time.Sleep(50 * time.Millisecond) // let the waiter queue behind the re-check
	mustRelease(t, other, shard, held.HoldID, inventory.ReleaseHold, 1, "", "RELEASED")
	clk.add(2 * time.Second) // the held re-check is now older than the bound
	close(release)
	<-first // answered from its own fresh check: either way within the bound
	if <-waiter {
		t.Fatal("the waiter answered SOLD_OUT from a re-check sent past the bound, after the seat came back")
	}
}
