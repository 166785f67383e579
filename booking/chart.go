package booking

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"tatkal/booking/db"
	"tatkal/booking/inventory"
)

// ChartArgs prepares the chart of one shard, scheduled at its chart time
// (Rules.ChartBefore before departure from the origin). Unique per shard.
type ChartArgs struct {
	ShardID int64 `json:"shard_id"`
}

func (ChartArgs) Kind() string { return "chart_prepare" }
func (ChartArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueMoney, MaxAttempts: 100, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// ChartScheduleArgs schedules the chart jobs of shards not charted yet
// (periodic; each shard's job is unique, so repeating it is harmless).
type ChartScheduleArgs struct{}

func (ChartScheduleArgs) Kind() string { return "chart_schedule" }
func (ChartScheduleArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueMoney, MaxAttempts: 3}
}

// ScheduleCharts inserts a chart job for every open shard departing within
// the next two days whose chart time is ahead, at that time (unique per
// shard: the job stays in River's table, so a worker down at chart time
// runs it when it comes back). It returns how many shards it looked at.
func (s *Service) ScheduleCharts(ctx context.Context) (int, error) {
	rows, err := s.pool.Query(ctx, `SELECT id FROM inventory_shards WHERE chart_state = 'OPEN'
		AND journey_date <= (now() AT TIME ZONE 'Asia/Kolkata')::date + 2`)
	if err != nil {
		return 0, fmt.Errorf("schedule charts: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return 0, fmt.Errorf("schedule charts: %w", err)
	}
	err = db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		for _, id := range ids {
			shard, err := s.catalog.ByID(ctx, id)
			if err != nil {
				return err
			}
			at := shard.DepartsAt.Add(-s.rules.ChartBefore)
			if !at.After(s.now()) {
				// A shard made after its chart time is not charted behind
				// anyone's back; a job scheduled before runs late instead.
				continue
			}
			if _, err := s.jobs.InsertTx(ctx, tx, ChartArgs{ShardID: id}, &river.InsertOpts{ScheduledAt: at}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("schedule charts: %w", err)
	}
	return len(ids), nil
}

// ChartReport says what preparing a chart did.
type ChartReport struct {
	Already   bool // charted before: nothing done
	Promoted  []Promoted
	Cancelled []string // PNRs of the waitlisted tickets cancelled with a refund
}

// Chart prepares the chart of a shard: frozen (its window closed, no hold
// granted after), the waitlist confirmed onto whatever berths are free,
// the rest of it cancelled and refunded less clerkage through the
// cancellation's own refund path, the core sent the confirmed chart, and
// the shard marked CHARTED. All in one transaction under the shard's
// exclusive lock; a retried job finds it CHARTED and does nothing again,
// so each waitlisted ticket is refunded once.
func (s *Service) Chart(ctx context.Context, shardID int64) (ChartReport, error) {
	var rep ChartReport
	var cancelled []CancelDone
	err := db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		rep, cancelled = ChartReport{}, nil
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, $2)", inventory.ShardLockClass, int32(shardID)); err != nil {
			return err
		}
		var state string
		if err := tx.QueryRow(ctx, `SELECT chart_state FROM inventory_shards WHERE id = $1 FOR UPDATE`, shardID).Scan(&state); err != nil {
			return err
		}
		if state == "CHARTED" {
			rep.Already = true
			return nil
		}
		var err error
		if rep.Promoted, err = s.promoteTx(ctx, tx, shardID); err != nil {
			return err
		}
		// Frozen from here: no hold, no promotion.
		if _, err := tx.Exec(ctx, `UPDATE inventory_shards SET chart_state = 'CHARTING',
			window_closes_at = least(window_closes_at, now()) WHERE id = $1`, shardID); err != nil {
			return err
		}
		waiting, err := s.waitlistTx(ctx, tx, shardID)
		if err != nil {
			return err
		}
		for _, w := range waiting {
			v, err := s.view(ctx, tx, w.holdID)
			if err != nil {
				return err
			}
			done, err := s.cancelBookingTx(ctx, tx, v, "waitlisted at charting", nil)
			if err != nil {
				return fmt.Errorf("cancel %s at charting: %w", w.pnr, err)
			}
			cancelled = append(cancelled, done)
			rep.Cancelled = append(rep.Cancelled, w.pnr)
			body := fmt.Sprintf("PNR %s was still waitlisted (TQWL/%d) when the chart was prepared and is cancelled. "+
				"Refund of Rs %s (the fare less clerkage) is on its way.", w.pnr, w.wl, Rupees(done.RefundPaise))
			if err := Notify(ctx, tx, w.userID, "CHART", w.pnr, "Not confirmed at charting: PNR "+w.pnr, body); err != nil {
				return err
			}
		}
		ref := fmt.Sprintf("CH%d-%s", shardID, time.Now().UTC().Format("20060102T150405"))
		_, err = tx.Exec(ctx, `UPDATE inventory_shards SET chart_state = 'CHARTED', charted_at = now(), chart_ref = $2
			WHERE id = $1`, shardID, ref)
		return err
	})
	if err != nil {
		return rep, fmt.Errorf("chart shard %d: %w", shardID, err)
	}
	if rep.Already {
		return rep, nil
	}
	for _, d := range cancelled {
		s.AfterCancelBooking(ctx, d)
	}
	if _, err := s.Rebuild(ctx, shardID); err != nil {
		s.log.Warn("rebuild after charting failed; the sweeper rebuilds it", "shard", shardID, "err", err)
	}
	s.log.Info("chart prepared", "shard", shardID, "promoted", len(rep.Promoted), "cancelled", len(rep.Cancelled))
	return rep, nil
}
