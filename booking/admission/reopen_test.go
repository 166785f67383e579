package admission

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"tatkal/booking/testenv"
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
	b := setupOn(t, redisURL, func(c *Config) { c.anyPlaces = true })
	ctx := context.Background()
	opens := time.Now().Add(time.Hour).Truncate(time.Second)
	shard := b.shard(t, "3A", 0, opens, "queue")
	ctl := b.svc.NewController(ControllerConfig{ID: "first", BaseRate: 1000, MaxRate: 1000, Tick: 100 * time.Millisecond})
	z := b.svc.qkey(shard.ID, "z")
	b.clock.Set(opens.Add(-5 * time.Minute))
	var cohort []int64
	for i := range int64(50) {
		cohort = append(cohort, 1000+i)
		if _, err := b.svc.Enter(ctx, b.caller(1000+i), intentOf(shard)); err != nil {
			t.Fatal(err)
		}
	}
	// The leader witnesses the cohort while the draw is open.
	b.clock.Set(opens.Add(5 * time.Second))
	if err := ctl.Step(ctx); err != nil {
		t.Fatal(err)
	}
	var seen int64
	var mark string
	if err := b.env.Pool.QueryRow(ctx, `SELECT cohort_seen, cohort_mark FROM admission_windows WHERE shard_id = $1`, shard.ID).Scan(&seen, &mark); err != nil {
		t.Fatal(err)
	}
	if seen != 50 || mark == "" {
		t.Fatalf("witness: %d entrants, mark %q; want 50 and a mark", seen, mark)
	}
	places := map[int64]float64{}
	for _, u := range cohort {
		places[u] = b.env.Redis.ZScore(ctx, z, strconv.FormatInt(u, 10)).Val()
	}
	wipe := func() {
		t.Helper()
		if err := b.env.Redis.Del(ctx, append(b.svc.queueKeys(shard.ID), b.svc.qkey(shard.ID, "at"))...).Err(); err != nil {
			t.Fatal(err)
		}
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
	wipe()
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
