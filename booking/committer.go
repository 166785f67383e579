package booking

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"tatkal/booking/inventory"
)

// holdRow is one hold waiting to become durable.
type holdRow struct {
	ID         uuid.UUID
	ShardID    int64
	UserID     int64
	IdemKey    string
	Kind       string
	From, To   int
	Berths     []int
	WaitlistNo int
	Passengers []Passenger
	Fare       Fare
	Epoch      int64
	OpeningDay time.Time
	ExpiresAt  time.Time
	TokenID    string
}

// commitVerdict says what happened to one row of a group commit.
type commitVerdict int

const (
	committed          commitVerdict = iota
	rejectedDuplicate                // the user's idempotency key already has a hold
	rejectedLiveHold                 // the user has a live hold on another shard
	rejectedDailyCap                 // the user reached the day's cap across shards
	rejectedStaleEpoch               // the shard was rebuilt since this hold was taken
)

type commitResult struct {
	verdict  commitVerdict
	existing uuid.UUID // for rejectedDuplicate and rejectedLiveHold
	err      error     // the whole batch failed; nothing was written (unless unknown)
	// unknown: COMMIT failed and reading the rows back failed too, so the
	// row may be durable. Redis must not be undone: the sweeper frees the
	// hold at expiry if no row turns up.
	unknown bool
}

type pendingHold struct {
	row  holdRow
	done chan commitResult
}

// Committer makes holds durable by group commit: each writer takes whatever
// is queued the moment it is free, so many holds share one transaction and
// nothing waits on a timer. Expiry jobs are inserted in the same
// transaction.
type Committer struct {
	pool     *pgxpool.Pool
	jobs     JobInserter
	dailyCap int
	in       chan *pendingHold
	maxBatch int
	log      *slog.Logger
}

// NewCommitter returns a committer; call Run to start its writers.
func NewCommitter(pool *pgxpool.Pool, jobs JobInserter, dailyCap int, log *slog.Logger) *Committer {
	return &Committer{pool: pool, jobs: jobs, dailyCap: dailyCap, in: make(chan *pendingHold, 8192), maxBatch: 1000, log: log}
}

// Run starts writers goroutines and returns when ctx ends and they stop.
func (c *Committer) Run(ctx context.Context, writers int) {
	done := make(chan struct{})
	for range writers {
		go func() {
			defer func() { done <- struct{}{} }()
			c.writer(ctx)
		}()
	}
	for range writers {
		<-done
	}
}

func (c *Committer) writer(ctx context.Context) {
	batch := make([]*pendingHold, 0, c.maxBatch)
	for {
		select {
		case <-ctx.Done():
			c.failQueued(ctx.Err())
			return
		case p := <-c.in:
			batch = append(batch[:0], p)
		drain:
			for len(batch) < c.maxBatch {
				select {
				case p := <-c.in:
					batch = append(batch, p)
				default:
					break drain
				}
			}
			results := c.write(context.WithoutCancel(ctx), batch)
			for i, p := range batch {
				p.done <- results[i]
			}
		}
	}
}

// failQueued answers holds still queued at shutdown, so their callers undo
// the Lua hold instead of waiting forever.
func (c *Committer) failQueued(err error) {
	for {
		select {
		case p := <-c.in:
			p.done <- commitResult{err: fmt.Errorf("committer stopped: %w", err)}
		default:
			return
		}
	}
}

// Submit queues row and waits until it is durable or rejected.
func (c *Committer) Submit(ctx context.Context, row holdRow) commitResult {
	p := &pendingHold{row: row, done: make(chan commitResult, 1)}
	select {
	case c.in <- p:
	case <-ctx.Done():
		return commitResult{err: ctx.Err()}
	}
	// Once queued, wait for the verdict even if the caller gives up: the
	// caller must know whether to undo the Lua hold.
	return <-p.done
}

func (c *Committer) write(ctx context.Context, batch []*pendingHold) []commitResult {
	results := make([]commitResult, len(batch))
	n := len(batch)
	ids := make([]uuid.UUID, n)
	shards := make([]int64, n)
	users := make([]int64, n)
	keys := make([]string, n)
	kinds := make([]string, n)
	froms := make([]int32, n)
	tos := make([]int32, n)
	counts := make([]int32, n)
	berths := make([]string, n)
	wls := make([]*int32, n)
	paxs := make([]string, n)
	fares := make([]int64, n)
	breakups := make([]string, n)
	epochs := make([]int64, n)
	days := make([]time.Time, n)
	expires := make([]time.Time, n)
	tokens := make([]*string, n)
	lockSet := map[int64]bool{}
	for i, p := range batch {
		r := p.row
		ids[i], shards[i], users[i], keys[i], kinds[i] = r.ID, r.ShardID, r.UserID, r.IdemKey, r.Kind
		froms[i], tos[i], counts[i] = int32(r.From), int32(r.To), int32(len(r.Passengers))
		berths[i] = intArrayLiteral(r.Berths)
		if r.WaitlistNo > 0 {
			w := int32(r.WaitlistNo)
			wls[i] = &w
		}
		pj, _ := json.Marshal(r.Passengers)
		bj, _ := json.Marshal(r.Fare.Breakup)
		paxs[i], fares[i], breakups[i] = string(pj), r.Fare.TotalPaise, string(bj)
		epochs[i], days[i], expires[i] = r.Epoch, r.OpeningDay, r.ExpiresAt
		if r.TokenID != "" {
			t := r.TokenID
			tokens[i] = &t
		}
		lockSet[r.ShardID] = true
	}
	inserted := map[uuid.UUID]bool{}
	bodyDone := false
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		for _, id := range slices.Sorted(maps.Keys(lockSet)) {
			if err := inventory.LockShardShared(ctx, tx, id); err != nil {
				return err
			}
		}
		// One statement for the batch. Rows that would break a durable rule
		// are skipped, not failed, so one bad row never sinks the others:
		// a stale epoch by the join, the daily cap by the count, and a
		// duplicate key or a second live hold by ON CONFLICT.
		rows, err := tx.Query(ctx, `
			INSERT INTO holds (id, shard_id, user_id, idempotency_key, kind, from_seq, to_seq, seat_count,
			                   berths, waitlist_no, passengers, fare_paise, fare_breakup, state, epoch,
			                   opening_day, expires_at, admission_token_id)
			SELECT h.id, h.shard_id, h.user_id, h.key, h.kind, h.from_seq, h.to_seq, h.cnt,
			       h.berths::int[], h.wl, h.pax::jsonb, h.fare, h.breakup::jsonb, 'HELD', h.epoch,
			       h.day, h.expires, h.token
			FROM unnest($1::uuid[], $2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::int[], $7::int[],
			            $8::int[], $9::text[], $10::int[], $11::text[], $12::bigint[], $13::text[], $14::bigint[],
			            $15::date[], $16::timestamptz[], $17::text[])
			     AS h(id, shard_id, user_id, key, kind, from_seq, to_seq, cnt, berths, wl, pax, fare, breakup,
			          epoch, day, expires, token)
			JOIN inventory_shards s ON s.id = h.shard_id AND s.epoch = h.epoch
			WHERE (SELECT count(*) FROM holds x WHERE x.user_id = h.user_id AND x.opening_day = h.day
			         AND x.state IN ('HELD', 'CONFIRMED')) < $18
			ON CONFLICT DO NOTHING
			RETURNING id`,
			ids, shards, users, keys, kinds, froms, tos, counts, berths, wls, paxs, fares, breakups, epochs,
			days, expires, tokens, c.dailyCap)
		if err != nil {
			return fmt.Errorf("insert holds: %w", err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		if err != nil {
			return fmt.Errorf("insert holds: %w", err)
		}
		params := make([]river.InsertManyParams, 0, len(got))
		for _, id := range got {
			inserted[id] = true
		}
		for _, p := range batch {
			if inserted[p.row.ID] {
				params = append(params, river.InsertManyParams{
					Args:       ExpireHoldArgs{HoldID: p.row.ID, ShardID: p.row.ShardID},
					InsertOpts: &river.InsertOpts{ScheduledAt: p.row.ExpiresAt},
				})
			}
		}
		if len(params) > 0 {
			if _, err := c.jobs.InsertManyFastTx(ctx, tx, params); err != nil {
				return fmt.Errorf("insert expiry jobs: %w", err)
			}
		}
		bodyDone = true
		return nil
	})
	unknown := false
	if err != nil && bodyDone {
		// COMMIT failed, or only its answer was lost (a dropped connection):
		// the batch may be durable. Undoing Redis under durable rows would
		// free seats PostgreSQL sold, so read the rows back first.
		durable, verr := c.durable(ctx, slices.Collect(maps.Keys(inserted)))
		switch {
		case verr != nil:
			unknown = true
			err = errors.Join(err, verr)
		case durable:
			c.log.Warn("group commit reported an error but is durable", "holds", n, "err", err)
			err = nil
		case len(inserted) == 0:
			err = nil // nothing was written either way
		}
	}
	if err != nil {
		c.log.Error("group commit failed", "holds", n, "unknown", unknown, "err", err)
		for i := range results {
			results[i].err = fmt.Errorf("commit %d holds: %w", n, err)
			results[i].unknown = unknown
		}
		return results
	}
	for i, p := range batch {
		if !inserted[p.row.ID] {
			results[i] = c.diagnose(ctx, p.row)
		}
	}
	return results
}

// durable reads back whether a batch whose COMMIT reported an error is in
// PostgreSQL: its rows are all in or all out, so any one of them decides.
// The read is retried for a few seconds, as the error may be PostgreSQL
// going away for a moment.
func (c *Committer) durable(ctx context.Context, ids []uuid.UUID) (bool, error) {
	if len(ids) == 0 {
		return false, nil
	}
	var err error
	for wait := 50 * time.Millisecond; wait < 5*time.Second; wait *= 2 {
		var n int
		if err = c.pool.QueryRow(ctx, `SELECT count(*) FROM holds WHERE id = ANY($1)`, ids).Scan(&n); err == nil {
			return n > 0, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(wait):
		}
	}
	return false, fmt.Errorf("read back %d holds: %w", len(ids), err)
}

// diagnose explains why a row was skipped. It runs after the commit, on the
// rare rejected rows only.
func (c *Committer) diagnose(ctx context.Context, r holdRow) commitResult {
	var existing uuid.UUID
	err := c.pool.QueryRow(ctx, `SELECT id FROM holds WHERE user_id = $1 AND idempotency_key = $2`, r.UserID, r.IdemKey).Scan(&existing)
	if err == nil {
		return commitResult{verdict: rejectedDuplicate, existing: existing}
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return commitResult{err: fmt.Errorf("diagnose hold %s: %w", r.ID, err)}
	}
	var epoch int64
	if err := c.pool.QueryRow(ctx, `SELECT epoch FROM inventory_shards WHERE id = $1`, r.ShardID).Scan(&epoch); err != nil {
		return commitResult{err: fmt.Errorf("diagnose hold %s: %w", r.ID, err)}
	}
	if epoch != r.Epoch {
		return commitResult{verdict: rejectedStaleEpoch}
	}
	err = c.pool.QueryRow(ctx, `SELECT id FROM holds WHERE user_id = $1 AND state = 'HELD'`, r.UserID).Scan(&existing)
	if err == nil {
		return commitResult{verdict: rejectedLiveHold, existing: existing}
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return commitResult{err: fmt.Errorf("diagnose hold %s: %w", r.ID, err)}
	}
	return commitResult{verdict: rejectedDailyCap}
}

func intArrayLiteral(xs []int) string {
	b := []byte{'{'}
	for i, x := range xs {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, "%d", x)
	}
	return string(append(b, '}'))
}
