package booking

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"tatkal/booking/inventory"
	"tatkal/booking/lab/seed"
)

// A writer that took its seats under an old epoch must not commit after
// the shard was rebuilt: the rebuild did not count its seats.
func TestStaleEpochWriterIsRejected(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env, svc, shardID := committerFixture(t, DefaultRules(), 4)
	users, err := seed.Users(ctx, env.Pool, seed.UsersSpec{Count: 2, Prefix: "ep", PasswordHash: "x"})
	if err != nil {
		t.Fatal(err)
	}
	epoch1, err := svc.Rebuild(ctx, shardID)
	if err != nil {
		t.Fatal(err)
	}

	holdID := uuid.New()
	res, err := env.Store.Hold(ctx, inventory.HoldRequest{ShardID: shardID, HoldID: holdID.String(), UserID: users[0],
		IdemKey: "stale-epoch-1", From: 0, To: 7, ExpiresAt: time.Now().Add(time.Minute), DailyCap: 2, Prefs: []byte("-"),
		IDOK: true, IdemTTL: time.Minute, MaxPassengers: 4})
	if err != nil || res.Outcome != inventory.Held || res.Epoch != epoch1 {
		t.Fatalf("hold: %+v %v", res, err)
	}
	epoch2, err := svc.Rebuild(ctx, shardID)
	if err != nil {
		t.Fatal(err)
	}
	if epoch2 <= epoch1 {
		t.Fatalf("rebuild did not advance the epoch: %d -> %d", epoch1, epoch2)
	}

	row := holdRow{ID: holdID, ShardID: shardID, UserID: users[0], IdemKey: "stale-epoch-1", Kind: KindSeat, From: 0, To: 7,
		Berths: res.Berths, Passengers: []Passenger{{Name: "Old Epoch", Age: 30, Gender: "M", IDType: "PAN", IDRef: "ABCDE1234F"}},
		Fare: Fare{TotalPaise: 100}, Epoch: res.Epoch, OpeningDay: time.Now().UTC().Truncate(24 * time.Hour), ExpiresAt: time.Now().Add(time.Minute)}
	fresh := row
	fresh.ID, fresh.UserID, fresh.IdemKey, fresh.Epoch = uuid.New(), users[1], "fresh-epoch-1", epoch2
	results := svc.committer.write(ctx, []*pendingHold{{row: row}, {row: fresh}})
	if results[0].err != nil || results[0].verdict != rejectedStaleEpoch {
		t.Fatalf("stale writer: verdict %v err %v, want rejectedStaleEpoch", results[0].verdict, results[0].err)
	}
	if results[1].err != nil || results[1].verdict != committed {
		t.Fatalf("current writer in the same batch: verdict %v err %v, want committed", results[1].verdict, results[1].err)
	}
	var n int
	if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM holds WHERE id = $1`, holdID).Scan(&n); err != nil || n != 0 {
		t.Fatalf("stale hold row count %d (%v), want 0", n, err)
	}
	// The rebuilt Redis state never had the stale hold's seats.
	snap, err := env.Store.Snapshot(ctx, shardID)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range snap.Holds {
		if h.ID == holdID.String() {
			t.Fatalf("stale hold %s survived the rebuild in Redis", holdID)
		}
	}
	// An older epoch can never be loaded over a newer one.
	if ok, err := env.Store.Load(ctx, shardID, inventory.ShardState{Epoch: epoch1, Legs: 7, BerthTypes: []byte("LMUL"), Coaches: []byte{1, 1, 1, 1}}); err != nil || ok {
		t.Fatalf("loading epoch %d over %d: ok=%v err=%v, want refused", epoch1, epoch2, ok, err)
	}
}
