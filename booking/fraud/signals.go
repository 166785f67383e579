package fraud

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/google/uuid"

	"tatkal/booking/db"
)

// Querier is a transaction or a pool.
type Querier = db.Querier

// Signal is what the live path knows about one hold. Account age, verified
// identity, the agent flag and the window are not passed: Record reads them
// from users and inventory_shards, so a caller cannot get them wrong.
type Signal struct {
	HoldID    uuid.UUID
	BookingID int64 // 0 until the hold is confirmed
	ShardID   int64
	UserID    int64
	DeviceID  string
	IP        netip.Addr // zero when unknown
	Attested  bool
	SolveMS   int // <0: no challenge was shown
	HeldAt    time.Time
	// Instrument is the raw payment instrument (UPI address, card
	// fingerprint from the gateway, net-banking account); Record stores only
	// its keyed hash. Empty until payment.
	Instrument string
	Passengers []Passenger
}

// Passenger as the hold carries it; Record normalises and hashes it.
type Passenger struct {
	Name   string
	Age    int
	IDType string
	IDRef  string
}

// Recorder writes signals. Key keys the hashes of ID numbers and payment
// instruments: both are low-entropy, so a plain hash could be reversed.
type Recorder struct {
	Key []byte
	// BenchDiscard, while set, makes Record write nothing and the live
	// path skip its signals: only `tatkal bench` sets it (--no-signals, or
	// switching it on and off within one run with --signals-ab), to measure
	// the hold path without recording beside with it. The passenger limit,
	// which keys on Key, still runs. Nil in serve and worker.
	BenchDiscard *atomic.Bool
}

// Discarding reports whether the bench has switched recording off.
func (r Recorder) Discarding() bool { return r.BenchDiscard != nil && r.BenchDiscard.Load() }

// Caps of one batch and one field, so a caller's bug cannot write unbounded rows.
const (
	maxBatch      = 5000
	maxPassengers = 6
	maxDeviceLen  = 128
)

// ErrInvalid marks a batch Record refused; nothing was written.
var ErrInvalid = errors.New("fraud: invalid signal")

// Record upserts a batch of signals in two statements, whatever the batch
// size. Recording the same hold again (at confirmation, with the booking
// and instrument) fills in what was empty and keeps the rest. A batch with
// any invalid signal is refused whole. The live path does not call it: it
// Enqueues, and Drain records.
func (r Recorder) Record(ctx context.Context, q Querier, sigs []Signal) error {
	if len(sigs) == 0 || r.Discarding() {
		return nil
	}
	b, err := r.prepare(sigs, nil)
	if err != nil {
		return err
	}
	return b.write(ctx, q)
}

// RecordRefused writes attempts the passenger limit refused (each Signal's
// HoldID the id the refused hold would have had; no booking, no
// instrument), as the drain writes those the group commit queued: the
// direct path's (Generate). A batch with any invalid attempt is refused whole.
func (r Recorder) RecordRefused(ctx context.Context, q Querier, attempts []Signal) error {
	if len(attempts) == 0 || r.Discarding() {
		return nil
	}
	b, err := r.prepare(attempts, nil)
	if err != nil {
		return err
	}
	return b.writeRefused(ctx, q)
}

// batch is signals as the columns they are written in: validated,
// normalised and hashed, so that it may wait in the inbox without a raw ID
// number or payment instrument in it.
type batch struct {
	Holds    []uuid.UUID `json:"hold"`
	Bookings []*int64    `json:"booking"`
	Shards   []int64     `json:"shard"`
	Users    []int64     `json:"user"`
	Devices  []string    `json:"device"`
	IPs      []*string   `json:"ip"`
	Attested []bool      `json:"attested"`
	Solves   []*int32    `json:"solve"`
	Helds    []time.Time `json:"held"`
	Instrs   []string    `json:"instrument"`

	PHold []uuid.UUID `json:"p_hold"`
	PSeq  []int32     `json:"p_seq"`
	PName []string    `json:"p_name"`
	PAge  []int32     `json:"p_age"`
	PID   []string    `json:"p_id"`

	// Refused are the attempts the passenger limit refused in the same
	// group commit, in the same columns (Holds: the ids the refused holds
	// would have had; no booking nor instrument). They ride the holds'
	// inbox row and are written to fraud_refused_attempts, not as signals.
	Refused *batch `json:"refused,omitempty"`
}

// empty reports whether b has nothing to write.
func (b batch) empty() bool {
	return len(b.Holds) == 0 && (b.Refused == nil || len(b.Refused.Holds) == 0)
}

// prepare validates and hashes sigs. With skip nil an invalid signal
// refuses the batch; otherwise skip is told of it and the rest go on.
func (r Recorder) prepare(sigs []Signal, skip func(Signal, error)) (batch, error) {
	var b batch
	if len(sigs) > maxBatch {
		return b, fmt.Errorf("%w: batch of %d exceeds %d", ErrInvalid, len(sigs), maxBatch)
	}
	if len(r.Key) < 16 {
		return b, fmt.Errorf("fraud record: hashing key shorter than 16 bytes")
	}
	seen := make(map[uuid.UUID]bool, len(sigs))
	for i, s := range sigs {
		if err := r.add(&b, s, seen); err != nil {
			if skip == nil {
				return batch{}, fmt.Errorf("%w: signal %d: %v", ErrInvalid, i, err)
			}
			skip(s, err)
		}
	}
	return b, nil
}

// add appends one signal to b, or says why it is invalid and leaves b as it was.
func (r Recorder) add(b *batch, s Signal, seen map[uuid.UUID]bool) error {
	switch {
	case s.HoldID == uuid.Nil:
		return errors.New("no hold id")
	case seen[s.HoldID]:
		return fmt.Errorf("hold %s twice in one batch", s.HoldID)
	case s.ShardID <= 0 || s.UserID <= 0:
		return fmt.Errorf("hold %s without shard or user", s.HoldID)
	case len(s.DeviceID) > maxDeviceLen:
		return fmt.Errorf("hold %s device id longer than %d", s.HoldID, maxDeviceLen)
	case s.HeldAt.IsZero():
		return fmt.Errorf("hold %s without held_at", s.HoldID)
	case len(s.Passengers) > maxPassengers:
		return fmt.Errorf("hold %s has %d passengers", s.HoldID, len(s.Passengers))
	}
	names := make([]string, len(s.Passengers))
	for j, p := range s.Passengers {
		names[j] = NormaliseName(p.Name)
		if names[j] == "" || len(names[j]) > 60 || p.Age < 0 || p.Age > 125 {
			return fmt.Errorf("hold %s passenger %d", s.HoldID, j)
		}
	}
	seen[s.HoldID] = true
	var booking *int64
	if s.BookingID > 0 {
		booking = &s.BookingID
	}
	var ip *string
	if s.IP.IsValid() {
		v := s.IP.Unmap().String()
		ip = &v
	}
	var solve *int32
	if s.SolveMS >= 0 {
		v := int32(min(s.SolveMS, 1<<30))
		solve = &v
	}
	instr := ""
	if s.Instrument != "" {
		instr = r.hash("instrument", strings.ToLower(strings.TrimSpace(s.Instrument)))
	}
	b.Holds, b.Bookings, b.Shards, b.Users = append(b.Holds, s.HoldID), append(b.Bookings, booking), append(b.Shards, s.ShardID), append(b.Users, s.UserID)
	b.Devices, b.IPs, b.Attested, b.Solves = append(b.Devices, s.DeviceID), append(b.IPs, ip), append(b.Attested, s.Attested), append(b.Solves, solve)
	b.Helds, b.Instrs = append(b.Helds, s.HeldAt), append(b.Instrs, instr)
	for j, p := range s.Passengers {
		b.PHold, b.PSeq, b.PName = append(b.PHold, s.HoldID), append(b.PSeq, int32(j)), append(b.PName, names[j])
		b.PAge, b.PID = append(b.PAge, int32(p.Age)), append(b.PID, r.idHash(p.IDType, p.IDRef))
	}
	return nil
}

// merge appends o to b.
func (b *batch) merge(o batch) {
	b.Holds, b.Bookings, b.Shards, b.Users = append(b.Holds, o.Holds...), append(b.Bookings, o.Bookings...), append(b.Shards, o.Shards...), append(b.Users, o.Users...)
	b.Devices, b.IPs, b.Attested, b.Solves = append(b.Devices, o.Devices...), append(b.IPs, o.IPs...), append(b.Attested, o.Attested...), append(b.Solves, o.Solves...)
	b.Helds, b.Instrs = append(b.Helds, o.Helds...), append(b.Instrs, o.Instrs...)
	b.PHold, b.PSeq, b.PName, b.PAge, b.PID = append(b.PHold, o.PHold...), append(b.PSeq, o.PSeq...), append(b.PName, o.PName...), append(b.PAge, o.PAge...), append(b.PID, o.PID...)
	if o.Refused != nil {
		if b.Refused == nil {
			b.Refused = &batch{}
		}
		b.Refused.merge(*o.Refused)
	}
}

// write upserts b: the signals, then their passengers.
func (b batch) write(ctx context.Context, q Querier) error {
	if b.Refused != nil {
		if err := b.Refused.writeRefused(ctx, q); err != nil {
			return err
		}
	}
	n := len(b.Holds)
	if n == 0 {
		return nil
	}
	// Account facts and the window come from the database; a hold whose
	// user or shard does not exist is dropped by the join and reported.
	tag, err := q.Exec(ctx, `
		INSERT INTO fraud_signals (hold_id, booking_id, shard_id, user_id, window_opens_at,
			account_created_at, account_age_days, identity_verified, agent,
			device_id, ip, ip_net24, attested, solve_ms, held_at, since_open_ms, instrument_fp)
		SELECT v.hold_id, v.booking_id, v.shard_id, v.user_id, s.window_opens_at,
			u.created_at, GREATEST(0, floor(extract(epoch FROM v.held_at - u.created_at) / 86400))::int,
			u.id_verification_status = 'VERIFIED', u.user_type = 'AGENT',
			v.device_id, v.ip::inet, network(set_masklen(v.ip::inet, CASE WHEN family(v.ip::inet) = 6 THEN 48 ELSE 24 END))::cidr, v.attested, v.solve_ms,
			v.held_at, floor(extract(epoch FROM v.held_at - s.window_opens_at) * 1000)::bigint, v.instrument_fp
		FROM unnest($1::uuid[], $2::bigint[], $3::bigint[], $4::bigint[], $5::text[], $6::text[],
		            $7::bool[], $8::int[], $9::timestamptz[], $10::text[])
		     AS v(hold_id, booking_id, shard_id, user_id, device_id, ip, attested, solve_ms, held_at, instrument_fp)
		JOIN users u ON u.id = v.user_id
		JOIN inventory_shards s ON s.id = v.shard_id
		ON CONFLICT (hold_id) DO UPDATE SET
			booking_id    = COALESCE(EXCLUDED.booking_id, fraud_signals.booking_id),
			instrument_fp = CASE WHEN EXCLUDED.instrument_fp <> '' THEN EXCLUDED.instrument_fp ELSE fraud_signals.instrument_fp END,
			device_id     = CASE WHEN fraud_signals.device_id = '' THEN EXCLUDED.device_id ELSE fraud_signals.device_id END,
			ip            = COALESCE(fraud_signals.ip, EXCLUDED.ip),
			ip_net24      = COALESCE(fraud_signals.ip_net24, EXCLUDED.ip_net24),
			solve_ms      = COALESCE(fraud_signals.solve_ms, EXCLUDED.solve_ms)`,
		b.Holds, b.Bookings, b.Shards, b.Users, b.Devices, b.IPs, b.Attested, b.Solves, b.Helds, b.Instrs)
	if err != nil {
		return fmt.Errorf("fraud record signals: %w", err)
	}
	if len(b.PHold) > 0 {
		// Passengers are fixed at hold time: a second recording keeps the
		// first. Those of a signal the join dropped are left out with it.
		if _, err := q.Exec(ctx, `
			INSERT INTO fraud_signal_passengers (hold_id, seq, name_norm, age, id_hash)
			SELECT p.* FROM unnest($1::uuid[], $2::int[], $3::text[], $4::int[], $5::text[]) AS p(hold_id, seq, name_norm, age, id_hash)
			WHERE EXISTS (SELECT 1 FROM fraud_signals f WHERE f.hold_id = p.hold_id)
			ON CONFLICT (hold_id, seq) DO NOTHING`, b.PHold, b.PSeq, b.PName, b.PAge, b.PID); err != nil {
			return fmt.Errorf("fraud record passengers: %w", err)
		}
	}
	if int(tag.RowsAffected()) != n {
		return fmt.Errorf("%w: %d of %d signals name an unknown user or shard", ErrInvalid, n-int(tag.RowsAffected()), n)
	}
	return nil
}

// writeRefused inserts b as refused attempts, each with its passengers
// gathered into arrays. An attempt already written (a drain retried) is
// kept as it was.
func (b batch) writeRefused(ctx context.Context, q Querier) error {
	n := len(b.Holds)
	if n == 0 {
		return nil
	}
	tag, err := q.Exec(ctx, `
		WITH p AS (
			SELECT hold_id, array_agg(name ORDER BY seq) AS names, array_agg(age ORDER BY seq) AS ages,
			       array_agg(id ORDER BY seq) AS ids
			FROM unnest($9::uuid[], $10::int[], $11::text[], $12::int[], $13::text[]) AS p(hold_id, seq, name, age, id)
			GROUP BY hold_id
		)
		INSERT INTO fraud_refused_attempts (attempt_id, shard_id, user_id, window_opens_at, device_id, ip, ip_net24,
			attested, solve_ms, attempted_at, since_open_ms, name_norms, ages, id_hashes)
		SELECT v.id, v.shard_id, v.user_id, s.window_opens_at, v.device_id, v.ip::inet,
			network(set_masklen(v.ip::inet, CASE WHEN family(v.ip::inet) = 6 THEN 48 ELSE 24 END))::cidr,
			v.attested, v.solve_ms, v.at, floor(extract(epoch FROM v.at - s.window_opens_at) * 1000)::bigint,
			p.names, p.ages, p.ids
		FROM unnest($1::uuid[], $2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::bool[], $7::int[], $8::timestamptz[])
		     AS v(id, shard_id, user_id, device_id, ip, attested, solve_ms, at)
		JOIN p ON p.hold_id = v.id
		JOIN users u ON u.id = v.user_id
		JOIN inventory_shards s ON s.id = v.shard_id
		ON CONFLICT (attempt_id) DO NOTHING`,
		b.Holds, b.Shards, b.Users, b.Devices, b.IPs, b.Attested, b.Solves, b.Helds, b.PHold, b.PSeq, b.PName, b.PAge, b.PID)
	if err != nil {
		return fmt.Errorf("fraud record refused attempts: %w", err)
	}
	if tag.RowsAffected() < int64(n) {
		// Dropped by a join (no passengers, an unknown user or shard) or
		// already written: worth a line, never an error.
		slog.WarnContext(ctx, "fraud refused attempts not all recorded", "attempts", n, "written", tag.RowsAffected())
	}
	return nil
}

// NormaliseName folds a passenger name to lower-case letters separated by
// single spaces, so "  Ramesh  KUMAR." and "ramesh kumar" match.
func NormaliseName(s string) string {
	var b strings.Builder
	space := false
	for _, r := range strings.ToLower(s) {
		switch {
		case unicode.IsLetter(r) || unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Mc, r):
			if space && b.Len() > 0 {
				b.WriteByte(' ')
			}
			space = false
			b.WriteRune(r)
		default:
			space = true
		}
	}
	return b.String()
}

func (r Recorder) idHash(idType, idRef string) string {
	ref := strings.ToUpper(strings.Map(func(c rune) rune {
		if unicode.IsLetter(c) || unicode.IsDigit(c) {
			return c
		}
		return -1
	}, idRef))
	if ref == "" {
		return ""
	}
	return r.hash("id", strings.ToUpper(strings.TrimSpace(idType))+"|"+ref)
}

func (r Recorder) hash(domain, v string) string {
	m := hmac.New(sha256.New, r.Key)
	m.Write([]byte(domain))
	m.Write([]byte{0})
	m.Write([]byte(v))
	return hex.EncodeToString(m.Sum(nil)[:16])
}

// PassengerKeys are the keys one passenger is known by across accounts
// for the live limit: the keyed hash of the ID number when there is one,
// and always the keyed hash of normalised name and age, so that dropping
// the ID or changing its type does not make a new passenger.
func (r Recorder) PassengerKeys(p Passenger) []string {
	keys := make([]string, 0, 2)
	if id := r.idHash(p.IDType, p.IDRef); id != "" {
		keys = append(keys, "i"+id)
	}
	if name := NormaliseName(p.Name); name != "" {
		keys = append(keys, "n"+r.hash("name-age", fmt.Sprintf("%s|%d", name, p.Age)))
	}
	return keys
}

// NormalisePhone folds an Indian mobile number to its ten digits ("+91
// 98765-43210", "09876543210" and "9876543210" are one phone), or "" when
// it is not one.
func NormalisePhone(s string) string {
	d := strings.Map(func(c rune) rune {
		if c >= '0' && c <= '9' {
			return c
		}
		if c == '+' || c == '-' || c == ' ' || c == '(' || c == ')' {
			return -1
		}
		return 'x'
	}, s)
	switch {
	case len(d) == 12 && strings.HasPrefix(d, "91"):
		d = d[2:]
	case len(d) == 11 && d[0] == '0':
		d = d[1:]
	}
	if len(d) != 10 || d[0] < '6' || d[0] > '9' || strings.ContainsRune(d, 'x') {
		return ""
	}
	return d
}

// PhoneHash is the keyed hash of a normalised phone number, what
// users.phone_hash holds: the per-person cap counts the verified accounts
// of one phone. "" when the phone is not a mobile number or the key is short.
func (r Recorder) PhoneHash(phone string) string {
	p := NormalisePhone(phone)
	if p == "" || len(r.Key) < 16 {
		return ""
	}
	return r.hash("phone", p)
}

// IDIndex is the keyed hash one ID number is known by, in the fraud
// signals and in the blind index of the tables that keep the number
// sealed (booking/pii); "" when there is no number.
func (r Recorder) IDIndex(idType, idRef string) string { return r.idHash(idType, idRef) }
