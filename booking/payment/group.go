package payment

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"tatkal/booking"
	"tatkal/booking/db"
)

// maxGroup bounds the bodies of one transaction. Each body runs in a
// savepoint, a subtransaction with its own xid once it writes, and a
// transaction with more than 64 of those overflows PostgreSQL's per-backend
// subxid cache, which makes every other backend's visibility checks read
// pg_subtrans: far dearer than a second COMMIT.
const maxGroup = 32

// groupTimeout bounds one group's transaction.
const groupTimeout = 30 * time.Second

// errAlone: a body hit a serialization failure or a deadlock inside the
// group; its savepoint is rolled back and its caller runs it again in a
// transaction of its own, with db.Transact's retries, as before grouping.
var errAlone = errors.New("retry alone")

// confirmGroup runs payment confirmations by group commit, as
// booking.Committer does holds: many bodies share one transaction and one
// COMMIT, each in its own savepoint so a failing body undoes only itself and
// returns its own error to its caller. There is no timer and no goroutine of
// its own: a caller queues its body and, while it waits, takes a writer's
// slot if one is free and writes whatever is queued, its own body or
// others'. Nothing is left queued without a caller contending for a slot,
// and nothing outlives its callers, so shutdown needs nothing.
type confirmGroup struct {
	pool  *pgxpool.Pool
	in    chan *groupItem
	slots chan struct{} // writers at once, each on one connection
	pause booking.PauseFunc
	log   *slog.Logger
}

type groupItem struct {
	// key orders the bodies of a transaction: each body first locks the row
	// key names, so two groups take those first locks in one order. Their
	// later locks (a wallet's account, a callback's hold) are not ordered:
	// two groups may still deadlock on them, which PostgreSQL breaks after
	// deadlock_timeout and the loser's bodies run alone (errAlone).
	key  uuid.UUID
	ctx  context.Context // the caller's, without its cancellation
	body func(context.Context, pgx.Tx) error
	done chan error
}

func newConfirmGroup(pool *pgxpool.Pool, writers int, pause booking.PauseFunc, log *slog.Logger) *confirmGroup {
	return &confirmGroup{pool: pool, in: make(chan *groupItem, 4096), slots: make(chan struct{}, writers), pause: pause, log: log}
}

// run runs body in a group's transaction, or alone (g nil: grouping off),
// and returns once it is committed (nil) or not: its own error, or the
// group's COMMIT error, which leaves its caller not knowing whether it
// committed, as a lost COMMIT answer does. ctx's cancellation does not stop
// a queued body: it shares a connection with others.
func (g *confirmGroup) run(ctx context.Context, pool *pgxpool.Pool, key uuid.UUID, body func(context.Context, pgx.Tx) error) error {
	alone := func() error {
		return db.Transact(ctx, pool, func(tx pgx.Tx) error { return body(ctx, tx) })
	}
	if g == nil {
		return alone()
	}
	it := &groupItem{key: key, ctx: context.WithoutCancel(ctx), body: body, done: make(chan error, 1)}
	select {
	case g.in <- it:
	case <-ctx.Done():
		return fmt.Errorf("confirm: %w", ctx.Err())
	}
	g.pause.At(it.ctx, "confirm.queued")
	err := g.wait(it)
	if errors.Is(err, errAlone) {
		return alone()
	}
	return err
}

// wait writes groups while its item is queued and a slot is free, and
// returns its item's answer. Once the queue is found empty its item is in
// some writer's group, whose answer it waits for.
func (g *confirmGroup) wait(it *groupItem) error {
	for {
		select {
		case err := <-it.done:
			return err
		case g.slots <- struct{}{}:
			batch := g.take()
			if len(batch) > 0 {
				g.writeOrFail(batch)
			}
			<-g.slots
			if len(batch) == 0 {
				return <-it.done
			}
		}
	}
}

// take drains up to maxGroup queued items.
func (g *confirmGroup) take() []*groupItem {
	var batch []*groupItem
	for len(batch) < maxGroup {
		select {
		case it := <-g.in:
			batch = append(batch, it)
		default:
			return batch
		}
	}
	return batch
}

// writeOrFail is write that, should a body panic (an HTTP server recovers
// a handler's panic), still answers every item and frees its slot, so
// other callers are not left waiting for ever.
func (g *confirmGroup) writeOrFail(batch []*groupItem) {
	answered := false
	defer func() {
		if answered {
			return
		}
		<-g.slots
		r := recover()
		for _, it := range batch {
			it.done <- fmt.Errorf("group of %d confirmations: a confirmation panicked: %v", len(batch), r)
		}
		panic(r)
	}()
	g.write(batch)
	answered = true
}

// write runs batch in one transaction and answers every item.
func (g *confirmGroup) write(batch []*groupItem) {
	slices.SortFunc(batch, func(a, b *groupItem) int { return bytes.Compare(a.key[:], b.key[:]) })
	// Bounded as one confirmation alone is by its request: a database that
	// hangs fails the group, and every caller hears of it.
	ctx, cancel := context.WithTimeout(context.Background(), groupTimeout)
	defer cancel()
	errs := make([]error, len(batch))
	err := pgx.BeginFunc(ctx, g.pool, func(tx pgx.Tx) error {
		for i, it := range batch {
			// The previous body's savepoint is released and this one's set
			// in the same round trip.
			sp := "RELEASE SAVEPOINT confirm; SAVEPOINT confirm"
			if i == 0 {
				sp = "SAVEPOINT confirm"
			}
			if _, err := tx.Exec(ctx, sp); err != nil {
				return fmt.Errorf("savepoint: %w", err)
			}
			errs[i] = it.body(it.ctx, tx)
			if errs[i] == nil {
				continue
			}
			if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT confirm"); err != nil {
				return fmt.Errorf("roll back a confirmation (%w): %w", errs[i], err)
			}
			var pgErr *pgconn.PgError
			if errors.As(errs[i], &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01") {
				errs[i] = errAlone
			}
		}
		g.pause.At(ctx, "confirm.before-commit")
		return nil
	})
	if err != nil {
		// Nothing of the group is known to be durable, nor known not to be
		// (a COMMIT whose answer was lost): no caller is told success. A
		// callback is answered with an error and comes again or is settled
		// by inquiry; a wallet payment's retry replays what committed. A
		// body to retry alone was rolled back to its savepoint: it still is.
		g.log.Error("confirmation group failed", "confirmations", len(batch), "err", err)
		err = fmt.Errorf("group of %d confirmations: %w", len(batch), err)
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
	}
	for i, it := range batch {
		it.done <- errs[i]
	}
}
