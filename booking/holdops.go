package booking

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river"

	"tatkal/booking/db"
	"tatkal/booking/funnel"
	"tatkal/booking/inventory"
)

// HoldInfo is a hold as the payments work needs it.
type HoldInfo struct {
	ID         uuid.UUID
	UserID     int64
	ShardID    int64
	IdemKey    string
	Kind       string
	State      string
	From, To   int
	Berths     []int
	Passengers []Passenger
	FarePaise  int64
	CreatedAt  time.Time
	ExpiresAt  time.Time
	UpdatedAt  time.Time
	Extended   bool
	// Chart is its shard's chart state and Banned whether a fraud decision
	// banned its account, read under the locks: a live hold of a charted
	// shard or a banned account can no longer become a ticket.
	Chart  string
	Banned bool
	// StateReason is why the hold is in its state (CancelledByReview says
	// whether a fraud review ended it).
	StateReason string
}

// Unconfirmable says why a HELD hold can no longer become a ticket ("" when
// it can): its shard is charted, or its account is banned. Its payment is
// refunded as for a cancelled hold.
func (h HoldInfo) Unconfirmable() string {
	switch {
	case h.Chart != "" && h.Chart != ChartOpen:
		return "the chart is prepared"
	case h.Banned:
		return "the account is banned"
	}
	return ""
}

// HoldShard is the shard of userID's hold id, without a lock; ok is false
// when there is no such hold of theirs.
func HoldShard(ctx context.Context, q db.Querier, id uuid.UUID, userID int64) (shardID int64, ok bool, err error) {
	err = q.QueryRow(ctx, `SELECT shard_id FROM holds WHERE id = $1 AND user_id = $2`, id, userID).Scan(&shardID)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("shard of hold %s: %w", id, err)
	}
	return shardID, true, nil
}

// LockHoldTx reads a hold FOR UPDATE in tx, after taking its shard's
// writer lock: every path locks a shard before the holds and bookings on
// it, as charting, promotion and rebuilds do, so no two paths wait on each
// other in a cycle (broken only by PostgreSQL's deadlock detector). One
// round trip.
func LockHoldTx(ctx context.Context, tx pgx.Tx, id uuid.UUID) (HoldInfo, error) {
	var h HoldInfo
	b := &pgx.Batch{}
	QueueLockHold(b, id, &h)
	err := tx.SendBatch(ctx, b).Close()
	return h, err
}

// QueueLockHold is LockHoldTx as statements of a batch: h is filled in
// when the batch's results are read (its Close returns the error), so the
// statements queued after it run under the shard's and the hold's locks
// in the same round trip.
func QueueLockHold(b *pgx.Batch, id uuid.UUID, h *HoldInfo) {
	QueueLockShardOfHold(b, id)
	b.Queue(lockHoldSQL, id).QueryRow(func(row pgx.Row) error { return scanHoldInfo(row, id, h) })
}

// QueueLockShardOfHold takes the writer lock of a hold's shard, read
// without a lock (a hold never changes shard); no hold, no lock.
func QueueLockShardOfHold(b *pgx.Batch, id uuid.UUID) {
	b.Queue(`SELECT pg_advisory_xact_lock_shared($1, (SELECT shard_id FROM holds WHERE id = $2)::int)`, inventory.ShardLockClass, id).
		Exec(func(pgconn.CommandTag) error { return nil })
}

const lockHoldSQL = `SELECT h.id, h.user_id, h.shard_id, h.idempotency_key, h.kind, h.state, h.from_seq, h.to_seq, h.berths, h.passengers,
	h.fare_paise, h.created_at, h.expires_at, h.updated_at, h.extended, s.chart_state, u.banned_at IS NOT NULL, h.state_reason
	FROM holds h JOIN inventory_shards s ON s.id = h.shard_id JOIN users u ON u.id = h.user_id WHERE h.id = $1 FOR UPDATE OF h`

func scanHoldInfo(row pgx.Row, id uuid.UUID, h *HoldInfo) error {
	var pax []byte
	var berths []int32
	err := row.Scan(&h.ID, &h.UserID, &h.ShardID, &h.IdemKey, &h.Kind, &h.State, &h.From, &h.To, &berths, &pax,
		&h.FarePaise, &h.CreatedAt, &h.ExpiresAt, &h.UpdatedAt, &h.Extended, &h.Chart, &h.Banned, &h.StateReason)
	if errors.Is(err, pgx.ErrNoRows) {
		return Errorf(ENOTFOUND, "NO_SUCH_HOLD", "No hold %s.", id)
	}
	if err != nil {
		return fmt.Errorf("lock hold %s: %w", id, err)
	}
	for _, b := range berths {
		h.Berths = append(h.Berths, int(b))
	}
	if err := json.Unmarshal(pax, &h.Passengers); err != nil {
		return fmt.Errorf("hold %s passengers: %w", id, err)
	}
	return nil
}

// ExtendHoldTx moves a HELD hold's expiry later, never earlier. With once,
// it extends only a hold not extended before, and marks it extended.
func ExtendHoldTx(ctx context.Context, tx pgx.Tx, id uuid.UUID, until time.Time, once bool) (bool, error) {
	q := `UPDATE holds SET expires_at = $2, updated_at = now() WHERE id = $1 AND state = 'HELD' AND expires_at < $2`
	if once {
		q = `UPDATE holds SET expires_at = $2, extended = true, updated_at = now()
			WHERE id = $1 AND state = 'HELD' AND expires_at < $2 AND NOT extended`
	}
	tag, err := tx.Exec(ctx, q, id, until)
	if err != nil {
		return false, fmt.Errorf("extend hold %s: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// ReleaseTx ends a HELD hold as state (RELEASED, EXPIRED, CANCELLED) with
// reason, in tx, with a seat-sync job behind the Redis release. It answers
// whether the hold was live. Call AfterRelease once tx commits.
func (s Holds) ReleaseTx(ctx context.Context, tx pgx.Tx, h HoldInfo, state, reason string) (bool, error) {
	if err := inventory.LockShardShared(ctx, tx, h.ShardID); err != nil {
		return false, err
	}
	tag, err := tx.Exec(ctx, `UPDATE holds SET state = $2, state_reason = $3, updated_at = now(),
		state_version = state_version + 1 WHERE id = $1 AND state = 'HELD'`, h.ID, state, reason)
	if err != nil {
		return false, fmt.Errorf("release hold %s: %w", h.ID, err)
	}
	if tag.RowsAffected() != 1 {
		return false, nil
	}
	if err := s.seatSyncLaterTx(ctx, tx, h.ID, h.ShardID); err != nil {
		return false, err
	}
	return true, nil
}

// ReviewCancelReason is the reason a fraud review's decision records on
// the holds and bookings it cancels: the passenger is told why, and an
// upheld appeal refunds exactly the bookings that carry it.
func ReviewCancelReason(decisionID int64) string {
	return fmt.Sprintf("%s (decision %d)", reviewCancelPrefix, decisionID)
}

const reviewCancelPrefix = "cancelled after fraud review"

// CancelledByReview reports whether reason is a fraud review's
// (ReviewCancelReason).
func CancelledByReview(reason string) bool { return strings.HasPrefix(reason, reviewCancelPrefix) }

// EndHoldTx ends, in tx, a hold that has not become a ticket and still
// could: a live one (HELD) is CANCELLED with reason and its seats go back
// (call AfterRelease once tx commits); a lapsed one (EXPIRED, RELEASED),
// whose seats are already back, is marked CANCELLED too, because a payment
// for it that succeeds late would otherwise retake its seats
// (RetakeAndConfirm retakes only lapsed holds). Either way a payment that
// arrives afterwards is refunded, never confirmed. It answers the state the
// hold ended from, "" when it was left as it was (CONFIRMED: a ticket to
// cancel as such; or already CANCELLED). The shard's lock first, then the
// hold's, as everywhere.
func (s Holds) EndHoldTx(ctx context.Context, tx pgx.Tx, id uuid.UUID, reason string) (HoldInfo, string, error) {
	h, err := LockHoldTx(ctx, tx, id)
	if err != nil {
		return h, "", err
	}
	switch h.State {
	case HoldHeld:
		if _, err := s.ReleaseTx(ctx, tx, h, HoldCancelled, reason); err != nil {
			return h, "", err
		}
	case HoldExpired, HoldReleased:
		if _, err := tx.Exec(ctx, `UPDATE holds SET state = 'CANCELLED', state_reason = $2, updated_at = now(),
			state_version = state_version + 1 WHERE id = $1`, id, reason); err != nil {
			return h, "", fmt.Errorf("end hold %s: %w", id, err)
		}
	default:
		return h, "", nil
	}
	return h, h.State, nil
}

// seatSyncDelay is how long after a commit its seat-sync job runs: the
// after-commit Redis update has normally landed by then, and the job finds
// nothing to do.
const seatSyncDelay = 10 * time.Second

// seatSyncLaterTx enqueues, in tx, the job that makes Redis agree with
// PostgreSQL about one hold should the after-commit update not land.
func (s Holds) seatSyncLaterTx(ctx context.Context, tx pgx.Tx, holdID uuid.UUID, shardID int64) error {
	_, err := s.jobs.InsertTx(ctx, tx, SeatSyncArgs{HoldID: holdID, ShardID: shardID},
		&river.InsertOpts{ScheduledAt: s.now().Add(seatSyncDelay)})
	if err != nil {
		return fmt.Errorf("enqueue seat sync of hold %s: %w", holdID, err)
	}
	return nil
}

// afterCommit is the context of the Redis update that follows a commit: not
// the request's, since PostgreSQL has decided and a client that disconnects
// right after the commit must not leave Redis behind; bounded, since the
// seat-sync job committed with the change is the backstop.
func afterCommit(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
}

// AfterRelease gives a released hold's seats back in Redis. If that fails,
// the seat-sync job of ReleaseTx repeats it.
func (s Holds) AfterRelease(ctx context.Context, h HoldInfo) {
	s.funnel.Add(h.ShardID, funnel.Released, 1)
	ctx, cancel := afterCommit(ctx)
	defer cancel()
	if _, err := s.store.Release(ctx, h.ShardID, h.ID.String(), inventory.ReleaseHold, h.UserID, ""); err != nil {
		s.log.Warn("release in Redis failed; the seat-sync job will repeat it", "hold", h.ID, "err", err)
	}
}

// Retake outcomes.
const (
	RetakeConfirmed = "CONFIRMED"
	// RetakeNoSeat: no seat for the hold (sold meanwhile, the chart
	// prepared, the account banned, the hold ended); nothing changed.
	RetakeNoSeat = "NO_SEAT"
	// RetakeRebooked: the passenger has held or booked this shard again
	// since; a second ticket is not what they asked for. Nothing changed.
	RetakeRebooked = "REBOOKED"
)

// RetakeAndConfirm gives a released hold its seats back, for the same
// journey and passengers at the original fare, and confirms it in the same
// transaction as inTx (the payment's side of it). It is how a payment that
// succeeds after its hold lapsed still becomes a ticket. It answers
// RetakeNoSeat when no seats are free (nothing changed).
//
// The hold row stays locked from before the Redis hold to the commit, so
// retakes of one hold (and the sweeper's repair of one) never interleave.
// The lapsed hold's own Redis record, if its release has not landed, is
// freed first (PostgreSQL says so); the retake's record is then marked R,
// which a late release of the lapsed hold leaves alone. The hold goes from
// lapsed straight to CONFIRMED, never back through HELD, so a live hold of
// the passenger elsewhere (one per account) does not block a paid journey.
//
// Whether the passenger has held or booked this shard again since
// (RetakeRebooked) is read under their account's lock, taken exclusive
// here and shared by every new hold's transaction to its COMMIT
// (Committer.write): a hold they made before is seen, one they make now
// waits for this decision, so a read without it and a retake after could
// not both let a new hold through and confirm this one.
func (s Settlement) RetakeAndConfirm(ctx context.Context, id uuid.UUID, inTx func(tx pgx.Tx, res ConfirmResult) error) (ConfirmResult, string, error) {
	var h HoldInfo
	var pax []byte
	err := s.pool.QueryRow(ctx, `SELECT user_id, shard_id, kind, state, from_seq, to_seq, passengers FROM holds WHERE id = $1`, id).
		Scan(&h.UserID, &h.ShardID, &h.Kind, &h.State, &h.From, &h.To, &pax)
	if err != nil {
		return ConfirmResult{}, "", fmt.Errorf("retake hold %s: %w", id, err)
	}
	// The retake holds again, under the hold rules that read the numbers.
	if h.Passengers, err = s.openPassengers(pax); err != nil {
		return ConfirmResult{}, "", fmt.Errorf("retake hold %s: %w", id, err)
	}
	if h.Kind != KindSeat || (h.State != HoldExpired && h.State != HoldReleased) {
		return ConfirmResult{}, RetakeNoSeat, nil
	}
	shard, err := s.catalog.ByID(ctx, h.ShardID)
	if err != nil {
		return ConfirmResult{}, "", err
	}
	if !s.now().Before(shard.ClosesAt) {
		return ConfirmResult{}, RetakeNoSeat, nil
	}
	// The passengers were within the rules when held and paid for: an
	// operator's lower limit since then does not strand them.
	rules := s.Rules()
	rules.MaxPassengers = max(rules.MaxPassengers, len(h.Passengers))
	prefs, idOK, err := ValidatePassengers(shard.Class, h.Passengers, rules)
	if err != nil {
		return ConfirmResult{}, "", fmt.Errorf("retake hold %s: %w", id, err)
	}
	idem := "retake:" + id.String()
	release := func(ctx context.Context) (string, error) {
		return s.store.Release(ctx, h.ShardID, id.String(), inventory.ReleaseUndo, h.UserID, idem)
	}
	var out ConfirmResult
	outcome, held := RetakeNoSeat, false
	committed, err := db.TransactSettled(ctx, s.pool, s.log, func(tx pgx.Tx) error {
		outcome, held = RetakeNoSeat, false // a retried attempt starts afresh
		// The shard's lock first, as everywhere; under it the chart state is
		// final for this transaction: a chart prepared since the hold
		// lapsed (the late success's read above) leaves no seat to retake.
		// Then the account's (see above), then the hold's, in one round trip.
		var state, chart string
		var epoch int64
		var banned, rebooked bool
		b := &pgx.Batch{}
		inventory.QueueLockShardShared(b, h.ShardID)
		queueLockAccount(b, h.UserID)
		b.Queue(`SELECT h.state, s.chart_state, s.epoch, u.banned_at IS NOT NULL,
				EXISTS (SELECT 1 FROM holds o WHERE o.user_id = h.user_id AND o.shard_id = h.shard_id AND o.id <> h.id
					AND o.state IN ('HELD', 'CONFIRMED') AND o.created_at > h.created_at)
			FROM holds h JOIN inventory_shards s ON s.id = h.shard_id JOIN users u ON u.id = h.user_id
			WHERE h.id = $1 FOR UPDATE OF h`, id).QueryRow(func(row pgx.Row) error {
			return row.Scan(&state, &chart, &epoch, &banned, &rebooked)
		})
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		if (state != HoldExpired && state != HoldReleased) || chart != ChartOpen || banned {
			return nil
		}
		if rebooked {
			outcome = RetakeRebooked
			return nil
		}
		// Whatever Redis still has under this id is not durable: the lapsed
		// hold's record (its release late or lost) or an earlier attempt of
		// this retake that never committed, idempotency key included.
		if _, err := release(ctx); err != nil {
			return err
		}
		expires := s.now().Add(rules.HoldWindow).Truncate(time.Millisecond)
		res, err := s.store.Hold(ctx, inventory.HoldRequest{
			ShardID: h.ShardID, HoldID: id.String(), UserID: h.UserID, IdemKey: idem, From: h.From, To: h.To,
			ExpiresAt: expires, DailyCap: 1 << 30, Prefs: prefs, IDOK: idOK, IdemTTL: time.Hour, MaxPassengers: rules.MaxPassengers,
			Retake: true,
		})
		if err != nil {
			return err
		}
		switch {
		case res.Outcome == inventory.NotReady:
			s.TriggerRebuild(h.ShardID)
			return fmt.Errorf("seat state of shard %d is being rebuilt", h.ShardID)
		case res.Replayed || res.Outcome == inventory.HoldExists:
			return fmt.Errorf("Redis still has a record of hold %s (%s)", id, res.Outcome)
		case res.Outcome != inventory.Held:
			return nil // sold out
		}
		held = true
		if epoch != res.Epoch {
			return fmt.Errorf("shard %d was rebuilt during the retake", h.ShardID)
		}
		s.pause.At(ctx, "retake.held")
		tag, err := tx.Exec(ctx, `UPDATE holds SET berths = $2, epoch = $3, expires_at = $4,
			state_reason = 're-held after a late payment', updated_at = now(), state_version = state_version + 1
			WHERE id = $1 AND state IN ('EXPIRED', 'RELEASED')`, id, res.Berths, res.Epoch, expires)
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return Errorf(ECONFLICT, "HOLD_CHANGED", "Hold %s changed during the retake.", id)
		}
		if out, err = s.confirmOne(ctx, tx, id, true); err != nil {
			return err
		}
		outcome = RetakeConfirmed
		return inTx(tx, out)
	})
	if err != nil {
		// Redis is undone only when PostgreSQL did not commit: a COMMIT
		// whose answer was lost may have committed the ticket (settled by
		// asking the server), and one in doubt is left to the sweeper,
		// which compares Redis with the rows once the server knows.
		if held && committed == db.NotCommitted {
			uctx, cancel := afterCommit(ctx)
			if _, err := release(uctx); err != nil {
				s.log.Error("undo retake failed; the sweeper will free it", "hold", id, "err", err)
			}
			cancel()
		}
		return ConfirmResult{}, "", fmt.Errorf("retake hold %s: %w", id, err)
	}
	if outcome == RetakeConfirmed {
		s.AfterConfirm(ctx, out)
	}
	return out, outcome, nil
}
