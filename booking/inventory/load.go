package inventory

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ShardLockClass is the first key of the advisory locks that order shard
// writers (shared) against a rebuild (exclusive), so a rebuild reads every
// write that committed under the old epoch and none commits after it.
const ShardLockClass = 4242

// LockShardShared takes the writer's side of the shard lock in tx.
func LockShardShared(ctx context.Context, tx pgx.Tx, shardID int64) error {
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock_shared($1, $2)", ShardLockClass, int32(shardID)); err != nil {
		return fmt.Errorf("lock shard %d: %w", shardID, err)
	}
	return nil
}

// HoldRecord is one hold as the Redis state keeps it.
type HoldRecord struct {
	ID         string
	State      byte // H held, W waitlist offer held, C confirmed, X waitlisted booking
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
	BerthTypes  []byte // one type code per berth, in shard index order
	Coaches     []byte // one coach number per berth (coaches keep their berths together)
	WaitlistCap int
	Holds       []HoldRecord // live holds and bookings
}

// Load replaces the shard's Redis state with st. It answers false when
// Redis already holds an equal or newer epoch.
func (s *Store) Load(ctx context.Context, shardID int64, st ShardState) (bool, error) {
	n := len(st.BerthTypes)
	if n == 0 || len(st.Coaches) != n || st.Legs < 1 || st.Legs > MaxLegs {
		return false, fmt.Errorf("load shard %d: bad shape (%d berths, %d legs)", shardID, n, st.Legs)
	}
	occ := make([]uint16, n)
	counts := map[string]int{}
	live := map[int64]string{}
	daily := map[int64]int{}
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
		var mask uint16
		for l := h.From; l < h.To; l++ {
			mask |= 1 << l
		}
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
	occBytes := make([]byte, 2*n)
	for b, m := range occ {
		occBytes[2*b], occBytes[2*b+1] = byte(m>>8), byte(m)
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
	keys := []string{
		s.key(shardID, "meta"), s.key(shardID, "occ"), s.key(shardID, "btype"), s.key(shardID, "coach"),
		s.key(shardID, "cnt"), s.key(shardID, "holds"), s.key(shardID, "exp"), s.key(shardID, "live"), s.key(shardID, "daily"),
	}
	res, err := s.load.Run(ctx, s.rdb, keys, st.Epoch, n, st.Legs, st.WaitlistCap, wlCount, wlNext,
		string(st.BerthTypes), string(st.Coaches), string(occBytes), cnt.String(), holds.String(), liveS.String(), dailyS.String()).StringSlice()
	if err != nil {
		return false, fmt.Errorf("load shard %d: %w", shardID, err)
	}
	return res[0] == "LOADED", nil
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
// waitlisted bookings plus live holds. The epoch bump and the reads happen
// under the exclusive shard lock, so every writer that committed under the
// old epoch is read, and any writer still holding the old epoch fails its
// epoch check afterwards.
func Rebuild(ctx context.Context, pool *pgxpool.Pool, s *Store, shardID int64) (int64, error) {
	var st ShardState
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
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
			       coalesce(h.waitlist_no, 0), h.seat_count, h.state, b.status
			FROM holds h LEFT JOIN bookings b ON b.hold_id = h.id
			WHERE h.shard_id = $1 AND h.state IN ('HELD', 'CONFIRMED')`, shardID)
		if err != nil {
			return err
		}
		var rec HoldRecord
		var kind, state string
		var bstatus *string
		var expires time.Time
		var berths []int32
		_, err = pgx.ForEachRow(rows, []any{&rec.ID, &kind, &rec.UserID, &rec.From, &rec.To, &expires, &berths,
			&rec.WaitlistNo, &rec.Passengers, &state, &bstatus}, func() error {
			h := rec
			h.ExpiresMs = expires.UnixMilli()
			h.Berths = make([]int, len(berths))
			for i, b := range berths {
				h.Berths[i] = int(b)
			}
			switch {
			case state == "HELD" && kind == "SEAT":
				h.State = 'H'
			case state == "HELD":
				h.State = 'W'
			case bstatus != nil && *bstatus == "CONFIRMED":
				h.State = 'C'
			case bstatus != nil && *bstatus == "WAITLISTED":
				h.State = 'X'
			default:
				return nil // cancelled booking: occupies nothing
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
	if _, err := s.Load(ctx, shardID, st); err != nil {
		return 0, fmt.Errorf("rebuild shard %d: %w", shardID, err)
	}
	return st.Epoch, nil
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
