package booking

import (
	"context"
	"log/slog"

	"tatkal/booking/inventory"
)

// What a shard's throttle paces: hold calls and payment initiations, each
// against its own budget, so a crowd of holds cannot keep the passengers
// who already hold seats from paying for them.
const (
	PaceHold    = "hold"
	PacePayment = "pay"
)

// ThrottleLevers are the operator's shard_throttle and shard_frozen
// levers as the hot path reads them, from memory (console/levers.Reader).
type ThrottleLevers interface {
	// ShardThrottle is the shard's calls per second; ok is false when off.
	ShardThrottle(shardID int64) (perSecond int, ok bool)
	// Throttling reports whether any shard (or all) is throttled.
	Throttling() bool
	// ShardFrozen reports whether the shard is frozen: every call refused.
	ShardFrozen(shardID int64) bool
	// Freezing reports whether any shard is frozen.
	Freezing() bool
}

// Throttle turns away, at the door, the hold calls and payment initiations
// over a shard's shard_throttle lever, so a slow booking core (seeds/001:
// the reservation system slowed to a quarter of its rate) is fed only what
// it can take. The lever is read from memory: with it off, a call costs
// nothing; with it set, one Redis round trip (inventory.Store.Pace, shared
// by every process). The booking service and the payment service share one.
type Throttle struct {
	levers ThrottleLevers
	store  *inventory.Store
	log    *slog.Logger
}

// NewThrottle returns the throttle over levers, pacing in store's Redis; a
// nil levers throttles nothing.
func NewThrottle(levers ThrottleLevers, store *inventory.Store, log *slog.Logger) *Throttle {
	if log == nil {
		log = slog.Default()
	}
	return &Throttle{levers: levers, store: store, log: log}
}

// Active reports whether any throttle or freeze is in force, for a caller
// that must look its shard up before it can ask Admit (a payment knows its
// hold).
func (t *Throttle) Active() bool {
	return t != nil && t.levers != nil && (t.levers.Throttling() || t.levers.Freezing())
}

// Admit lets one call of kind (PaceHold, PacePayment) through to the
// shard's booking core, or refuses it: SHARD_FROZEN while the shard is
// frozen (shard_frozen), else the THROTTLED answer naming
// the wait until the next slot. If Redis cannot be asked, the call is
// refused as the hold path refuses one when its seat script cannot run
// (SEATS_UNREACHABLE): the call would need Redis anyway.
func (t *Throttle) Admit(ctx context.Context, shardID int64, kind string) error {
	return t.admit(ctx, shardID, kind, 0, "")
}

// AdmitHold is Admit for a hold attempt: a repeat of one already decided
// (userID's idempotency key idem known to the seat script) is let through
// without spending a slot, as a payment's replay is answered before its
// throttle.
func (t *Throttle) AdmitHold(ctx context.Context, shardID, userID int64, idem string) error {
	return t.admit(ctx, shardID, PaceHold, userID, idem)
}

func (t *Throttle) admit(ctx context.Context, shardID int64, kind string, userID int64, idem string) error {
	if t == nil || t.levers == nil {
		return nil
	}
	if t.levers.ShardFrozen(shardID) {
		// The shard's seats are being put right (the invariant watch froze
		// it, or a person did): nothing new is sold or started on it.
		if kind == PacePayment {
			return Errorf(EUNAVAIL, ReasonShardFrozen, "Payments on this train are paused while its seats are checked. Nothing was charged; please try again later.")
		}
		return Errorf(EUNAVAIL, ReasonShardFrozen, "Bookings on this train are paused while its seats are checked. Nothing was changed; please try again later.")
	}
	rate, ok := t.levers.ShardThrottle(shardID)
	if !ok {
		return nil
	}
	wait, err := t.store.Pace(ctx, shardID, kind, rate, userID, idem)
	if err != nil {
		t.log.Error("throttle: pace failed", "shard", shardID, "kind", kind, "err", err)
		return Errorf(EUNAVAIL, ReasonSeatsUnreachable, "The seat service is not reachable right now. Nothing was changed; please retry.")
	}
	if wait == 0 {
		return nil
	}
	msg := "Bookings on this train are being paced right now. Nothing was lost; retry in a second."
	if kind == PacePayment {
		msg = "Payments on this train are being paced right now. Nothing was lost and your seats stay held; retry in a second."
	}
	return Throttled(msg, wait)
}

// ReasonSeatsUnreachable: Redis, the owner of seat state, could not be
// asked; nothing was changed and a retry is safe.
const ReasonSeatsUnreachable = "SEATS_UNREACHABLE"

// ReasonShardFrozen: the shard is frozen (the shard_frozen lever, pulled by
// the invariant watch when its seats disagree, or by a person): its new
// holds and payment starts are refused until a person thaws it.
const ReasonShardFrozen = "SHARD_FROZEN"
