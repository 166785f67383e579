package admission

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"tatkal/booking/admission/token"
	"tatkal/booking/lab/seed"
)

// TestFairnessFiguresOfASyntheticWindow: a sealed window of 12 entrants
// whose arrivals, places, account ages, client types and bookings are
// chosen, so every figure has a known answer: success by client type,
// account age band and arrival second; Spearman's ρ = 1 when arrival
// order is queue order and -1 when reversed; the window verifies; the
// figures are stored and published with the window after the draw.
func TestFairnessFiguresOfASyntheticWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, nil)
	opens := time.Now().Add(-10 * time.Minute).Truncate(time.Millisecond)
	sh := b.shard(t, "3A", 10, opens, "queue")
	pool := b.env.Pool
	users := func(prefix string, n int, age time.Duration, agent bool) []int64 {
		ids, err := seed.Users(ctx, pool, seed.UsersSpec{Count: n, Prefix: prefix, PasswordHash: "x", CreatedAt: opens.Add(-age), Agent: agent})
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	a := users("ffa", 6, 40*24*time.Hour, false)   // under 3 months
	bb := users("ffb", 4, 800*24*time.Hour, false) // 1-3 years
	c := users("ffc", 2, 2000*24*time.Hour, true)  // agents, 3+ years
	all := slices.Concat(a, bb, c)
	wseed := sha256.Sum256([]byte("synthetic window"))
	now := time.Now()
	if _, err := pool.Exec(ctx, `INSERT INTO admission_windows (shard_id, seed, seed_sha256, prequeue_opens_at, opens_at, randomise_until, sealed_at, revealed_at, cohort_size)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $8)`, sh.ID, wseed[:], Commitment(wseed[:]), opens.Add(-15*time.Minute), opens, opens.Add(10*time.Second), now, len(all)); err != nil {
		t.Fatal(err)
	}
	// Queue order is (score, ticket); arrivals 100 ms apart in that order.
	type ent struct {
		uid    int64
		ticket string
		score  int64
	}
	var es []ent
	for _, uid := range all {
		tk := b.svc.Ticket(sh.ID, uid)
		es = append(es, ent{uid, tk, Score(wseed[:], tk)})
	}
	slices.SortFunc(es, func(x, y ent) int {
		if x.score != y.score {
			return compare(x.score, y.score)
		}
		return strings.Compare(x.ticket, y.ticket)
	})
	for i, e := range es {
		if _, err := pool.Exec(ctx, `INSERT INTO admission_entrants (shard_id, ticket, user_id, score, entered_at) VALUES ($1, $2, $3, $4, $5)`,
			sh.ID, e.ticket, e.uid, e.score, opens.Add(time.Duration(i)*100*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	// Booked: a0, a1, a2, b0, c0. Aggressive (refused for early polls on
	// this window): a2, a3; b1 was refused on another window only.
	for i, uid := range []int64{a[0], a[1], a[2], bb[0], c[0]} {
		var hold string
		if err := pool.QueryRow(ctx, `INSERT INTO holds (id, shard_id, user_id, idempotency_key, kind, from_seq, to_seq, seat_count, passengers,
				fare_paise, fare_breakup, state, epoch, opening_day, expires_at)
			VALUES (gen_random_uuid(), $1, $2, 'k', 'SEAT', 0, 7, 1, '[]', 100, '[]', 'CONFIRMED', 1, current_date, now()) RETURNING id::text`,
			sh.ID, uid).Scan(&hold); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `INSERT INTO bookings (pnr, hold_id, user_id, shard_id, from_seq, to_seq, status, fare_paise)
			VALUES ($1, $2, $3, $4, 0, 7, 'CONFIRMED', 100)`, fmt.Sprintf("81000000%02d", i), hold, uid, sh.ID); err != nil {
			t.Fatal(err)
		}
	}
	refuse := func(uid, shard int64) {
		v := strconv.FormatInt(now.UnixMilli(), 10) + "|" + strconv.FormatInt(shard, 10) + "|" + RefusedEarlyPoll + "|test"
		if err := b.env.Redis.LPush(ctx, refusalsKey(b.env.KeyPrefix, uid), v).Err(); err != nil {
			t.Fatal(err)
		}
	}
	refuse(a[2], sh.ID)
	refuse(a[3], sh.ID)
	refuse(bb[1], sh.ID+1000)

	f, err := b.svc.ComputeFairness(ctx, sh.ID)
	if err != nil {
		t.Fatal(err)
	}
	if f.Entrants != 12 || f.WithArrival != 12 {
		t.Fatalf("entrants %d, with arrival %d; want 12, 12", f.Entrants, f.WithArrival)
	}
	if f.SpearmanRho == nil || math.Abs(*f.SpearmanRho-1) > 1e-9 {
		t.Fatalf("arrival order = queue order: rho %v, want 1", f.SpearmanRho)
	}
	if !f.Verified {
		t.Fatalf("the window does not verify: %s", f.VerifyNote)
	}
	want := func(what string, got []Rate, w []Rate) {
		t.Helper()
		if !slices.Equal(got, w) {
			t.Errorf("%s: %+v, want %+v", what, got, w)
		}
	}
	want("by client", f.ByClient, []Rate{{"ordinary", 8, 3, 0.375}, {"aggressive", 2, 1, 0.5}, {"agent", 2, 1, 0.5}})
	want("by account age", f.ByAge, []Rate{{"under 3 months", 6, 3, 0.5}, {"3-12 months", 0, 0, 0}, {"1-3 years", 4, 1, 0.25}, {"3+ years", 2, 1, 0.5}})
	var booked0, booked1 int
	for i, e := range es {
		if slices.Contains([]int64{a[0], a[1], a[2], bb[0], c[0]}, e.uid) {
			if i < 10 {
				booked0++
			} else {
				booked1++
			}
		}
	}
	want("by arrival second", f.BySecond, []Rate{{"before opening", 0, 0, 0}, {"+0s", 10, booked0, round4(float64(booked0) / 10)},
		{"+1s", 2, booked1, round4(float64(booked1) / 2)}})

	// Reversed arrivals: ρ = -1.
	for i, e := range es {
		if _, err := pool.Exec(ctx, `UPDATE admission_entrants SET entered_at = $3 WHERE shard_id = $1 AND ticket = $2`,
			sh.ID, e.ticket, opens.Add(time.Duration(len(es)-i)*100*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	if f, err = b.svc.ComputeFairness(ctx, sh.ID); err != nil {
		t.Fatal(err)
	}
	if f.SpearmanRho == nil || math.Abs(*f.SpearmanRho+1) > 1e-9 {
		t.Fatalf("reversed arrivals: rho %v, want -1", f.SpearmanRho)
	}
	// Stored, and published with the window after the draw.
	pub, err := b.svc.Fairness(ctx, sh.ID, false)
	if err != nil {
		t.Fatal(err)
	}
	if pub.Figures == nil || pub.Figures.Entrants != 12 || pub.Figures.SpearmanRho == nil || math.Abs(*pub.Figures.SpearmanRho+1) > 1e-9 {
		t.Fatalf("published figures: %+v", pub.Figures)
	}
}

// TestFairnessOfAnUnsealedWindowIsRefused: no figures before the draw.
func TestFairnessOfAnUnsealedWindowIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	sh := b.shard(t, "3A", 10, time.Now().Add(time.Hour), "queue")
	if _, err := b.svc.ComputeFairness(context.Background(), sh.ID); err == nil {
		t.Fatal("figures computed for a window with no draw")
	}
}

// TestSpearman against hand-computed values, ties averaged.
func TestSpearman(t *testing.T) {
	for _, c := range []struct {
		x, y []float64
		rho  float64
	}{
		{[]float64{1, 2, 3, 4, 5}, []float64{5, 6, 7, 8, 7}, 0.8207826816681233},
		{[]float64{1, 2, 3}, []float64{3, 2, 1}, -1},
		{[]float64{1, 1, 1}, []float64{1, 2, 3}, 0},
	} {
		if got := Spearman(c.x, c.y); math.Abs(got-c.rho) > 1e-12 {
			t.Errorf("Spearman(%v, %v) = %v, want %v", c.x, c.y, got, c.rho)
		}
	}
}

// TestByChance against exact hypergeometric tails (Python's math.comb):
// two of four entrants in the group and two bookings; the rehearsal's
// three seeds (270 aggressive of 900 entrants, 90 bookings) at no
// advantage, at 1.35× and 1.95× the rest's rate, and at the review's 6×.
func TestByChance(t *testing.T) {
	for _, c := range []struct {
		group, rest Rate
		p           float64
	}{
		{Rate{Entrants: 2, Booked: 2}, Rate{Entrants: 2}, 1.0 / 6},
		{Rate{Entrants: 2, Booked: 1}, Rate{Entrants: 2, Booked: 1}, 5.0 / 6},
		{Rate{Entrants: 2}, Rate{Entrants: 2, Booked: 2}, 1},
		{Rate{Entrants: 2, Booked: 3}, Rate{Entrants: 2, Booked: 1}, 1}, // more booked than entered: no conclusion
		// A national window: 100,000 entrants, 5,000 bookings.
		{Rate{Entrants: 30000, Booked: 1560}, Rate{Entrants: 70000, Booked: 3440}, 0.030108919597588695},
		{Rate{Entrants: 30000, Booked: 1400}, Rate{Entrants: 70000, Booked: 3600}, 0.9993132564528444},
		{Rate{Entrants: 270, Booked: 27}, Rate{Entrants: 630, Booked: 63}, 0.5431156305089897},
		{Rate{Entrants: 270, Booked: 33}, Rate{Entrants: 630, Booked: 57}, 0.09258857862209847},
		{Rate{Entrants: 270, Booked: 41}, Rate{Entrants: 630, Booked: 49}, 0.0007353415210378691},
		{Rate{Entrants: 270, Booked: 65}, Rate{Entrants: 630, Booked: 25}, 2.54368490933549e-18},
	} {
		if got := ByChance(c.group, c.rest); math.Abs(got/c.p-1) > 1e-8 {
			t.Errorf("ByChance(%+v, %+v) = %v, want %v", c.group, c.rest, got, c.p)
		}
	}
}

func round4(x float64) float64 { return math.Round(1e4*x) / 1e4 }

// TestDrawIgnoresArrivalOver10000Entrants is the goal for the draw
// itself (the package doc: fair by construction): 10,000 entrants arriving
// in ticket order, placed by the keyed hash of their ticket; |Spearman ρ|
// between arrival and place must be under 0.05 (about 0.01 expected from
// chance alone), for each of five seeds.
func TestDrawIgnoresArrivalOver10000Entrants(t *testing.T) {
	b := &Service{ticketKey: token.Derive([]byte("0123456789abcdef0123456789abcdef-test"), "ticket")}
	for s := range 5 {
		wseed := sha256.Sum256([]byte("draw " + strconv.Itoa(s)))
		type ent struct {
			arrival int
			ticket  string
			score   int64
		}
		es := make([]ent, 10000)
		for i := range es {
			tk := b.Ticket(42, int64(i+1))
			es[i] = ent{i, tk, Score(wseed[:], tk)}
		}
		slices.SortFunc(es, func(x, y ent) int {
			if x.score != y.score {
				return compare(x.score, y.score)
			}
			return strings.Compare(x.ticket, y.ticket)
		})
		arrivals, places := make([]float64, len(es)), make([]float64, len(es))
		for i, e := range es {
			arrivals[i], places[i] = float64(e.arrival), float64(i+1)
		}
		rho := Spearman(arrivals, places)
		t.Logf("seed %d: rho %.4f over %d entrants", s, rho, len(es))
		if math.Abs(rho) >= 0.05 {
			t.Errorf("seed %d: |rho| = %.4f, not under 0.05", s, math.Abs(rho))
		}
	}
}

// BenchmarkByChance at a national window's size (100,000 entrants, 5,000
// bookings): the console works it out for every group of every window
// it lists.
func BenchmarkByChance(b *testing.B) {
	for b.Loop() {
		ByChance(Rate{Entrants: 30000, Booked: 1400}, Rate{Entrants: 70000, Booked: 3600})
	}
}
