package booking_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/uuid"

	"tatkal/booking"
	"tatkal/booking/fraud"
	"tatkal/booking/lab/teststack"
)

// TestBadSignalNeverFailsAHold: a hold whose signal is refused (a device
// id past the column's bound) is durable all the same; a good hold's
// signal is recorded, and its confirmation adds the booking to it.
func TestBadSignalNeverFailsAHold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{})
	_, date := s.DemoShard(t, 20, 0)
	u := s.Users(t, "sig", 2)
	hold := func(user int64, key string, cs booking.ClientSignals) uuid.UUID {
		res, err := s.Service.Hold(ctx, teststack.Caller(user), booking.HoldRequest{UserID: user, IdempotencyKey: key,
			Train: "12951", Date: date, Class: "3A", Quota: "TQ", From: "MMCT", To: "NDLS",
			Passengers: []booking.Passenger{{Name: "Asha Rao", Age: 30, Gender: "F", IDType: "PAN", IDRef: "ASHAR1234K"}}, Client: cs})
		if err != nil || res.Status != "HELD" {
			t.Fatalf("hold %s: %+v %v", key, res, err)
		}
		return res.HoldID
	}
	bad := hold(u[0], "sig-bad-0001", booking.ClientSignals{DeviceID: strings.Repeat("d", 200), SolveMS: -1})
	good := hold(u[1], "sig-good-0001", booking.ClientSignals{DeviceID: "dev-1", IP: netip.MustParseAddr("10.1.2.3"), SolveMS: 812})
	drain := func() {
		if _, err := fraud.Drain(ctx, s.Pool); err != nil {
			t.Fatal(err)
		}
	}
	drain()
	var n int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM holds WHERE id = ANY($1) AND state = 'HELD'`, []uuid.UUID{bad, good}).Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d of 2 holds durable (err %v)", n, err)
	}
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM fraud_signals WHERE hold_id = $1`, bad).Scan(&n); err != nil || n != 0 {
		t.Errorf("the refused signal left %d rows (err %v)", n, err)
	}
	var net24, dev string
	var solve int
	if err := s.Pool.QueryRow(ctx, `SELECT ip_net24::text, device_id, solve_ms FROM fraud_signals WHERE hold_id = $1`, good).Scan(&net24, &dev, &solve); err != nil {
		t.Fatalf("signal of the good hold: %v", err)
	}
	if net24 != "10.1.2.0/24" || dev != "dev-1" || solve != 812 {
		t.Errorf("signal: %s %s %d", net24, dev, solve)
	}
	if _, err := s.Service.Confirm(ctx, good); err != nil {
		t.Fatal(err)
	}
	drain()
	var booked bool
	if err := s.Pool.QueryRow(ctx, `SELECT booking_id = (SELECT id FROM bookings WHERE hold_id = $1) FROM fraud_signals WHERE hold_id = $1`, good).Scan(&booked); err != nil || !booked {
		t.Errorf("confirmation did not add the booking to the signal (err %v)", err)
	}
}
