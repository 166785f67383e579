package fraud

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
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

// TestRefusedAttemptsRideTheInbox: the group commit's attempts the passenger
// limit refused ride its inbox row beside the holds' signals (one row, no
// statement of their own), hashed like them; the drain writes them to
// fraud_refused_attempts, not as signals; and clustering links the account
// that tried with the accounts holding that passenger (by ID number), but
// not with a stranger of the same name and age.
func TestRefusedAttemptsRideTheInbox(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	opens := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	holder, shard := b.fixture(t, opens, "holder@example.in", opens.Add(-240*time.Hour))
	user := func(login string) int64 {
		var id int64
		if err := b.env.Pool.QueryRow(ctx, `INSERT INTO users (login, password_hash) VALUES ($1, 'x') RETURNING id`, login).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	holder2, tout, homonym := user("holder2@example.in"), user("tout@example.in"), user("homonym@example.in")
	customer := Passenger{Name: "Lata Menon", Age: 61, IDType: "AADHAAR", IDRef: "234567890123"}
	sig := func(uid int64, ms int, pax ...Passenger) Signal {
		return Signal{HoldID: uuid.New(), ShardID: shard, UserID: uid, DeviceID: fmt.Sprintf("dev-%d", uid), IP: netipFrom(int(uid % 200)),
			SolveMS: 2000 + ms, HeldAt: opens.Add(time.Duration(ms) * time.Millisecond), Passengers: pax}
	}
	own := func(n int) Passenger {
		return Passenger{Name: fmt.Sprintf("Own Person %c", 'a'+n), Age: 30 + n, IDType: "AADHAAR", IDRef: fmt.Sprintf("3456789%05d", n)}
	}
	held := []Signal{sig(holder, 1000, customer), sig(holder2, 2000, customer, own(1)), sig(tout, 9000, own(2)),
		// a stranger of the customer's name and age: another person
		sig(homonym, 9500, Passenger{Name: "LATA menon", Age: 61, IDType: "AADHAAR", IDRef: "987654321098"})}
	tried := sig(tout, 8990, own(3), customer)
	batch := &pgx.Batch{}
	if err := b.rec.QueueInbox(ctx, batch, held, []Signal{tried}); err != nil {
		t.Fatal(err)
	}
	if batch.Len() != 1 {
		t.Fatalf("%d statements queued, want the one inbox row", batch.Len())
	}
	if err := b.env.Pool.SendBatch(ctx, batch).Close(); err != nil {
		t.Fatal(err)
	}
	var leaks int
	if err := b.env.Pool.QueryRow(ctx, `SELECT count(*) FROM fraud_signal_inbox WHERE convert_from(rows, 'UTF8') ~ '234567890123'`).Scan(&leaks); err != nil || leaks != 0 {
		t.Fatalf("%d inbox rows with a raw ID number (%v)", leaks, err)
	}
	if n, err := Drain(ctx, b.env.Pool); err != nil || n != len(held) {
		t.Fatalf("drain wrote %d signals (%v), want %d", n, err, len(held))
	}
	var attempts, sigs int
	var uid int64
	var names []string
	var ids []string
	var since int64
	if err := b.env.Pool.QueryRow(ctx, `SELECT count(*) OVER (), user_id, name_norms, id_hashes, since_open_ms,
		(SELECT count(*) FROM fraud_signals WHERE hold_id = a.attempt_id) FROM fraud_refused_attempts a`).Scan(&attempts, &uid, &names, &ids, &since, &sigs); err != nil {
		t.Fatal(err)
	}
	if attempts != 1 || uid != tout || len(names) != 2 || names[1] != "lata menon" || ids[1] != b.rec.idHash("AADHAAR", customer.IDRef) || since != 8990 || sigs != 0 {
		t.Errorf("refused attempts %d: user %d (want %d) names %v ids %v since %d ms, %d signals of it", attempts, uid, tout, names, ids, since, sigs)
	}
	cfg := DefaultConfig()
	cfg.EdgeThreshold = 0.01
	if _, err := (Clusterer{Config: cfg}).Run(ctx, b.env.Pool, opens); err != nil {
		t.Fatal(err)
	}
	rows, err := b.env.Pool.Query(ctx, `SELECT user_a, user_b FROM fraud_edges, jsonb_array_elements(evidence) e
		WHERE window_opens_at = $1 AND e->>'kind' = $2 ORDER BY 1, 2`, opens, KindRefusedPassenger)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ A, B int64 }])
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ A, B int64 }{{min(holder, tout), max(holder, tout)}, {min(holder2, tout), max(holder2, tout)}}
	if !slices.Equal(got, want) {
		t.Errorf("refused-passenger edges %v, want the tout with each holder %v (not with the homonym %d)", got, want, homonym)
	}
}
