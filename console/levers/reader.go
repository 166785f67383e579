package levers

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Reader gives the hot path the levers in force. Values are read from
// PostgreSQL: after half a second a call asks Run to refresh them in the
// background and answers from the cache; after a second (or without Run)
// it waits for fresh values. So
// a change is in force on every process within a second, and under steady
// traffic the hot path never waits for the database. It only reads:
// automatic reverts are River jobs (RevertArgs).
type Reader struct {
	pool *pgxpool.Pool
	ttl  time.Duration
	log  *slog.Logger

	mu         sync.Mutex
	vals       map[string]string // name|scope -> value
	loadedAt   time.Time
	refreshing atomic.Bool
	kick       chan struct{} // asks Run for a refresh
}

// NewReader returns a reader caching for 500 ms.
func NewReader(pool *pgxpool.Pool, log *slog.Logger) *Reader {
	if log == nil {
		log = slog.Default()
	}
	return &Reader{pool: pool, ttl: 500 * time.Millisecond, log: log,
		kick: make(chan struct{}, 1)}
}

func (r *Reader) get(name, scope string) (string, bool) {
	v, ok := r.snapshot()[name+"|"+scope]
	return v, ok
}

// snapshot is the levers in force (name|scope -> value), fresh within a
// second; nil for a nil reader.
func (r *Reader) snapshot() map[string]string {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	vals, age := r.vals, time.Since(r.loadedAt)
	r.mu.Unlock()
	switch {
	case vals == nil || age > 2*r.ttl:
		// Never answer from values older than a second.
		r.Refresh(context.Background())
		r.mu.Lock()
		vals = r.vals
		r.mu.Unlock()
	case age > r.ttl && r.refreshing.CompareAndSwap(false, true):
		select {
		case r.kick <- struct{}{}:
		default:
		}
	}
	return vals
}

// Run performs the background refreshes the hot path asks for, until ctx
// ends; the process owns it (booking/app), so no refresh outlives the pool.
func (r *Reader) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.kick:
			r.Refresh(ctx)
			r.refreshing.Store(false)
		}
	}
}

// Refresh reloads the levers now; it writes nothing. On a database error
// the last values stay in force (and an empty set on the first load, i.e.
// the defaults).
func (r *Reader) Refresh(ctx context.Context) {
	stopping := func() bool { return ctx.Err() != nil } // the process is stopping: nothing to warn about
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	vals := map[string]string{}
	rows, err := r.pool.Query(ctx, `SELECT name, scope, value FROM console_levers`)
	if err == nil {
		for rows.Next() {
			var n, s, v string
			if err = rows.Scan(&n, &s, &v); err != nil {
				break
			}
			vals[n+"|"+s] = v
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		if !stopping() {
			r.log.Warn("read levers; keeping the last values", "err", err)
		}
		if r.vals == nil {
			r.vals = map[string]string{}
		}
		r.loadedAt = time.Now()
		return
	}
	r.vals, r.loadedAt = vals, time.Now()
}

func (r *Reader) on(name, scope string) bool {
	v, ok := r.get(name, scope)
	return ok && v == "on"
}

// MethodEnabled reports whether payments by method are allowed (the CARD
// and NB kill switches).
func (r *Reader) MethodEnabled(method string) bool { return !r.on(KillSwitch, method) }

// WaitlistEnabled reports whether TQWL may be offered.
func (r *Reader) WaitlistEnabled() bool { return !r.on(KillSwitch, "WAITLIST") }

// NonEssentialEnabled reports whether non-essential features may run.
func (r *Reader) NonEssentialEnabled() bool { return !r.on(KillSwitch, "NON_ESSENTIAL") }

// HoldWindow returns the hold window set for method, if any.
func (r *Reader) HoldWindow(method string) (time.Duration, bool) {
	v, ok := r.get(HoldWindow, method)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, false
	}
	return time.Duration(n) * time.Second, true
}

// AdmissionPaused reports whether admission to the shard (or all) is paused.
// A frozen shard admits no one either: its holds would be refused.
func (r *Reader) AdmissionPaused(shardID int64) bool {
	return r.on(AdmissionPaused, "global") || r.on(AdmissionPaused, "shard:"+strconv.FormatInt(shardID, 10)) || r.ShardFrozen(shardID)
}

// ShardFrozen reports whether the shard is frozen (shard_frozen on): its
// new holds and payment starts are refused.
func (r *Reader) ShardFrozen(shardID int64) bool {
	return r.on(ShardFrozen, "shard:"+strconv.FormatInt(shardID, 10))
}

// Freezing reports whether any shard is frozen, so a path that must look
// its shard up first (a payment knows only its hold) does so only then.
func (r *Reader) Freezing() bool {
	for k, v := range r.snapshot() {
		if v == "on" && strings.HasPrefix(k, ShardFrozen+"|") {
			return true
		}
	}
	return false
}

// AdmissionRate returns the fixed admission rate of the shard (the shard's
// own, else the global one); ok is false when admission is adaptive.
func (r *Reader) AdmissionRate(shardID int64) (int, bool) {
	return r.shardInt(AdmissionRate, shardID, "adaptive")
}

// ForShard is the value of a lever set per shard, for one shard: its own,
// else the global one; a scope set to unset ("adaptive", "off") has
// nothing of its own. ok is false when neither is set. get reads a scope's
// value; the levers' reader and the console's summary of the levers in
// force both answer through it.
func ForShard(get func(scope string) (string, bool), shardID int64, unset string) (string, bool) {
	for _, scope := range []string{"shard:" + strconv.FormatInt(shardID, 10), "global"} {
		if v, ok := get(scope); ok && v != unset {
			return v, true
		}
	}
	return "", false
}

// shardInt is a numeric per-shard lever's value for the shard (ForShard).
func (r *Reader) shardInt(name string, shardID int64, unset string) (int, bool) {
	v, ok := ForShard(func(scope string) (string, bool) { return r.get(name, scope) }, shardID, unset)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	return n, err == nil
}

// WindowClosesAt returns the closing time an operator set for the shard's
// window, if any.
func (r *Reader) WindowClosesAt(shardID int64) (time.Time, bool) {
	v, ok := r.get(WindowClosesAt, "shard:"+strconv.FormatInt(shardID, 10))
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339, v)
	return t, err == nil
}

// ShardMode is the shard's mode set by the lever (direct or queue), if any.
func (r *Reader) ShardMode(shardID int64) (string, bool) {
	return r.get(ShardMode, "shard:"+strconv.FormatInt(shardID, 10))
}

// ShardThrottle returns how many hold calls (and, counted apart, payment
// initiations) a second may reach the booking core for the shard: the
// shard's own throttle, else the global one; ok is false when both are off
// or unset. A shard set off falls back to the global value, as
// AdmissionRate's adaptive does: off means "nothing of its own".
func (r *Reader) ShardThrottle(shardID int64) (perSecond int, ok bool) {
	n, ok := r.shardInt(ShardThrottle, shardID, "off")
	return n, ok && n > 0
}

// Throttling reports whether any shard_throttle is set (not off), so a
// path that must look its shard up first (a payment knows only its hold)
// does so only while some throttle is in force.
func (r *Reader) Throttling() bool {
	for k, v := range r.snapshot() {
		if v != "off" && strings.HasPrefix(k, ShardThrottle+"|") {
			return true
		}
	}
	return false
}
