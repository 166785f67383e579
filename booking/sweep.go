package booking

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"tatkal/booking/db"
	"tatkal/booking/inventory"
)

// DefaultSweepGrace is how long past its expiry a hold may wait for its own
// expiry job before the sweeper steps in, how old a Redis hold without a row
// must be before it counts as orphaned, and how long a row must have been
// left alone before a Redis record missing for it forces a rebuild.
const DefaultSweepGrace = 30 * time.Second

// lostAfter is how old a Redis hold with no row must be before its attempt
// counts as lost with its process: far above any commit (milliseconds, or
// seconds while PostgreSQL restarts), well below the hold window.
const lostAfter = 30 * time.Second

// SweepReport says what one sweep did.
type SweepReport struct {
	Expired int // overdue HELD rows released
	Orphans int // Redis holds with no durable row, released
	Synced  int // Redis records brought in line with their row
	Rebuilt int // shards rebuilt: state missing, behind PostgreSQL's epoch, a failed rebuild, or a record no script can repair
	// Promoted: shards whose promotion was overdue (berths kept for the
	// waitlist longer than the grace), run by the sweeper.
	Promoted int
}

// Sweep catches whatever the per-hold jobs missed: HELD rows past expiry;
// berths kept for a waitlist promotion whose job is overdue (the
// promotion is run here, so a job lost or given up cannot keep them for
// ever; until then they stay kept, and nothing below frees them);
// shards in or near their window whose Redis state is missing, behind
// PostgreSQL's epoch or whose last rebuild failed (rebuilt); and every Redis
// record that disagrees with PostgreSQL, whatever its state (PostgreSQL
// wins). One hold or shard that fails does not stop the others: each error
// is logged and all are returned together.
func (s *Service) Sweep(ctx context.Context) (SweepReport, error) {
	var rep SweepReport
	var errs []error
	fail := func(err error) {
		s.log.Error("sweep", "err", err)
		errs = append(errs, err)
	}
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
			fail(fmt.Errorf("sweep: %w", err))
			continue
		}
		rep.Expired++
	}

	rows, err = s.pool.Query(ctx, `SELECT DISTINCT shard_id FROM bookings WHERE kept_for_promotion AND cancelled_at < $1`, cutoff)
	if err != nil {
		return rep, fmt.Errorf("sweep: %w", err)
	}
	late, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return rep, fmt.Errorf("sweep: %w", err)
	}
	for _, shardID := range late {
		s.log.Warn("sweep: berths kept for a waitlist promotion whose job is overdue; promoting now", "shard", shardID)
		if _, err := s.Promote(ctx, shardID); err != nil {
			fail(fmt.Errorf("sweep: %w", err))
			continue
		}
		rep.Promoted++
	}

	rows, err = s.pool.Query(ctx, `SELECT id FROM inventory_shards
		WHERE window_opens_at < $1 AND window_closes_at > $2 ORDER BY id`, s.now().Add(time.Hour), s.now().Add(-24*time.Hour))
	if err != nil {
		fail(fmt.Errorf("sweep: %w", err))
		return rep, errors.Join(errs...)
	}
	shards, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		fail(fmt.Errorf("sweep: %w", err))
		return rep, errors.Join(errs...)
	}
	for _, shardID := range shards {
		if err := s.sweepShard(ctx, shardID, cutoff, &rep, fail); err != nil {
			fail(fmt.Errorf("sweep shard %d: %w", shardID, err))
		}
	}
	return rep, errors.Join(errs...)
}

// sweptRow is PostgreSQL's side of one hold the sweeper compares.
type sweptRow struct {
	want    byte // inventory.RecordState
	berths  []int
	changed time.Time
}

// sweepShard brings one shard's Redis state in line with PostgreSQL. A
// record a script can fix is fixed hold by hold (SyncSeat reads PostgreSQL
// again, so a row that moved on since is judged by its new state); a record
// missing, or with other berths than its row, needs the shard rebuilt.
// PostgreSQL is read first: a hold made after that read looks like a write
// in flight, not like a record that must go.
func (s *Service) sweepShard(ctx context.Context, shardID int64, cutoff time.Time, rep *SweepReport, fail func(error)) error {
	rebuilt, err := s.RebuildIfNeeded(ctx, shardID)
	if err != nil || rebuilt {
		if rebuilt {
			rep.Rebuilt++
		}
		return err
	}
	pg := map[string]sweptRow{}
	read := func(where string, arg any) error {
		rows, err := s.pool.Query(ctx, `SELECT h.id, h.state, h.kind, coalesce(b.status, ''), coalesce(b.kept_for_promotion, false),
			h.berths, greatest(h.updated_at, coalesce(b.cancelled_at, h.updated_at))
			FROM holds h LEFT JOIN bookings b ON b.hold_id = h.id WHERE `+where, arg)
		if err != nil {
			return err
		}
		var id uuid.UUID
		var state, kind, bstatus string
		var kept bool
		var berths []int32
		var changed time.Time
		_, err = pgx.ForEachRow(rows, []any{&id, &state, &kind, &bstatus, &kept, &berths, &changed}, func() error {
			r := sweptRow{want: inventory.RecordState(state, kind, bstatus, kept), changed: changed}
			if r.want == 'H' || r.want == 'C' {
				for _, b := range berths {
					r.berths = append(r.berths, int(b))
				}
			}
			pg[id.String()] = r
			return nil
		})
		return err
	}
	if err := read(`h.shard_id = $1 AND h.state IN ('HELD', 'CONFIRMED')`, shardID); err != nil {
		return err
	}
	recs, err := s.store.Records(ctx, shardID)
	if err != nil {
		return err
	}
	// The rows of records PostgreSQL says occupy nothing (or has none).
	var others []uuid.UUID
	for _, rec := range recs {
		if _, ok := pg[rec.ID]; ok {
			continue
		}
		if id, err := uuid.Parse(rec.ID); err == nil {
			others = append(others, id)
		}
	}
	if len(others) > 0 {
		if err := read(`h.id = ANY($1)`, others); err != nil {
			return err
		}
	}
	rebuild, lost := false, 0
	seen := make(map[string]bool, len(recs))
	for _, rec := range recs {
		seen[rec.ID] = true
		p, ok := pg[rec.ID]
		due := time.UnixMilli(rec.ExpiresMs).Before(cutoff)
		unsold := rec.State == 'H' || rec.State == 'W' || rec.State == 'R'
		var err error
		switch {
		case ok && p.want == rec.State:
			if !slices.Equal(p.berths, rec.Berths) && p.changed.Before(cutoff) {
				rebuild = true
			}
			continue
		case !ok && unsold && !due:
			// A write in flight: a hold before its commit. Unless it was
			// made longer ago than a commit ever takes: then its process
			// died with it (lost, below).
			// The shorter of the configured and the operator's hold
			// window dates the hold no earlier than it can have been made.
			if rec.State != 'R' && time.UnixMilli(rec.ExpiresMs).Add(-min(s.rules.HoldWindow, s.Rules().HoldWindow)).Before(s.now().Add(-lostAfter)) {
				lost++
			}
			continue
		case ok && rec.State == 'R' && p.want == 0 && !due:
			continue // a retake before its commit
		case ok && rec.State == 'R' && p.want == 0:
			err = s.undoRetake(ctx, rec.ID)
			rep.Orphans++
		case !ok:
			if _, err = uuid.Parse(rec.ID); err != nil {
				s.log.Warn("sweep: Redis record with a foreign id left alone", "shard", shardID, "hold", rec.ID)
				continue
			}
			err = s.releaseOrphan(ctx, shardID, rec)
			rep.Orphans++
		default:
			err = s.SyncSeat(ctx, uuid.MustParse(rec.ID))
			rep.Synced++
		}
		if err != nil {
			fail(fmt.Errorf("sweep shard %d hold %s: %w", shardID, rec.ID, err))
		}
	}
	for id, p := range pg {
		if p.want != 0 && !seen[id] && p.changed.Before(cutoff) {
			rebuild = true
		}
	}
	switch {
	case rebuild:
		s.log.Warn("sweep: Redis records missing or on other berths than PostgreSQL's; rebuilding", "shard", shardID)
	case lost > 0:
		// Holds made lostAfter ago with no row: attempts lost with the
		// process that made them (killed before or during its group
		// commit). Waiting for their expiry would keep their seats and
		// answer their keys' retries IN_PROGRESS for minutes; a rebuild
		// from PostgreSQL frees both at once, and its new epoch refuses
		// any such commit still in flight, so none can land afterwards.
		s.log.Warn("sweep: holds with no row long after their commit; their attempts were lost, rebuilding", "shard", shardID, "holds", lost)
		rebuild = true
	}
	if rebuild {
		if _, err := s.Rebuild(ctx, shardID); err != nil {
			return err
		}
		rep.Rebuilt++
	}
	return nil
}

// releaseOrphan frees a Redis record no row stands behind (a hold whose
// durable write failed and whose undo failed too): undo for a hold never
// made durable, cancel for a sold record (which only a rebuild from a row
// since deleted could have written).
func (s *Service) releaseOrphan(ctx context.Context, shardID int64, rec inventory.HoldRecord) error {
	mode := inventory.ReleaseUndo
	if rec.State == 'C' || rec.State == 'X' {
		mode = inventory.ReleaseCancel
	}
	_, err := s.store.Release(ctx, shardID, rec.ID, mode, 0, "")
	return err
}

// undoRetake frees the seats of a retake that never committed (its own undo
// failed). The hold row is locked meanwhile, as the retake keeps it locked
// from its Redis hold to its commit, so a retake in progress is never undone.
func (s *Service) undoRetake(ctx context.Context, raw string) error {
	id, err := uuid.Parse(raw)
	if err != nil {
		return err
	}
	return db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		var shardID, userID int64
		var state string
		if err := tx.QueryRow(ctx, `SELECT shard_id, user_id, state FROM holds WHERE id = $1 FOR UPDATE`, id).
			Scan(&shardID, &userID, &state); err != nil {
			return err
		}
		if state == HoldConfirmed {
			_, err := s.store.Confirm(ctx, shardID, raw)
			return err
		}
		_, err := s.store.Release(ctx, shardID, raw, inventory.ReleaseUndo, userID, "retake:"+raw)
		return err
	})
}
