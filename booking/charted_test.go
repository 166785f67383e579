package booking_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/uuid"

	"tatkal/booking"
	"tatkal/booking/lab/teststack"
	"tatkal/booking/payment"
)

// Issue 33 (1): a hold still live when the chart is prepared can no
// longer become a ticket, however its payment comes: the chart ends it,
// and a UPI payment the passenger approves afterwards is refunded in full
// by the late-success path (which finds the chart prepared), for a seat
// hold and for a waitlist offer alike. Before, the seat hold became
// CONFIRMED with a PNR the frozen chart did not list, and the paid
// waitlist offer became WAITLISTED on a charted shard with no refund and
// no way to cancel.
func TestHoldsLiveAtChartingAreRefundedNotBooked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{Routes: teststack.QuietRoutes()})
	shardID, date := s.DemoShard(t, 1, 2)
	users := s.Users(t, "lc", 2)
	pay := func(i int, want string) (hold, pay uuid.UUID) {
		h, err := s.Service.Hold(ctx, teststack.Caller(users[i]), holdReq(users[i], fmt.Sprintf("live-chart-%d", i), date, "MMCT", "NDLS",
			pax(fmt.Sprintf("Passenger %c", 'A'+i), 30+i, "F")))
		if err != nil || h.Status != want {
			t.Fatalf("hold %d: %+v %v, want %s", i, h, err, want)
		}
		v, err := s.Payments.Initiate(ctx, teststack.Caller(users[i]), payment.InitiateRequest{HoldID: h.HoldID, Method: payment.UPI,
			VPA: fmt.Sprintf("p%d@okbank", i), IdempotencyKey: fmt.Sprintf("live-chart-pay-%d", i)})
		if err != nil || v.State != payment.AwaitingUser {
			t.Fatalf("pay %d: %+v %v", i, v, err)
		}
		return h.HoldID, v.ID
	}
	seatHold, seatPay := pay(0, "HELD")
	offerHold, offerPay := pay(1, "WAITLIST_OFFERED")

	rep, err := s.Service.Chart(ctx, shardID)
	teststack.Must(t, err, "chart")
	if len(rep.Ended) != 2 || len(rep.Chart.Confirmed) != 0 {
		t.Fatalf("chart: %d holds ended, %d confirmed; want both live holds ended, nobody confirmed", len(rep.Ended), len(rep.Chart.Confirmed))
	}
	// The passengers approve at their bank afterwards; we ask the gateway
	// (as the inquiry job would) and run the late-success job.
	for _, p := range []uuid.UUID{seatPay, offerPay} {
		s.ApproveAtGateway(t, p)
		s.Payments.Inquire(ctx, p) //nolint:errcheck // the answer is read from the database below
		teststack.Must(t, s.Payments.ResolveLateSuccess(ctx, p), "late success")
	}
	for i, h := range []uuid.UUID{seatHold, offerHold} {
		var bookings, refunds int
		var refunded int64
		var state string
		teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT (SELECT state FROM holds WHERE id = $1),
			(SELECT count(*) FROM bookings WHERE hold_id = $1),
			(SELECT count(*) FROM refunds r JOIN payments p ON p.id = r.payment_id WHERE p.hold_id = $1),
			(SELECT coalesce(sum(r.amount_paise), 0) FROM refunds r JOIN payments p ON p.id = r.payment_id WHERE p.hold_id = $1)`, h).
			Scan(&state, &bookings, &refunds, &refunded), "hold %d", i)
		var paid int64
		teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT amount_paise FROM payments WHERE hold_id = $1 AND state IN ('SUCCESS', 'REFUNDED')`, h).Scan(&paid), "payment %d", i)
		if bookings != 0 || refunds != 1 || refunded != paid {
			t.Fatalf("hold %d paid after charting: %s, %d bookings, %d refunds of %d paise (paid %d); want no ticket and the money back once",
				i, state, bookings, refunds, refunded, paid)
		}
	}
	s.CheckInvariants(t, shardID)
}

// Issue 33 (1), the backstop: a hold still HELD on a shard that is charted
// (a hold written between the chart and the shard's rebuild) is refused
// when paid from the wallet (nothing charged), and a gateway payment for
// it is refunded as for a cancelled hold: no ticket past the chart.
func TestAHeldHoldOnAChartedShardIsNeverConfirmed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{Routes: teststack.QuietRoutes()})
	shardID, date := s.DemoShard(t, 2, 0)
	users := walletUsers(t, s, "hc", 2)
	wallet := mustHold(t, s, users[0], "held-charted-0", date)
	upi := mustHold(t, s, users[1], "held-charted-1", date)
	v, err := s.Payments.Initiate(ctx, teststack.Caller(users[1]), payment.InitiateRequest{HoldID: upi.HoldID, Method: payment.UPI,
		VPA: "late@okbank", IdempotencyKey: "held-charted-pay-1"})
	teststack.Must(t, err, "upi")
	_, err = s.Pool.Exec(ctx, `UPDATE inventory_shards SET chart_state = 'CHARTED' WHERE id = $1`, shardID)
	teststack.Must(t, err, "chart the shard")
	if _, err := s.Payments.Initiate(ctx, teststack.Caller(users[0]), payment.InitiateRequest{HoldID: wallet.HoldID, Method: payment.Wallet,
		IdempotencyKey: "held-charted-pay-0"}); booking.ErrorReason(err) != "HOLD_UNCONFIRMABLE" {
		t.Fatalf("wallet payment for a hold on a charted shard: %v", err)
	}
	s.ApproveAtGateway(t, v.ID)
	s.Payments.Inquire(ctx, v.ID) //nolint:errcheck // read below
	var bookings, refunds int
	var hold string
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM bookings WHERE hold_id = ANY($1)),
		(SELECT count(*) FROM refunds WHERE payment_id = $2 AND reason = 'HOLD_CANCELLED'), (SELECT state FROM holds WHERE id = $3)`,
		[]uuid.UUID{wallet.HoldID, upi.HoldID}, v.ID, upi.HoldID).Scan(&bookings, &refunds, &hold), "outcome")
	if bookings != 0 || refunds != 1 || hold != booking.HoldCancelled {
		t.Fatalf("after paying on a charted shard: %d bookings, %d refunds, hold %s", bookings, refunds, hold)
	}
	if n, _, _ := s.Payments.Wallet(ctx, users[0], 0); n != 1_000_000 {
		t.Fatalf("the refused wallet payment moved the balance to %d", n)
	}
}
