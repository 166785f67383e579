package inventory

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"tatkal/booking/db"
)

// ShardLockClass is the first key of the advisory locks that order shard
// writers (shared) against a rebuild (exclusive), so a rebuild reads every
// write that committed under the old epoch and none commits after it.
const ShardLockClass = 4242

// LockShardShared takes the writer's side of the shard lock in tx.
func LockShardShared(ctx context.Context, tx pgx.Tx, shardID int64) error {
	if _, err := tx.Exec(ctx, lockSharedSQL, ShardLockClass, int32(shardID)); err != nil {
		return fmt.Errorf("lock shard %d: %w", shardID, err)
	}
	return nil
}

// QueueLockShardShared is LockShardShared as one statement of a batch sent
// in the writer's transaction, before its writes; the batch's Close names
// the shard in its error.
func QueueLockShardShared(b *pgx.Batch, shardID int64) {
	b.Queue(lockSharedSQL, ShardLockClass, int32(shardID)).Fn = func(br pgx.BatchResults) error {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("lock shard %d: %w", shardID, err)
		}
		return nil
	}
}

const lockSharedSQL = "SELECT pg_advisory_xact_lock_shared($1, $2)"

// HoldRecord is one hold as the Redis state keeps it.
type HoldRecord struct {
	ID         string
	State      byte // H held, W waitlist offer held, R retaking (see HoldRequest.Retake), C confirmed, X waitlisted booking
	UserID     int64
	From, To   int
	ExpiresMs  int64
	Berths     []int
	WaitlistNo int
	Passengers int
}

func (h HoldRecord) encode() string {
	b := make([]string, len(h.Berths))
	for i, x := range h.Berths {
		b[i] = strconv.Itoa(x)
	}
	wl := ""
	if h.WaitlistNo > 0 {
		wl = strconv.Itoa(h.WaitlistNo)
	}
	return strings.Join([]string{string(h.State), strconv.FormatInt(h.UserID, 10), strconv.Itoa(h.From), strconv.Itoa(h.To),
		strconv.FormatInt(h.ExpiresMs, 10), strings.Join(b, ","), wl, strconv.Itoa(h.Passengers)}, "|")
}

func decodeRecord(id, s string) (HoldRecord, error) {
	f := strings.Split(s, "|")
	if len(f) != 8 || len(f[0]) != 1 {
		return HoldRecord{}, fmt.Errorf("bad hold record %s: %q", id, s)
	}
	var err error
	h := HoldRecord{ID: id, State: f[0][0]}
	ints := []*int{&h.From, &h.To, &h.Passengers}
	for i, src := range []string{f[2], f[3], f[7]} {
		if *ints[i], err = strconv.Atoi(src); err != nil {
			return HoldRecord{}, fmt.Errorf("bad hold record %s: %q", id, s)
		}
	}
	if h.UserID, err = strconv.ParseInt(f[1], 10, 64); err != nil {
		return HoldRecord{}, fmt.Errorf("bad hold record %s: %q", id, s)
	}
	if h.ExpiresMs, err = strconv.ParseInt(f[4], 10, 64); err != nil {
		return HoldRecord{}, fmt.Errorf("bad hold record %s: %q", id, s)
	}
	if f[6] != "" {
		if h.WaitlistNo, err = strconv.Atoi(f[6]); err != nil {
			return HoldRecord{}, fmt.Errorf("bad hold record %s: %q", id, s)
		}
	}
	h.Berths, err = parseInts(f[5])
	return h, err
}

// ShardState is everything LOAD needs to recreate a shard.
type ShardState struct {
	Epoch       int64
	Legs        int
	BerthTypes  []byte // one type code per berth (see BerthCode), in shard index order
	Coaches     []byte // one coach number per berth; a coach's berths are contiguous
	WaitlistCap int
	Holds       []HoldRecord // live holds and bookings
}

// Load replaces the shard's Redis state with st. It answers false when
// Redis already holds an equal or newer epoch.
func (s *Store) Load(ctx context.Context, shardID int64, st ShardState) (bool, error) {
	return s.loadState(ctx, shardID, st, nil)
}

// loadState is Load with extraDaily: per user, holds that occupy nothing any
// more yet still count against the day's cap (cancelled bookings).
func (s *Store) loadState(ctx context.Context, shardID int64, st ShardState, extraDaily map[int64]int) (bool, error) {
	n := len(st.BerthTypes)
	if n == 0 || n > maxBerths || len(st.Coaches) != n || st.Legs < 1 || st.Legs > MaxLegs {
		return false, fmt.Errorf("load shard %d: bad shape (%d berths, %d legs)", shardID, n, st.Legs)
	}
	for b, t := range st.BerthTypes {
		if strings.IndexByte(berthCodes, t) < 0 {
			return false, fmt.Errorf("load shard %d: berth %d has type code %q, not one of %q", shardID, b, t, berthCodes)
		}
	}
	// The coach table: where each coach starts, then the berth count.
	var coaches []byte
	seenCoach := map[byte]bool{}
	for b, c := range st.Coaches {
		if b > 0 && c == st.Coaches[b-1] {
			continue
		}
		if seenCoach[c] {
			return false, fmt.Errorf("load shard %d: coach %d's berths are not contiguous (again at berth %d)", shardID, c, b)
		}
		seenCoach[c] = true
		coaches = append(coaches, byte(b>>8), byte(b))
	}
	coaches = append(coaches, byte(n>>8), byte(n))

	occ := make([]uint16, n)
	counts := map[string]int{}
	live := map[int64]string{}
	daily := map[int64]int{}
	for u, c := range extraDaily {
		if c > 0 {
			daily[u] += c
		}
	}
	wlCount, wlNext := 0, 0
	var holds strings.Builder
	seen := make(map[string]bool, len(st.Holds))
	for _, h := range st.Holds {
		if err := checkRecord(h, st.Legs); err != nil {
			return false, fmt.Errorf("load shard %d: %w", shardID, err)
		}
		if seen[h.ID] {
			return false, fmt.Errorf("load shard %d: hold %s listed twice", shardID, h.ID)
		}
		seen[h.ID] = true
		mask := legMask(h.From, h.To)
		for _, b := range h.Berths {
			if b < 0 || b >= n || occ[b]&mask != 0 {
				return false, fmt.Errorf("load shard %d: hold %s berth %d taken twice or out of range", shardID, h.ID, b)
			}
			occ[b] |= mask
		}
		switch h.State {
		case 'H':
			live[h.UserID] = h.ID
			daily[h.UserID]++
			addCounts(counts, "h", h.From, h.To, len(h.Berths))
		case 'W':
			live[h.UserID] = h.ID
			daily[h.UserID]++
			wlCount += h.Passengers
		case 'C':
			daily[h.UserID]++
			addCounts(counts, "c", h.From, h.To, len(h.Berths))
		case 'X':
			daily[h.UserID]++
			wlCount += h.Passengers
		}
		wlNext = max(wlNext, h.WaitlistNo)
		holds.WriteString(h.ID + "=" + h.encode() + "\n")
	}
	var cnt, liveS, dailyS strings.Builder
	for l := 0; l < st.Legs; l++ {
		fmt.Fprintf(&cnt, "h%d=%d\nc%d=%d\n", l, counts["h"+strconv.Itoa(l)], l, counts["c"+strconv.Itoa(l)])
	}
	for u, id := range live {
		fmt.Fprintf(&liveS, "%d=%s\n", u, id)
	}
	for u, c := range daily {
		fmt.Fprintf(&dailyS, "%d=%d\n", u, c)
	}
	args := []any{st.Epoch, n, st.Legs, st.WaitlistCap, wlCount, wlNext, string(coaches),
		cnt.String(), holds.String(), liveS.String(), dailyS.String(), MaxLegs, len(berthCodes), s.pad(ctx)}
	for l := 0; l < st.Legs; l++ {
		args = append(args, string(bitmap(n, func(b int) bool { return occ[b]&(1<<l) == 0 })))
	}
	for i := range len(berthCodes) {
		args = append(args, string(bitmap(n, func(b int) bool { return st.BerthTypes[b] == berthCodes[i] })))
	}
	res, err := s.load.Run(ctx, s.rdb, s.familyKeys(shardID), args...).StringSlice()
	s.SoldOut().Drop(shardID)
	if err != nil {
		return false, fmt.Errorf("load shard %d: %w", shardID, err)
	}
	return res[0] == "LOADED", nil
}

// padField is the field every per-shard hash (cnt, holds, live, daily)
// carries besides its own: LOAD gives it a value longer than the server's
// hash-max-listpack-value, so Redis keeps the hash as a hash table. Left a
// listpack (up to hash-max-listpack-entries, 512 by default), every lookup
// of a hold, a user or a counter scans it: with a few hundred records or
// users that scanning cost more than the rest of a hold. No hold id (see
// checkHoldID), user id or counter name is ever "|".
const padField = "|"

// The pad also means the four hashes always exist once loaded, so the
// scripts can tell a hash lost in a partial loss from an empty one.
//
// pad returns the value for padField: one byte longer than the server's
// hash-max-listpack-value (64 when the server will not say), or one byte
// when that limit is set too high to be worth beating.
func (s *Store) pad(ctx context.Context) string {
	limit := 64
	if v, err := s.rdb.ConfigGet(ctx, "hash-max-listpack-value").Result(); err == nil {
		if n, err := strconv.Atoi(v["hash-max-listpack-value"]); err == nil {
			limit = n
		}
	}
	if limit >= 4096 {
		return "-"
	}
	return strings.Repeat("-", limit+1)
}

// bitmap lays out one bit per berth as Redis numbers them (bit b is bit
// 7-b%8 of byte b/8), set where set(b); the bits past the last berth are 0.
func bitmap(n int, set func(b int) bool) []byte {
	out := make([]byte, (n+7)/8)
	for b := 0; b < n; b++ {
		if set(b) {
			out[b/8] |= 0x80 >> (b % 8)
		}
	}
	return out
}

func bitAt(m string, b int) bool {
	return b/8 < len(m) && m[b/8]&(0x80>>(b%8)) != 0
}

func legMask(from, to int) uint16 {
	var m uint16
	for l := from; l < to; l++ {
		m |= 1 << l
	}
	return m
}

// checkRecord refuses a record the scripts could never have written: the
// counters and masks built from it would disagree with the records, and
// RELEASE and CONFIRM would move them by the wrong amounts.
func checkRecord(h HoldRecord, legs int) error {
	if err := checkHoldID(h.ID); err != nil {
		return err
	}
	if h.From < 0 || h.To > legs || h.From >= h.To {
		return fmt.Errorf("hold %s: stops %d-%d outside %d legs", h.ID, h.From, h.To, legs)
	}
	if h.Passengers < 1 {
		return fmt.Errorf("hold %s: %d passengers", h.ID, h.Passengers)
	}
	switch h.State {
	case 'H', 'C':
		if len(h.Berths) != h.Passengers {
			return fmt.Errorf("hold %s: %d berths for %d passengers", h.ID, len(h.Berths), h.Passengers)
		}
	case 'W', 'X':
		if len(h.Berths) != 0 {
			return fmt.Errorf("hold %s: waitlist record with berths %v", h.ID, h.Berths)
		}
	default:
		return fmt.Errorf("hold %s: unknown state %q", h.ID, h.State)
	}
	return nil
}

func addCounts(c map[string]int, prefix string, from, to, n int) {
	for l := from; l < to; l++ {
		c[prefix+strconv.Itoa(l)] += n
	}
}

// Rebuild reloads a shard from PostgreSQL under a new epoch: confirmed and
// waitlisted bookings plus live holds, and the day's count of each user
// (cancelled bookings included, as the scripts count them). The epoch bump and the reads happen
// under the exclusive shard lock, so every writer that committed under the
// old epoch is read, and any writer still holding the old epoch fails its
// epoch check afterwards.
//
// The epoch is bumped before the load, so a load that fails leaves the shard
// refusing holds: the failure is kept on the shard row (rebuild_failed_at,
// rebuild_error) for the sweeper to retry and the console to show, and a
// successful rebuild clears it.
func Rebuild(ctx context.Context, pool *pgxpool.Pool, s *Store, shardID int64) (int64, error) {
	epoch, err := rebuild(ctx, pool, s, shardID)
	noteRebuild(ctx, pool, shardID, err)
	return epoch, err
}

// noteRebuild records a rebuild's outcome on the shard row, on a context of
// its own: a rebuild cut short by its caller still leaves its failure.
func noteRebuild(ctx context.Context, pool *pgxpool.Pool, shardID int64, failure error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if failure != nil {
		pool.Exec(ctx, `UPDATE inventory_shards SET rebuild_failed_at = now(), rebuild_error = $2 WHERE id = $1`, //nolint:errcheck
			shardID, failure.Error())
		return
	}
	pool.Exec(ctx, `UPDATE inventory_shards SET rebuild_failed_at = NULL, rebuild_error = NULL
		WHERE id = $1 AND rebuild_failed_at IS NOT NULL`, shardID) //nolint:errcheck
}

func rebuild(ctx context.Context, pool *pgxpool.Pool, s *Store, shardID int64) (int64, error) {
	var st ShardState
	var extraDaily map[int64]int
	err := db.Transact(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, $2)", ShardLockClass, int32(shardID)); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, `UPDATE inventory_shards SET epoch = epoch + 1 WHERE id = $1
			RETURNING epoch, legs, waitlist_cap`, shardID).Scan(&st.Epoch, &st.Legs, &st.WaitlistCap)
		if err != nil {
			return fmt.Errorf("bump epoch: %w", err)
		}
		rows, err := tx.Query(ctx, `SELECT coach, berth_type FROM shard_berths WHERE shard_id = $1 ORDER BY idx`, shardID)
		if err != nil {
			return err
		}
		coachIdx := map[string]byte{}
		var coach, btype string
		_, err = pgx.ForEachRow(rows, []any{&coach, &btype}, func() error {
			ci, ok := coachIdx[coach]
			if !ok {
				ci = byte(len(coachIdx) + 1)
				coachIdx[coach] = ci
			}
			st.Coaches = append(st.Coaches, ci)
			st.BerthTypes = append(st.BerthTypes, BerthCode(btype))
			return nil
		})
		if err != nil {
			return fmt.Errorf("read berths: %w", err)
		}
		// Live holds, and the holds behind bookings that still occupy
		// something (a berth or a waitlist place).
		rows, err = tx.Query(ctx, `
			SELECT h.id::text, h.kind, h.user_id, h.from_seq, h.to_seq, h.expires_at, h.berths,
			       coalesce(h.waitlist_no, 0), h.seat_count, h.state, coalesce(b.status, ''), coalesce(b.kept_for_promotion, false)
			FROM holds h LEFT JOIN bookings b ON b.hold_id = h.id
			WHERE h.shard_id = $1 AND h.state IN ('HELD', 'CONFIRMED')`, shardID)
		if err != nil {
			return err
		}
		// A cancelled booking occupies nothing, yet its ticket used the
		// day's cap: the scripts keep counting it, and so does the rebuild.
		extraDaily = map[int64]int{}
		var rec HoldRecord
		var kind, state, bstatus string
		var kept bool
		var expires time.Time
		var berths []int32
		_, err = pgx.ForEachRow(rows, []any{&rec.ID, &kind, &rec.UserID, &rec.From, &rec.To, &expires, &berths,
			&rec.WaitlistNo, &rec.Passengers, &state, &bstatus, &kept}, func() error {
			h := rec
			h.ExpiresMs = expires.UnixMilli()
			h.Berths = make([]int, len(berths))
			for i, b := range berths {
				h.Berths[i] = int(b)
			}
			if h.State = RecordState(state, kind, bstatus, kept); h.State == 0 {
				extraDaily[h.UserID]++ // cancelled booking: occupies nothing
				return nil
			}
			if h.State == 'W' || h.State == 'X' {
				h.Berths = nil
			}
			st.Holds = append(st.Holds, h)
			return nil
		})
		if err != nil {
			return fmt.Errorf("read holds: %w", err)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("rebuild shard %d: %w", shardID, err)
	}
	if _, err := s.loadState(ctx, shardID, st, extraDaily); err != nil {
		return 0, fmt.Errorf("rebuild shard %d: %w", shardID, err)
	}
	return st.Epoch, nil
}

// RecordState is the Redis record PostgreSQL implies for a hold, from its
// state, kind, its booking's status ("" for none) and whether that booking,
// cancelled, keeps its berths for the waitlist's promotion
// (bookings.kept_for_promotion): H or W for a live hold or waitlist offer,
// C for a confirmed booking or a cancelled one whose berths are kept, X for
// a waitlisted booking, and 0 for a hold that occupies nothing (lapsed,
// cancelled, its booking cancelled).
func RecordState(holdState, kind, bookingStatus string, kept bool) byte {
	switch {
	case holdState == "HELD" && kind == "SEAT":
		return 'H'
	case holdState == "HELD":
		return 'W'
	case holdState != "CONFIRMED":
		return 0
	case bookingStatus == "CONFIRMED":
		return 'C'
	case bookingStatus == "CANCELLED" && kept && kind == "SEAT":
		return 'C'
	case bookingStatus == "WAITLISTED":
		return 'X'
	}
	return 0
}

// BerthCode maps a berth type (LB MB UB SL SU WS MS AS) to the one-byte code
// the scripts compare with passenger preferences.
func BerthCode(t string) byte {
	switch t {
	case "LB":
		return 'L'
	case "MB":
		return 'M'
	case "UB":
		return 'U'
	case "SL":
		return 'S'
	case "SU":
		return 'T'
	case "WS":
		return 'W'
	case "MS":
		return 'C'
	case "AS":
		return 'A'
	}
	return '?'
}
