// Package fraud records the signals of every hold and booking, clusters the
// accounts behind them after each window, and (later) carries the review
// decisions on those clusters.
package fraud

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"strings"
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
	// BenchDiscard makes Record write nothing, and the live path skip its
	// signals: only `tatkal bench --no-signals` sets it, to measure the
	// hold path without recording beside with it. The passenger limit,
	// which keys on Key, still runs. Never set in serve or worker.
	BenchDiscard bool
}

// Caps of one batch and one field, so a caller's bug cannot write unbounded rows.
const (
	maxBatch      = 5000
	maxPassengers = 6
	maxDeviceLen  = 128
)

// ErrInvalid marks a batch Record refused; nothing was written.
var ErrInvalid = errors.New("fraud: invalid signal")

// Record upserts a batch of signals in two statements, whatever the batch
// size: meant for the group committer or a follow-up job, never one call per
// hold. Recording the same hold again (at confirmation, with the booking
// and instrument) fills in what was empty and keeps the rest. A batch with
// any invalid signal is refused whole.
func (r Recorder) Record(ctx context.Context, q Querier, sigs []Signal) error {
	if len(sigs) == 0 || r.BenchDiscard {
		return nil
	}
	if len(sigs) > maxBatch {
		return fmt.Errorf("%w: batch of %d exceeds %d", ErrInvalid, len(sigs), maxBatch)
	}
	if len(r.Key) < 16 {
		return fmt.Errorf("fraud record: hashing key shorter than 16 bytes")
	}
	n := len(sigs)
	var (
		holds    = make([]uuid.UUID, n)
		bookings = make([]*int64, n)
		shards   = make([]int64, n)
		users    = make([]int64, n)
		devices  = make([]string, n)
		ips      = make([]*string, n)
		attested = make([]bool, n)
		solves   = make([]*int32, n)
		helds    = make([]time.Time, n)
		instrs   = make([]string, n)

		pHold []uuid.UUID
		pSeq  []int32
		pName []string
		pAge  []int32
		pID   []string
	)
	seen := make(map[uuid.UUID]bool, n)
	for i, s := range sigs {
		switch {
		case s.HoldID == uuid.Nil:
			return fmt.Errorf("%w: signal %d has no hold id", ErrInvalid, i)
		case seen[s.HoldID]:
			return fmt.Errorf("%w: hold %s twice in one batch", ErrInvalid, s.HoldID)
		case s.ShardID <= 0 || s.UserID <= 0:
			return fmt.Errorf("%w: hold %s without shard or user", ErrInvalid, s.HoldID)
		case len(s.DeviceID) > maxDeviceLen:
			return fmt.Errorf("%w: hold %s device id longer than %d", ErrInvalid, s.HoldID, maxDeviceLen)
		case s.HeldAt.IsZero():
			return fmt.Errorf("%w: hold %s without held_at", ErrInvalid, s.HoldID)
		case len(s.Passengers) > maxPassengers:
			return fmt.Errorf("%w: hold %s has %d passengers", ErrInvalid, s.HoldID, len(s.Passengers))
		}
		seen[s.HoldID] = true
		holds[i], shards[i], users[i], devices[i], attested[i], helds[i] = s.HoldID, s.ShardID, s.UserID, s.DeviceID, s.Attested, s.HeldAt
		if s.BookingID > 0 {
			bookings[i] = &sigs[i].BookingID
		}
		if s.IP.IsValid() {
			ip := s.IP.Unmap().String()
			ips[i] = &ip
		}
		if s.SolveMS >= 0 {
			v := int32(min(s.SolveMS, 1<<30))
			solves[i] = &v
		}
		if s.Instrument != "" {
			instrs[i] = r.hash("instrument", strings.ToLower(strings.TrimSpace(s.Instrument)))
		}
		for j, p := range s.Passengers {
			name := NormaliseName(p.Name)
			if name == "" || len(name) > 60 || p.Age < 0 || p.Age > 125 {
				return fmt.Errorf("%w: hold %s passenger %d", ErrInvalid, s.HoldID, j)
			}
			pHold = append(pHold, s.HoldID)
			pSeq = append(pSeq, int32(j))
			pName = append(pName, name)
			pAge = append(pAge, int32(p.Age))
			pID = append(pID, r.idHash(p.IDType, p.IDRef))
		}
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
		holds, bookings, shards, users, devices, ips, attested, solves, helds, instrs)
	if err != nil {
		return fmt.Errorf("fraud record signals: %w", err)
	}
	if int(tag.RowsAffected()) != n {
		return fmt.Errorf("%w: %d of %d signals name an unknown user or shard", ErrInvalid, n-int(tag.RowsAffected()), n)
	}
	if len(pHold) > 0 {
		// Passengers are fixed at hold time: a second recording keeps the first.
		if _, err := q.Exec(ctx, `
			INSERT INTO fraud_signal_passengers (hold_id, seq, name_norm, age, id_hash)
			SELECT * FROM unnest($1::uuid[], $2::int[], $3::text[], $4::int[], $5::text[])
			ON CONFLICT (hold_id, seq) DO NOTHING`, pHold, pSeq, pName, pAge, pID); err != nil {
			return fmt.Errorf("fraud record passengers: %w", err)
		}
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
