package review

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"tatkal/booking"
	"tatkal/booking/audit"
	"tatkal/booking/db"
)

// DefaultEnforceDelay is how long after a decision (or its approval) its
// enforcement waits: members see nothing change until a later batch, so an
// attacker cannot tie a block to the request that caused it.
const DefaultEnforceDelay = 30 * time.Minute

// enforcerActor is who the audit log names for the batch job's acts; the
// decision's analysts are named in the decision's own records.
const enforcerActor = "system:fraud-enforcer"

// Enforcer carries out decided clusters in batches: bookings cancelled
// through the booking service's cancellation (refund per the Tatkal rules,
// berths back to the pool), accounts banned or given harder challenges.
// Each act is recorded with the act in one transaction, so a job stopped
// midway and run again never acts twice.
type Enforcer struct {
	Review  *Service
	Booking *booking.Service
	// Pause is a test hook ("fraud.enforce.after-cancel"); nil in production.
	Pause booking.PauseFunc
	Log   *slog.Logger
}

// RunDue enforces every decision whose time has come (approved, if it
// needed approval), oldest first, and returns how many it finished.
func (e *Enforcer) RunDue(ctx context.Context) (int, error) {
	rows, err := e.Review.pool.Query(ctx, `SELECT id FROM fraud_decisions
		WHERE enforced_at IS NULL AND enforce_after <= $1 AND (NOT needs_approval OR approved_at IS NOT NULL)
		ORDER BY enforce_after, id LIMIT 100`, e.Review.now())
	if err != nil {
		return 0, fmt.Errorf("due decisions: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return 0, fmt.Errorf("due decisions: %w", err)
	}
	for i, id := range ids {
		if err := e.Enforce(ctx, id); err != nil {
			return i, err
		}
	}
	return len(ids), nil
}

// Enforce carries out one decision. Running it again after a stop finds
// what was done and does the rest.
func (e *Enforcer) Enforce(ctx context.Context, decisionID int64) error {
	pool := e.Review.pool
	var outcome string
	var clusterID int64
	var window time.Time
	var enforced *time.Time
	err := pool.QueryRow(ctx, `SELECT d.outcome, d.cluster_id, c.window_opens_at, d.enforced_at
		FROM fraud_decisions d JOIN fraud_clusters c ON c.id = d.cluster_id WHERE d.id = $1`, decisionID).
		Scan(&outcome, &clusterID, &window, &enforced)
	if err != nil {
		return fmt.Errorf("enforce decision %d: %w", decisionID, err)
	}
	if enforced != nil {
		return nil
	}
	switch outcome {
	case CancelBookings:
		if err := e.cancelBookings(ctx, decisionID, clusterID, window); err != nil {
			return err
		}
	case Ban, ExtraChallenge:
		if err := e.accounts(ctx, decisionID, clusterID, outcome); err != nil {
			return err
		}
	}
	_, err = pool.Exec(ctx, `UPDATE fraud_decisions SET enforced_at = now() WHERE id = $1 AND enforced_at IS NULL`, decisionID)
	if err != nil {
		return fmt.Errorf("enforce decision %d: %w", decisionID, err)
	}
	return audit.Write(ctx, pool, enforcerActor, "fraud.enforce", fmt.Sprintf("decision:%d", decisionID),
		map[string]any{"outcome": outcome, "cluster": clusterID})
}

// cancelBookings cancels the members' live bookings of the cluster's
// window, one transaction per booking holding both the cancellation and
// its record.
func (e *Enforcer) cancelBookings(ctx context.Context, decisionID, clusterID int64, window time.Time) error {
	pool := e.Review.pool
	rows, err := pool.Query(ctx, `SELECT b.hold_id, b.user_id FROM bookings b
		JOIN fraud_cluster_members m ON m.user_id = b.user_id AND m.cluster_id = $1
		JOIN inventory_shards s ON s.id = b.shard_id AND s.window_opens_at = $2
		WHERE NOT EXISTS (SELECT 1 FROM fraud_enforcements f WHERE f.decision_id = $3 AND f.hold_id = b.hold_id AND f.action = 'CANCEL')
		ORDER BY b.id`, clusterID, window, decisionID)
	if err != nil {
		return fmt.Errorf("bookings of cluster %d: %w", clusterID, err)
	}
	type target struct {
		hold uuid.UUID
		user int64
	}
	targets, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (target, error) {
		var t target
		return t, r.Scan(&t.hold, &t.user)
	})
	if err != nil {
		return fmt.Errorf("bookings of cluster %d: %w", clusterID, err)
	}
	for _, t := range targets {
		var done booking.CancelDone
		err := db.Transact(ctx, pool, func(tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, `INSERT INTO fraud_enforcements (decision_id, user_id, hold_id, action)
				VALUES ($1, $2, $3, 'CANCEL') ON CONFLICT DO NOTHING`, decisionID, t.user, t.hold)
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 {
				return nil // done by an earlier run
			}
			done, err = e.Booking.CancelBookingTx(ctx, tx, t.hold, cancelReason(decisionID))
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE fraud_enforcements SET refund_paise = $4
				WHERE decision_id = $1 AND hold_id = $2 AND action = 'CANCEL' AND user_id = $3`, decisionID, t.hold, t.user, done.RefundPaise); err != nil {
				return err
			}
			return audit.Write(ctx, tx, enforcerActor, "fraud.cancel_booking", "hold:"+t.hold.String(),
				map[string]any{"decision": decisionID, "refund_paise": done.RefundPaise, "released": done.Released})
		})
		if code := booking.ErrorCode(err); err != nil && code != booking.EINTERNAL {
			// Nothing to cancel by the rules (too late, not a ticket):
			// recorded as done with nothing refunded, so the batch goes on.
			e.log().Warn("fraud enforcement: booking not cancelled", "decision", decisionID, "hold", t.hold, "err", err)
			if _, err := pool.Exec(ctx, `INSERT INTO fraud_enforcements (decision_id, user_id, hold_id, action)
				VALUES ($1, $2, $3, 'CANCEL') ON CONFLICT DO NOTHING`, decisionID, t.user, t.hold); err != nil {
				return fmt.Errorf("record skipped booking %s: %w", t.hold, err)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("cancel booking of hold %s for decision %d: %w", t.hold, decisionID, err)
		}
		e.Booking.AfterCancelBooking(ctx, done)
		e.Pause.At(ctx, "fraud.enforce.after-cancel")
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// cancelReason is the cancel reason of the bookings a decision cancelled:
// an upheld appeal refunds exactly those (and not one the passenger had
// cancelled before, which enforcement records too).
func cancelReason(decisionID int64) string {
	return fmt.Sprintf("cancelled after fraud review (decision %d)", decisionID)
}

// accounts bans the members or makes their challenges harder. A ban also
// ends their sessions' booking (holds are refused at the group commit); the
// member can still sign in to see why and appeal.
func (e *Enforcer) accounts(ctx context.Context, decisionID, clusterID int64, outcome string) error {
	action, set := "BAN", `banned_at = coalesce(banned_at, now())`
	if outcome == ExtraChallenge {
		action, set = "EXTRA_CHALLENGE", `risk_score = greatest(risk_score, 1)`
	}
	return db.Transact(ctx, e.Review.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `
			WITH todo AS (
				INSERT INTO fraud_enforcements (decision_id, user_id, hold_id, action)
				SELECT $1, user_id, '00000000-0000-0000-0000-000000000000', $3 FROM fraud_cluster_members WHERE cluster_id = $2
				ON CONFLICT DO NOTHING RETURNING user_id)
			UPDATE users SET `+set+` WHERE id IN (SELECT user_id FROM todo)`, decisionID, clusterID, action)
		if err != nil {
			return fmt.Errorf("%s members of cluster %d: %w", action, clusterID, err)
		}
		return audit.Write(ctx, tx, enforcerActor, "fraud."+map[string]string{"BAN": "ban", "EXTRA_CHALLENGE": "extra_challenge"}[action],
			fmt.Sprintf("cluster:%d", clusterID), map[string]any{"decision": decisionID, "accounts": tag.RowsAffected()})
	})
}

func (e *Enforcer) log() *slog.Logger {
	if e.Log != nil {
		return e.Log
	}
	return slog.Default()
}

// EnforceArgs is the periodic batch that enforces due decisions.
type EnforceArgs struct{}

func (EnforceArgs) Kind() string { return "fraud_enforce" }

// InsertOpts: one batch at a time; a batch stopped midway is retried and
// picks up where it stopped.
func (EnforceArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: river.QueueDefault, MaxAttempts: 10,
		UniqueOpts: river.UniqueOpts{ByState: []rivertype.JobState{
			rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
			rivertype.JobStateRetryable, rivertype.JobStateScheduled,
		}}}
}

// EnforceWorker runs EnforceArgs.
type EnforceWorker struct {
	river.WorkerDefaults[EnforceArgs]
	Enforcer *Enforcer
}

func (w *EnforceWorker) Work(ctx context.Context, job *river.Job[EnforceArgs]) error {
	n, err := w.Enforcer.RunDue(ctx)
	if n > 0 {
		w.Enforcer.log().Info("fraud decisions enforced", "decisions", n)
	}
	return err
}
