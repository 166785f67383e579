package fraud

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"tatkal/booking/db"
)

// Service runs clustering against the database.
type Service struct {
	Pool      *pgxpool.Pool
	Clusterer Clusterer
	// EarlyPasses: how long after a window opens it is clustered while
	// still open, so a decision is enforced long before the chart (after
	// the chart a cancellation frees nothing). nil is DefaultEarlyPasses;
	// an empty slice clusters only once every shard of the window closed.
	EarlyPasses []time.Duration
}

// DefaultEarlyPasses: 10 minutes after the opening (the rush's holds are
// taken, most paid) and 30 (the agents' bar lifts; late payments are in).
var DefaultEarlyPasses = []time.Duration{10 * time.Minute, 30 * time.Minute}

func (s *Service) earlyPasses() []time.Duration {
	if s.EarlyPasses == nil {
		return DefaultEarlyPasses
	}
	return s.EarlyPasses
}

// ClusterWindow runs one window's clustering in one transaction, so
// analysts never see a half-replaced set of clusters. Two runs of the same
// window (the scheduled one and one on demand) take turns on an advisory
// lock rather than interleave their deletes and inserts.
func (s *Service) ClusterWindow(ctx context.Context, window time.Time) (Result, error) {
	// Signals still queued by the live path belong in this run.
	if _, err := Drain(ctx, s.Pool); err != nil {
		return Result{}, err
	}
	var res Result
	err := db.Transact(ctx, s.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('fraud_cluster'), hashtext($1::text))`,
			window.UTC().Format(time.RFC3339Nano)); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		// The edge query sorts and groups ~10 rows per signal; at the
		// default 4 MB it spilled to disk (EXPLAIN ANALYZE, 11k signals).
		if _, err := tx.Exec(ctx, `SET LOCAL work_mem = '64MB'`); err != nil {
			return fmt.Errorf("work_mem: %w", err)
		}
		var err error
		if res, err = s.Clusterer.Run(ctx, tx, window); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `
			INSERT INTO fraud_runs (window_opens_at, signals, edges, clusters, flagged) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (window_opens_at) DO UPDATE SET ran_at = now(), signals = EXCLUDED.signals,
				edges = EXCLUDED.edges, clusters = EXCLUDED.clusters, flagged = EXCLUDED.flagged`,
			window, res.Signals, res.Edges, len(res.Clusters), res.Flagged())
		return err
	})
	if err != nil {
		return Result{}, fmt.Errorf("fraud cluster window %s: %w", window.Format(time.RFC3339), err)
	}
	slog.Info("fraud clustering", "window", window, "signals", res.Signals, "edges", res.Edges,
		"clusters", len(res.Clusters), "flagged", res.Flagged())
	return res, nil
}

// DueWindows returns the windows with signals and no run since their last
// signal was recorded that are due: every shard of the window has closed,
// or an early pass (EarlyPasses after the opening) has come with no run
// since it. What the scheduler enqueues; at most limit, oldest first.
func (s *Service) DueWindows(ctx context.Context, now time.Time, limit int) ([]time.Time, error) {
	passes := make([]float64, len(s.earlyPasses()))
	for i, d := range s.earlyPasses() {
		passes[i] = d.Seconds()
	}
	rows, err := s.Pool.Query(ctx, `
		SELECT f.window_opens_at
		FROM (SELECT window_opens_at, max(recorded_at) AS last FROM fraud_signals GROUP BY window_opens_at) f
		LEFT JOIN fraud_runs r USING (window_opens_at)
		WHERE (r.ran_at IS NULL OR r.ran_at < f.last)
		  AND (NOT EXISTS (SELECT 1 FROM inventory_shards s WHERE s.window_opens_at = f.window_opens_at AND s.window_closes_at > $1)
		       OR EXISTS (SELECT 1 FROM unnest($3::float8[]) AS p(secs)
		                  WHERE f.window_opens_at + make_interval(secs => p.secs) <= $1
		                    AND (r.ran_at IS NULL OR r.ran_at < f.window_opens_at + make_interval(secs => p.secs))))
		ORDER BY f.window_opens_at LIMIT $2`, now, limit, passes)
	if err != nil {
		return nil, fmt.Errorf("fraud due windows: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
	if err != nil {
		return nil, fmt.Errorf("fraud due windows: %w", err)
	}
	return out, nil
}
