package admission

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"tatkal/booking"
	"tatkal/booking/admission/token"
	"tatkal/booking/inventory"
)

// fastQueue is a queue-mode 3A shard of berths, opened a minute ago, with
// entrants 1..entrants waiting, and step, which runs n steps of a
// controller admitting as fast as places allow.
func (b *bundle) fastQueue(t *testing.T, berths, entrants int) (*booking.Shard, func(n int)) {
	t.Helper()
	shard := b.shard(t, "3A", berths, time.Now().Add(-time.Minute), "queue")
	if shard.Total != berths {
		t.Skipf("seeded %d berths, want %d", shard.Total, berths)
	}
	b.fill(t, shard.ID, 1, entrants)
	ctl := b.svc.NewController(ControllerConfig{BaseRate: 5000, MaxRate: 5000, Tick: 50 * time.Millisecond})
	return shard, func(n int) {
		t.Helper()
		for range n {
			if err := ctl.Step(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestOfferKeepsItsPlace: an admission offer can be picked up for OfferTTL
// from when it is made; picked up, its permit lives TokenTTL from then,
// and all that time its place is kept for it: the controller gives the
// places of lapsed offers to the next in line, never the kept one, and
// the holder gets its seat however many came before it.
func TestOfferKeepsItsPlace(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	shard, step := b.fastQueue(t, 3, 10)
	t0 := time.Now()
	step(3)
	if adm, _ := b.admitted(t, shard.ID); adm != 3 {
		t.Fatalf("admitted %d for 3 places, want 3", adm)
	}
	// Traveller 1 picks its offer up at 30 s; 2 and 3 never come.
	b.clock.Set(t0.Add(30 * time.Second))
	v, err := b.svc.Status(ctx, b.caller(1), b.svc.Ticket(shard.ID, 1))
	if err != nil || v.Status != Admitted || v.AdmissionToken == nil || v.ExpiresInS < 115 || v.ExpiresInS > 120 {
		t.Fatalf("picked up at 30 s: %+v %v", v, err)
	}
	// At 61 s the two unclaimed offers have lapsed: their two places go to
	// the next two, the kept one does not (2 no-shows of 2 are too few for
	// an allowance yet).
	b.clock.Set(t0.Add(61 * time.Second))
	step(3)
	if adm, _ := b.admitted(t, shard.ID); adm != 5 {
		t.Fatalf("after two offers lapsed: admitted %d, want 5", adm)
	}
	v, err = b.svc.Status(ctx, b.caller(2), b.svc.Ticket(shard.ID, 2))
	if err != nil || v.Status != Expired {
		t.Fatalf("unclaimed offer at 61 s: %+v %v", v, err)
	}
	// The next two are faster: they take two seats at once.
	for _, uid := range []int64{4, 5} {
		res, err := b.env.Store.Hold(ctx, inventory.HoldRequest{ShardID: shard.ID, HoldID: uuid.NewString(), UserID: uid, IdemKey: "kept-" + uuid.NewString(),
			From: 0, To: shard.Legs, ExpiresAt: time.Now().Add(3 * time.Minute), DailyCap: 2, Prefs: []byte("-"), IDOK: true, IdemTTL: time.Hour, MaxPassengers: 4})
		if err != nil || res.Outcome != inventory.Held {
			t.Fatalf("hold of %d: %+v %v", uid, res, err)
		}
	}
	step(3)
	if adm, _ := b.admitted(t, shard.ID); adm != 5 {
		t.Fatalf("with one place left, kept for a picked-up offer: admitted %d, want 5", adm)
	}
	// Traveller 1 comes back at 140 s, inside its permit: still admitted,
	// and its seat is there.
	b.clock.Set(t0.Add(140 * time.Second))
	v, err = b.svc.Status(ctx, b.caller(1), b.svc.Ticket(shard.ID, 1))
	if err != nil || v.Status != Admitted || v.ExpiresInS > 10 {
		t.Fatalf("back at 140 s: %+v %v", v, err)
	}
	res, err := b.env.Store.Hold(ctx, inventory.HoldRequest{ShardID: shard.ID, HoldID: uuid.NewString(), UserID: 1, IdemKey: "kept-1",
		From: 0, To: shard.Legs, ExpiresAt: time.Now().Add(3 * time.Minute), DailyCap: 2, Prefs: []byte("-"), IDOK: true, IdemTTL: time.Hour, MaxPassengers: 4})
	if err != nil || res.Outcome != inventory.Held {
		t.Fatalf("the kept place: %+v %v", res, err)
	}
	// Past its permit, a picked-up offer lapses too.
	b.clock.Set(t0.Add(151 * time.Second))
	v, err = b.svc.Status(ctx, b.caller(1), b.svc.Ticket(shard.ID, 1))
	if err != nil || v.Status != Expired {
		t.Fatalf("past the permit: %+v %v", v, err)
	}
}

// TestPacing: poll_after_ms is half the expected wait at the cursor's
// speed, PollMin near the cursor (so an obedient client learns of its
// admission within about a second), never above PollMax, and its jitter
// only makes polls earlier.
func TestPacing(t *testing.T) {
	b := setup(t, nil)
	s := b.svc
	cases := []struct {
		pos  int64
		rate float64
		want int
	}{
		{1, 50, 1000}, {50, 50, 1000}, {100, 50, 1000}, {200, 50, 2000}, {1000, 50, 10000}, {100000, 50, 15000},
		{3, 0, 1500}, // a stalled cursor counts as one a second
	}
	for _, c := range cases {
		if got := s.pollAfter(c.pos, c.rate); got != c.want {
			t.Errorf("pollAfter(%d, %.0f) = %d ms, want %d", c.pos, c.rate, got, c.want)
		}
	}
	for range 1000 {
		if j := jitter(1000); j > 1000 || j < 800 {
			t.Fatalf("jitter(1000) = %d", j)
		}
	}
}

// TestAdmitsPartiesNotBerths: before any party has held, a probe of
// partiesKnown offers goes out (one offer a berth would over-admit, and
// the admitted would race each other for too few seats: the faster poller
// wins); once they have held, the places left are offered at the berths a
// party took, not one offer a berth.
func TestAdmitsPartiesNotBerths(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ctx := context.Background()
	shard, step := b.fastQueue(t, 40, 200)
	t0 := time.Now()
	step(3)
	if adm, _ := b.admitted(t, shard.ID); adm != partiesKnown {
		t.Fatalf("admitted %d for 40 berths before any party held, want the probe's %d", adm, partiesKnown)
	}
	// The probe's ten hold parties of three end to end, with their
	// tokens: 30 berths taken, 10 left on every leg.
	first, err := b.env.Redis.ZRange(ctx, b.svc.queueKeys(shard.ID)[0], 0, partiesKnown-1).Result()
	if err != nil || len(first) != partiesKnown {
		t.Fatalf("first admitted: %v %v", first, err)
	}
	for _, m := range first {
		uid, _ := strconv.ParseInt(m, 10, 64)
		mark := token.UsedKey(b.svc.cfg.Prefix, token.Claims{ShardID: shard.ID, TokenID: token.TokenID(shard.ID, uid, 0)})
		res, err := b.env.Store.Hold(ctx, inventory.HoldRequest{ShardID: shard.ID, HoldID: uuid.NewString(), UserID: uid, IdemKey: "party-" + m,
			From: 0, To: shard.Legs, ExpiresAt: time.Now().Add(3 * time.Minute), DailyCap: 2, Prefs: []byte("---"), IDOK: true,
			IdemTTL: time.Hour, MaxPassengers: 4, TokenKey: mark, TokenTTL: 3 * time.Minute})
		if err != nil || res.Outcome != inventory.Held {
			t.Fatalf("hold of %d: %+v %v", uid, res, err)
		}
	}
	// 10 berths left are four parties of three's worth (one offer a
	// berth would be ten).
	step(3)
	if adm, _ := b.admitted(t, shard.ID); adm != partiesKnown+4 {
		t.Fatalf("after 10 parties of 3 held: admitted %d, want %d (4 parties for 10 berths)", adm, partiesKnown+4)
	}
	// Those four never come; once their offers lapse, their places go to
	// the next four, plus the no-show allowance: 4 lapsed of 14 offers,
	// times those 4 places.
	b.clock.Set(t0.Add(61 * time.Second))
	step(3)
	adm, _ := b.admitted(t, shard.ID)
	lapsed, used := 4.0, 10.0
	allowance := int64(lapsed / (used + lapsed + 10) * 4)
	if want := partiesKnown + 4 + 4 + allowance; adm != want {
		t.Fatalf("after 4 offers lapsed: admitted %d, want %d (%d no-show allowance)", adm, want, allowance)
	}
}
