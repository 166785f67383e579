package booking

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"tatkal/booking/inventory"
)

// DefaultSweepGrace is how long past its expiry a hold may wait for its own
// expiry job before the sweeper steps in, and how old a Redis hold without
// a row must be before it counts as orphaned.
const DefaultSweepGrace = 30 * time.Second

// SweepReport says what one sweep did.
type SweepReport struct {
	Expired int // overdue HELD rows released
	Orphans int // Redis holds with no row, released
	Synced  int // Redis holds brought in line with their row
	Rebuilt int // shards whose Redis state was missing
}

// Sweep catches whatever the per-hold jobs missed: HELD rows past expiry,
// Redis holds past expiry whose row is gone or says otherwise (a hold whose
// durable write failed and whose undo also failed), and shards in or near
// their window whose Redis state is missing.
func (s *Service) Sweep(ctx context.Context) (SweepReport, error) {
	var rep SweepReport
	cutoff := s.now().Add(-s.sweepGrace)
	rows, err := s.pool.Query(ctx, `SELECT id FROM holds WHERE state = 'HELD' AND expires_at < $1 LIMIT 5000`, cutoff)
	if err != nil {
		return rep, fmt.Errorf("sweep: %w", err)
	}
	overdue, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return rep, fmt.Errorf("sweep: %w", err)
	}
	for _, id := range overdue {
		if _, err := s.ExpireHold(ctx, id); err != nil {
			return rep, err
		}
		rep.Expired++
	}

	rows, err = s.pool.Query(ctx, `SELECT id FROM inventory_shards
		WHERE window_opens_at < $1 AND window_closes_at > $2 ORDER BY id`, s.now().Add(time.Hour), s.now().Add(-24*time.Hour))
	if err != nil {
		return rep, fmt.Errorf("sweep: %w", err)
	}
	shards, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return rep, fmt.Errorf("sweep: %w", err)
	}
	for _, shardID := range shards {
		ready, _, err := s.store.Ready(ctx, shardID)
		if err != nil {
			return rep, fmt.Errorf("sweep shard %d: %w", shardID, err)
		}
		if !ready {
			if _, err := s.Rebuild(ctx, shardID); err != nil {
				return rep, err
			}
			rep.Rebuilt++
			continue
		}
		due, err := s.store.DueHolds(ctx, shardID, cutoff, 5000)
		if err != nil {
			return rep, err
		}
		for _, raw := range due {
			id, err := uuid.Parse(raw)
			if err != nil {
				continue
			}
			var state string
			err = s.pool.QueryRow(ctx, `SELECT state FROM holds WHERE id = $1`, id).Scan(&state)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
				if _, err := s.store.Release(ctx, shardID, raw, inventory.ReleaseHold, 0, ""); err != nil {
					return rep, err
				}
				rep.Orphans++
			case err != nil:
				return rep, fmt.Errorf("sweep hold %s: %w", id, err)
			case state == HoldHeld:
				if _, err := s.ExpireHold(ctx, id); err != nil {
					return rep, err
				}
				rep.Expired++
			default:
				if err := s.SyncSeat(ctx, id); err != nil {
					return rep, err
				}
				rep.Synced++
			}
		}
	}
	return rep, nil
}
