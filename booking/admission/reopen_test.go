package admission

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"tatkal/booking"
	"tatkal/booking/inventory"
	"tatkal/booking/lab/testenv"
)

// TestQueueLostBeforeItsSealReopensTheDraw: until the seal the randomised
// cohort lives in Redis alone. Redis loses the queue after the draw has
// closed and before the first admission (or between it and the seal):
// nothing is sealed from what is left and nobody is admitted from it;
// the draw reopens, everyone who joins again gets the place the seed gave
// them before, and once it closes the seal records the whole cohort and
// admission follows the seed's order. Sealing what was left would have put
// everyone who joined in time behind whoever joined again first.
func TestQueueLostBeforeItsSealReopensTheDraw(t *testing.T) {
	testenv.EachRedis(t, testQueueLostBeforeItsSeal)
}

func testQueueLostBeforeItsSeal(t *testing.T, redisURL string) {
	b, ctl, shard, opens := witnessedWindow(t, redisURL)
	ctx := context.Background()
	z := b.svc.qkey(shard.ID, "z")
	// The leader witnesses the cohort while the draw is open.
	cohort, places := b.witnessedCohort(t, ctl, shard, opens)
	var seen int64
	var mark string
	if err := b.env.Pool.QueryRow(ctx, `SELECT cohort_seen, cohort_mark FROM admission_windows WHERE shard_id = $1`, shard.ID).Scan(&seen, &mark); err != nil {
		t.Fatal(err)
	}
	if seen != 50 || mark == "" {
		t.Fatalf("witness: %d entrants, mark %q; want 50 and a mark", seen, mark)
	}
	sealedAt := func() (sealed bool, until time.Time) {
		t.Helper()
		if err := b.env.Pool.QueryRow(ctx, `SELECT sealed_at IS NOT NULL, randomise_until FROM admission_windows WHERE shard_id = $1`,
			shard.ID).Scan(&sealed, &until); err != nil {
			t.Fatal(err)
		}
		return sealed, until
	}

	// Lost between the first admission and the seal: a newcomer re-joined
	// the wiped queue, which is not sealed with only them in it.
	b.wipeQueue(t, shard.ID)
	b.clock.Set(opens.Add(11 * time.Second)) // the draw closed (10 s and the grace)
	if _, err := b.env.Redis.ZAdd(ctx, z, redis.Z{Score: 1, Member: "1000"}).Result(); err != nil {
		t.Fatal(err)
	}
	if err := ctl.seal(ctx, shard); err == nil || !strings.Contains(err.Error(), "lost") {
		t.Fatalf("sealing a queue lost since the witness: %v, want refused", err)
	}
	if sealed, _ := sealedAt(); sealed {
		t.Fatal("the window was sealed from a lost queue")
	}

	// A process that read the window before the reopening (it rereads
	// every couple of seconds) still gives the drawn place.
	stale, err := b.svc.WindowFor(ctx, shard)
	if err != nil {
		t.Fatal(err)
	}
	// The next tick finds the queue lost before the first admission:
	// nothing admitted, nothing sealed, the draw reopened.
	if err := ctl.Step(ctx); err != nil {
		t.Fatal(err)
	}
	sealed, until := sealedAt()
	if a, _ := b.admitted(t, shard.ID); a != 0 || sealed {
		t.Fatalf("after the loss: %d admitted, sealed %v; want none and not sealed", a, sealed)
	}
	if want := opens.Add(11*time.Second + b.svc.cfg.Reopen); until.Before(want) {
		t.Fatalf("the draw reopens until %v, want at least %v", until, want)
	}
	if n := b.env.Redis.Exists(ctx, z).Val(); n != 0 {
		t.Fatal("the lost queue's keys were kept")
	}
	// Everyone is told to join again, and gets the place they had.
	for _, u := range cohort {
		b.svc.polls.init()
		if _, err := b.svc.Status(ctx, b.caller(u), b.svc.Ticket(shard.ID, u)); reasonOf(err) != "NOT_IN_QUEUE" {
			t.Fatalf("entrant %d after the loss: %v, want NOT_IN_QUEUE", u, err)
		}
		if u == cohort[0] {
			if _, err := b.svc.enterShard(ctx, shard.ID, stale, b.caller(u), "", b.clock.Now()); err != nil {
				t.Fatalf("entrant %d joining again through a window read before the reopening: %v", u, err)
			}
		} else if _, err := b.svc.Enter(ctx, b.caller(u), intentOf(shard)); err != nil {
			t.Fatalf("entrant %d joining again: %v", u, err)
		}
		if got := b.env.Redis.ZScore(ctx, z, strconv.FormatInt(u, 10)).Val(); got != places[u] {
			t.Fatalf("entrant %d joined again at %v, had %v", u, got, places[u])
		}
	}
	// Once the reopened draw closes, the whole cohort is sealed and
	// admitted in the seed's order.
	b.clock.Set(until.Add(time.Second))
	for i := 0; ; i++ {
		if err := ctl.Step(ctx); err != nil {
			t.Fatal(err)
		}
		if a, l := b.admitted(t, shard.ID); a == 50 && l == a {
			break
		}
		if i > 500 {
			a, l := b.admitted(t, shard.ID)
			t.Fatalf("admitted %d, logged %d; want 50", a, l)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var size int64
	if err := b.env.Pool.QueryRow(ctx, `SELECT cohort_size FROM admission_windows WHERE shard_id = $1`, shard.ID).Scan(&size); err != nil || size != 50 {
		t.Fatalf("sealed cohort %d (%v), want 50", size, err)
	}
	order := b.admissionOrder(t, shard.ID)
	want := slices.Clone(cohort)
	slices.SortFunc(want, func(x, y int64) int {
		if places[x] < places[y] {
			return -1
		}
		return 1
	})
	if !slices.Equal(order, want) {
		t.Fatalf("admitted in the order %v, want the seed's %v", order, want)
	}
	if rep, err := VerifyWindow(ctx, b.env.Pool, shard.ID); err != nil || !rep.OK() {
		t.Fatalf("verify-window after the reopened draw: %s %v", rep, err)
	}
	// The reopening is published with the window, and in its figures.
	pub, err := b.svc.Fairness(ctx, shard.ID, false)
	if err != nil || pub.DrawsReopened != 1 || pub.DrawReopenedAt == nil || !pub.RandomiseUntil.Equal(until) {
		t.Fatalf("published window: %+v %v; want the draw reopened once, until %v", pub, err, until)
	}
	fig, err := b.svc.ComputeFairness(ctx, shard.ID)
	if err != nil || fig.DrawsReopened != 1 {
		t.Fatalf("fairness figures: draws reopened %d (%v), want 1", fig.DrawsReopened, err)
	}
}

// witnessedWindow is a queue-mode shard opening in an hour, on a fresh
// stack at redisURL (places unbounded), and its controller.
func witnessedWindow(t *testing.T, redisURL string) (*bundle, *Controller, *booking.Shard, time.Time) {
	t.Helper()
	b := setupOn(t, redisURL, func(c *Config) { c.anyPlaces = true })
	opens := time.Now().Add(time.Hour).Truncate(time.Second)
	shard := b.shard(t, "3A", 0, opens, "queue")
	ctl := b.svc.NewController(ControllerConfig{ID: "first", BaseRate: 1000, MaxRate: 1000, Tick: 100 * time.Millisecond})
	return b, ctl, shard, opens
}

// wipeQueue deletes the shard's queue from Redis, as a flush or a failover
// to an empty replica would.
func (b *bundle) wipeQueue(t *testing.T, shardID int64) {
	t.Helper()
	if err := b.env.Redis.Del(context.Background(), append(b.svc.queueKeys(shardID), b.svc.qkey(shardID, "at"))...).Err(); err != nil {
		t.Error(err)
	}
}

// witnessedCohort enters 50 accounts in shard's draw and steps ctl once
// while the draw is open, so PostgreSQL witnesses them; it answers them
// with their drawn places.
func (b *bundle) witnessedCohort(t *testing.T, ctl *Controller, shard *booking.Shard, opens time.Time) ([]int64, map[int64]float64) {
	t.Helper()
	ctx := context.Background()
	b.clock.Set(opens.Add(-5 * time.Minute))
	var cohort []int64
	for i := range int64(50) {
		cohort = append(cohort, 1000+i)
		if _, err := b.svc.Enter(ctx, b.caller(1000+i), intentOf(shard)); err != nil {
			t.Fatal(err)
		}
	}
	b.clock.Set(opens.Add(5 * time.Second))
	if err := ctl.Step(ctx); err != nil {
		t.Fatal(err)
	}
	places := map[int64]float64{}
	for _, u := range cohort {
		places[u] = b.env.Redis.ZScore(ctx, b.svc.qkey(shard.ID, "z"), strconv.FormatInt(u, 10)).Val()
	}
	return cohort, places
}

// window reads what PostgreSQL holds of shard's window.
func (b *bundle) window(t *testing.T, shardID int64) (sealed bool, until time.Time, reopened int) {
	t.Helper()
	if err := b.env.Pool.QueryRow(context.Background(), `SELECT sealed_at IS NOT NULL, randomise_until, draws_reopened
		FROM admission_windows WHERE shard_id = $1`, shardID).Scan(&sealed, &until, &reopened); err != nil {
		t.Fatal(err)
	}
	return sealed, until, reopened
}

// A wipe between a tick's witness and its ADMIT (a failover in those few
// milliseconds) is caught by ADMIT itself: it does not seal what is left
// (a fast re-joiner's late place) nor admit from it; the draw reopens.
func TestQueueLostBetweenWitnessAndAdmitIsNotSealed(t *testing.T) {
	b, ctl, shard, opens := witnessedWindow(t, testenv.RedisURL())
	ctx := context.Background()
	b.witnessedCohort(t, ctl, shard, opens)
	m := b.svc.qkey(shard.ID, "m")
	ctl.afterWitness = func() {
		ctl.afterWitness = nil
		b.wipeQueue(t, shard.ID)
		if _, err := b.svc.Enter(ctx, b.caller(1000), intentOf(shard)); err != nil {
			t.Errorf("re-joining the wiped queue: %v", err)
		}
	}
	b.clock.Set(opens.Add(11 * time.Second)) // the draw closed (10 s and the grace)
	if err := ctl.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if a, _ := b.admitted(t, shard.ID); a != 0 {
		t.Fatalf("admitted %d from a queue wiped after its witness", a)
	}
	if b.env.Redis.HExists(ctx, m, "sealed").Val() {
		t.Fatal("the wiped queue was sealed in Redis")
	}
	sealed, until, reopened := b.window(t, shard.ID)
	if sealed || reopened != 1 || until.Before(opens.Add(11*time.Second+b.svc.cfg.Reopen)) {
		t.Fatalf("window after the loss: sealed %v, reopened %d, draw until %v; want the draw reopened", sealed, reopened, until)
	}
}

// A reopening whose PostgreSQL step did not land (the leader died after
// clearing the queue) is finished by the next tick, which keeps those who
// joined again meanwhile at their drawn places: it does not clear the
// queue a second time.
func TestReopeningInterruptedAfterRedisIsFinished(t *testing.T) {
	b, ctl, shard, opens := witnessedWindow(t, testenv.RedisURL())
	ctx := context.Background()
	cohort, places := b.witnessedCohort(t, ctl, shard, opens)
	stale, err := b.svc.WindowFor(ctx, shard)
	if err != nil {
		t.Fatal(err)
	}
	// The reopening's Redis step alone, as reopen does it.
	now := opens.Add(11 * time.Second)
	b.clock.Set(now)
	until := now.Add(b.svc.cfg.Reopen)
	m := b.svc.qkey(shard.ID, "m")
	pipe := b.env.Redis.TxPipeline()
	pipe.Del(ctx, append(b.svc.queueKeys(shard.ID), b.svc.qkey(shard.ID, "at"))...)
	pipe.HSet(ctx, m, "reopened", until.UnixMilli())
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	back := cohort[:10]
	for _, u := range back {
		if _, err := b.svc.enterShard(ctx, shard.ID, stale, b.caller(u), "", now); err != nil {
			t.Fatal(err)
		}
	}
	if err := ctl.Step(ctx); err != nil {
		t.Fatal(err)
	}
	sealed, drawUntil, reopened := b.window(t, shard.ID)
	if sealed || reopened != 1 || drawUntil.UnixMilli() < until.UnixMilli() {
		t.Fatalf("window: sealed %v, reopened %d, draw until %v; want the reopening until %v recorded", sealed, reopened, drawUntil, until)
	}
	for _, u := range back {
		if got, err := b.env.Redis.ZScore(ctx, b.svc.qkey(shard.ID, "z"), strconv.FormatInt(u, 10)).Result(); err != nil || got != places[u] {
			t.Fatalf("entrant %d who joined again: place %v (%v), want %v", u, got, err, places[u])
		}
	}
}

// A window another leader sealed while this process still holds it as
// unsealed (read before the seal) is not sealed again from a wiped queue:
// the witness finds it sealed, drops the cached window and ends the tick.
func TestStaleWindowDoesNotSealAWipedQueue(t *testing.T) {
	b, ctl, shard, opens := witnessedWindow(t, testenv.RedisURL())
	ctx := context.Background()
	b.witnessedCohort(t, ctl, shard, opens)
	stale, err := b.svc.WindowFor(ctx, shard)
	if err != nil || stale.SealedAt != nil {
		t.Fatalf("window before the seal: %+v %v", stale, err)
	}
	b.clock.Set(opens.Add(11 * time.Second))
	for i := 0; ; i++ {
		if err := ctl.Step(ctx); err != nil {
			t.Fatal(err)
		}
		if sealed, _, _ := b.window(t, shard.ID); sealed {
			break
		}
		if i > 200 {
			t.Fatal("the window was never sealed")
		}
	}
	m := b.svc.qkey(shard.ID, "m")
	b.wipeQueue(t, shard.ID)
	copied := *stale
	copied.loaded = time.Now()
	b.svc.windows.Store(shard.ID, &copied)
	if err := ctl.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if b.env.Redis.HExists(ctx, m, "sealed").Val() {
		t.Fatal("a wiped queue was sealed again through a window read before its seal")
	}
	if v, ok := b.svc.windows.Load(shard.ID); ok && v.(*Window).SealedAt == nil {
		t.Fatal("the stale window is still cached")
	}
}

// While every place is held by parties paying, the queue waits, told how
// far the held berth-legs reach; when that count cannot be read, the
// queue is told nothing new rather than a guessed reach that would
// release every waiter past it for good.
func TestHeldReachUnknownReleasesNobody(t *testing.T) {
	b := setupOn(t, testenv.RedisURL(), nil)
	ctx := context.Background()
	shard := b.shard(t, "3A", 2, time.Now().Add(-time.Minute), "queue")
	if shard.Total != 2 {
		t.Skipf("seeded %d berths, want 2", shard.Total)
	}
	b.fill(t, shard.ID, 1, 10)
	ctl := b.svc.NewController(ControllerConfig{BaseRate: 5, MaxRate: 5, Tick: 200 * time.Millisecond})
	// Two other travellers hold both seats (in Redis: no place is free).
	for i := range 2 {
		id := uuid.NewString()
		res, err := b.env.Store.Hold(ctx, inventory.HoldRequest{ShardID: shard.ID, HoldID: id, UserID: int64(900 + i), IdemKey: "pay-" + id,
			From: 0, To: shard.Legs, ExpiresAt: time.Now().Add(3 * time.Minute), DailyCap: 2, Prefs: []byte("-"), IDOK: true, IdemTTL: time.Hour, MaxPassengers: 4})
		if err != nil || res.Outcome != inventory.Held {
			t.Fatalf("hold %d: %+v %v", i, res, err)
		}
	}
	// The held berth-legs cannot be read: the holds table is away.
	if _, err := b.env.Pool.Exec(ctx, `ALTER TABLE holds RENAME TO holds_away`); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		time.Sleep(200 * time.Millisecond)
		if err := ctl.Step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.env.Pool.Exec(ctx, `ALTER TABLE holds_away RENAME TO holds`); err != nil {
		t.Fatal(err)
	}
	if reach, err := b.env.Redis.HGet(ctx, b.svc.qkey(shard.ID, "m"), "reach").Result(); err != redis.Nil {
		t.Fatalf("queue told reach %q (%v) while the held berth-legs were unknown", reach, err)
	}
	if v, err := b.svc.Status(ctx, b.caller(5), b.svc.Ticket(shard.ID, 5)); err != nil || v.Status != Waiting {
		t.Fatalf("waiter 5 while the held berth-legs were unknown: %+v %v; want still waiting", v, err)
	}
}
