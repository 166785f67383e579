package console_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"tatkal/booking"
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/teststack"
	"tatkal/console/levers"
)

// A shard is switched to the waiting room before its window opens; after
// opening, the switch is refused.
func TestShardModeSwitchBeforeTheWindow(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{})
	ops := actor(t, s, "ops1")
	ctx := context.Background()
	_, date := s.DemoShard(t, 4, 0)
	later := date.AddDate(0, 0, 1)
	future, err := seed.Shard(ctx, s.Pool, seed.ShardSpec{Train: "12951", Date: later, Class: "3A", Berths: 4,
		OpensAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	open, err := seed.Shard(ctx, s.Pool, seed.ShardSpec{Train: "12951", Date: later.AddDate(0, 0, 1), Class: "3A", Berths: 4,
		OpensAt: time.Now().Add(-time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Service.Rebuild(ctx, open); err != nil {
		t.Fatal(err)
	}
	svc := s.Console.Levers()
	if _, err := svc.Propose(ctx, ops, propose(levers.ShardMode, fmt.Sprintf("shard:%d", open), "queue")); booking.ErrorCode(err) != booking.EINVALID {
		t.Fatalf("switching an open window: %v, want refused", err)
	}
	if _, err := svc.Propose(ctx, ops, propose(levers.ShardMode, fmt.Sprintf("shard:%d", future), "sideways")); booking.ErrorCode(err) != booking.EINVALID {
		t.Fatalf("an unknown mode: %v, want refused", err)
	}
	if _, err := svc.Propose(ctx, ops, propose(levers.ShardMode, fmt.Sprintf("shard:%d", future), "queue")); err != nil {
		t.Fatal(err)
	}
	var mode string
	if err := s.Pool.QueryRow(ctx, `SELECT mode FROM inventory_shards WHERE id = $1`, future).Scan(&mode); err != nil || mode != "queue" {
		t.Fatalf("shard mode %q (%v), want queue", mode, err)
	}
	s.Levers.Refresh(ctx)
	if m, ok := s.Levers.ShardMode(future); !ok || m != "queue" {
		t.Fatalf("the reader sees mode %q %v", m, ok)
	}
	// The open shard stays direct: a hold goes through without a token.
	users := s.Users(t, "mode", 1)
	res, err := s.Service.Hold(ctx, teststack.Caller(users[0]), holdReq(users[0], "mode-0001", later.AddDate(0, 0, 1)))
	if err != nil || res.Status != "HELD" {
		t.Fatalf("hold on the direct shard: %+v %v", res, err)
	}
}
