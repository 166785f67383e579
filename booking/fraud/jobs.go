package fraud

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// ClusterWindowArgs clusters one window's accounts: enqueued by the
// scheduler once the window has closed, or on demand from the console.
type ClusterWindowArgs struct {
	WindowOpensAt time.Time `json:"window_opens_at"`
}

func (ClusterWindowArgs) Kind() string { return "fraud_cluster_window" }

// InsertOpts: one queued or running run per window, but a finished one
// does not block the next (signals recorded after a run make it due again).
func (ClusterWindowArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: river.QueueDefault, MaxAttempts: 10,
		UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
			rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
			rivertype.JobStateRetryable, rivertype.JobStateScheduled,
		}}}
}

// ScheduleArgs is the periodic job that enqueues a ClusterWindowArgs for
// every closed window not yet clustered since its last signal.
type ScheduleArgs struct{}

func (ScheduleArgs) Kind() string { return "fraud_schedule" }
func (ScheduleArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: river.QueueDefault, MaxAttempts: 3}
}

// ClusterWorker is the thin worker for ClusterWindowArgs.
type ClusterWorker struct {
	river.WorkerDefaults[ClusterWindowArgs]
	Svc *Service
}

func (w *ClusterWorker) Work(ctx context.Context, job *river.Job[ClusterWindowArgs]) error {
	_, err := w.Svc.ClusterWindow(ctx, job.Args.WindowOpensAt)
	return err
}

// Timeout: a window of a million holds needs more than River's minute.
func (w *ClusterWorker) Timeout(*river.Job[ClusterWindowArgs]) time.Duration { return 15 * time.Minute }

// ScheduleWorker enqueues the due windows' runs.
type ScheduleWorker struct {
	river.WorkerDefaults[ScheduleArgs]
	Svc *Service
}

func (w *ScheduleWorker) Work(ctx context.Context, job *river.Job[ScheduleArgs]) error {
	due, err := w.Svc.DueWindows(ctx, time.Now(), 100)
	if err != nil {
		return err
	}
	if len(due) == 0 {
		return nil
	}
	client := river.ClientFromContext[pgx.Tx](ctx)
	params := make([]river.InsertManyParams, len(due))
	for i, win := range due {
		params[i] = river.InsertManyParams{Args: ClusterWindowArgs{WindowOpensAt: win}}
	}
	if _, err := client.InsertMany(ctx, params); err != nil {
		return fmt.Errorf("fraud schedule: enqueue %d windows: %w", len(due), err)
	}
	return nil
}

// DrainArgs is the periodic job that writes the queued signals (Enqueue)
// into fraud_signals.
type DrainArgs struct{}

func (DrainArgs) Kind() string { return "fraud_signal_drain" }
func (DrainArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: river.QueueDefault, MaxAttempts: 3}
}

// DrainWorker runs Drain.
type DrainWorker struct {
	river.WorkerDefaults[DrainArgs]
	Pool *pgxpool.Pool
}

func (w *DrainWorker) Work(ctx context.Context, job *river.Job[DrainArgs]) error {
	_, err := Drain(ctx, w.Pool)
	return err
}
