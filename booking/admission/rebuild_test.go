package admission

import (
	"context"
	"testing"
	"time"

	"tatkal/booking"
	"tatkal/booking/lab/testenv"
)

// lossBundle is a sealed window part-way through admission: cohort
// entrants 1000.., late entrants 5000.., some admitted and logged.
type lossBundle struct {
	*bundle
	shard       *booking.Shard
	ctl         *Controller
	cohort      []int64
	late        []int64
	before      map[int64]View // every entrant's answer before the loss
	adm         int64          // admitted (and logged) before the loss
	firstFence  int64
	opens       time.Time
	lateWaiting int // late entrants not admitted
}

// oneOf is a cohort entrant whose answer before the loss was status.
func (lb *lossBundle) oneOf(t *testing.T, status string) int64 {
	t.Helper()
	for _, u := range lb.cohort {
		if lb.before[u].Status == status {
			return u
		}
	}
	t.Fatalf("no cohort entrant was %s", status)
	return 0
}

func newLoss(t *testing.T, redisURL string) *lossBundle {
	t.Helper()
	b := setupOn(t, redisURL, func(c *Config) { c.anyPlaces = true })
	ctx := context.Background()
	opens := time.Now().Add(time.Hour).Truncate(time.Second)
	lb := &lossBundle{bundle: b, shard: b.shard(t, "3A", 0, opens, "queue"), opens: opens, before: map[int64]View{}}
	// The fence counter well above 1, so a counter lost with Redis (which
	// starts again at 1) is seen to be raised above the log's fences.
	ctlKeys := b.svc.NewController(ControllerConfig{}).leaseKeys()
	if err := b.env.Redis.Set(ctx, ctlKeys[1], 41, 0).Err(); err != nil {
		t.Fatal(err)
	}
	b.clock.Set(opens.Add(-5 * time.Minute))
	for i := range int64(200) {
		lb.cohort = append(lb.cohort, 1000+i)
		if _, err := b.svc.Enter(ctx, b.caller(1000+i), intentOf(lb.shard)); err != nil {
			t.Fatal(err)
		}
	}
	b.clock.Set(opens.Add(11 * time.Second))
	for i := range int64(10) {
		lb.late = append(lb.late, 5000+i)
		if _, err := b.svc.Enter(ctx, b.caller(5000+i), intentOf(lb.shard)); err != nil {
			t.Fatal(err)
		}
	}
	lb.ctl = b.svc.NewController(ControllerConfig{ID: "first", BaseRate: 100, MaxRate: 100, Tick: 100 * time.Millisecond})
	b.clock.Set(opens.Add(12 * time.Second))
	for i := 0; ; i++ {
		if err := lb.ctl.Step(ctx); err != nil {
			t.Fatal(err)
		}
		if a, l := b.admitted(t, lb.shard.ID); a >= 60 && l == a {
			lb.adm = a
			break
		}
		if i > 500 {
			t.Fatal("not admitting")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if lb.adm >= 200 {
		t.Fatalf("admitted the whole cohort (%d) before the loss", lb.adm)
	}
	lb.firstFence = lb.ctl.Fence()
	if lb.firstFence != 42 {
		t.Fatalf("first fence %d, want 42", lb.firstFence)
	}
	for _, u := range append(append([]int64{}, lb.cohort...), lb.late...) {
		v := lb.status(t, u)
		lb.before[u] = v
		if v.Status == Waiting && u >= 5000 {
			lb.lateWaiting++
		}
	}
	return lb
}

// status asks for u's place, past any cached answer.
func (lb *lossBundle) status(t *testing.T, u int64) View {
	t.Helper()
	lb.svc.polls.init()
	v, err := lb.svc.Status(context.Background(), lb.caller(u), lb.svc.Ticket(lb.shard.ID, u))
	if err != nil {
		t.Fatalf("status of %d: %v", u, err)
	}
	return v
}

// refused checks that the queue answers u 503 retryable, on status and on
// entering again.
func (lb *lossBundle) refused(t *testing.T, u int64) {
	t.Helper()
	ctx := context.Background()
	lb.svc.polls.init()
	_, err := lb.svc.Status(ctx, lb.caller(u), lb.svc.Ticket(lb.shard.ID, u))
	if booking.ErrorCode(err) != booking.EUNAVAIL || reasonOf(err) != "QUEUE_RECOVERING" {
		t.Fatalf("status of %d while lost: %v, want 503 QUEUE_RECOVERING", u, err)
	}
	_, err = lb.svc.Enter(ctx, lb.caller(u), intentOf(lb.shard))
	if booking.ErrorCode(err) != booking.EUNAVAIL || reasonOf(err) != "QUEUE_RECOVERING" {
		t.Fatalf("entering %d while lost: %v, want 503 QUEUE_RECOVERING", u, err)
	}
}

// same checks that every cohort entrant has the answer it had before the
// loss: the admitted are admitted, the waiting keep their places.
func (lb *lossBundle) same(t *testing.T) {
	t.Helper()
	for _, u := range lb.cohort {
		was, v := lb.before[u], lb.status(t, u)
		if v.Status != was.Status || (was.Status == Waiting && *v.PositionHint != *was.PositionHint) {
			t.Fatalf("entrant %d: before the loss %s at %v, after %s at %v", u, was.Status, pos(was), v.Status, pos(v))
		}
		if v.Status == Admitted && v.AdmissionToken == nil {
			t.Fatalf("entrant %d admitted without a token after the rebuild", u)
		}
	}
}

func pos(v View) any {
	if v.PositionHint == nil {
		return nil
	}
	return *v.PositionHint
}

// finish admits everyone left and checks the log: every place once, in
// the order the seed gives, the cursor going on after the last admitted.
func (lb *lossBundle) finish(t *testing.T, ctl *Controller, want int64) {
	t.Helper()
	ctx := context.Background()
	for i := 0; ; i++ {
		if err := ctl.Step(ctx); err != nil {
			t.Logf("step: %v", err) // a stale fence gives up once, then leads again
		}
		if a, l := lb.admitted(t, lb.shard.ID); a == want && l == a {
			break
		}
		if i > 1000 {
			a, l := lb.admitted(t, lb.shard.ID)
			t.Fatalf("admitted %d, logged %d; want %d", a, l, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var n, users, maxSeq int64
	if err := lb.env.Pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT user_id), max(seq) FROM admission_log WHERE shard_id = $1`,
		lb.shard.ID).Scan(&n, &users, &maxSeq); err != nil {
		t.Fatal(err)
	}
	if n != want || users != want || maxSeq != want-1 {
		t.Fatalf("admission log: %d rows, %d users, last seq %d; want %d each once", n, users, maxSeq, want)
	}
	// The first admitted after the loss is who stood first in line.
	var next int64
	if err := lb.env.Pool.QueryRow(ctx, `SELECT user_id FROM admission_log WHERE shard_id = $1 AND seq = $2`,
		lb.shard.ID, lb.adm).Scan(&next); err != nil {
		t.Fatal(err)
	}
	if v := lb.before[next]; v.Status != Waiting || pos(v) != int64(1) {
		t.Fatalf("the first admitted after the loss, %d, was %s at %v before it", next, v.Status, pos(v))
	}
	rep, err := VerifyWindow(ctx, lb.env.Pool, lb.shard.ID)
	if err != nil || !rep.OK() {
		t.Fatalf("verify-window after the rebuild: %s %v", rep, err)
	}
}

// TestQueueRebuiltAfterWipe: a sealed queue's keys and the controller's
// lease and fence counter vanish mid-window (a Redis restart without
// persistence). While lost, every answer is 503 to retry, never a place;
// a new leader rebuilds it from PostgreSQL: the cohort keeps its places,
// the admitted stay admitted, late entrants are told to join again (and
// go behind), the cursor goes on after the last admitted, nobody is
// admitted twice, and the new leader's fence goes above the log's.
func TestQueueRebuiltAfterWipe(t *testing.T) { testenv.EachRedis(t, testQueueRebuiltAfterWipe) }

func testQueueRebuiltAfterWipe(t *testing.T, redisURL string) {
	lb := newLoss(t, redisURL)
	ctx := context.Background()
	keys := append(lb.svc.queueKeys(lb.shard.ID), lb.svc.qkey(lb.shard.ID, "at"))
	for _, k := range append(keys, lb.ctl.leaseKeys()...) {
		if err := lb.env.Redis.Del(ctx, k).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, u := range []int64{lb.oneOf(t, Admitted), lb.oneOf(t, Waiting), lb.late[9], 9999} {
		lb.refused(t, u)
	}
	if n, _ := lb.env.Redis.Exists(ctx, keys[0]).Result(); n != 0 {
		t.Fatal("an entry was taken while the queue was lost")
	}

	// A new process leads: its fence counter starts again at 1, below the
	// log's 42.
	ctl := lb.svc.NewController(ControllerConfig{ID: "second", BaseRate: 100, MaxRate: 100, Tick: 100 * time.Millisecond})
	if err := ctl.Step(ctx); err == nil {
		t.Fatal("a leader whose fence is below the log's went on leading")
	}
	if a, l := lb.admitted(t, lb.shard.ID); a != lb.adm || l != a {
		t.Fatalf("rebuilt with admitted %d logged %d, want %d", a, l, lb.adm)
	}
	lb.same(t)
	// A second, slower rebuild (another leader's) changes nothing now.
	w, err := lb.svc.WindowFor(ctx, lb.shard)
	if err != nil {
		t.Fatal(err)
	}
	if err := ctl.rebuild(ctx, 99, lb.shard, w, &shardState{}); err != nil {
		t.Fatal(err)
	}
	lb.same(t)
	// Late entrants not yet admitted are not in PostgreSQL: they join
	// again, behind the cohort.
	for _, u := range lb.late {
		lb.svc.polls.init()
		_, err := lb.svc.Status(ctx, lb.caller(u), lb.svc.Ticket(lb.shard.ID, u))
		if reasonOf(err) != "NOT_IN_QUEUE" {
			t.Fatalf("late entrant %d after the rebuild: %v, want NOT_IN_QUEUE", u, err)
		}
		v, err := lb.svc.Enter(ctx, lb.caller(u), intentOf(lb.shard))
		if err != nil || v.Status != Waiting || *v.PositionHint != 200-lb.adm+u-5000+1 {
			t.Fatalf("late entrant %d joining again: %+v %v", u, v, err)
		}
	}
	lb.finish(t, ctl, 210)
	if f := ctl.Fence(); f <= lb.firstFence {
		t.Fatalf("the new leader's fence %d is not above the log's %d", f, lb.firstFence)
	}
	var stale int64
	lb.env.Pool.QueryRow(ctx, `SELECT count(*) FROM admission_log WHERE shard_id = $1 AND seq >= $2 AND fence <= $3`, //nolint:errcheck
		lb.shard.ID, lb.adm, lb.firstFence).Scan(&stale)
	if stale != 0 {
		t.Fatalf("%d admissions after the loss under a fence not above the log's", stale)
	}
}

// TestQueueRebuiltAfterFailover: the queue's keys are there but were
// written on another node, or hold fewer admissions than PostgreSQL
// logged (a replica promoted before the last writes reached it). Both are
// refused and rebuilt; the node one answers 503 until then. The late
// entrants the copy still holds keep their places (PostgreSQL does not
// have them; a wipe would have lost them).
func TestQueueRebuiltAfterFailover(t *testing.T) { testenv.EachRedis(t, testQueueRebuiltAfterFailover) }

func testQueueRebuiltAfterFailover(t *testing.T, redisURL string) {
	lb := newLoss(t, redisURL)
	ctx := context.Background()
	m := lb.svc.qkey(lb.shard.ID, "m")

	// Written on another node: the copy on this one is not trusted.
	if err := lb.env.Redis.HSet(ctx, m, "node", "a-node-that-failed-over").Err(); err != nil {
		t.Fatal(err)
	}
	lb.refused(t, lb.oneOf(t, Admitted))
	lb.refused(t, lb.oneOf(t, Waiting))
	if err := lb.ctl.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if node, _ := lb.env.Redis.HGet(ctx, m, "node").Result(); node == "a-node-that-failed-over" {
		t.Fatal("the rebuilt queue still names the other node")
	}
	lb.same(t)
	lb.lateKept(t)

	// A copy that missed the last admissions (and their logging): the
	// leader knows PostgreSQL has more, and rebuilds before admitting.
	if err := lb.env.Redis.HSet(ctx, m, "admitted", lb.adm-5, "logged", lb.adm-10).Err(); err != nil {
		t.Fatal(err)
	}
	if err := lb.ctl.Step(ctx); err != nil {
		t.Fatal(err)
	}
	if a, l := lb.admitted(t, lb.shard.ID); a != lb.adm || l != lb.adm {
		t.Fatalf("after a rolled-back copy: admitted %d logged %d, want PostgreSQL's %d (rebuilt, nothing admitted that step)", a, l, lb.adm)
	}
	lb.same(t)
	lb.lateKept(t)
	lb.finish(t, lb.ctl, 200+int64(lb.lateWaiting))
}

// lateKept checks that every late entrant still waiting before the loss
// waits at the same place after the rebuild.
func (lb *lossBundle) lateKept(t *testing.T) {
	t.Helper()
	if lb.lateWaiting == 0 {
		t.Fatal("no late entrant was waiting before the loss")
	}
	for _, u := range lb.late {
		was := lb.before[u]
		if was.Status != Waiting {
			continue
		}
		if v := lb.status(t, u); v.Status != Waiting || pos(v) != pos(was) {
			t.Fatalf("late entrant %d: before the loss waiting at %v, after %s at %v", u, pos(was), v.Status, pos(v))
		}
	}
}
