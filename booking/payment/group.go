package payment

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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
	mu      sync.Mutex
	failed  map[uuid.UUID]time.Time // holds of groups whose joint confirmation failed, and when
	pool    *pgxpool.Pool
	booking *booking.Service
	in      chan *groupItem
	slots   chan struct{} // writers at once, each on one connection
	pause   booking.PauseFunc
	log     *slog.Logger
	common  atomic.Int64 // common successes taken set-based
}

type groupItem struct {
	// key orders the bodies of a transaction: each body first locks the row
	// key names, so two groups take those first locks in one order. Their
	// later locks (a wallet's account, a callback's hold) are not ordered,
	// nor are the common successes' (takeCommon locks their payments and
	// holds before any body): two groups may still deadlock on them, which
	// PostgreSQL breaks after deadlock_timeout, and the loser's common part
	// is rolled back to run by bodies, or its bodies run alone (errAlone).
	key  uuid.UUID
	ctx  context.Context // the caller's, without its cancellation
	body groupBody
	// common, if not nil, is the body's work told ahead should it be a
	// common success, which the group may take set-based instead.
	common *commonSuccess
	done   chan error
}

// groupBody is a payment's work in a transaction, alone or in a group; it
// confirms a hold through c, never booking.ConfirmTx directly.
type groupBody func(ctx context.Context, tx pgx.Tx, c *confirmations) error

// confirmations confirm the holds payments pay for. Alone, a hold is
// confirmed at once in the body's transaction. In a group, the group's
// holds are confirmed together after its last body, before its COMMIT
// (booking.ConfirmManyTx): about nine statements a confirmation become
// about nine a group, the cost grouping exists to share.
type confirmations struct {
	booking *booking.Service
	group   *confirmGroup // nil: alone
	holds   []uuid.UUID
	results []*booking.ConfirmResult
}

// Confirm confirms holdID, or (grouped) books it for the group's
// confirmation: the result is filled in then and read once the body's
// transaction has committed. A hold another body of the group is
// confirming sends this body to run alone, after the group.
func (c *confirmations) Confirm(ctx context.Context, tx pgx.Tx, holdID uuid.UUID) (*booking.ConfirmResult, error) {
	if c.group == nil {
		res, err := c.booking.ConfirmTx(ctx, tx, holdID)
		return &res, err
	}
	if err := c.Check(holdID); err != nil {
		return nil, err
	}
	res := &booking.ConfirmResult{HoldID: holdID}
	c.holds, c.results = append(c.holds, holdID), append(c.results, res)
	return res, nil
}

// Check is called by a body on the hold it has just locked: a hold whose
// confirmation the group has booked is HELD in the transaction until the
// group's end, while its payment is already SUCCESS, a state no body alone
// ever sees; the body runs alone after the group instead, and sees the
// hold confirmed.
//
// A hold whose group's joint confirmation failed lately runs alone too,
// so one that cannot be confirmed (its berth taken, say) and comes back
// (the gateway's retry, the inquiry job) does not sink group after group.
func (c *confirmations) Check(holdID uuid.UUID) error {
	if c.group != nil && (slices.Contains(c.holds, holdID) || c.group.failedLately(holdID)) {
		return errAlone
	}
	return nil
}

// flush confirms the group's holds in tx and fills in their results.
func (c *confirmations) flush(ctx context.Context, tx pgx.Tx) error {
	if len(c.holds) == 0 {
		return nil
	}
	res, err := c.booking.ConfirmManyTx(ctx, tx, c.holds)
	if err != nil {
		return fmt.Errorf("confirm %d holds together: %w", len(c.holds), err)
	}
	for i := range res {
		if res[i].Already {
			// Only a body that did not check its hold could have let
			// another confirm it first; its payment would get no ticket.
			return fmt.Errorf("hold %s was confirmed before its group's confirmation", res[i].HoldID)
		}
		*c.results[i] = res[i]
	}
	return nil
}

func newConfirmGroup(pool *pgxpool.Pool, bk *booking.Service, writers int, pause booking.PauseFunc, log *slog.Logger) *confirmGroup {
	return &confirmGroup{failed: map[uuid.UUID]time.Time{}, pool: pool, booking: bk, in: make(chan *groupItem, 4096), slots: make(chan struct{}, writers), pause: pause, log: log}
}

// run runs body in a group's transaction, or alone (g nil: grouping off),
// and returns once it is committed (nil) or not: its own error, or the
// group's COMMIT error, which leaves its caller not knowing whether it
// committed, as a lost COMMIT answer does. ctx's cancellation does not stop
// a queued body: it shares a connection with others.
func (g *confirmGroup) run(ctx context.Context, pool *pgxpool.Pool, bk *booking.Service, key uuid.UUID, body groupBody) error {
	return g.runOrTake(ctx, pool, bk, key, body, nil)
}

// runOrTake is run with common, which a group may take instead of running
// body (common.taken says so once it returns nil).
func (g *confirmGroup) runOrTake(ctx context.Context, pool *pgxpool.Pool, bk *booking.Service, key uuid.UUID, body groupBody,
	common *commonSuccess) error {
	alone := func() error {
		if common != nil {
			common.taken = false // taken by a group that did not commit
		}
		return db.Transact(ctx, pool, func(tx pgx.Tx) error { return body(ctx, tx, &confirmations{booking: bk}) })
	}
	if g == nil {
		return alone()
	}
	it := &groupItem{key: key, ctx: context.WithoutCancel(ctx), body: body, common: common, done: make(chan error, 1)}
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

// failedFor is how long the holds of a group whose joint confirmation
// failed are confirmed alone.
const failedFor = time.Minute

func (g *confirmGroup) failedLately(holdID uuid.UUID) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	at, ok := g.failed[holdID]
	return ok && time.Since(at) < failedFor
}

func (g *confirmGroup) confirmationFailed(holds []uuid.UUID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	for id, at := range g.failed {
		if now.Sub(at) >= failedFor {
			delete(g.failed, id)
		}
	}
	for _, id := range holds {
		g.failed[id] = now
	}
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
	c := &confirmations{booking: g.booking, group: g}
	var confirmFailed error
	err := pgx.BeginTxFunc(ctx, g.pool, db.GenericPlansTx, func(tx pgx.Tx) error {
		stx := &savepointTx{Tx: tx}
		taken := g.takeCommon(ctx, stx, batch, c)
		for i, it := range batch {
			if taken[i] {
				continue
			}
			stx.next()
			booked := len(c.holds)
			errs[i] = it.body(it.ctx, stx, c)
			if errs[i] == nil {
				continue
			}
			// Its confirmations go with the rest of its work.
			c.holds, c.results = c.holds[:booked], c.results[:booked]
			if err := stx.rollback(ctx); err != nil {
				return fmt.Errorf("roll back a confirmation (%w): %w", errs[i], err)
			}
			var pgErr *pgconn.PgError
			if errors.As(errs[i], &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01") {
				errs[i] = errAlone
			}
		}
		if err := c.flush(ctx, tx); err != nil {
			confirmFailed = err
			return err
		}
		g.pause.At(ctx, "confirm.before-commit")
		return nil
	})
	if confirmFailed != nil {
		// Rare (a hold a body changed after another booked its
		// confirmation, a berth's exclusion constraint): the whole group
		// was rolled back, and every body runs again alone, where each
		// confirmation stands or fails by itself. Each one's error here
		// came from a transaction that never was.
		g.log.Warn("a group's confirmations failed together; its bodies run alone", "confirmations", len(batch), "err", confirmFailed)
		g.confirmationFailed(c.holds)
		for _, it := range batch {
			it.done <- errAlone
		}
		return
	}
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

// savepointTx is a group's transaction as one body sees it: the body's
// savepoint (releasing the previous body's) rides in front of the body's
// first statements, in their round trip, rather than a round trip of its
// own. Until the body sends something, the savepoint is pending: a body
// that fails before that has nothing to roll back. A body's savepoint is
// named other than the one that exists (of two names, so pgx prepares
// four statements per connection), so rolling back to one that was never
// made (a batch refused before it was sent) fails the group instead of
// undoing an earlier body's work.
type savepointTx struct {
	pgx.Tx
	pending bool   // the current body's savepoint is not sent yet
	held    string // the savepoint last sent, if any
}

// next starts a body.
func (t *savepointTx) next() { t.pending = true }

// rollback undoes the current body's work, if it sent any.
func (t *savepointTx) rollback(ctx context.Context) error {
	if t.pending {
		return nil
	}
	_, err := t.Tx.Exec(ctx, "ROLLBACK TO SAVEPOINT "+t.held)
	return err
}

// take marks the current body's savepoint sent and returns its statements.
func (t *savepointTx) take() []string {
	var sql []string
	if t.held != "" {
		sql = append(sql, "RELEASE SAVEPOINT "+t.held)
	}
	name := "confirm_a"
	if t.held == name {
		name = "confirm_b"
	}
	t.held, t.pending = name, false
	return append(sql, "SAVEPOINT "+name)
}

// flush sends the pending savepoint by itself, for the calls that cannot
// carry it.
func (t *savepointTx) flush(ctx context.Context) error {
	if !t.pending {
		return nil
	}
	if _, err := t.Tx.Exec(ctx, strings.Join(t.take(), "; ")); err != nil {
		return fmt.Errorf("savepoint: %w", err)
	}
	return nil
}

func (t *savepointTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if !t.pending {
		return t.Tx.SendBatch(ctx, b)
	}
	withSP := &pgx.Batch{}
	for _, sp := range t.take() {
		withSP.Queue(sp)
	}
	withSP.QueuedQueries = append(withSP.QueuedQueries, b.QueuedQueries...)
	return t.Tx.SendBatch(ctx, withSP)
}

func (t *savepointTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := t.flush(ctx); err != nil {
		return pgconn.CommandTag{}, err
	}
	return t.Tx.Exec(ctx, sql, args...)
}

func (t *savepointTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := t.flush(ctx); err != nil {
		return nil, err
	}
	return t.Tx.Query(ctx, sql, args...)
}

func (t *savepointTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := t.flush(ctx); err != nil {
		return errRow{err}
	}
	return t.Tx.QueryRow(ctx, sql, args...)
}

func (t *savepointTx) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	if err := t.flush(ctx); err != nil {
		return 0, err
	}
	return t.Tx.CopyFrom(ctx, table, cols, src)
}

func (t *savepointTx) Begin(ctx context.Context) (pgx.Tx, error) {
	if err := t.flush(ctx); err != nil {
		return nil, err
	}
	return t.Tx.Begin(ctx)
}

func (t *savepointTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if err := t.flush(ctx); err != nil {
		return nil, err
	}
	return t.Tx.Prepare(ctx, name, sql)
}

// errRow is a row whose query was never sent.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
