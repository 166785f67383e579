package booking_test

import (
	"context"
	"testing"
	"time"

	"tatkal/booking"
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/teststack"
	"tatkal/booking/payment"
)

// An account holds on one shard, then on another while the first hold is
// still live: PostgreSQL skips the second row (one live hold an account).
// The first hold confirms before the skip is diagnosed (the committer
// paused there). The account has one ticket of a cap of two, so the second
// hold must not be refused as DAILY_CAP: it is saved, as a retry would be.
func TestHoldRightAfterTheLastConfirmsIsNotRefusedAsDailyCap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := &pauser{}
	s := teststack.New(t, teststack.Options{Pause: p.pause})
	shard3A, date := s.DemoShard(t, 4, 0)
	shard2A, err := seed.Shard(ctx, s.Pool, seed.ShardSpec{Train: "12951", Date: date, Class: "2A", Berths: 4, OpensAt: time.Now().Add(-time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Service.Rebuild(ctx, shard2A); err != nil {
		t.Fatal(err)
	}
	users, err := seed.Users(ctx, s.Pool, seed.UsersSpec{Count: 1, Prefix: "dc", PasswordHash: "x", WalletRupees: 10000})
	if err != nil {
		t.Fatal(err)
	}
	u := users[0]
	first, err := s.Service.Hold(ctx, teststack.Caller(u), holdReq(u, "dcap-hold-1", date, "MMCT", "NDLS", pax("Asha Verma", 30, "F")))
	if err != nil || first.Status != "HELD" {
		t.Fatalf("first hold: %+v %v", first, err)
	}

	reached, release := p.arm("commit.before-diagnose")
	type answer struct {
		r   booking.HoldResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		req := holdReq(u, "dcap-hold-2", date, "MMCT", "NDLS", pax("Asha Verma", 30, "F"))
		req.Class = "2A"
		r, err := s.Service.Hold(ctx, teststack.Caller(u), req)
		done <- answer{r, err}
	}()
	waitFor(t, reached, "the second hold's row to be skipped for the live first hold")
	pay, err := s.Payments.Initiate(ctx, teststack.Caller(u), payment.InitiateRequest{HoldID: first.HoldID, Method: payment.Wallet, IdempotencyKey: "dcap-pay-1"})
	if err != nil || pay.State != payment.Success {
		t.Fatalf("wallet pay: %+v %v", pay, err)
	}
	close(release)
	a := <-done
	if a.err != nil || a.r.Status != "HELD" {
		t.Fatalf("a hold after the first confirmed (1 ticket of %d): %+v %v (%s), want HELD",
			booking.DefaultRules().DailyCap, a.r, a.err, booking.ErrorReason(a.err))
	}
	var held int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM holds WHERE user_id = $1 AND state = 'HELD' AND shard_id = $2`, u, shard2A).Scan(&held); err != nil {
		t.Fatal(err)
	}
	if held != 1 {
		t.Fatalf("%d live holds on the second shard, want 1", held)
	}
	s.CheckInvariants(t, shard3A)
	s.CheckInvariants(t, shard2A)

	// The cap itself still refuses: a third hold once two are taken.
	req := holdReq(u, "dcap-hold-3", date, "MMCT", "NDLS", pax("Asha Verma", 30, "F"))
	pay2, err := s.Payments.Initiate(ctx, teststack.Caller(u), payment.InitiateRequest{HoldID: a.r.HoldID, Method: payment.Wallet, IdempotencyKey: "dcap-pay-2"})
	if err != nil || pay2.State != payment.Success {
		t.Fatalf("wallet pay 2: %+v %v", pay2, err)
	}
	if _, err := s.Service.Hold(ctx, teststack.Caller(u), req); booking.ErrorReason(err) != "DAILY_CAP" {
		t.Fatalf("a third hold with two tickets taken: %v, want DAILY_CAP", err)
	}
}
