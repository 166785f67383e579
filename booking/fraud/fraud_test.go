package fraud

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/google/uuid"

	"tatkal/booking/lab/testenv"
)

var testKey = []byte("fraud-test-key-0123456789abcdef")

type bundle struct {
	env *testenv.Env
	rec Recorder
}

func setup(t testing.TB) bundle {
	t.Helper()
	return bundle{env: testenv.New(t), rec: Recorder{Key: testKey}}
}

// fixture makes one account and one shard whose window opened at opens.
func (b bundle) fixture(t testing.TB, opens time.Time, login string, created time.Time) (userID, shardID int64) {
	t.Helper()
	ctx := context.Background()
	g, err := Generate(ctx, b.env.Pool, b.rec, Population{OpensAt: opens, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.env.Pool.QueryRow(ctx, `INSERT INTO users (login, password_hash, created_at, user_type, id_verification_status)
		VALUES ($1, 'x', $2, 'AGENT', 'VERIFIED') RETURNING id`, login, created).Scan(&userID); err != nil {
		t.Fatal(err)
	}
	return userID, g.ShardID
}

func TestRecordSignals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	opens := time.Date(2026, 12, 2, 10, 0, 0, 0, time.FixedZone("IST", 5*3600+1800))
	uid, shard := b.fixture(t, opens, "asha@example.in", opens.Add(-72*time.Hour-time.Minute))
	hold := uuid.New()
	sig := Signal{
		HoldID: hold, ShardID: shard, UserID: uid, DeviceID: "dev-1", IP: netip.MustParseAddr("::ffff:10.1.2.77"),
		Attested: true, SolveMS: 1234, HeldAt: opens.Add(2345 * time.Millisecond),
		Passengers: []Passenger{{Name: "  Asha  DEVI. ", Age: 41, IDType: "aadhaar", IDRef: "1234 5678 9012"}},
	}
	if err := b.rec.Record(ctx, b.env.Pool, []Signal{sig}); err != nil {
		t.Fatal(err)
	}
	// Confirmation records the hold again with booking and instrument; what
	// the first recording had stays.
	again := Signal{HoldID: hold, ShardID: shard, UserID: uid, HeldAt: sig.HeldAt, SolveMS: -1, BookingID: 77,
		Instrument: " Asha@OKbank ", Passengers: []Passenger{{Name: "Someone Else", Age: 9}}}
	if err := b.rec.Record(ctx, b.env.Pool, []Signal{again}); err != nil {
		t.Fatal(err)
	}
	var (
		ageDays, solve           int
		sinceOpen, booking       int64
		verified, agent, attest  bool
		device, net24, ip, instr string
		win                      time.Time
	)
	if err := b.env.Pool.QueryRow(ctx, `SELECT account_age_days, solve_ms, since_open_ms, booking_id, identity_verified, agent, attested,
			device_id, ip_net24::text, host(ip), instrument_fp, window_opens_at FROM fraud_signals WHERE hold_id = $1`, hold).
		Scan(&ageDays, &solve, &sinceOpen, &booking, &verified, &agent, &attest, &device, &net24, &ip, &instr, &win); err != nil {
		t.Fatal(err)
	}
	if ageDays != 3 || solve != 1234 || sinceOpen != 2345 || booking != 77 || !verified || !agent || !attest ||
		device != "dev-1" || net24 != "10.1.2.0/24" || ip != "10.1.2.77" || !win.Equal(opens) {
		t.Errorf("signal = age %d solve %d since %d booking %d verified %v agent %v attested %v device %q net %q ip %q window %v",
			ageDays, solve, sinceOpen, booking, verified, agent, attest, device, net24, ip, win)
	}
	if instr != b.rec.hash("instrument", "asha@okbank") || len(instr) != 32 {
		t.Errorf("instrument_fp = %q, want the keyed hash of the trimmed, lower-cased address", instr)
	}
	var name, idHash string
	var n int
	if err := b.env.Pool.QueryRow(ctx, `SELECT min(name_norm), min(id_hash), count(*) FROM fraud_signal_passengers WHERE hold_id = $1`, hold).
		Scan(&name, &idHash, &n); err != nil {
		t.Fatal(err)
	}
	if n != 1 || name != "asha devi" || idHash != b.rec.idHash("AADHAAR", "123456789012") || idHash == "" {
		t.Errorf("passengers = %d, %q, %q", n, name, idHash)
	}

	// Bad batches are refused whole and write nothing.
	good := Signal{HoldID: uuid.New(), ShardID: shard, UserID: uid, HeldAt: opens}
	for name, bad := range map[string]Signal{
		"no hold":      {ShardID: shard, UserID: uid, HeldAt: opens},
		"unknown user": {HoldID: uuid.New(), ShardID: shard, UserID: 1 << 40, HeldAt: opens},
		"no time":      {HoldID: uuid.New(), ShardID: shard, UserID: uid},
		"passenger":    {HoldID: uuid.New(), ShardID: shard, UserID: uid, HeldAt: opens, Passengers: []Passenger{{Name: "...", Age: 3}}},
		"duplicate":    good,
	} {
		tx, err := b.env.Pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		err = b.rec.Record(ctx, tx, []Signal{good, bad})
		tx.Rollback(ctx) //nolint:errcheck // the caller's transaction is what makes a refused batch write nothing
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
	var total int
	if err := b.env.Pool.QueryRow(ctx, `SELECT count(*) FROM fraud_signals`).Scan(&total); err != nil || total != 1 {
		t.Errorf("signals after refused batches = %d (%v), want 1", total, err)
	}
	if err := (Recorder{Key: []byte("short")}).Record(ctx, b.env.Pool, []Signal{good}); err == nil {
		t.Error("a short hashing key was accepted")
	}
}

func newHoldID() uuid.UUID { return uuid.New() }

func netipFrom(i int) netip.Addr { return netip.AddrFrom4([4]byte{100, 64, byte(i), 9}) }
