package booking

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
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

// LockHoldTx reads a hold FOR UPDATE in tx.
func LockHoldTx(ctx context.Context, tx pgx.Tx, id uuid.UUID) (HoldInfo, error) {
	var h HoldInfo
	err := scanHoldInfo(tx.QueryRow(ctx, lockHoldSQL, id), id, &h)
	return h, err
}

// QueueLockHold is LockHoldTx as one statement of a batch: h is filled in
// when the batch's results are read (its Close returns the error), so the
// statements queued after it run under the hold's lock in the same round
// trip.
func QueueLockHold(b *pgx.Batch, id uuid.UUID, h *HoldInfo) {
	b.Queue(lockHoldSQL, id).QueryRow(func(row pgx.Row) error { return scanHoldInfo(row, id, h) })
}

const lockHoldSQL = `SELECT id, user_id, shard_id, idempotency_key, kind, state, from_seq, to_seq, berths, passengers,
	fare_paise, created_at, expires_at, updated_at, extended FROM holds WHERE id = $1 FOR UPDATE`

func scanHoldInfo(row pgx.Row, id uuid.UUID, h *HoldInfo) error {
	var pax []byte
	var berths []int32
	err := row.Scan(&h.ID, &h.UserID, &h.ShardID, &h.IdemKey, &h.Kind, &h.State, &h.From, &h.To, &berths, &pax,
		&h.FarePaise, &h.CreatedAt, &h.ExpiresAt, &h.UpdatedAt, &h.Extended)
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
func (s *Service) ReleaseTx(ctx context.Context, tx pgx.Tx, h HoldInfo, state, reason string) (bool, error) {
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

// seatSyncDelay is how long after a commit its seat-sync job runs: the
// after-commit Redis update has normally landed by then, and the job finds
// nothing to do.
const seatSyncDelay = 10 * time.Second

// seatSyncLaterTx enqueues, in tx, the job that makes Redis agree with
// PostgreSQL about one hold should the after-commit update not land.
func (s *Service) seatSyncLaterTx(ctx context.Context, tx pgx.Tx, holdID uuid.UUID, shardID int64) error {
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
func (s *Service) AfterRelease(ctx context.Context, h HoldInfo) {
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
	RetakeNoSeat    = "NO_SEAT"
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
func (s *Service) RetakeAndConfirm(ctx context.Context, id uuid.UUID, inTx func(tx pgx.Tx, res ConfirmResult) error) (ConfirmResult, string, error) {
	var h HoldInfo
	err := s.pool.QueryRow(ctx, `SELECT user_id, shard_id, kind, state, from_seq, to_seq, passengers FROM holds WHERE id = $1`, id).
		Scan(&h.UserID, &h.ShardID, &h.Kind, &h.State, &h.From, &h.To, &h.Passengers)
	if err != nil {
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
	prefs, idOK, err := ValidatePassengers(shard.Class, h.Passengers, s.rules)
	if err != nil {
		return ConfirmResult{}, "", fmt.Errorf("retake hold %s: %w", id, err)
	}
	idem := "retake:" + id.String()
	release := func(ctx context.Context) (string, error) {
		return s.store.Release(ctx, h.ShardID, id.String(), inventory.ReleaseUndo, h.UserID, idem)
	}
	var out ConfirmResult
	outcome, held := RetakeNoSeat, false
	err = db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		outcome, held = RetakeNoSeat, false // a retried attempt starts afresh
		var state string
		if err := tx.QueryRow(ctx, `SELECT state FROM holds WHERE id = $1 FOR UPDATE`, id).Scan(&state); err != nil {
			return err
		}
		if state != HoldExpired && state != HoldReleased {
			return nil
		}
		if err := inventory.LockShardShared(ctx, tx, h.ShardID); err != nil {
			return err
		}
		var epoch int64
		if err := tx.QueryRow(ctx, `SELECT epoch FROM inventory_shards WHERE id = $1`, h.ShardID).Scan(&epoch); err != nil {
			return err
		}
		// Whatever Redis still has under this id is not durable: the lapsed
		// hold's record (its release late or lost) or an earlier attempt of
		// this retake that never committed, idempotency key included.
		if _, err := release(ctx); err != nil {
			return err
		}
		expires := s.now().Add(s.rules.HoldWindow).Truncate(time.Millisecond)
		res, err := s.store.Hold(ctx, inventory.HoldRequest{
			ShardID: h.ShardID, HoldID: id.String(), UserID: h.UserID, IdemKey: idem, From: h.From, To: h.To,
			ExpiresAt: expires, DailyCap: 1 << 30, Prefs: prefs, IDOK: idOK, IdemTTL: time.Hour, MaxPassengers: s.rules.MaxPassengers,
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
		if held {
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
