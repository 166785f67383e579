package booking_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"tatkal/booking"
	"tatkal/booking/db"
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/teststack"
)

// ConfirmManyTx confirms holds of two shards, seat and waitlist, with one
// to three passengers each, in its handful of statements: each hold gets
// its own booking, PNR, passengers with their berths (or none on the
// waitlist), e-ticket and jobs. Two of them drew the same PNR; the second
// is given another. A set with a hold not HELD, or one hold twice, is
// refused whole.
func TestConfirmManyAcrossShardsAndKinds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{})
	shardA, date := s.DemoShard(t, 2, 5)
	waitlist := 0
	nextDay := date.AddDate(0, 0, 1)
	shardB, err := seed.Shard(ctx, s.Pool, seed.ShardSpec{Train: "12951", Date: nextDay, Class: "3A", Berths: 8,
		OpensAt: time.Now().Add(-time.Minute), WaitlistCap: &waitlist})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Service.Rebuild(ctx, shardB); err != nil {
		t.Fatal(err)
	}
	users := s.Users(t, "many", 4)
	hold := func(user int64, key string, on int64, want string, ps ...booking.Passenger) booking.HoldResult {
		t.Helper()
		d := date
		if on == shardB {
			d = nextDay
		}
		res, err := s.Service.Hold(ctx, teststack.Caller(user), holdReq(user, key, d, "MMCT", "NDLS", ps...))
		if err != nil || res.Status != want {
			t.Fatalf("hold %s: %+v %v; want %s", key, res, err, want)
		}
		return res
	}
	pair := hold(users[0], "many-pair-1", shardA, "HELD", pax("Asha Rao", 30, "F"), pax("Ravi Rao", 34, "M"))
	wl := hold(users[1], "many-waitlist", shardA, "WAITLIST_OFFERED", pax("Meena Iyer", 61, "F"))
	trio := hold(users[2], "many-trio-1", shardB, "HELD", pax("Kiran Das", 40, "M"), pax("Lata Das", 38, "F"), pax("Om Das", 9, "M"))
	lone := hold(users[3], "many-lone-1", shardB, "HELD", pax("Zoya Khan", 27, "F"))
	ids := []uuid.UUID{pair.HoldID, wl.HoldID, trio.HoldID, lone.HoldID}

	// The first two PNRs drawn are the same.
	var mu sync.Mutex
	drawn := 0
	s.Service.SetNewPNR(func(region int, location string) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		drawn++
		if drawn <= 2 {
			return fmt.Sprintf("%d%s0000042", region, location), nil
		}
		return booking.NewPNR(region, location)
	})

	// Refused whole: a hold named twice, and a set with a hold not HELD.
	for name, set := range map[string][]uuid.UUID{"twice": {pair.HoldID, pair.HoldID}, "cancelled": {pair.HoldID, lone.HoldID}} {
		if name == "cancelled" {
			if _, err := s.Service.Cancel(ctx, users[3], lone.HoldID); err != nil {
				t.Fatal(err)
			}
		}
		err := db.Transact(ctx, s.Pool, func(tx pgx.Tx) error {
			_, err := s.Service.ConfirmManyTx(ctx, tx, set)
			return err
		})
		if err == nil {
			t.Fatalf("%s: confirmed; want refused", name)
		}
	}
	ids = ids[:3]
	drawn = 0
	var results []booking.ConfirmResult
	if err := db.Transact(ctx, s.Pool, func(tx pgx.Tx) error {
		var err error
		results, err = s.Service.ConfirmManyTx(ctx, tx, ids)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		s.Service.AfterConfirm(ctx, r)
	}
	if drawn != 4 {
		t.Errorf("%d PNRs drawn; want 4 (three, then one more for the collision)", drawn)
	}
	pnrs := map[string]bool{}
	for i, r := range results {
		if r.HoldID != ids[i] || r.BookingID == 0 || !pnrRE.MatchString(r.PNR) || pnrs[r.PNR] || r.Already {
			t.Errorf("result %d: %+v", i, r)
		}
		pnrs[r.PNR] = true
	}
	for i, c := range []struct {
		shard                          int64
		status                         string
		passengers, berthed, notes, wl int
	}{
		{shardA, booking.BookingConfirmed, 2, 2, 2, 0},
		{shardA, booking.BookingWaitlisted, 1, 0, 2, 1},
		{shardB, booking.BookingConfirmed, 3, 3, 2, 0},
	} {
		var shard int64
		var status, holdState string
		var passengers, berthed, notes, wlNo, jobs int
		if err := s.Pool.QueryRow(ctx, `SELECT b.shard_id, b.status, coalesce(b.waitlist_no, 0), h.state,
			(SELECT count(*) FROM booking_passengers p WHERE p.booking_id = b.id AND p.status = b.status),
			(SELECT count(*) FROM booking_passengers p WHERE p.booking_id = b.id AND p.berth_idx IS NOT NULL AND p.coach IS NOT NULL),
			(SELECT count(*) FROM notifications n WHERE n.kind = 'ETICKET' AND n.ref = b.pnr AND n.user_id = b.user_id),
			(SELECT count(*) FROM river_job j WHERE (j.kind = 'core_sync_group' AND j.args->'bookings' @> jsonb_build_array(jsonb_build_object('booking_id', b.id, 'pnr', b.pnr)))
				OR (j.kind = 'seat_sync_group' AND j.args->'holds' @> jsonb_build_array(jsonb_build_object('hold_id', h.id, 'shard_id', h.shard_id))))
			FROM bookings b JOIN holds h ON h.id = b.hold_id WHERE b.id = $1 AND b.pnr = $2`,
			results[i].BookingID, results[i].PNR).Scan(&shard, &status, &wlNo, &holdState, &passengers, &berthed, &notes, &jobs); err != nil {
			t.Fatalf("booking %d: %v", i, err)
		}
		if shard != c.shard || status != c.status || holdState != booking.HoldConfirmed || passengers != c.passengers ||
			berthed != c.berthed || notes != c.notes || (wlNo > 0) != (c.wl > 0) || jobs != 2 {
			t.Errorf("booking %d: shard %d %s wl %d hold %s, %d passengers (%d with berths), %d e-ticket messages, %d jobs; want %+v",
				i, shard, status, wlNo, holdState, passengers, berthed, notes, jobs, c)
		}
	}
	// The three share one job of each kind.
	var kinds string
	if err := s.Pool.QueryRow(ctx, `SELECT string_agg(kind, ' ' ORDER BY kind) FROM river_job
		WHERE kind IN ('core_sync', 'seat_sync', 'core_sync_group', 'seat_sync_group')`).Scan(&kinds); err != nil || kinds != "core_sync_group seat_sync_group" {
		t.Errorf("sync jobs %q (%v), want one group job of each kind", kinds, err)
	}
	s.CheckInvariants(t, shardA)
	s.CheckInvariants(t, shardB)
}
