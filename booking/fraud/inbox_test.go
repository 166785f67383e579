package fraud

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestQueuedSignalsAreRecordedByTheDrain: the live path's Enqueue writes
// one inbox row per call, hashed (no raw ID number or instrument), leaving
// out an invalid signal and keeping the rest; nothing is in fraud_signals
// until Drain, which writes the hold's batch and then its confirmation's,
// so the hold's precise time and solve time stay and the confirmation adds
// the booking and instrument. The inbox is empty after.
func TestQueuedSignalsAreRecordedByTheDrain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	opens := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	uid, shard := b.fixture(t, opens, "queued@example.in", opens.Add(-240*time.Hour))
	hold, other := uuid.New(), uuid.New()
	heldAt := opens.Add(1234 * time.Millisecond)
	good := Signal{HoldID: hold, ShardID: shard, UserID: uid, DeviceID: "dev-q", IP: netip.MustParseAddr("10.9.8.7"), SolveMS: 456,
		HeldAt: heldAt, Passengers: []Passenger{{Name: "Ravi Shankar", Age: 52, IDType: "PAN", IDRef: "RAVIS4321Q"}}}
	bad := Signal{HoldID: other, ShardID: shard, UserID: uid, DeviceID: strings.Repeat("x", maxDeviceLen+1), HeldAt: heldAt}
	if err := b.rec.Enqueue(ctx, b.env.Pool, []Signal{bad, good}); err != nil {
		t.Fatal(err)
	}
	// The confirmation knows the hold only by its coarse commit time.
	if err := b.rec.Enqueue(ctx, b.env.Pool, []Signal{{HoldID: hold, BookingID: 91, ShardID: shard, UserID: uid, SolveMS: -1,
		HeldAt: heldAt.Add(40 * time.Millisecond), Instrument: "upi:ravi@okbank"}}); err != nil {
		t.Fatal(err)
	}
	var queued, leaks, recorded int
	if err := b.env.Pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE convert_from(rows, 'UTF8') ~* 'RAVIS4321Q|ravi@okbank'),
		(SELECT count(*) FROM fraud_signals) FROM fraud_signal_inbox`).Scan(&queued, &leaks, &recorded); err != nil {
		t.Fatal(err)
	}
	if queued != 2 || leaks != 0 || recorded != 0 {
		t.Fatalf("after Enqueue: %d inbox rows (want 2), %d with a raw ID number or instrument (want 0), %d signals recorded (want 0)",
			queued, leaks, recorded)
	}
	n, err := Drain(ctx, b.env.Pool)
	if err != nil || n != 2 {
		t.Fatalf("drain wrote %d (%v), want the hold's signal and its confirmation's", n, err)
	}
	var solve int
	var booking int64
	var at time.Time
	var device, instr string
	var pax, left, others int
	if err := b.env.Pool.QueryRow(ctx, `SELECT solve_ms, booking_id, held_at, device_id, instrument_fp,
			(SELECT count(*) FROM fraud_signal_passengers WHERE hold_id = $1), (SELECT count(*) FROM fraud_signal_inbox),
			(SELECT count(*) FROM fraud_signals WHERE hold_id = $2)
		FROM fraud_signals WHERE hold_id = $1`, hold, other).Scan(&solve, &booking, &at, &device, &instr, &pax, &left, &others); err != nil {
		t.Fatal(err)
	}
	if solve != 456 || booking != 91 || !at.Equal(heldAt) || device != "dev-q" || instr != b.rec.hash("instrument", "upi:ravi@okbank") || pax != 1 {
		t.Errorf("recorded: solve %d booking %d held %v (want %v) device %q instrument %q passengers %d", solve, booking, at, heldAt, device, instr, pax)
	}
	if left != 0 || others != 0 {
		t.Errorf("%d inbox rows left, %d signals of the invalid hold; want 0 and 0", left, others)
	}
	if n, err := Drain(ctx, b.env.Pool); err != nil || n != 0 {
		t.Errorf("a second drain wrote %d (%v), want 0", n, err)
	}
}
