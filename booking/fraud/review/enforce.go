package review

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"tatkal/booking"
	"tatkal/booking/audit"
	"tatkal/booking/db"
	"tatkal/booking/india"
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
// berths back to the pool), the members' holds that could still become
// tickets ended, accounts banned or given harder challenges. Each act is
// recorded with the act in one transaction, so a job stopped midway and run
// again never acts twice.
type Enforcer struct {
	Review  *Service
	Booking *booking.Service
	// Pause is a test hook ("fraud.enforce.after-cancel",
	// "fraud.enforce.after-end-hold"); nil in production.
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
//
// A decision is enforced for good once it has run, payments still in
// flight included: a member's hold whose payment was pending at the bank
// is ended with the rest (endHolds), so when the bank's success comes the
// payment path finds the hold CANCELLED and refunds it in full; no ticket
// is issued after the decision. The other way, issuing the ticket and
// sweeping the members' later bookings until their payments settle, was
// not taken: the ticket would be issued, sent to the reservation core and
// then cancelled, and a confirmed Tatkal ticket cancelled refunds nothing,
// so a payment the decision caught in flight would be kept for a ticket
// the passenger never had; and the decision could not be called done
// while any member's bank was still deciding. A hold a member makes after
// enforcement is a new act: a ban refuses it, and any other decision
// leaves it to a new review.
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
		// The holds first: one confirmed meanwhile is a booking by the time
		// the bookings are read, and is cancelled as such.
		if err := e.endHolds(ctx, decisionID, clusterID, &window); err != nil {
			return err
		}
		if err := e.cancelBookings(ctx, decisionID, clusterID, window); err != nil {
			return err
		}
	case Ban:
		// The ban first: from its commit no hold of theirs is written and
		// no payment of theirs confirms (booking.HoldInfo.Unconfirmable),
		// so the holds read after it are all they will have.
		if err := e.accounts(ctx, decisionID, clusterID, outcome); err != nil {
			return err
		}
		if err := e.endHolds(ctx, decisionID, clusterID, nil); err != nil {
			return err
		}
	case ExtraChallenge, Watch:
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
		JOIN fraud_decision_members m ON m.user_id = b.user_id AND m.decision_id = $1
		JOIN inventory_shards s ON s.id = b.shard_id AND s.window_opens_at = $2
		WHERE NOT EXISTS (SELECT 1 FROM fraud_enforcements f WHERE f.decision_id = $1 AND f.hold_id = b.hold_id AND f.action = 'CANCEL')
		ORDER BY b.id`, decisionID, window)
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
			if done.Released {
				var pnr string
				if err := tx.QueryRow(ctx, `SELECT pnr FROM bookings WHERE hold_id = $1`, t.hold).Scan(&pnr); err != nil {
					return fmt.Errorf("pnr of hold %s: %w", t.hold, err)
				}
				if err := booking.NotifyT(ctx, tx, t.user, "BOOKING_CANCELLED", pnr, "msg.bookingreview", pnr, india.Decimal(done.RefundPaise)); err != nil {
					return err
				}
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

// cancelReason is the cancel reason of the holds and bookings a decision
// cancelled: an upheld appeal refunds exactly those bookings (and not one
// the passenger had cancelled before, which enforcement records too).
func cancelReason(decisionID int64) string { return booking.ReviewCancelReason(decisionID) }

// endHolds ends the members' holds that have not become tickets and still
// could (booking.Holds.EndHoldTx): a live one, whose payment may be
// pending at the bank, and a lapsed one with a payment not refunded, which
// a late success would otherwise retake. A hold's payment that succeeds
// afterwards is refunded in full. Within window's shards, as the bookings
// the decision cancels; every shard for a ban (window nil). Shards already
// charted are left out: no hold of theirs can become a ticket. One
// transaction per hold, holding its end, its record (a CANCEL of the hold),
// the member's notice and the audit; the seats go back in Redis after it.
// A hold ended is no longer selected, so a run stopped midway and run
// again ends each once.
func (e *Enforcer) endHolds(ctx context.Context, decisionID, clusterID int64, window *time.Time) error {
	pool := e.Review.pool
	rows, err := pool.Query(ctx, `SELECT h.id FROM holds h
		JOIN fraud_decision_members m ON m.user_id = h.user_id AND m.decision_id = $1
		JOIN inventory_shards s ON s.id = h.shard_id AND s.chart_state = 'OPEN' AND ($2::timestamptz IS NULL OR s.window_opens_at = $2)
		WHERE h.state = 'HELD'
		   OR (h.state IN ('EXPIRED', 'RELEASED') AND EXISTS (SELECT 1 FROM payments p WHERE p.hold_id = h.id
		       AND NOT EXISTS (SELECT 1 FROM refunds r WHERE r.payment_id = p.id)))
		ORDER BY h.id`, decisionID, window)
	if err != nil {
		return fmt.Errorf("holds of cluster %d: %w", clusterID, err)
	}
	holds, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return fmt.Errorf("holds of cluster %d: %w", clusterID, err)
	}
	for _, id := range holds {
		var h booking.HoldInfo
		var from string
		err := db.Transact(ctx, pool, func(tx pgx.Tx) error {
			var err error
			if h, from, err = e.Booking.EndHoldTx(ctx, tx, id, cancelReason(decisionID)); err != nil || from == "" {
				return err // confirmed meanwhile (cancelBookings cancels it) or ended before
			}
			if _, err := tx.Exec(ctx, `INSERT INTO fraud_enforcements (decision_id, user_id, hold_id, action)
				VALUES ($1, $2, $3, 'CANCEL') ON CONFLICT DO NOTHING`, decisionID, h.UserID, id); err != nil {
				return fmt.Errorf("record ended hold: %w", err)
			}
			sh, err := e.Booking.Catalog().ByIDTx(ctx, tx, h.ShardID)
			if err != nil {
				return err
			}
			journey := fmt.Sprintf("%s %s on %s", sh.Train, sh.Class, sh.Date.Format("2 Jan 2006"))
			if err := booking.NotifyT(ctx, tx, h.UserID, "HOLD_CANCELLED", id.String(), "msg.holdreview", journey); err != nil {
				return err
			}
			return audit.Write(ctx, tx, enforcerActor, "fraud.end_hold", "hold:"+id.String(),
				map[string]any{"decision": decisionID, "from": from})
		})
		if err != nil {
			return fmt.Errorf("end hold %s for decision %d: %w", id, decisionID, err)
		}
		if from == booking.HoldHeld {
			e.Booking.AfterRelease(ctx, h)
		}
		e.Pause.At(ctx, "fraud.enforce.after-end-hold")
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

// accounts bans the members or makes their challenges harder. A ban also
// ends their sessions' booking (holds are refused at the group commit, and
// a payment for a hold they have is refunded, not confirmed); the member
// can still sign in to see why and appeal.
// A watch lowers the bar for the member (harder challenges) until it
// lapses, and tells them nothing: a watched ring learns nothing from it.
func (e *Enforcer) accounts(ctx context.Context, decisionID, clusterID int64, outcome string) error {
	action, set := "BAN", `UPDATE users SET banned_at = coalesce(banned_at, now()) WHERE id IN (SELECT user_id FROM todo) RETURNING id`
	switch outcome {
	case ExtraChallenge:
		action, set = "EXTRA_CHALLENGE", `UPDATE users SET risk_score = greatest(risk_score, 1) WHERE id IN (SELECT user_id FROM todo) RETURNING id`
	case Watch:
		action, set = "WATCH", `INSERT INTO fraud_watch (user_id, decision_id, until) SELECT user_id, $1, $3::timestamptz FROM todo
			ON CONFLICT (user_id) DO UPDATE SET decision_id = EXCLUDED.decision_id, until = greatest(fraud_watch.until, EXCLUDED.until)
			RETURNING user_id`
	}
	return db.Transact(ctx, e.Review.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `
			WITH todo AS (
				INSERT INTO fraud_enforcements (decision_id, user_id, hold_id, action)
				SELECT $1, user_id, '00000000-0000-0000-0000-000000000000', $2 FROM fraud_decision_members WHERE decision_id = $1
				ON CONFLICT DO NOTHING RETURNING user_id)
			`+set, append([]any{decisionID, action}, watchArgs(outcome, e.Review.now())...)...)
		if err != nil {
			return fmt.Errorf("%s members of cluster %d: %w", action, clusterID, err)
		}
		users, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return fmt.Errorf("%s members of cluster %d: %w", action, clusterID, err)
		}
		if action == "BAN" {
			// The member is told, and how to appeal (a cancellation tells
			// them with each ticket).
			for _, u := range users {
				if err := booking.NotifyT(ctx, tx, u, "ACCOUNT_SUSPENDED", fmt.Sprintf("decision:%d:user:%d", decisionID, u), "msg.banreview"); err != nil {
					return err
				}
			}
		}
		return audit.Write(ctx, tx, enforcerActor, "fraud."+strings.ToLower(action),
			fmt.Sprintf("cluster:%d", clusterID), map[string]any{"decision": decisionID, "accounts": len(users)})
	})
}

// WatchFor is how long a WATCH decision keeps its members' challenges
// harder.
const WatchFor = 30 * 24 * time.Hour

func watchArgs(outcome string, now time.Time) []any {
	if outcome == Watch {
		return []any{now.Add(WatchFor)}
	}
	return nil
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
