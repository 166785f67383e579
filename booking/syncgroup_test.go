package booking_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"tatkal/booking"
	"tatkal/booking/db"
	"tatkal/booking/lab/teststack"
	"tatkal/booking/prs"
)

// A confirmation group's sync jobs: the core sync and the seat sync of
// three confirmations are one job each; what fails in a group's run gets
// a job of its own, and only that. The core fails two of three bookings
// (the third was synced before), then every one; Redis fails one hold's
// seat sync.
func TestGroupSyncJobsGiveOnlyTheirFailuresJobsOfTheirOwn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, faults := stackWithFaults(t, teststack.Options{})
	shardID, date := s.DemoShard(t, 3, 0)
	users := s.Users(t, "sg", 3)
	var ids []uuid.UUID
	for i, u := range users {
		ids = append(ids, mustHold(t, s, u, "syncgroup-"+itoa(int64(i)), date).HoldID)
	}
	var results []booking.ConfirmResult
	if err := db.Transact(ctx, s.Pool, func(tx pgx.Tx) (err error) {
		results, err = s.Service.ConfirmManyTx(ctx, tx, ids)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var group booking.CoreSyncGroupArgs
	var seats booking.SeatSyncGroupArgs
	var seatsAt time.Time
	if err := s.Pool.QueryRow(ctx, `SELECT (SELECT args FROM river_job WHERE kind = 'core_sync_group'),
		(SELECT args FROM river_job WHERE kind = 'seat_sync_group'), (SELECT scheduled_at FROM river_job WHERE kind = 'seat_sync_group')`).
		Scan(&group, &seats, &seatsAt); err != nil {
		t.Fatal(err)
	}
	if len(group.Bookings) != 3 || len(seats.Holds) != 3 {
		t.Fatalf("group jobs name %d bookings and %d holds, want 3 each", len(group.Bookings), len(seats.Holds))
	}
	for i, r := range results {
		if !slices.Contains(group.Bookings, booking.CoreSyncArgs{BookingID: r.BookingID, PNR: r.PNR}) ||
			!slices.Contains(seats.Holds, booking.SeatSyncArgs{HoldID: r.HoldID, ShardID: shardID}) {
			t.Errorf("confirmation %d (%+v) is missing from the group jobs %+v %+v", i, r, group, seats)
		}
	}
	if until := time.Until(seatsAt); until < 5*time.Second {
		t.Errorf("the seat sync runs in %s; want it after the after-commit update has had its chance (10 s)", until)
	}
	alone := func(kind, key string) []string {
		t.Helper()
		var got []string
		rows, err := s.Pool.Query(ctx, `SELECT args->>$2 FROM river_job WHERE kind = $1 AND scheduled_at > now() ORDER BY 1`, kind, key)
		if err != nil {
			t.Fatal(err)
		}
		got, err = pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	synced := func() []int64 {
		t.Helper()
		rows, err := s.Pool.Query(ctx, `SELECT id FROM bookings WHERE hold_id = ANY($1) AND prs_state = 'SYNCED' ORDER BY id`, ids)
		if err != nil {
			t.Fatal(err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			t.Fatal(err)
		}
		return got
	}

	// The first booking reaches the core on its own; then the core fails.
	if err := s.Service.SyncToCore(ctx, results[0].BookingID); err != nil {
		t.Fatal(err)
	}
	s.SetCoreFaults(t, prs.Faults{FailRate: 1})
	if err := s.Service.SyncGroupToCore(ctx, group.Bookings); err != nil {
		t.Fatalf("a group whose failures were given jobs is done: %v", err)
	}
	want := []string{itoa(results[1].BookingID), itoa(results[2].BookingID)}
	slices.Sort(want)
	if got := alone("core_sync", "booking_id"); !slices.Equal(got, want) {
		t.Errorf("core sync jobs of their own for bookings %v; want %v (the two the core failed)", got, want)
	}
	// Back up: the group's run again (River's, should its jobs not have
	// been enqueued) sends what is left and enqueues nothing more.
	s.SetCoreFaults(t, prs.Faults{})
	if err := s.Service.SyncGroupToCore(ctx, group.Bookings); err != nil {
		t.Fatal(err)
	}
	if got := synced(); len(got) != 3 {
		t.Errorf("%d of 3 bookings synced after the core came back", len(got))
	}
	if got := alone("core_sync", "booking_id"); len(got) != 2 {
		t.Errorf("core sync jobs of their own %v after a clean run; want the two from before only", got)
	}

	// Redis fails one hold's seat sync.
	faults.fail(1, confirmOf(ids[1].String()))
	if err := s.Service.SyncSeats(ctx, seats.Holds); err != nil {
		t.Fatal(err)
	}
	if got := alone("seat_sync", "hold_id"); !slices.Equal(got, []string{ids[1].String()}) {
		t.Errorf("seat sync jobs of their own for holds %v; want only %s", got, ids[1])
	}
	if rep := check(t, s, shardID); rep.OK() {
		t.Error("the invariant check passed with one hold's seats not marked sold in Redis")
	}
	if err := s.Service.SyncSeat(ctx, ids[1]); err != nil { // what its job does
		t.Fatal(err)
	}
	s.CheckInvariants(t, shardID)
}
