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

// BatchTx is a transaction whose BEGIN rides in front of its first batch and
// whose COMMIT rides behind its last: two round trips fewer than pgx's own,
// which is a quarter of a hold group commit's time when every round trip
// waits for a busy machine to schedule PostgreSQL and then us. In between it
// is an ordinary pgx.Tx (River inserts its jobs through it).
type BatchTx struct {
	conn *pgxpool.Conn
	done bool
}

var _ pgx.Tx = (*BatchTx)(nil)

// BeginBatch takes a connection from pool and sends BEGIN and first's
// statements in one round trip. On any error the transaction is rolled back
// and the connection returned; first's own callbacks say which statement
// failed.
func BeginBatch(ctx context.Context, pool *pgxpool.Pool, first *pgx.Batch) (*BatchTx, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	t := &BatchTx{conn: conn}
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.QueuedQueries = append(b.QueuedQueries, first.QueuedQueries...)
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return nil, errors.Join(err, t.Rollback(ctx))
	}
	return t, nil
}

// CommitBatch sends last's statements and COMMIT in one round trip. On error
// the transaction is rolled back (if the connection still can) and the
// error says whether COMMIT was reached: a lost answer to it leaves the
// outcome unknown, as with any COMMIT.
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
	err := t.conn.SendBatch(ctx, b).Close()
	if err != nil {
		return errors.Join(err, t.Rollback(ctx))
	}
	t.done = true
	t.conn.Release()
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
	t.done = true
	defer t.conn.Release() // the pool drops a connection left mid-transaction
	if t.conn.Conn().IsClosed() {
		return nil // the server has rolled it back
	}
	// A caller that gave up still gets its connection back clean, but never
	// waits long for a server that stopped answering.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackWait)
	defer cancel()
	if _, err := t.conn.Exec(rctx, "ROLLBACK"); err != nil {
		return fmt.Errorf("rollback: %w", err)
	}
	return nil
}

const rollbackWait = 5 * time.Second

// Begin is refused: nothing that runs inside a BatchTx nests (pgx's own
// savepoint type is not exported, and Conn().Begin would start a second,
// separate transaction that commits this one).
func (t *BatchTx) Begin(context.Context) (pgx.Tx, error) {
	return nil, errors.New("db.BatchTx: nested transactions are not supported")
}

func (t *BatchTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	return t.conn.CopyFrom(ctx, table, cols, src)
}

func (t *BatchTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	return t.conn.SendBatch(ctx, b)
}

// LargeObjects is not supported (pgx builds them only on its own transactions).
func (t *BatchTx) LargeObjects() pgx.LargeObjects { return pgx.LargeObjects{} }

func (t *BatchTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	return t.conn.Conn().Prepare(ctx, name, sql)
}

func (t *BatchTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return t.conn.Exec(ctx, sql, args...)
}

func (t *BatchTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return t.conn.Query(ctx, sql, args...)
}

func (t *BatchTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.conn.QueryRow(ctx, sql, args...)
}

func (t *BatchTx) Conn() *pgx.Conn { return t.conn.Conn() }
