package fraud

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"tatkal/booking/db"
)

// Enqueue queues sigs for recording in q's transaction: one narrow row,
// validated and hashed, for Drain to write into fraud_signals. The
// confirmation calls it; the hold's group commit sends the same row with
// its other statements (QueueInbox), so the live path pays one insert
// whatever the batch and no round trip of its own. An invalid signal is
// logged and left out; the others go on, and so does the caller's
// transaction: only the database failing the insert is an error.
func (r Recorder) Enqueue(ctx context.Context, q Querier, sigs []Signal) error {
	raw, err := r.inboxRow(ctx, sigs, nil)
	if err != nil || raw == nil {
		return err
	}
	if _, err := q.Exec(ctx, inboxInsert, raw); err != nil {
		return fmt.Errorf("fraud enqueue: %w", err)
	}
	return nil
}

// QueueInbox is Enqueue as one more statement of the caller's batch, for
// the group commit: sigs are its holds' signals and refused the attempts
// its passenger limit refused (each HoldID the id the refused hold would
// have had), which ride the same row. A refused attempt is a tout's ring
// reaching past the limit, and nothing else records it.
func (r Recorder) QueueInbox(ctx context.Context, b *pgx.Batch, sigs, refused []Signal) error {
	raw, err := r.inboxRow(ctx, sigs, refused)
	if err != nil || raw == nil {
		return err
	}
	b.Queue(inboxInsert, raw)
	return nil
}

const inboxInsert = `INSERT INTO fraud_signal_inbox (rows) VALUES ($1)`

// inboxRow is the inbox row of sigs and refused, or nil when there is
// nothing to record.
func (r Recorder) inboxRow(ctx context.Context, sigs, refused []Signal) ([]byte, error) {
	if (len(sigs) == 0 && len(refused) == 0) || r.Discarding() {
		return nil, nil
	}
	b, err := r.prepare(sigs, func(s Signal, err error) {
		slog.WarnContext(ctx, "fraud signal not recorded; the hold is", "hold", s.HoldID, "err", err)
	})
	if err != nil {
		slog.WarnContext(ctx, "fraud signals not recorded; the holds are", "signals", len(sigs), "err", err)
		return nil, nil
	}
	if len(refused) > 0 {
		rb, err := r.prepare(refused, func(s Signal, err error) {
			slog.WarnContext(ctx, "refused attempt not recorded", "attempt", s.HoldID, "err", err)
		})
		if err != nil {
			slog.WarnContext(ctx, "refused attempts not recorded", "attempts", len(refused), "err", err)
		} else if len(rb.Holds) > 0 {
			b.Refused = &rb
		}
	}
	if b.empty() {
		return nil, nil
	}
	raw, err := json.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("fraud enqueue: %w", err)
	}
	return raw, nil
}

// drainLimit is how many queued batches one drain transaction takes.
const drainLimit = 200

// Drain writes every queued batch into fraud_signals, oldest first, and
// returns how many signals it wrote. Drains take turns (an advisory lock),
// so a hold's own batch, queued when it committed, is always written before
// its confirmation's, queued later. A batch the database refuses is logged
// and dropped: a signal never blocks the ones behind it.
func Drain(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	total := 0
	for {
		n, more, err := drainOnce(ctx, pool)
		total += n
		if err != nil || !more {
			return total, err
		}
	}
}

func drainOnce(ctx context.Context, pool *pgxpool.Pool) (written int, more bool, err error) {
	err = db.Transact(ctx, pool, func(tx pgx.Tx) error {
		written, more = 0, false
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('fraud_signal_drain'))`); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		rows, err := tx.Query(ctx, `SELECT id, rows FROM fraud_signal_inbox ORDER BY id LIMIT $1`, drainLimit)
		if err != nil {
			return err
		}
		type queued struct {
			id int64
			b  batch
		}
		var got []queued
		var ids []int64
		for rows.Next() {
			var q queued
			var raw []byte
			if err := rows.Scan(&q.id, &raw); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, q.id)
			if err := json.Unmarshal(raw, &q.b); err != nil {
				slog.WarnContext(ctx, "fraud signal batch unreadable; dropped", "inbox_id", q.id, "err", err)
				continue
			}
			got = append(got, q)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		// Consecutive batches are written as one, up to the first that names
		// a hold already in it (its confirmation): one upsert cannot touch a
		// row twice.
		var group batch
		seen := map[uuid.UUID]bool{}
		flush := func() error {
			n, err := writeGroup(ctx, tx, group)
			written += n
			group, seen = batch{}, map[uuid.UUID]bool{}
			return err
		}
		for _, q := range got {
			for _, h := range q.b.Holds {
				if seen[h] {
					if err := flush(); err != nil {
						return err
					}
					break
				}
			}
			for _, h := range q.b.Holds {
				seen[h] = true
			}
			group.merge(q.b)
		}
		if err := flush(); err != nil {
			return err
		}
		if len(ids) > 0 {
			// By id, not by range: a lower id committed after our read is not ours.
			if _, err := tx.Exec(ctx, `DELETE FROM fraud_signal_inbox WHERE id = ANY($1)`, ids); err != nil {
				return err
			}
		}
		more = len(ids) == drainLimit
		return nil
	})
	if err != nil {
		return 0, false, fmt.Errorf("fraud drain: %w", err)
	}
	return written, more, nil
}

// writeGroup writes b under a savepoint; a refusal is logged and dropped.
func writeGroup(ctx context.Context, tx pgx.Tx, b batch) (int, error) {
	if b.empty() {
		return 0, nil
	}
	sp, err := tx.Begin(ctx)
	if err != nil {
		return 0, err
	}
	err = b.write(ctx, sp)
	if errors.Is(err, ErrInvalid) { // the others are written
		slog.WarnContext(ctx, "fraud signals not recorded", "err", err)
		return len(b.Holds), sp.Commit(ctx)
	}
	if err != nil {
		if rb := sp.Rollback(ctx); rb != nil {
			return 0, errors.Join(err, rb)
		}
		slog.WarnContext(ctx, "fraud signals not recorded", "signals", len(b.Holds), "err", err)
		return 0, nil
	}
	return len(b.Holds), sp.Commit(ctx)
}
