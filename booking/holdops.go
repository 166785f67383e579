package booking

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

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

// LockHoldTx reads a hold FOR UPDATE in tx.
func LockHoldTx(ctx context.Context, tx pgx.Tx, id uuid.UUID) (HoldInfo, error) {
	var h HoldInfo
	var pax []byte
	var berths []int32
	err := tx.QueryRow(ctx, `SELECT id, user_id, shard_id, idempotency_key, kind, state, from_seq, to_seq, berths, passengers,
		fare_paise, created_at, expires_at, updated_at, extended FROM holds WHERE id = $1 FOR UPDATE`, id).
		Scan(&h.ID, &h.UserID, &h.ShardID, &h.IdemKey, &h.Kind, &h.State, &h.From, &h.To, &berths, &pax,
			&h.FarePaise, &h.CreatedAt, &h.ExpiresAt, &h.UpdatedAt, &h.Extended)
	if errors.Is(err, pgx.ErrNoRows) {
		return h, Errorf(ENOTFOUND, "NO_SUCH_HOLD", "No hold %s.", id)
	}
	if err != nil {
		return h, fmt.Errorf("lock hold %s: %w", id, err)
	}
	for _, b := range berths {
		h.Berths = append(h.Berths, int(b))
	}
	if err := json.Unmarshal(pax, &h.Passengers); err != nil {
		return h, fmt.Errorf("hold %s passengers: %w", id, err)
	}
	return h, nil
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
// reason, in tx. It answers whether the hold was live. Call AfterRelease
// once tx commits.
func (s *Service) ReleaseTx(ctx context.Context, tx pgx.Tx, h HoldInfo, state, reason string) (bool, error) {
	if err := inventory.LockShardShared(ctx, tx, h.ShardID); err != nil {
		return false, err
	}
	tag, err := tx.Exec(ctx, `UPDATE holds SET state = $2, state_reason = $3, updated_at = now(),
		state_version = state_version + 1 WHERE id = $1 AND state = 'HELD'`, h.ID, state, reason)
	if err != nil {
		return false, fmt.Errorf("release hold %s: %w", h.ID, err)
	}
	return tag.RowsAffected() == 1, nil
}

// AfterRelease gives a released hold's seats back in Redis. If Redis is
// unreachable, the sweeper frees them once the hold's expiry passes.
func (s *Service) AfterRelease(ctx context.Context, h HoldInfo) {
	s.funnel.Add(h.ShardID, funnel.Released, 1)
	if _, err := s.store.Release(ctx, h.ShardID, h.ID.String(), inventory.ReleaseHold, h.UserID, ""); err != nil {
		s.log.Warn("release in Redis failed; the sweeper will free it", "hold", h.ID, "err", err)
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
	expires := s.now().Add(time.Minute).Truncate(time.Millisecond)
	res, err := s.store.Hold(ctx, inventory.HoldRequest{
		ShardID: h.ShardID, HoldID: id.String(), UserID: h.UserID, IdemKey: idem, From: h.From, To: h.To,
		ExpiresAt: expires, DailyCap: 1 << 30, Prefs: prefs, IDOK: idOK, IdemTTL: time.Hour, MaxPassengers: s.rules.MaxPassengers,
		BypassUserLimits: true,
	})
	if err != nil {
		return ConfirmResult{}, "", fmt.Errorf("retake hold %s: %w", id, err)
	}
	switch res.Outcome {
	case inventory.NotReady:
		s.TriggerRebuild(h.ShardID)
		return ConfirmResult{}, "", fmt.Errorf("retake hold %s: seat state is being rebuilt", id)
	case inventory.Held:
	default:
		if res.Outcome == inventory.WaitlistOffered {
			s.store.Release(ctx, h.ShardID, id.String(), inventory.ReleaseUndo, h.UserID, idem) //nolint:errcheck
		}
		return ConfirmResult{}, RetakeNoSeat, nil
	}
	undo := func() {
		if _, err := s.store.Release(context.WithoutCancel(ctx), h.ShardID, id.String(), inventory.ReleaseUndo, h.UserID, idem); err != nil {
			s.log.Error("undo retake failed; the sweeper will free it", "hold", id, "err", err)
		}
	}
	var out ConfirmResult
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := inventory.LockShardShared(ctx, tx, h.ShardID); err != nil {
			return err
		}
		var epoch int64
		if err := tx.QueryRow(ctx, `SELECT epoch FROM inventory_shards WHERE id = $1`, h.ShardID).Scan(&epoch); err != nil {
			return err
		}
		if epoch != res.Epoch {
			return fmt.Errorf("shard %d was rebuilt during the retake", h.ShardID)
		}
		tag, err := tx.Exec(ctx, `UPDATE holds SET state = 'HELD', berths = $2, epoch = $3, expires_at = $4,
			state_reason = 're-held after a late payment', updated_at = now(), state_version = state_version + 1
			WHERE id = $1 AND state IN ('EXPIRED', 'RELEASED')`, id, res.Berths, res.Epoch, expires)
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return Errorf(ECONFLICT, "HOLD_CHANGED", "Hold %s changed during the retake.", id)
		}
		if out, err = s.ConfirmTx(ctx, tx, id); err != nil {
			return err
		}
		return inTx(tx, out)
	})
	if err != nil {
		undo()
		return ConfirmResult{}, "", fmt.Errorf("retake hold %s: %w", id, err)
	}
	s.AfterConfirm(ctx, out)
	return out, RetakeConfirmed, nil
}
