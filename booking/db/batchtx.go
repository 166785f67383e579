package db

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// BatchTx is a transaction whose BEGIN rides in front of its first batch
// (pgx's Batch.BeginTx) and whose COMMIT rides behind its last: two round
// trips fewer than pgx's own, which is a quarter of a hold group commit's
// time when every round trip waits for a busy machine to schedule
// PostgreSQL and then us. In between it is pgx's transaction (River
// inserts its jobs through it); once committed or rolled back, every
// method answers pgx.ErrTxClosed.
type BatchTx struct {
	pgx.Tx
	conn *pgxpool.Conn
	done bool
}

// BeginBatch takes a connection from pool and sends BEGIN and first's
// statements in one round trip. On any error the transaction is rolled back
// and the connection returned; first's own callbacks say which statement
// failed.
func BeginBatch(ctx context.Context, pool *pgxpool.Pool, first *pgx.Batch) (*BatchTx, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	b.QueuedQueries = append(b.QueuedQueries, first.QueuedQueries...)
	br := conn.SendBatch(ctx, b)
	t := &BatchTx{Tx: br.Tx(), conn: conn}
	if err := br.Close(); err != nil {
		return nil, errors.Join(err, t.Rollback(ctx))
	}
	return t, nil
}

// CommitBatch sends last's statements and COMMIT in one round trip. On error
// the transaction is rolled back (if the connection still can); a lost
// answer to COMMIT leaves the outcome unknown, as with any COMMIT.
func (t *BatchTx) CommitBatch(ctx context.Context, last *pgx.Batch) error {
	if t.done {
		return pgx.ErrTxClosed
	}
	b := &pgx.Batch{QueuedQueries: append([]*pgx.QueuedQuery(nil), last.QueuedQueries...)}
	b.Queue("COMMIT").Exec(func(ct pgconn.CommandTag) error {
		if ct.String() == "ROLLBACK" { // the transaction had failed before
			return pgx.ErrTxCommitRollback
		}
		return nil
	})
	if err := t.Tx.SendBatch(ctx, b).Close(); err != nil {
		return errors.Join(err, t.Rollback(ctx))
	}
	// pgx's transaction never saw the COMMIT: it is set aside unclosed, and
	// the connection, idle again, goes back to the pool.
	t.end()
	return nil
}

// Commit commits with no statements of its own.
func (t *BatchTx) Commit(ctx context.Context) error { return t.CommitBatch(ctx, &pgx.Batch{}) }

// Rollback rolls back and returns the connection; after Commit it does
// nothing, so a deferred Rollback is always safe.
func (t *BatchTx) Rollback(ctx context.Context) error {
	if t.done {
		return nil
	}
	defer t.end() // the pool drops a connection left mid-transaction
	// A caller that gave up still gets its connection back clean, but never
	// waits long for a server that stopped answering.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackWait)
	defer cancel()
	if err := t.Tx.Rollback(rctx); err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		return fmt.Errorf("rollback: %w", err)
	}
	return nil
}

const rollbackWait = 5 * time.Second

// end returns the connection and leaves a closed transaction in its place.
func (t *BatchTx) end() {
	t.done = true
	t.conn.Release()
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	t.Tx = pgx.FailedBatchResults(b, pgx.ErrTxClosed).Tx()
}
