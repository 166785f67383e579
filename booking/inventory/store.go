package inventory

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed lua/common.lua
	commonLua string
	//go:embed lua/hold.lua
	holdLua string
	//go:embed lua/release.lua
	releaseLua string
	//go:embed lua/confirm.lua
	confirmLua string
	//go:embed lua/load.lua
	loadLua string
	//go:embed lua/snapshot.lua
	snapshotLua string
	//go:embed lua/avail.lua
	availLua string
	//go:embed lua/ready.lua
	readyLua string
	//go:embed lua/forget.lua
	forgetLua string
	//go:embed lua/promote.lua
	promoteLua string
	//go:embed lua/soldout.lua
	soldoutLua string
)

// MaxLegs is the most legs a shard can track (a berth's legs fit the
// uint16 mask of Snapshot.Occupancy; Redis keeps one bitmap per leg).
const MaxLegs = 16

// maxBerths is the most berths a shard can hold: the coach table in the
// shard's meta keeps berth indexes in two bytes.
const maxBerths = 65535

// berthCodes are the berth type codes BerthCode yields; LOAD writes one
// bitmap per code, and a shard's berth types must be among them.
const berthCodes = "LMUSTWCA?"

// Store runs the seat scripts against Redis.
type Store struct {
	rdb      redis.UniversalClient
	prefix   string
	hold     *redis.Script
	release  *redis.Script
	confirm  *redis.Script
	load     *redis.Script
	snapshot *redis.Script
	avail    *redis.Script
	ready    *redis.Script
	forget   *redis.Script
	promote  *redis.Script
	soldout  *redis.Script
	// sold is the process's sold-out cache over this store (nil: none); the
	// scripts that give seats back drop its view of their shard.
	sold atomic.Pointer[SoldOutCache]
}

// New returns a Store whose keys start with prefix (one per deployment, so
// several can share a Redis).
func New(rdb redis.UniversalClient, prefix string) *Store {
	script := func(body string) *redis.Script { return redis.NewScript(commonLua + "\n" + body) }
	st := &Store{
		rdb:      rdb,
		prefix:   prefix,
		hold:     script(holdLua),
		release:  script(releaseLua),
		confirm:  script(confirmLua),
		load:     script(loadLua),
		snapshot: script(snapshotLua),
		avail:    script(availLua),
		ready:    script(readyLua),
		forget:   script(forgetLua),
		promote:  script(promoteLua),
		soldout:  script(soldoutLua),
	}
	st.sold.Store(NewSoldOutCache(st, SoldOutConfig{}))
	return st
}

// SoldOut returns the store's sold-out cache (nil when turned off). New
// gives each store one with the defaults.
func (s *Store) SoldOut() *SoldOutCache { return s.sold.Load() }

// SetSoldOut replaces the store's sold-out cache; nil turns it off.
func (s *Store) SetSoldOut(c *SoldOutCache) { s.sold.Store(c) }

// Redis returns the client, for health checks.
func (s *Store) Redis() redis.UniversalClient { return s.rdb }

// MetaKey is the key of a shard's meta hash. Every key of a shard shares its
// hash tag, so this key names the Redis Cluster slot (and master) of all of
// them.
func (s *Store) MetaKey(shardID int64) string { return s.key(shardID, "meta") }

// UserKey is a key of one account's, outside every shard's hash tag (the
// hold path's per-account diagnostics: booking/refusals.go).
func (s *Store) UserKey(userID int64, name string) string {
	return s.prefix + ":u" + strconv.FormatInt(userID, 10) + ":" + name
}

func (s *Store) key(shardID int64, name string) string {
	return s.prefix + ":{s" + strconv.FormatInt(shardID, 10) + "}:" + name
}

func (s *Store) idemKey(shardID, userID int64, idem string) string {
	return s.key(shardID, "idem:"+strconv.FormatInt(userID, 10)+":"+idem)
}

// Seat state keys, besides meta (epoch, shape, waitlist, coach table), cnt
// (per-leg counters h<leg> and c<leg>), holds (records), exp (live holds by
// expiry), live and daily (per user): one bitmap per leg, bit b set when
// berth b is free on that leg, and one static bitmap per berth type.
func (s *Store) legKey(shardID int64, leg int) string {
	return s.key(shardID, "free:"+strconv.Itoa(leg))
}

func (s *Store) typeKey(shardID int64, code byte) string {
	return s.key(shardID, "type:"+string(code))
}

// scratchKey names a key a script overwrites and reads within one call
// (and leaves for the next: scripts are atomic, LOAD and Wipe delete it).
func (s *Store) scratchKey(shardID int64, name string) string {
	return s.key(shardID, "tmp:"+name)
}

// legKeys lists the bitmap keys of legs from..to-1.
func (s *Store) legKeys(shardID int64, from, to int) []string {
	keys := make([]string, 0, to-from)
	for l := from; l < to; l++ {
		keys = append(keys, s.legKey(shardID, l))
	}
	return keys
}

func (s *Store) typeKeys(shardID int64) []string {
	keys := make([]string, len(berthCodes))
	for i := range len(berthCodes) {
		keys[i] = s.typeKey(shardID, berthCodes[i])
	}
	return keys
}

// familyKeys lists every state key of a shard (idempotency keys aside), in
// the order LOAD expects: meta cnt holds exp live daily, the MaxLegs leg
// bitmaps, the type bitmaps, then the seen set (HOLD), scratch keys and the
// keys of the earlier one-string format, so a load or a wipe leaves
// nothing of them behind.
func (s *Store) familyKeys(shardID int64) []string {
	keys := []string{
		s.key(shardID, "meta"), s.key(shardID, "cnt"), s.key(shardID, "holds"),
		s.key(shardID, "exp"), s.key(shardID, "live"), s.key(shardID, "daily"),
	}
	keys = append(keys, s.legKeys(shardID, 0, MaxLegs)...)
	keys = append(keys, s.typeKeys(shardID)...)
	keys = append(keys, s.key(shardID, "seen"), s.scratchKey(shardID, "free"), s.scratchKey(shardID, "avail"))
	for i := range len(berthCodes) {
		keys = append(keys, s.scratchKey(shardID, string(berthCodes[i])))
	}
	return append(keys, s.key(shardID, "occ"), s.key(shardID, "btype"), s.key(shardID, "coach"))
}

// Outcome is the decision of one hold attempt.
type Outcome string

const (
	Held            Outcome = "HELD"
	WaitlistOffered Outcome = "WAITLIST_OFFERED"
	SoldOut         Outcome = "SOLD_OUT"
	NotReady        Outcome = "NOT_READY"      // shard state missing: rebuild, then retry
	LiveHold        Outcome = "LIVE_HOLD"      // the user already has a live hold here
	DailyCap        Outcome = "DAILY_CAP"      // the user reached the day's Tatkal cap
	BadPassengers   Outcome = "BAD_PASSENGERS" // too many or too few passengers
	NoID            Outcome = "NO_ID"          // nobody carries a validated ID
	BadJourney      Outcome = "BAD_JOURNEY"
	TokenUsed       Outcome = "TOKEN_USED"  // the admission token was used before
	HoldExists      Outcome = "HOLD_EXISTS" // a record with this hold id exists; nothing changed
	KeyReused       Outcome = "KEY_REUSED"  // the idempotency key came with another request; nothing changed
)

// HoldRequest is one attempt, already validated by the booking service.
type HoldRequest struct {
	ShardID   int64
	HoldID    string
	UserID    int64
	IdemKey   string
	From, To  int // stop sequence numbers; legs From..To-1
	ExpiresAt time.Time
	DailyCap  int
	// Prefs has one byte per passenger: a berth type code or '-' for none.
	Prefs         []byte
	IDOK          bool
	AllowWaitlist bool
	IdemTTL       time.Duration
	MaxPassengers int
	// TokenKey, when set, is an admission token's used-mark (same hash tag
	// as the shard): a used token is refused with TokenUsed, and a decision
	// marks it used for TokenTTL, in the same atomic step.
	TokenKey string
	TokenTTL time.Duration
	// Retake takes seats back for a payment that arrived after its hold
	// lapsed: no live-hold or daily check (the journey is paid for), not the
	// user's live hold, and a record in state R until CONFIRM, which a
	// RELEASE of the lapsed hold (same id) refuses to touch.
	Retake bool
	// RequestHash fingerprints the request the idempotency key came with
	// (at most 64 characters): the key sent again with another request is
	// answered KeyReused. Empty is compared with nothing.
	RequestHash string
}

// HoldResult is the script's answer.
type HoldResult struct {
	Outcome    Outcome
	Epoch      int64
	HoldID     string // the new hold, the replayed one, or the user's live hold for LiveHold
	ExpiresAt  time.Time
	Berths     []int
	WaitlistNo int
	Replayed   bool // the idempotency key was seen before; this is the prior answer
}

// Hold runs the HOLD script. A request the script could not record
// faithfully (a hold id carrying a separator of the stored formats, an
// idempotency window under a second) is refused with an error before Redis
// is touched: Redis does not undo a script's writes when it fails midway.
func (s *Store) Hold(ctx context.Context, r HoldRequest) (HoldResult, error) {
	if err := checkHoldID(r.HoldID); err != nil {
		return HoldResult{}, fmt.Errorf("hold shard %d: %w", r.ShardID, err)
	}
	if len(r.RequestHash) > 64 || strings.Contains(r.RequestHash, "|") {
		return HoldResult{}, fmt.Errorf("hold shard %d: bad request hash %q", r.ShardID, r.RequestHash)
	}
	if r.IdemTTL < time.Second {
		return HoldResult{}, fmt.Errorf("hold shard %d: idempotency window %v is under one second", r.ShardID, r.IdemTTL)
	}
	keys := []string{
		s.key(r.ShardID, "meta"), s.key(r.ShardID, "exp"), s.idemKey(r.ShardID, r.UserID, r.IdemKey),
		s.scratchKey(r.ShardID, "free"), s.key(r.ShardID, "holds"), s.key(r.ShardID, "live"),
		s.key(r.ShardID, "daily"), s.key(r.ShardID, "cnt"),
	}
	// The journey's leg bitmaps (none for a journey no shard has: the
	// script answers BAD_JOURNEY), then a bitmap per preferred berth type,
	// then a scratch key per type.
	nleg := 0
	if r.From >= 0 && r.From < r.To && r.To <= MaxLegs {
		keys = append(keys, s.legKeys(r.ShardID, r.From, r.To)...)
		nleg = r.To - r.From
	}
	var codes []byte
	for _, c := range r.Prefs {
		if strings.IndexByte(berthCodes, c) >= 0 && bytes.IndexByte(codes, c) < 0 {
			codes = append(codes, c)
			keys = append(keys, s.typeKey(r.ShardID, c))
		}
	}
	for _, c := range codes {
		keys = append(keys, s.scratchKey(r.ShardID, string(c)))
	}
	keys = append(keys, s.key(r.ShardID, "seen"))
	args := []any{
		r.HoldID, r.UserID, r.From, r.To, r.ExpiresAt.UnixMilli(), r.DailyCap, string(r.Prefs),
		boolArg(r.IDOK), boolArg(r.AllowWaitlist), int64(r.IdemTTL / time.Second), r.MaxPassengers,
		nleg, string(codes), "0", boolArg(r.Retake), r.RequestHash,
	}
	if r.TokenKey != "" {
		if r.TokenTTL < time.Millisecond || !strings.HasPrefix(r.TokenKey, s.prefix+":{s"+strconv.FormatInt(r.ShardID, 10)+"}:") {
			return HoldResult{}, fmt.Errorf("hold shard %d: bad admission token mark %q", r.ShardID, r.TokenKey)
		}
		keys = append(keys, r.TokenKey)
		args[13] = strconv.FormatInt(r.TokenTTL.Milliseconds(), 10)
	}
	res, err := s.hold.Run(ctx, s.rdb, keys, args...).StringSlice()
	if err != nil {
		return HoldResult{}, fmt.Errorf("hold script shard %d: %w", r.ShardID, err)
	}
	out := HoldResult{Outcome: Outcome(res[0])}
	if len(res) > 1 {
		if out.Epoch, err = strconv.ParseInt(res[1], 10, 64); err != nil {
			return HoldResult{}, fmt.Errorf("hold script shard %d: bad epoch %q", r.ShardID, res[1])
		}
	}
	switch out.Outcome {
	case "REPLAY":
		out.Replayed = true
		err = parseAnswer(res[2], &out)
	case Held, WaitlistOffered, SoldOut:
		err = parseAnswer(res[2], &out)
	case LiveHold:
		out.HoldID = res[2]
	}
	if err != nil {
		return HoldResult{}, fmt.Errorf("hold script shard %d: %w", r.ShardID, err)
	}
	return out, nil
}

// checkHoldID refuses ids that would break the answer ("|"), the LOAD
// format ("=", newline) or be ambiguous (empty).
func checkHoldID(id string) error {
	if id == "" || strings.ContainsAny(id, "|=\n") {
		return fmt.Errorf("bad hold id %q", id)
	}
	return nil
}

// parseAnswer decodes "OUTCOME|hold_id|expires_ms|berths or waitlist no".
func parseAnswer(s string, out *HoldResult) error {
	f := strings.Split(s, "|")
	if len(f) != 4 {
		return fmt.Errorf("bad answer %q", s)
	}
	out.Outcome = Outcome(f[0])
	out.HoldID = f[1]
	if out.Outcome == SoldOut {
		return nil
	}
	ms, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil {
		return fmt.Errorf("bad answer %q", s)
	}
	out.ExpiresAt = time.UnixMilli(ms).UTC()
	if out.Outcome == WaitlistOffered {
		out.WaitlistNo, err = strconv.Atoi(f[3])
		return err
	}
	out.Berths, err = parseInts(f[3])
	return err
}

func parseInts(csv string) ([]int, error) {
	if csv == "" {
		return nil, nil
	}
	parts := strings.Split(csv, ",")
	out := make([]int, len(parts))
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil {
			return nil, fmt.Errorf("bad berth list %q", csv)
		}
		out[i] = n
	}
	return out, nil
}

func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// ReleaseMode says why seats go back.
type ReleaseMode string

const (
	// ReleaseHold frees a live hold that expired, failed or was cancelled.
	ReleaseHold ReleaseMode = "release"
	// ReleaseUndo erases an attempt whose durable write failed, idempotency key included.
	ReleaseUndo ReleaseMode = "undo"
	// ReleaseCancel frees the seats of a cancelled confirmed or waitlisted booking.
	ReleaseCancel ReleaseMode = "cancel"
)

// ErrNotReady means the shard has no state in Redis; rebuild it first.
var ErrNotReady = errors.New("shard state not loaded")

// ErrBadJourney means the stops do not make a journey on the shard's legs.
var ErrBadJourney = errors.New("journey outside the shard's legs")

// Release runs RELEASE. It answers RELEASED, GONE (nothing to do),
// CONFIRMED (the hold is sold; use ReleaseCancel) or RETAKING (ReleaseHold
// of a record a retake made under the same id: not the record the release
// was issued for, so it is left alone). ReleaseCancel frees a record in any
// state: PostgreSQL's cancellation wins over a confirmation Redis missed.
func (s *Store) Release(ctx context.Context, shardID int64, holdID string, mode ReleaseMode, userID int64, idemKey string) (string, error) {
	switch mode {
	case ReleaseHold, ReleaseUndo, ReleaseCancel:
	default:
		return "", fmt.Errorf("release hold %s: unknown mode %q", holdID, mode)
	}
	keys := []string{
		s.key(shardID, "meta"), s.key(shardID, "cnt"), s.key(shardID, "holds"),
		s.key(shardID, "exp"), s.key(shardID, "live"), s.key(shardID, "daily"),
		s.idemKey(shardID, userID, idemKey),
	}
	keys = append(keys, s.legKeys(shardID, 0, MaxLegs)...)
	res, err := s.release.Run(ctx, s.rdb, keys, holdID, string(mode)).StringSlice()
	s.SoldOut().Drop(shardID)
	if err != nil {
		return "", fmt.Errorf("release hold %s: %w", holdID, err)
	}
	if res[0] == string(NotReady) {
		return "", fmt.Errorf("release hold %s: %w", holdID, ErrNotReady)
	}
	return res[0], nil
}

// Forgotten is Forget's answer when it erased the attempt's key.
const Forgotten = "FORGOTTEN"

// Forget erases the idempotency key of an attempt whose seat record is gone
// (and, when tokenKey is set, the admission token's use-mark it left), if
// the key still names holdID. It answers FORGOTTEN, LIVE (the record is
// still there: nothing changed) or GONE (the key names another attempt).
func (s *Store) Forget(ctx context.Context, shardID, userID int64, idemKey, holdID, tokenKey string) (string, error) {
	keys := []string{s.key(shardID, "holds"), s.idemKey(shardID, userID, idemKey)}
	if tokenKey != "" {
		keys = append(keys, tokenKey)
	}
	res, err := s.forget.Run(ctx, s.rdb, keys, holdID).Text()
	if err != nil {
		return "", fmt.Errorf("forget attempt %s: %w", holdID, err)
	}
	if res == string(NotReady) {
		return "", fmt.Errorf("forget attempt %s: %w", holdID, ErrNotReady)
	}
	return res, nil
}

// Confirm runs CONFIRM: CONFIRMED (also when it already was) or GONE.
func (s *Store) Confirm(ctx context.Context, shardID int64, holdID string) (string, error) {
	keys := []string{s.key(shardID, "meta"), s.key(shardID, "cnt"), s.key(shardID, "holds"), s.key(shardID, "exp"), s.key(shardID, "live")}
	res, err := s.confirm.Run(ctx, s.rdb, keys, holdID).StringSlice()
	if err != nil {
		return "", fmt.Errorf("confirm hold %s: %w", holdID, err)
	}
	if res[0] == string(NotReady) {
		return "", fmt.Errorf("confirm hold %s: %w", holdID, ErrNotReady)
	}
	return res[0], nil
}

// Availability is what AVAIL reports for one journey.
type Availability struct {
	Free         int // berths free on every leg of the journey
	WaitlistLeft int
	Total        int
}

// Available counts berths free for a whole journey (not the per-leg
// minimum: fragmented legs do not add up to a berth).
func (s *Store) Available(ctx context.Context, shardID int64, from, to int) (Availability, error) {
	keys := []string{s.key(shardID, "meta"), s.scratchKey(shardID, "avail")}
	nleg := 0
	if from >= 0 && from < to && to <= MaxLegs {
		keys = append(keys, s.legKeys(shardID, from, to)...)
		nleg = to - from
	}
	res, err := s.avail.Run(ctx, s.rdb, keys, from, to, nleg).Slice()
	if err != nil {
		return Availability{}, fmt.Errorf("availability shard %d: %w", shardID, err)
	}
	switch res[0] {
	case "OK":
	case string(NotReady):
		return Availability{}, fmt.Errorf("availability shard %d: %w", shardID, ErrNotReady)
	case string(BadJourney):
		return Availability{}, fmt.Errorf("availability shard %d, stops %d-%d: %w", shardID, from, to, ErrBadJourney)
	default:
		return Availability{}, fmt.Errorf("availability shard %d: unexpected answer %v", shardID, res[0])
	}
	return Availability{Free: int(res[1].(int64)), WaitlistLeft: int(res[2].(int64)), Total: int(res[3].(int64))}, nil
}

// Wipe deletes a shard's state, as a Redis loss would: every state key in
// one DEL, so no script ever sees part of it. Idempotency keys outlive it
// (their answers name the old epoch, so they are not replayed). Tests and
// the console's guarded rebuild use it.
func (s *Store) Wipe(ctx context.Context, shardID int64) error {
	err := s.rdb.Del(ctx, s.familyKeys(shardID)...).Err()
	s.SoldOut().Drop(shardID)
	if err != nil {
		return fmt.Errorf("wipe shard %d: %w", shardID, err)
	}
	return nil
}

// Ready reports whether the shard's state is loaded, and its epoch. A shard
// whose meta survived but some seat key did not (a partial loss) is not
// ready: the scripts refuse it, and it must be rebuilt like a lost one.
func (s *Store) Ready(ctx context.Context, shardID int64) (bool, int64, error) {
	keys := []string{s.key(shardID, "meta"), s.key(shardID, "cnt"), s.key(shardID, "holds"),
		s.key(shardID, "live"), s.key(shardID, "daily")}
	keys = append(keys, s.legKeys(shardID, 0, MaxLegs)...)
	keys = append(keys, s.typeKeys(shardID)...)
	res, err := s.ready.Run(ctx, s.rdb, keys, MaxLegs).StringSlice()
	if err != nil {
		return false, 0, fmt.Errorf("shard %d epoch: %w", shardID, err)
	}
	if len(res) < 2 || res[0] != "1" {
		return false, 0, nil
	}
	v, err := strconv.ParseInt(res[1], 10, 64)
	if err != nil {
		return false, 0, fmt.Errorf("shard %d epoch: bad epoch %q", shardID, res[1])
	}
	return true, v, nil
}

// Records lists every hold record of the shard (live, retaking and sold),
// for the sweeper to compare with PostgreSQL.
func (s *Store) Records(ctx context.Context, shardID int64) ([]HoldRecord, error) {
	m, err := s.rdb.HGetAll(ctx, s.key(shardID, "holds")).Result()
	if err != nil {
		return nil, fmt.Errorf("records shard %d: %w", shardID, err)
	}
	out := make([]HoldRecord, 0, len(m))
	for id, rec := range m {
		if id == padField {
			continue
		}
		h, err := decodeRecord(id, rec)
		if err != nil {
			return nil, fmt.Errorf("records shard %d: %w", shardID, err)
		}
		out = append(out, h)
	}
	return out, nil
}

// DueHolds lists live holds in Redis whose expiry is at or before t; the
// sweeper reconciles each with PostgreSQL.
func (s *Store) DueHolds(ctx context.Context, shardID int64, t time.Time, limit int64) ([]string, error) {
	ids, err := s.rdb.ZRangeByScore(ctx, s.key(shardID, "exp"), &redis.ZRangeBy{
		Min: "-inf", Max: strconv.FormatInt(t.UnixMilli(), 10), Count: limit,
	}).Result()
	if err != nil {
		return nil, fmt.Errorf("due holds shard %d: %w", shardID, err)
	}
	return ids, nil
}

// Promotion is one waitlisted booking's hold confirmed onto berths, one per
// passenger in passenger order.
type Promotion struct {
	HoldID string
	Berths []int
}

// PromoteOutcome is PROMOTE's answer.
type PromoteOutcome string

const (
	// PromoteApplied: the delta is in Redis and the shard is at the new epoch.
	PromoteApplied PromoteOutcome = "PROMOTED"
	// PromoteStale: Redis was not at the epoch the promotion started from.
	PromoteStale PromoteOutcome = "STALE"
	// PromoteMismatch: Redis disagreed with the promotion (a record or a
	// berth not as PostgreSQL has it); nothing was changed.
	PromoteMismatch PromoteOutcome = "MISMATCH"
)

// Promote applies a waitlist promotion PostgreSQL committed under epoch
// (bumped from epoch-1 by it) to the shard's Redis state, changing only
// what it must: the records of the cancelled holds (absent ones skipped)
// go and free their berths, each promotion's waitlisted record becomes
// sold on its berths, and the shard moves to epoch, in one atomic script
// fenced by the old epoch. Anything but PromoteApplied changed nothing,
// and the caller rebuilds the shard instead.
func (s *Store) Promote(ctx context.Context, shardID, epoch int64, cancelled []string, promoted []Promotion) (PromoteOutcome, error) {
	if epoch < 2 {
		return "", fmt.Errorf("promote shard %d: bad epoch %d", shardID, epoch)
	}
	var drops, promos strings.Builder
	for _, id := range cancelled {
		if !plainID(id) {
			return "", fmt.Errorf("promote shard %d: bad hold id %q", shardID, id)
		}
		drops.WriteString(id + "\n")
	}
	for _, p := range promoted {
		if !plainID(p.HoldID) || len(p.Berths) == 0 {
			return "", fmt.Errorf("promote shard %d: bad promotion %+v", shardID, p)
		}
		promos.WriteString(p.HoldID + "=")
		for i, b := range p.Berths {
			if b < 0 || b >= maxBerths {
				return "", fmt.Errorf("promote shard %d: hold %s: berth %d out of range", shardID, p.HoldID, b)
			}
			if i > 0 {
				promos.WriteByte(',')
			}
			promos.WriteString(strconv.Itoa(b))
		}
		promos.WriteByte('\n')
	}
	keys := []string{s.key(shardID, "meta"), s.key(shardID, "cnt"), s.key(shardID, "holds"), s.key(shardID, "exp"), s.key(shardID, "live")}
	keys = append(keys, s.legKeys(shardID, 0, MaxLegs)...)
	res, err := s.promote.Run(ctx, s.rdb, keys, strconv.FormatInt(epoch-1, 10), strconv.FormatInt(epoch, 10), drops.String(), promos.String()).StringSlice()
	s.SoldOut().Drop(shardID)
	if err != nil {
		return "", fmt.Errorf("promote shard %d: %w", shardID, err)
	}
	if res[0] == string(NotReady) {
		return "", fmt.Errorf("promote shard %d: %w", shardID, ErrNotReady)
	}
	return PromoteOutcome(res[0]), nil
}

// plainID is a hold id the scripts' line formats can carry.
func plainID(id string) bool {
	return id != "" && !strings.ContainsAny(id, "=|,\n")
}
