package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"tatkal/booking/lab/teststack"
)

// A hold's Idempotency-Key is bound to its request: the same key with
// another journey or other passengers is refused 422
// IDEMPOTENCY_KEY_REUSED and changes nothing, whether Redis still has the
// key's answer (the HOLD script) or only PostgreSQL does (the committer's
// diagnosis, after Redis forgot it); the same request replays as before.
func TestHoldIdempotencyKeyBoundToRequest(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{})
	shardID, date := s.DemoShard(t, 8, 0)
	ids := s.Users(t, "hidem", 1)
	c := newClient(s, ids[0])
	ctx := context.Background()
	body := holdBody(date, "BVI", "NAD", 2)
	first := c.hold(t, "bound-key-0001", body)
	if first.status != http.StatusCreated || first.body["status"] != "HELD" {
		t.Fatalf("first hold: %d %s", first.status, first.raw)
	}
	holds := func() int {
		var n int
		if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM holds`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for name, other := range map[string]string{
		"another journey":      holdBody(date, "BVI", "ST", 2),
		"fewer passengers":     holdBody(date, "BVI", "NAD", 1),
		"another passenger ID": strings.Replace(body, "ABCDE1234F", "ABCDE9999F", 1),
	} {
		r := c.hold(t, "bound-key-0001", other)
		if r.status != http.StatusUnprocessableEntity || r.body["reason"] != "IDEMPOTENCY_KEY_REUSED" {
			t.Fatalf("%s under the same key: %d %s, want 422 IDEMPOTENCY_KEY_REUSED", name, r.status, r.raw)
		}
	}
	if again := c.hold(t, "bound-key-0001", body); again.status != http.StatusCreated || again.body["hold_id"] != first.body["hold_id"] ||
		again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("the same request again: %d %s", again.status, again.raw)
	}
	if n := holds(); n != 1 {
		t.Fatalf("%d holds, want 1", n)
	}
	if rep := s.CheckInvariants(t, shardID); rep.Legs[1].RedisHeld != 2 {
		t.Fatalf("held on leg BVI-ST: %d, want 2", rep.Legs[1].RedisHeld)
	}

	// Redis forgets the key (it lives only the idempotency window); the
	// hold is cancelled, so the user may hold again. PostgreSQL's unique
	// key still knows it, with the request it came with.
	if r := c.do(t, "POST", fmt.Sprintf("/v1/bookings/%s/cancel", first.body["hold_id"]), nil, ""); r.status != http.StatusOK {
		t.Fatalf("cancel: %d %s", r.status, r.raw)
	}
	keys, err := s.Redis.Keys(ctx, s.KeyPrefix+"*idem*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("idempotency keys in Redis: %v %v", keys, err)
	}
	s.Redis.Del(ctx, keys...)
	r := c.hold(t, "bound-key-0001", holdBody(date, "BVI", "ST", 1))
	if r.status != http.StatusUnprocessableEntity || r.body["reason"] != "IDEMPOTENCY_KEY_REUSED" {
		t.Fatalf("another request under a key only PostgreSQL remembers: %d %s, want 422", r.status, r.raw)
	}
	if n := holds(); n != 1 {
		t.Fatalf("%d holds, want 1", n)
	}
	if rep := s.CheckInvariants(t, shardID); rep.Legs[0].RedisHeld != 0 || rep.Legs[1].RedisHeld != 0 {
		t.Fatalf("seats still taken after the refusal: %+v", rep.Legs)
	}
	if r := c.hold(t, "bound-key-0001", body); r.body["hold_id"] != first.body["hold_id"] {
		t.Fatalf("the first request again: %d %s, want its (cancelled) hold", r.status, r.raw)
	}
}
