package admission

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"tatkal/booking/admission/token"
	"tatkal/booking/funnel"
	"tatkal/booking/inventory"
	"tatkal/booking/lab/testenv"
)

// fill puts n late entrants (users base..base+n-1) in shard's queue.
func (b *bundle) fill(t testing.TB, shardID int64, base int64, n int) {
	t.Helper()
	ctx := context.Background()
	shard, err := b.svc.cfg.Catalog.ByID(ctx, shardID)
	if err != nil {
		t.Fatal(err)
	}
	for i := range int64(n) {
		if _, err := b.svc.Enter(ctx, b.caller(base+i), intentOf(shard)); err != nil {
			t.Fatalf("enter %d: %v", base+i, err)
		}
	}
}

// TestLeaderTakeover: two controllers (two processes' worth) on one Redis
// and PostgreSQL; the leader dies mid-window keeping its lease; the other
// takes over when the lease lapses; everyone is admitted exactly once, in
// queue order, and the dead leader's fence is refused if it wakes up.
func TestLeaderTakeover(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.anyPlaces = true })
	ctx := context.Background()
	shard := b.shard(t, "3A", 0, time.Now().Add(-time.Minute), "queue")
	const n = 600
	b.fill(t, shard.ID, 1, n)

	cfg := ControllerConfig{Tick: 20 * time.Millisecond, LeaseTTL: 300 * time.Millisecond, BaseRate: 300, MaxRate: 300}
	cfgA, cfgB := cfg, cfg
	cfgA.ID, cfgB.ID = "A", "B"
	a, bb := b.svc.NewController(cfgA), b.svc.NewController(cfgB)
	ctxA, stopA := context.WithCancel(ctx)
	ctxB, stopB := context.WithCancel(ctx)
	defer stopB()
	doneA := make(chan struct{})
	go func() { a.Run(ctxA); close(doneA) }()
	time.Sleep(50 * time.Millisecond) // A takes the lease first
	doneB := make(chan struct{})
	go func() { bb.Run(ctxB); close(doneB) }()

	testenv.Eventually(t, 20*time.Second, "a quarter admitted", func() error {
		adm, _ := b.admitted(t, shard.ID)
		return testenv.Want(adm >= n/4, "%d of %d admitted", adm, n)
	})
	if a.Fence() == 0 || bb.Fence() != 0 {
		t.Fatalf("A should lead: fences A %d B %d", a.Fence(), bb.Fence())
	}
	oldFence := a.Fence()
	a.abandon.Store(true) // crash: the lease is not given back
	stopA()
	<-doneA
	stoppedAt, _ := b.admitted(t, shard.ID)
	if stoppedAt >= n {
		t.Fatalf("everyone admitted before the leader stopped (%d)", stoppedAt)
	}
	testenv.Eventually(t, 20*time.Second, "everyone admitted and logged after the takeover", func() error {
		adm, logged := b.admitted(t, shard.ID)
		return testenv.Want(adm == n && logged == n, "admitted %d logged %d of %d", adm, logged, n)
	})
	if bb.Fence() <= oldFence {
		t.Fatalf("B leads with fence %d, not above A's %d", bb.Fence(), oldFence)
	}

	// The dead leader wakes up with its old fence: refused, nothing admitted.
	stopB()
	<-doneB
	b.fill(t, shard.ID, 100000, 5)
	if err := a.stepShard(ctx, oldFence, shard.ID, time.Now()); err == nil || !strings.Contains(err.Error(), "stale") {
		t.Fatalf("stale leader: %v", err)
	}
	if adm, _ := b.admitted(t, shard.ID); adm != n {
		t.Fatalf("a stale leader admitted: %d", adm)
	}

	// Exactly once, in queue order, by both leaders.
	var rows, users, minSeq, maxSeq, fences int64
	if err := b.env.Pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT user_id), min(seq), max(seq), count(DISTINCT fence)
		FROM admission_log WHERE shard_id = $1`, shard.ID).Scan(&rows, &users, &minSeq, &maxSeq, &fences); err != nil {
		t.Fatal(err)
	}
	if rows != n || users != n || minSeq != 0 || maxSeq != n-1 || fences < 2 {
		t.Fatalf("log: %d rows, %d users, seq %d..%d, %d fences", rows, users, minSeq, maxSeq, fences)
	}
	members, _ := b.env.Redis.ZRange(ctx, b.svc.qkey(shard.ID, "z"), 0, n-1).Result()
	got, _ := b.env.Pool.Query(ctx, `SELECT user_id::text FROM admission_log WHERE shard_id = $1 ORDER BY seq`, shard.ID)
	i := 0
	for got.Next() {
		var u string
		got.Scan(&u) //nolint:errcheck
		if u != members[i] {
			t.Fatalf("place %d admitted %s, queue has %s", i, u, members[i])
		}
		i++
	}
}

// TestNearlySoldOut: with 5 seats left and no offer lapsed yet, no more
// than 5 offers are outstanding at once, however fast the controller would
// go; once they lapse unclaimed, their places go to the next ones, plus a
// small allowance for the no-shows now measured.
func TestNearlySoldOut(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *Config) { c.Allowance = 2 })
	ctx := context.Background()
	shard := b.shard(t, "3A", 5, time.Now().Add(-time.Minute), "queue")
	if shard.Total != 5 {
		t.Skipf("seeded %d berths, want 5", shard.Total)
	}
	b.fill(t, shard.ID, 1, 100)
	ctl := b.svc.NewController(ControllerConfig{BaseRate: 5000, MaxRate: 5000, Tick: 50 * time.Millisecond})
	for range 30 {
		if err := ctl.Step(ctx); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	if adm, _ := b.admitted(t, shard.ID); adm != 5 {
		t.Fatalf("admitted %d with 5 seats left and no no-show measured, want 5", adm)
	}
	// Status of the 6th: waiting, honest odds (every place is promised).
	v, err := b.svc.Status(ctx, b.caller(6), b.svc.Ticket(shard.ID, 6))
	if err != nil || v.Status != Waiting || v.PositionHint == nil || *v.PositionHint != 1 || v.Odds == "" {
		t.Fatalf("6th: %+v %v", v, err)
	}
	// The offers lapse unclaimed: 5 places again, and 5 no-shows of 5
	// make an allowance of 1 (5/(5+10) of 5 places).
	b.clock.Set(time.Now().Add(b.svc.cfg.OfferTTL + time.Second))
	for range 5 {
		if err := ctl.Step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if adm, _ := b.admitted(t, shard.ID); adm != 11 {
		t.Fatalf("after the first offers lapsed: admitted %d, want 11", adm)
	}
	v, err = b.svc.Status(ctx, b.caller(1), b.svc.Ticket(shard.ID, 1))
	if err != nil || v.Status != Expired {
		t.Fatalf("first admitted, offer lapsed: %+v %v", v, err)
	}
}

// TestAdmittedTokenAndSoldOutRelease: an admitted entrant gets a token the
// hold path accepts; when the shard sells out, those still waiting are
// released with alternatives.
func TestAdmittedTokenAndSoldOutRelease(t *testing.T) {
	testenv.EachRedis(t, testAdmittedTokenAndSoldOutRelease)
}

func testAdmittedTokenAndSoldOutRelease(t *testing.T, redisURL string) {
	b := setupOn(t, redisURL, nil)
	ctx := context.Background()
	shard := b.shard(t, "3A", 2, time.Now().Add(-time.Minute), "queue")
	other := b.shard(t, "2A", 0, time.Now().Add(-time.Minute), "direct")
	b.fill(t, shard.ID, 1, 10)
	ctl := b.svc.NewController(ControllerConfig{BaseRate: 5, MaxRate: 5, Tick: 200 * time.Millisecond})
	if err := ctl.Step(ctx); err != nil {
		t.Fatal(err)
	}
	c1 := b.caller(1)
	v, err := b.svc.Status(ctx, c1, b.svc.Ticket(shard.ID, 1))
	if err != nil || v.Status != Admitted || v.AdmissionToken == nil {
		t.Fatalf("first: %+v %v", v, err)
	}
	cl, err := b.svc.Verifier().Verify(*v.AdmissionToken, token.SessionInfo{UserID: 1, SessionToken: c1.SessionToken, DeviceToken: c1.DeviceToken},
		token.Intent{ShardID: shard.ID}, time.Now())
	if err != nil || cl.TokenID != token.TokenID(shard.ID, 1, 0) {
		t.Fatalf("token of the admitted: %+v %v", cl, err)
	}

	// Sell both seats.
	for i, uid := range []int64{900, 901} {
		res, err := b.env.Store.Hold(ctx, inventory.HoldRequest{ShardID: shard.ID, HoldID: uuid.NewString(), UserID: uid, IdemKey: "sellout-" + string(rune('a'+i)),
			From: 0, To: shard.Legs, ExpiresAt: time.Now().Add(3 * time.Minute), DailyCap: 2, Prefs: []byte("-"), IDOK: true, IdemTTL: time.Hour, MaxPassengers: 4})
		if err != nil || res.Outcome != inventory.Held {
			t.Fatalf("hold %d: %+v %v", i, res, err)
		}
	}
	ctl.shards[shard.ID].sigAt = time.Time{}
	if err := ctl.Step(ctx); err != nil {
		t.Fatal(err)
	}
	v, err = b.svc.Status(ctx, b.caller(9), b.svc.Ticket(shard.ID, 9))
	if err != nil || v.Status != SoldOut || !strings.Contains(v.Message, "Sold out") {
		t.Fatalf("waiting on a sold-out shard: %+v %v", v, err)
	}
	found := false
	for _, a := range v.Alternatives {
		found = found || (a.Class == other.Class && a.TrainNo == other.Train && a.SeatsLeft > 0)
	}
	if !found {
		t.Fatalf("alternatives %+v lack %s %s", v.Alternatives, other.Train, other.Class)
	}
	if adm, _ := b.admitted(t, shard.ID); adm > 2 {
		t.Fatalf("admitted %d on a 2-seat shard", adm)
	}
}

// TestFragmentsEndInSoldOut: berths are left only on the first leg, and
// the admitted travellers' holds come back SOLD_OUT: the queue ends with a
// sold-out answer for those still waiting (nobody more is admitted to
// spend a hold call on a refusal); when berth-legs come back (a hold is
// released) it reopens.
func TestFragmentsEndInSoldOut(t *testing.T) {
	t.Parallel()
	var rec *funnel.Recorder
	b := setup(t, func(c *Config) {
		rec = funnel.New(c.Redis, c.Prefix, nil)
		c.Funnel = rec
	})
	ctx := context.Background()
	shard := b.shard(t, "3A", 3, time.Now().Add(-time.Minute), "queue")
	if shard.Total != 3 || shard.Legs < 2 {
		t.Skipf("seeded %d berths on %d legs, want 3 on 2 or more", shard.Total, shard.Legs)
	}
	hold := func(uid int64, from int) string {
		id := uuid.NewString()
		res, err := b.env.Store.Hold(ctx, inventory.HoldRequest{ShardID: shard.ID, HoldID: id, UserID: uid, IdemKey: "frag-" + strconv.FormatInt(uid, 10),
			From: from, To: shard.Legs, ExpiresAt: time.Now().Add(3 * time.Minute), DailyCap: 2, Prefs: []byte("-"), IDOK: true, IdemTTL: time.Hour, MaxPassengers: 4})
		if err != nil || res.Outcome != inventory.Held {
			t.Fatalf("hold of %d: %+v %v", uid, res, err)
		}
		return id
	}
	hold(900, 0)
	second := hold(901, 0)
	frag := hold(902, 1) // one berth left, on the first leg only
	b.fill(t, shard.ID, 1, 40)
	ctl := b.svc.NewController(ControllerConfig{BaseRate: 50, MaxRate: 50, Tick: 200 * time.Millisecond})
	step := func() {
		t.Helper()
		if st := ctl.shards[shard.ID]; st != nil {
			st.sigAt = time.Time{}
		}
		if err := ctl.Step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	step()
	if adm, _ := b.admitted(t, shard.ID); adm != 1 {
		t.Fatalf("admitted %d with one berth left on one leg, want 1", adm)
	}
	v, err := b.svc.Status(ctx, b.caller(6), b.svc.Ticket(shard.ID, 6))
	if err != nil || v.Status != Waiting {
		t.Fatalf("before any hold was refused: %+v %v", v, err)
	}
	// Admitted travellers' holds find no seats (as the hold path counts
	// them; each status is asked by another waiter, as a poll's answer is
	// cached until its next poll): nine of them are not yet evidence, ten
	// are, though they came one every 3 s (near the end, admissions and
	// holds are few).
	soldOutAt := func(ago time.Duration) {
		t.Helper()
		sec := strconv.FormatInt(time.Now().Add(-ago).Unix(), 10)
		key := b.svc.cfg.Prefix + ":funnel:" + strconv.FormatInt(shard.ID, 10) + ":" + sec
		if err := b.env.Redis.HIncrBy(ctx, key, funnel.SoldOut, 1).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 9 {
		soldOutAt(time.Duration(2+3*i) * time.Second)
	}
	step()
	if v, err := b.svc.Status(ctx, b.caller(7), b.svc.Ticket(shard.ID, 7)); err != nil || v.Status != Waiting {
		t.Fatalf("after 9 sold-out holds: %+v %v", v, err)
	}
	soldOutAt(29 * time.Second)
	step()
	v, err = b.svc.Status(ctx, b.caller(8), b.svc.Ticket(shard.ID, 8))
	if err != nil || v.Status != SoldOut || !strings.Contains(v.Message, "parts of the route") {
		t.Fatalf("after 10 sold-out holds of 10: %+v %v", v, err)
	}
	for range 3 {
		step()
	}
	if adm, _ := b.admitted(t, shard.ID); adm != 1 {
		t.Fatalf("admitted %d after the queue ended sold out, want 1", adm)
	}
	// Two holds are released: two berths free end to end (one of them
	// promised to the outstanding offer), the queue reopens.
	for uid, id := range map[int64]string{901: second, 902: frag} {
		if _, err := b.env.Store.Release(ctx, shard.ID, id, inventory.ReleaseUndo, uid, "frag-"+strconv.FormatInt(uid, 10)); err != nil {
			t.Fatal(err)
		}
	}
	// Admission moves at the rate over the time between steps: step until
	// it has had a second's worth.
	for i := 0; i < 10; i++ {
		step()
		time.Sleep(100 * time.Millisecond)
	}
	if v, err := b.svc.Status(ctx, b.caller(9), b.svc.Ticket(shard.ID, 9)); err != nil || v.Status == SoldOut {
		t.Fatalf("after berths came back: %+v %v", v, err)
	}
	if adm, _ := b.admitted(t, shard.ID); adm < 2 {
		t.Fatalf("admitted %d after berths came back, want more than 1", adm)
	}
	// Traveller 8 was told sold out and left: it is not let back in, and
	// an offer reaching its place lapses at once instead of keeping a seat.
	// (Asked once its last answer may be asked again.)
	b.clock.Set(time.Now().Add(31 * time.Second))
	v, err = b.svc.Status(ctx, b.caller(8), b.svc.Ticket(shard.ID, 8))
	if err != nil || v.Status != SoldOut || !strings.Contains(v.Message, "released then") {
		t.Fatalf("told sold out before the reopening: %+v %v", v, err)
	}
	off, err := ctl.offers(ctx, shard, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	rank, err := b.env.Redis.ZRank(ctx, b.svc.queueKeys(shard.ID)[0], "8").Result()
	if adm, _ := b.admitted(t, shard.ID); err == nil && rank < adm && off.lapsed < 1 {
		t.Fatalf("traveller 8 (place %d of %d admitted) left, but its offer is not lapsed: %+v", rank, adm, off)
	}
}

// TestHeldSeatsKeepTheQueueWaiting: every seat is held by travellers still
// paying. That is not sold out: a failed payment gives its seat back, and
// it goes to the next in the queue. So the queue waits, telling the first
// waiters (as many as the berth-legs held: each party takes at least one)
// that seats may come back and everyone behind them that none can reach
// them; a released seat goes to
// the next waiter in order; once no hold is left to fail, those still
// waiting are told sold out. Before, the queue was told sold out as soon
// as the seats were held, and a rehearsal's queue left a third of its
// berth-legs unsold when payments failed.
func TestHeldSeatsKeepTheQueueWaiting(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	shard := b.shard(t, "3A", 2, time.Now().Add(-time.Minute), "queue")
	if shard.Total != 2 {
		t.Skipf("seeded %d berths, want 2", shard.Total)
	}
	reach := 2 * int64(shard.Legs) // two end-to-end holds of one berth
	b.fill(t, shard.ID, 1, int(reach)+5)
	ctl := b.svc.NewController(ControllerConfig{BaseRate: 5, MaxRate: 5, Tick: 200 * time.Millisecond})
	step := func() { // a tick's worth of admissions each
		t.Helper()
		time.Sleep(200 * time.Millisecond)
		if err := ctl.Step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	status := func(uid int64) View {
		t.Helper()
		v, err := b.svc.Status(ctx, b.caller(uid), b.svc.Ticket(shard.ID, uid))
		if err != nil {
			t.Fatalf("status of %d: %v", uid, err)
		}
		return v
	}
	// Two other travellers hold both seats, durably (HELD rows), and pay.
	holdIDs := make([]string, 2)
	for i := range holdIDs {
		var uid int64
		if err := b.env.Pool.QueryRow(ctx, `INSERT INTO users (login, password_hash) VALUES ($1, 'x') RETURNING id`, fmt.Sprintf("payer%d", i)).Scan(&uid); err != nil {
			t.Fatal(err)
		}
		holdIDs[i] = uuid.NewString()
		res, err := b.env.Store.Hold(ctx, inventory.HoldRequest{ShardID: shard.ID, HoldID: holdIDs[i], UserID: uid, IdemKey: "pay-" + holdIDs[i],
			From: 0, To: shard.Legs, ExpiresAt: time.Now().Add(3 * time.Minute), DailyCap: 2, Prefs: []byte("-"), IDOK: true, IdemTTL: time.Hour, MaxPassengers: 4})
		if err != nil || res.Outcome != inventory.Held {
			t.Fatalf("hold %d: %+v %v", i, res, err)
		}
		if _, err := b.env.Pool.Exec(ctx, `INSERT INTO holds (id, shard_id, user_id, idempotency_key, kind, from_seq, to_seq, seat_count,
			passengers, fare_paise, fare_breakup, state, epoch, opening_day, expires_at)
			VALUES ($1, $2, $3, $4, 'SEAT', 0, $5, 1, '[]', 100, '{}', 'HELD', 0, current_date, now() + interval '3 minutes')`,
			holdIDs[i], shard.ID, uid, "pay-"+holdIDs[i], shard.Legs); err != nil {
			t.Fatal(err)
		}
	}
	step()
	// The first reach waiters could get a seat back; the next cannot.
	for _, uid := range []int64{2, reach} {
		if v := status(uid); v.Status != Waiting || !strings.Contains(v.Odds, "held by travellers paying") {
			t.Fatalf("waiter %d while every seat is held: %+v", uid, v)
		}
	}
	if v := status(reach + 1); v.Status != SoldOut || !strings.Contains(v.Message, "would not reach you") {
		t.Fatalf("waiter %d, behind every held berth-leg: %+v", reach+1, v)
	}
	if adm, _ := b.admitted(t, shard.ID); adm != 0 {
		t.Fatalf("admitted %d while no seat was free, want 0", adm)
	}
	// One payment fails: its seat comes back and goes to waiter 1.
	if got, err := b.env.Store.Release(ctx, shard.ID, holdIDs[0], inventory.ReleaseHold, 0, ""); err != nil || got != "RELEASED" {
		t.Fatalf("release: %q %v", got, err)
	}
	if _, err := b.env.Pool.Exec(ctx, `UPDATE holds SET state = 'EXPIRED' WHERE id = $1`, holdIDs[0]); err != nil {
		t.Fatal(err)
	}
	step()
	if v := status(1); v.Status != Admitted {
		t.Fatalf("waiter 1 after a held seat came back: %+v", v)
	}
	// Waiter 1 takes it (as a hold of the store), the other payment
	// succeeds: nothing is held any more, so waiter 2 is told sold out
	// (when it next polls: its last answer is kept until then).
	if res, err := b.env.Store.Hold(ctx, inventory.HoldRequest{ShardID: shard.ID, HoldID: uuid.NewString(), UserID: 1, IdemKey: "w1",
		From: 0, To: shard.Legs, ExpiresAt: time.Now().Add(3 * time.Minute), DailyCap: 2, Prefs: []byte("-"), IDOK: true, IdemTTL: time.Hour, MaxPassengers: 4}); err != nil || res.Outcome != inventory.Held {
		t.Fatalf("waiter 1's hold: %+v %v", res, err)
	}
	if _, err := b.env.Pool.Exec(ctx, `UPDATE holds SET state = 'CONFIRMED' WHERE id = $1`, holdIDs[1]); err != nil {
		t.Fatal(err)
	}
	step()
	b.clock.Set(time.Now().Add(time.Minute))
	if v := status(2); v.Status != SoldOut || !strings.Contains(v.Message, "every seat and waitlist place") {
		t.Fatalf("waiter 2 once nothing is held: %+v", v)
	}
}
