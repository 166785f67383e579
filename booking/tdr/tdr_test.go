package tdr_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"tatkal/booking"
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/teststack"
	"tatkal/booking/payment"
	"tatkal/booking/tdr"
)

// booked holds one passenger for user on the demo shard and pays from the
// wallet: a confirmed ticket.
func booked(t *testing.T, s *teststack.Stack, user int64, date time.Time, key string) (uuid.UUID, int64) {
	t.Helper()
	ctx := context.Background()
	h, err := s.Service.Hold(ctx, teststack.Caller(user), booking.HoldRequest{UserID: user, IdempotencyKey: key + "-hold", Train: "12951",
		Date: date, Class: "3A", From: "BVI", To: "NDLS", Passengers: []booking.Passenger{{Name: "Tara Nair", Age: 41, Gender: "F",
			IDType: "PAN", IDRef: "TARAN1234F"}}})
	if err != nil || h.Status != "HELD" {
		t.Fatalf("hold: %+v %v", h, err)
	}
	v, err := s.Payments.Initiate(ctx, teststack.Caller(user), payment.InitiateRequest{HoldID: h.HoldID, Method: payment.Wallet, IdempotencyKey: key + "-pay"})
	if err != nil || v.State != payment.Success {
		t.Fatalf("wallet pay: %+v %v", v, err)
	}
	return h.HoldID, v.AmountPaise
}

func wallet(t *testing.T, s *teststack.Stack, user int64) int64 {
	t.Helper()
	var p int64
	teststack.Must(t, s.Pool.QueryRow(context.Background(), `SELECT balance_paise FROM wallet_accounts WHERE user_id = $1`, user).Scan(&p), "wallet")
	return p
}

// A TDR for a train over 3 hours late: refused outside its time limits
// and with a bad delay; filed once; the first approver cannot approve it
// again, a second finance person does, and the refund (reason TDR) is
// paid back to the wallet by the refund job; a small claim too takes two;
// a refusal needs an answer, is final and moves nothing. Every step is in the audit log with its person.
func TestTDRFiledApprovedByTwoAndRefunded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{Work: true})
	_, date := s.DemoShard(t, 8, 0)
	users, err := seed.Users(ctx, s.Pool, seed.UsersSpec{Count: 3, Prefix: "tdr", PasswordHash: "x", WalletRupees: 20000})
	teststack.Must(t, err, "seed users")
	big, fare := booked(t, s, users[0], date, "tdr-big")
	small, _ := booked(t, s, users[1], date, "tdr-small")
	refused, _ := booked(t, s, users[2], date, "tdr-refused")

	// 12951 leaves MMCT at 17:00 IST; BVI is its first stop after it.
	var departs time.Time
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT (($1::date + tr.departs_at) AT TIME ZONE 'Asia/Kolkata') + make_interval(mins => st.depart_min)
		FROM trains tr JOIN train_stops st ON st.train_number = tr.number WHERE tr.number = '12951' AND st.station_code = 'BVI'`,
		date.Format(time.DateOnly)).Scan(&departs), "departure")
	now := departs.Add(2 * time.Hour)
	svc := &tdr.Service{Pool: s.Pool, Refunds: payment.NewRefunds(s.River), Now: func() time.Time { return now }}
	late := tdr.Claim{Reason: tdr.TrainLate, LateMinutes: 200}

	early := &tdr.Service{Pool: s.Pool, Now: func() time.Time { return departs.Add(-25 * time.Hour) }}
	for name, c := range map[string]struct {
		svc    *tdr.Service
		claim  tdr.Claim
		user   int64
		hold   uuid.UUID
		reason string
	}{
		"too early":             {early, late, users[0], big, "TDR_TOO_EARLY"},
		"past the delay":        {&tdr.Service{Pool: s.Pool, Now: func() time.Time { return departs.Add(201 * time.Minute) }}, late, users[0], big, "TDR_TOO_LATE"},
		"not run too late":      {&tdr.Service{Pool: s.Pool, Now: func() time.Time { return departs.Add(73 * time.Hour) }}, tdr.Claim{Reason: tdr.TrainNotRun}, users[0], big, "TDR_TOO_LATE"},
		"3 hours is not over 3": {svc, tdr.Claim{Reason: tdr.TrainLate, LateMinutes: 180}, users[0], big, "BAD_TDR_DELAY"},
		"no reason":             {svc, tdr.Claim{}, users[0], big, "BAD_TDR_REASON"},
		"someone else's":        {svc, late, users[1], big, "NO_SUCH_BOOKING"},
	} {
		if _, err := c.svc.File(ctx, c.user, c.hold, c.claim); booking.ErrorReason(err) != c.reason {
			t.Fatalf("%s: %v, want %s", name, err, c.reason)
		}
	}
	var n int
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM tdrs`).Scan(&n), "count")
	if n != 0 {
		t.Fatalf("%d TDRs recorded by refused claims", n)
	}

	bigT, err := svc.File(ctx, users[0], big, late)
	if err != nil || bigT.Status != tdr.Filed || bigT.AmountPaise != fare {
		t.Fatalf("file: %+v %v (fare %d)", bigT, err, fare)
	}
	if _, err := svc.File(ctx, users[0], big, tdr.Claim{Reason: tdr.TrainNotRun}); booking.ErrorReason(err) != "TDR_EXISTS" {
		t.Fatalf("second claim: %v", err)
	}
	before := wallet(t, s, users[0])
	if done, err := svc.Approve(ctx, bigT.ID, "finance1"); err != nil || done {
		t.Fatalf("first approval above the limit: done %v, %v; want recorded only", done, err)
	}
	if done, err := svc.Approve(ctx, bigT.ID, "finance1"); booking.ErrorReason(err) != "SAME_PERSON" || done {
		t.Fatalf("own second approval: %v", err)
	}
	if got, _ := svc.ForHold(ctx, users[0], big); got == nil || got.Status != tdr.Filed || got.RefundState != "" {
		t.Fatalf("after one approval: %+v", got)
	}
	if done, err := svc.Approve(ctx, bigT.ID, "finance2"); err != nil || !done {
		t.Fatalf("second approval: done %v, %v", done, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := svc.ForHold(ctx, users[0], big)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == tdr.Approved && got.RefundState == "PROCESSED" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("refund not paid: %+v", got)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var reason string
	var amount int64
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT r.reason, r.amount_paise FROM refunds r JOIN tdrs t ON t.refund_id = r.id WHERE t.id = $1`,
		bigT.ID).Scan(&reason, &amount), "refund row")
	if reason != booking.RefundTDR || amount != fare {
		t.Fatalf("refund %s %d, want TDR %d", reason, amount, fare)
	}
	if after := wallet(t, s, users[0]); after-before != fare {
		t.Fatalf("wallet moved by %d, want the fare %d back", after-before, fare)
	}
	if _, err := svc.Approve(ctx, bigT.ID, "finance3"); booking.ErrorReason(err) != "TDR_DECIDED" {
		t.Fatalf("approval of a decided TDR: %v", err)
	}

	// However small the claim, one person's approval moves no money: a
	// TDR has no gateway's word, so it takes two people.
	smallT, err := svc.File(ctx, users[1], small, tdr.Claim{Reason: tdr.TrainNotRun, Note: "cancelled at BVI"})
	if err != nil {
		t.Fatal(err)
	}
	if done, err := svc.Approve(ctx, smallT.ID, "finance1"); err != nil || done {
		t.Fatalf("one approval of a small claim: done %v, %v", done, err)
	}
	var asked int
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM refunds r JOIN payments p ON p.id = r.payment_id WHERE p.hold_id = $1`, small).Scan(&asked), "refunds")
	if asked != 0 {
		t.Fatalf("one approval of a small claim requested %d refunds", asked)
	}
	if done, err := svc.Approve(ctx, smallT.ID, "finance2"); err != nil || !done {
		t.Fatalf("the second person's approval of a small claim: %v %v", done, err)
	}

	// Refused: an answer is needed, nothing moves, and it is final.
	refT, err := svc.File(ctx, users[2], refused, late)
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Refuse(ctx, refT.ID, "finance2", "  "); booking.ErrorReason(err) != "ANSWER_REQUIRED" {
		t.Fatalf("refusal without an answer: %v", err)
	}
	if err := svc.Refuse(ctx, refT.ID, "finance2", "The running record shows 12951 left BVI 40 minutes late."); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Approve(ctx, refT.ID, "finance1"); booking.ErrorReason(err) != "TDR_DECIDED" {
		t.Fatalf("approval after a refusal: %v", err)
	}
	var refunds int
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM refunds r JOIN payments p ON p.id = r.payment_id WHERE p.hold_id = $1`, refused).Scan(&refunds), "refunds")
	if refunds != 0 {
		t.Fatalf("a refused TDR moved money: %d refunds", refunds)
	}

	rows, err := s.Pool.Query(ctx, `SELECT actor || ' ' || action FROM audit_log WHERE action LIKE 'tdr.%' ORDER BY id`)
	teststack.Must(t, err, "audit")
	var got []string
	for rows.Next() {
		var a string
		teststack.Must(t, rows.Scan(&a), "audit row")
		got = append(got, a)
	}
	want := []string{fmt.Sprintf("user:%d tdr.file", users[0]), "finance1 tdr.approve.first", "finance2 tdr.approve",
		fmt.Sprintf("user:%d tdr.file", users[1]), "finance1 tdr.approve.first", "finance2 tdr.approve", fmt.Sprintf("user:%d tdr.file", users[2]), "finance2 tdr.refuse"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("audit:\n%v\nwant\n%v", got, want)
	}
}
