package db

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ServerTx names a transaction on the server: its process and its 64-bit
// id, enough to stop it and to ask how it ended (Settle).
type ServerTx struct {
	PID uint32
	XID uint64
}

// Settle asks the server how a transaction whose COMMIT reported an error
// ended. Its connection failed, but the server may not know yet: the
// COMMIT may still be at work there, or still on its way (a half-open
// connection keeps the transaction open, idle, until the server notices,
// which can take hours). Reading the rows then would see none, an effect
// outside PostgreSQL (Redis) would be undone, and a COMMIT arriving after
// would make it durable under the undone effect. So a transaction still
// open and idle is stopped (its process terminated, matched by id as well
// as process, so a process reused by another connection is never touched);
// one at work is waited for; and only once the server says committed or
// aborted does the answer count (pg_xact_status: final once the
// transaction is no longer in progress). Retried for a few seconds, as the
// error may be PostgreSQL going away for a moment; past that the
// transaction is in doubt (an error).
func Settle(ctx context.Context, q Querier, t ServerTx) (committed bool, err error) {
	for wait := 50 * time.Millisecond; wait < 5*time.Second; wait *= 2 {
		var status *string
		err = q.QueryRow(ctx, `SELECT pg_xact_status($1::text::xid8),
			(SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			 WHERE pid = $2 AND backend_xid::text = $3 AND state <> 'active')`,
			strconv.FormatUint(t.XID, 10), int64(t.PID), strconv.FormatUint(t.XID&0xffffffff, 10)).Scan(&status, nil)
		switch {
		case err != nil:
		case status == nil:
			return false, fmt.Errorf("transaction %d is too old to ask about", t.XID)
		case *status == "committed":
			return true, nil
		case *status == "aborted":
			return false, nil
		default:
			err = fmt.Errorf("transaction %d of server process %d is still in progress", t.XID, t.PID)
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(wait):
		}
	}
	return false, fmt.Errorf("how transaction %d ended: %w", t.XID, err)
}

// Outcome is how a transaction ended, as far as its caller can know.
type Outcome int

const (
	// NotCommitted: rolled back, or the server says it aborted.
	NotCommitted Outcome = iota
	// Committed: the COMMIT's answer came, or the server says so.
	Committed
	// InDoubt: the COMMIT's answer was lost and the server could not be
	// asked; an effect outside PostgreSQL must be neither kept as if
	// committed nor undone as if not: a later check compares it with the
	// rows.
	InDoubt
)

// TransactSettled runs fn in a transaction, like Transact, for a caller
// with an effect outside PostgreSQL that must be undone only if the
// transaction did not commit. A COMMIT that reports an error is settled by
// asking the server (Settle): a COMMIT whose answer was lost but which
// committed is Committed, with no error. Its id rides the transaction's
// first round trip.
func TransactSettled(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger, fn func(pgx.Tx) error) (Outcome, error) {
	var err error
	for attempt := 0; attempt < 4; attempt++ {
		var out Outcome
		out, err = transactSettledOnce(ctx, pool, log, fn)
		var pgErr *pgconn.PgError
		if out != NotCommitted || !errors.As(err, &pgErr) || (pgErr.Code != "40001" && pgErr.Code != "40P01") {
			return out, err
		}
		t := time.NewTimer(time.Duration(attempt+1) * 5 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return NotCommitted, fmt.Errorf("%w (after %w)", ctx.Err(), err)
		case <-t.C:
		}
	}
	return NotCommitted, err
}

func transactSettledOnce(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger, fn func(pgx.Tx) error) (Outcome, error) {
	b := &pgx.Batch{}
	var xid string
	b.Queue(`SELECT pg_current_xact_id()::text`).QueryRow(func(r pgx.Row) error { return r.Scan(&xid) })
	tx, err := BeginBatch(ctx, pool, b)
	if err != nil {
		return NotCommitted, err
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after a commit it does nothing
	st := ServerTx{PID: tx.Conn().PgConn().PID()}
	if st.XID, err = strconv.ParseUint(xid, 10, 64); err != nil {
		return NotCommitted, fmt.Errorf("transaction id %q: %w", xid, err)
	}
	if err := fn(tx); err != nil {
		return NotCommitted, err
	}
	cerr := tx.Commit(ctx)
	var pgErr *pgconn.PgError
	switch {
	case cerr == nil:
		return Committed, nil
	case errors.As(cerr, &pgErr) || errors.Is(cerr, pgx.ErrTxCommitRollback):
		return NotCommitted, cerr // the server answered: not committed
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	committed, serr := Settle(sctx, pool, st)
	switch {
	case serr != nil:
		return InDoubt, fmt.Errorf("commit: %w; and how it ended is unknown: %w", cerr, serr)
	case committed:
		if log != nil {
			log.Warn("a COMMIT's answer was lost; the server says it committed", "xid", st.XID, "err", cerr)
		}
		return Committed, nil
	}
	return NotCommitted, cerr
}
