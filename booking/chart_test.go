package booking_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/google/uuid"

	"tatkal/booking"
	"tatkal/booking/payment"
	"tatkal/booking/seed"
	"tatkal/booking/teststack"
)

// At charting a shard with one free berth and two paid waitlisted tickets:
// the first is confirmed, the second cancelled and refunded the fare less
// clerkage, once, though the chart is prepared three times at once (a
// retried or doubled job); the shard is CHARTED and takes no more holds.
func TestChartConfirmsWhatFitsAndRefundsTheRestOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{})
	shardID, date := s.DemoShard(t, 1, 5)
	users, err := seed.Users(ctx, s.Pool, seed.UsersSpec{Count: 4, Prefix: "ch", PasswordHash: "x", WalletRupees: 10000})
	teststack.Must(t, err, "users")
	book := func(i int, want string) uuid.UUID {
		h, err := s.Service.Hold(ctx, teststack.Caller(users[i]), holdReq(users[i], fmt.Sprintf("chart-%04d", i), date, "MMCT", "NDLS",
			pax(fmt.Sprintf("Passenger %c", 'A'+i), 30+i, "M")))
		if err != nil || h.Status != want {
			t.Fatalf("hold %d: %+v %v, want %s", i, h, err, want)
		}
		pay, err := s.Payments.Initiate(ctx, teststack.Caller(users[i]), payment.InitiateRequest{HoldID: h.HoldID, Method: payment.Wallet,
			IdempotencyKey: fmt.Sprintf("chart-pay-%04d", i)})
		if err != nil || pay.State != payment.Success {
			t.Fatalf("pay %d: %+v %v", i, pay, err)
		}
		return h.HoldID
	}
	seat := book(0, "HELD")
	w1, w2 := book(1, "WAITLIST_OFFERED"), book(2, "WAITLIST_OFFERED")
	// The confirmed berth is cancelled with no worker running: its
	// promotion job waits, and the chart does the promotion instead.
	_, err = s.Service.CancelBooking(ctx, users[0], seat, nil)
	teststack.Must(t, err, "cancel the seat")

	var wg sync.WaitGroup
	reps := make([]booking.ChartReport, 3)
	errs := make([]error, 3)
	for i := range 3 {
		wg.Go(func() { reps[i], errs[i] = s.Service.Chart(ctx, shardID) })
	}
	wg.Wait()
	charted := 0
	for i := range 3 {
		teststack.Must(t, errs[i], "chart %d", i)
		if !reps[i].Already {
			charted++
			if len(reps[i].Promoted) != 1 || len(reps[i].Cancelled) != 1 {
				t.Fatalf("chart: %+v, want one promoted and one cancelled", reps[i])
			}
		}
	}
	if charted != 1 {
		t.Fatalf("%d of 3 concurrent charts did the work, want 1", charted)
	}
	v1, err := s.Service.Status(ctx, users[1], w1)
	teststack.Must(t, err, "status 1")
	v2, err := s.Service.Status(ctx, users[2], w2)
	teststack.Must(t, err, "status 2")
	if v1.BookingStat != booking.BookingConfirmed || v2.BookingStat != booking.BookingCancelled {
		t.Fatalf("TQWL/1 %s, TQWL/2 %s; want CONFIRMED and CANCELLED", v1.BookingStat, v2.BookingStat)
	}
	shard, err := s.Service.Catalog().ByID(ctx, shardID)
	teststack.Must(t, err, "shard")
	var refunds int
	var amount int64
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*), coalesce(sum(r.amount_paise), 0) FROM refunds r JOIN payments p ON p.id = r.payment_id
		WHERE p.hold_id = $1`, w2).Scan(&refunds, &amount), "refunds")
	if want := v2.Fare.TotalPaise - shard.Fare.Clerkage; refunds != 1 || amount != want {
		t.Fatalf("%d refunds of Rs %s for the waitlisted ticket left at charting, want one of Rs %s", refunds, booking.Rupees(amount), booking.Rupees(want))
	}
	var others int
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM refunds r JOIN payments p ON p.id = r.payment_id WHERE p.hold_id <> $1`, w2).
		Scan(&others), "other refunds")
	if others != 0 {
		t.Fatalf("%d refunds for tickets that were not waitlisted at charting", others)
	}
	var state string
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT chart_state FROM inventory_shards WHERE id = $1`, shardID).Scan(&state), "chart state")
	if state != "CHARTED" {
		t.Fatalf("shard %s after charting", state)
	}
	s.CheckInvariants(t, shardID)
	// Frozen: no hold after the chart.
	s.Service.Catalog().Forget()
	if _, err := s.Service.Hold(ctx, teststack.Caller(users[3]), holdReq(users[3], "chart-late-1", date, "MMCT", "NDLS", pax("Late Comer", 40, "M"))); err == nil {
		t.Fatal("a hold was granted on a charted shard")
	}
}
