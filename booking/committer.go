package booking

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"tatkal/booking/db"
	"tatkal/booking/fraud"
	"tatkal/booking/inventory"
)

// holdRow is one hold waiting to become durable.
type holdRow struct {
	ID      uuid.UUID
	ShardID int64
	UserID  int64
	IdemKey string
	// RequestHash fingerprints the request IdemKey came with.
	RequestHash string
	Kind        string
	From, To    int
	Berths      []int
	WaitlistNo  int
	Passengers  []Passenger
	Fare        Fare
	Epoch       int64
	OpeningDay  time.Time
	ExpiresAt   time.Time
	TokenID     string
	HeldAt      time.Time
	Client      ClientSignals
	// Stored is the passengers' JSON as the hold row keeps it, their ID
	// numbers sealed (Service.storedPassengers); nil: Passengers without
	// their ID numbers (tests' rows), never one in clear.
	Stored []byte
}

// commitVerdict says what happened to one row of a group commit.
type commitVerdict int

const (
	committed          commitVerdict = iota
	rejectedDuplicate                // the user's idempotency key already has a hold
	rejectedLiveHold                 // the user has a live hold on another shard
	rejectedDailyCap                 // the user reached the day's cap across shards
	rejectedStaleEpoch               // the shard was rebuilt since this hold was taken
	rejectedKeyReused                // the idempotency key has a hold for another request
	rejectedMonthlyCap               // the account reached the month's cap
	rejectedPassenger                // a passenger is on too many accounts' holds today
	rejectedBanned                   // fraud review banned the account
	rejectedCharted                  // the shard's chart is prepared: it sells nothing more
	// rejectedChanged: skipped by a rule whose grounds were gone by the
	// diagnosis (the account's live hold on another shard confirmed,
	// expired or was cancelled in between). Submit tries such a row again.
	rejectedChanged
)

type commitResult struct {
	verdict  commitVerdict
	existing uuid.UUID // for rejectedDuplicate and rejectedLiveHold
	err      error     // the whole batch failed; nothing was written (unless unknown)
	// unknown: COMMIT failed and reading the rows back failed too, so the
	// row may be durable. Redis must not be undone: the sweeper frees the
	// hold at expiry if no row turns up.
	unknown bool
	tx      db.ServerTx // when unknown: the transaction that may still commit
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
	rules    Rules
	live     func() Rules    // the rules in force (Service.Rules); nil: rules
	fraud    *fraud.Recorder // nil: no signals, no passenger limit
	in       chan *pendingHold
	maxBatch int
	log      *slog.Logger
	pause    PauseFunc // the service's (pause.go)
}

// rulesNow is the rules in force (the service's, under the operators'
// changes), else those the committer was made with.
func (c *Committer) rulesNow() Rules {
	if c.live != nil {
		return c.live()
	}
	return c.rules
}

// NewCommitter returns a committer; call Run to start its writers. rec,
// if not nil, records each batch's fraud signals and keys the passenger
// limit across accounts.
func NewCommitter(pool *pgxpool.Pool, jobs JobInserter, rules Rules, rec *fraud.Recorder, log *slog.Logger) *Committer {
	return &Committer{pool: pool, jobs: jobs, rules: rules, fraud: rec, in: make(chan *pendingHold, 8192), maxBatch: maxHoldBatch, log: log}
}

// maxHoldBatch bounds the holds of one transaction, and with them its
// advisory locks (a passenger's keys, an account's phone and the account,
// at most ten a hold): PostgreSQL's lock table holds max_locks_per_transaction (64) times
// its connections, shared by every transaction of every process.
const maxHoldBatch = 128

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

// changedRetries bounds Submit's new tries of a row skipped on grounds gone
// by its diagnosis: each needs the account's state to change again between
// one INSERT and its diagnosis, a few milliseconds.
const changedRetries = 3

// Submit queues row and waits until it is durable or rejected. A row
// skipped on grounds that were gone by its diagnosis is submitted again:
// answering it with a limit the account has not reached would tell an
// honest passenger their day is used up.
func (c *Committer) Submit(ctx context.Context, row holdRow) commitResult {
	r := c.submit(ctx, row)
	for i := 0; i < changedRetries && r.err == nil && r.verdict == rejectedChanged; i++ {
		c.log.Info("hold skipped on grounds gone by its diagnosis; submitting again", "hold", row.ID, "try", i+2)
		r = c.submit(ctx, row)
	}
	return r
}

func (c *Committer) submit(ctx context.Context, row holdRow) commitResult {
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
	hashes := make([]string, n)
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
		pj := r.Stored
		if pj == nil {
			pj, _ = json.Marshal(withoutIDRefs(r.Passengers))
		}
		bj, _ := json.Marshal(r.Fare.Breakup)
		paxs[i], fares[i], breakups[i] = string(pj), r.Fare.TotalPaise, string(bj)
		epochs[i], days[i], expires[i] = r.Epoch, r.OpeningDay, r.ExpiresAt
		if r.TokenID != "" {
			t := r.TokenID
			tokens[i] = &t
		}
		hashes[i] = r.RequestHash
		lockSet[r.ShardID] = true
	}
	inserted := map[uuid.UUID]bool{}
	bodyDone := false
	var stx db.ServerTx // the transaction on the server, once its COMMIT may be sent
	var xid string
	var paxRefused map[int]bool
	var paxKeys [][]string
	ok := make([]bool, n)
	// Not db.Transact: run records what it inserted (inserted, bodyDone) for
	// the verdicts that follow, so it is not safe to run twice. Four round
	// trips: BEGIN with the locks and reads, the INSERT, the expiry jobs, and
	// the passenger keys and fraud signals with COMMIT.
	run := func() error {
		// The shards' locks and the limits' reads ride the BEGIN: the
		// reads need no lock of their own.
		b := &pgx.Batch{}
		b.Queue(db.GenericPlans) // its statements rotate over the pool's connections
		for _, id := range slices.Sorted(maps.Keys(lockSet)) {
			inventory.QueueLockShardShared(b, id)
		}
		limit := c.newPassengerLimit(batch)
		limit.queueLocks(b)
		persons := c.newPersonCap(users, days)
		persons.queueLocks(b)
		queueAccountLocks(b, users)
		limit.queue(b)
		persons.queue(b)
		// Its id, should the COMMIT's answer be lost (committed asks by it).
		b.Queue(`SELECT pg_current_xact_id()::text`).QueryRow(func(r pgx.Row) error { return r.Scan(&xid) })
		tx, err := db.BeginBatch(ctx, c.pool, b)
		if err != nil {
			return err // each statement's error says which it is
		}
		defer tx.Rollback(ctx) //nolint:errcheck // after CommitBatch it does nothing
		paxKeys, paxRefused = limit.keys, limit.refused(batch, c.rulesNow().PassengerAccounts)
		// A row over its person's cap is left out and diagnosed, which
		// answers the day's cap, as the INSERT's own count would.
		overCap := persons.refused(paxRefused)
		for i := range ok {
			ok[i] = !paxRefused[i] && !overCap[i]
		}
		// One statement for the batch (insertHoldsSQL).
		rows, err := tx.Query(ctx, insertHoldsSQL,
			ids, shards, users, keys, kinds, froms, tos, counts, berths, wls, paxs, fares, breakups, epochs,
			days, expires, tokens, c.rulesNow().DailyCap, hashes, ok, c.rulesNow().MonthlyCap, c.rulesNow().MonthlyCapVerified, c.rulesNow().PersonDailyCap)
		if err != nil {
			return fmt.Errorf("insert holds: %w", err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		if err != nil {
			return fmt.Errorf("insert holds: %w", err)
		}
		for _, id := range got {
			inserted[id] = true
		}
		if jobs := expiryJobs(batch, inserted); len(jobs) > 0 {
			if _, err := c.jobs.InsertManyTx(ctx, tx, jobs); err != nil {
				return fmt.Errorf("insert expiry jobs: %w", err)
			}
		}
		last := &pgx.Batch{}
		c.queuePassengers(last, batch, paxKeys, inserted)
		if err := c.queueSignals(ctx, last, batch, inserted, paxRefused); err != nil {
			return err
		}
		id, err := strconv.ParseUint(xid, 10, 64)
		if err != nil {
			return fmt.Errorf("transaction id %q: %w", xid, err)
		}
		bodyDone, stx = true, db.ServerTx{PID: tx.Conn().PgConn().PID(), XID: id}
		c.pause.At(ctx, "commit.before-commit")
		return tx.CommitBatch(ctx, last)
	}
	err := run()
	unknown := false
	if err != nil && bodyDone {
		// COMMIT failed, or only its answer was lost (a dropped connection):
		// the batch may be durable. Undoing Redis under durable rows would
		// free seats PostgreSQL sold, so ask the server how it ended first.
		if len(inserted) == 0 {
			err = nil // nothing was written either way
		} else if durable, verr := c.committed(ctx, stx); verr != nil {
			unknown = true
			err = errors.Join(err, verr)
		} else if durable {
			c.log.Warn("group commit reported an error but is durable", "holds", n, "err", err)
			err = nil
		}
	}
	if err != nil {
		c.log.Error("group commit failed", "holds", n, "unknown", unknown, "err", err)
		for i := range results {
			results[i].err = fmt.Errorf("commit %d holds: %w", n, err)
			results[i].unknown, results[i].tx = unknown, stx
		}
		return results
	}
	c.pause.At(ctx, "commit.before-diagnose")
	for i, p := range batch {
		switch {
		case inserted[p.row.ID]:
		case paxRefused[i]:
			results[i] = commitResult{verdict: rejectedPassenger}
		default:
			results[i] = c.diagnose(ctx, p.row)
		}
	}
	return results
}

// insertHoldsSQL is a batch's INSERT. Rows that would break a durable
// rule are skipped, not failed, so one bad row never sinks the others: a
// stale epoch or a charted shard by the shard's check, the daily cap by
// the count, and a duplicate key or a second live hold by ON CONFLICT.
//
// Every check is a subquery of the row itself, on the unnested rows alone
// (the rows the Go side let through, ok, unnested with them): joined to
// inventory_shards and to a second unnest of ok, the planner took the open
// shards as the outer loop and ran the unnest and its daily-cap count once
// per open shard, and matched ok row by row against every row (issue 38):
// a catalog of thousands of open shards would have multiplied every
// batch's work by thousands.
const insertHoldsSQL = `
	INSERT INTO holds (id, shard_id, user_id, idempotency_key, kind, from_seq, to_seq, seat_count,
	                   berths, waitlist_no, passengers, fare_paise, fare_breakup, state, epoch,
	                   opening_day, expires_at, admission_token_id, request_hash)
	SELECT h.id, h.shard_id, h.user_id, h.key, h.kind, h.from_seq, h.to_seq, h.cnt,
	       h.berths::int[], h.wl, h.pax::jsonb, h.fare, h.breakup::jsonb, 'HELD', h.epoch,
	       h.day, h.expires, h.token, h.hash
	FROM unnest($1::uuid[], $2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::int[], $7::int[],
	            $8::int[], $9::text[], $10::int[], $11::text[], $12::bigint[], $13::text[], $14::bigint[],
	            $15::date[], $16::timestamptz[], $17::text[], $19::text[], $20::bool[])
	     AS h(id, shard_id, user_id, key, kind, from_seq, to_seq, cnt, berths, wl, pax, fare, breakup,
	          epoch, day, expires, token, hash, ok)
	JOIN users u ON u.id = h.user_id AND u.banned_at IS NULL
	WHERE h.ok
	  AND h.epoch = (SELECT s.epoch FROM inventory_shards s WHERE s.id = h.shard_id AND s.chart_state = 'OPEN')
	  AND (SELECT count(*) FROM holds x WHERE x.user_id = h.user_id AND x.opening_day = h.day
	         AND x.state IN ('HELD', 'CONFIRMED')) < $18
	  AND (SELECT count(*) FROM holds x WHERE x.user_id = h.user_id
	         AND x.opening_day >= date_trunc('month', h.day)::date
	         AND x.opening_day < (date_trunc('month', h.day) + interval '1 month')::date
	         AND x.state IN ('HELD', 'CONFIRMED'))
	      < CASE WHEN u.id_verification_status = 'VERIFIED' THEN $22::int ELSE $21::int END
	  AND (u.phone_hash IS NULL OR u.id_verification_status <> 'VERIFIED'
	       OR (SELECT count(*) FROM users v JOIN holds x ON x.user_id = v.id
	           WHERE v.phone_hash = u.phone_hash AND v.id_verification_status = 'VERIFIED'
	             AND x.opening_day = h.day AND x.state IN ('HELD', 'CONFIRMED')) < $23::int)
	ON CONFLICT DO NOTHING
	RETURNING id`

// expiryJobs are the expiry jobs of a batch's inserted holds: one a second
// of expiry (a batch's holds are taken within milliseconds of each other,
// so usually one), run when the last of its holds is due. A lone hold
// keeps the single kind. A hold's seats come back up to a second after
// its window, plus the group's run; the window itself is unchanged, as
// payment refuses a hold past its expires_at by the clock.
func expiryJobs(batch []*pendingHold, inserted map[uuid.UUID]bool) []river.InsertManyParams {
	type second struct {
		last  time.Time
		holds []ExpireHoldArgs
	}
	bySecond := map[int64]*second{}
	for _, p := range batch {
		if !inserted[p.row.ID] {
			continue
		}
		k := p.row.ExpiresAt.Truncate(time.Second).Unix()
		g := bySecond[k]
		if g == nil {
			g = &second{}
			bySecond[k] = g
		}
		g.holds = append(g.holds, ExpireHoldArgs{HoldID: p.row.ID, ShardID: p.row.ShardID})
		if p.row.ExpiresAt.After(g.last) {
			g.last = p.row.ExpiresAt
		}
	}
	jobs := make([]river.InsertManyParams, 0, len(bySecond))
	for _, k := range slices.Sorted(maps.Keys(bySecond)) {
		g := bySecond[k]
		var args river.JobArgs = ExpireHoldGroupArgs{Holds: g.holds}
		if len(g.holds) == 1 {
			args = g.holds[0]
		}
		jobs = append(jobs, river.InsertManyParams{Args: args, InsertOpts: &river.InsertOpts{ScheduledAt: g.last}})
	}
	return jobs
}

// committed asks the server how a transaction whose COMMIT reported an
// error ended (db.Settle).
func (c *Committer) committed(ctx context.Context, t db.ServerTx) (bool, error) {
	return db.Settle(ctx, c.pool, t)
}

// diagnose explains why a row was skipped. It runs after the commit, on the
// rare rejected rows only.
func (c *Committer) diagnose(ctx context.Context, r holdRow) commitResult {
	var existing uuid.UUID
	var hash string
	err := c.pool.QueryRow(ctx, `SELECT id, request_hash FROM holds WHERE user_id = $1 AND idempotency_key = $2`, r.UserID, r.IdemKey).Scan(&existing, &hash)
	if err == nil {
		// Rows from before request hashes were kept (empty) cannot be compared.
		if hash != "" && r.RequestHash != "" && hash != r.RequestHash {
			return commitResult{verdict: rejectedKeyReused}
		}
		return commitResult{verdict: rejectedDuplicate, existing: existing}
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return commitResult{err: fmt.Errorf("diagnose hold %s: %w", r.ID, err)}
	}
	var banned bool
	if err := c.pool.QueryRow(ctx, `SELECT banned_at IS NOT NULL FROM users WHERE id = $1`, r.UserID).Scan(&banned); err != nil {
		return commitResult{err: fmt.Errorf("diagnose hold %s: %w", r.ID, err)}
	}
	if banned {
		return commitResult{verdict: rejectedBanned}
	}
	var epoch int64
	var chart string
	if err := c.pool.QueryRow(ctx, `SELECT epoch, chart_state FROM inventory_shards WHERE id = $1`, r.ShardID).Scan(&epoch, &chart); err != nil {
		return commitResult{err: fmt.Errorf("diagnose hold %s: %w", r.ID, err)}
	}
	if chart != ChartOpen {
		// A process's catalog may still show the window open a moment
		// after charting closed it; the shard's row decides.
		return commitResult{verdict: rejectedCharted}
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
	// The account's day, its month, then the person's day across the
	// verified accounts of its phone. Each is counted, never assumed: a
	// row skipped for a live hold that confirmed since shows none of them,
	// and is tried again rather than refused with a limit not reached.
	n, err := readTatkalCounts(ctx, c.pool, r.UserID, r.OpeningDay)
	if err != nil {
		return commitResult{err: fmt.Errorf("diagnose hold %s: %w", r.ID, err)}
	}
	day, month, person, verified := n.day, n.month, n.person, n.verified
	rules := c.rulesNow() // one snapshot for the whole diagnosis
	monthly := rules.MonthlyCap
	if verified {
		monthly = rules.MonthlyCapVerified
	}
	switch {
	case day >= rules.DailyCap:
		return commitResult{verdict: rejectedDailyCap}
	case month >= monthly:
		return commitResult{verdict: rejectedMonthlyCap}
	case rules.PersonDailyCap > 0 && person >= rules.PersonDailyCap:
		return commitResult{verdict: rejectedDailyCap} // the person's day, answered as the account's
	}
	return commitResult{verdict: rejectedChanged}
}

// passengerLimit finds the rows of a batch that would put one passenger on
// the Tatkal holds of more than PassengerAccounts accounts in one opening
// day, counting the live and confirmed holds already durable and the rows
// of this batch before it, in order: its read is queued in the caller's
// batch (queue), then refused decides, once. keys are each row's passenger
// keys, nil when the limit is off.
// Transactions of several writers or processes that name one passenger
// take turns: each locks its passengers' keys (queueLocks) before the read,
// so the later one reads what the earlier committed.
type passengerLimit struct {
	keys  [][]string
	days  []time.Time
	pkeys []string
	users map[string]map[int64]bool // day+key -> accounts holding that passenger
}

// newPassengerLimit reads the batch's passenger keys.
func (c *Committer) newPassengerLimit(batch []*pendingHold) *passengerLimit {
	l := &passengerLimit{users: map[string]map[int64]bool{}}
	if c.fraud == nil || c.rulesNow().PassengerAccounts <= 0 {
		return l
	}
	l.keys = make([][]string, len(batch))
	seen := map[string]bool{}
	for i, p := range batch {
		for _, ps := range p.row.Passengers {
			for _, k := range c.fraud.PassengerKeys(fraud.Passenger{Name: ps.Name, Age: ps.Age, IDType: ps.IDType, IDRef: ps.IDRef}) {
				l.keys[i] = append(l.keys[i], k)
				dk := p.row.OpeningDay.Format(time.DateOnly) + k
				if !seen[dk] {
					seen[dk] = true
					l.days, l.pkeys = append(l.days, p.row.OpeningDay), append(l.pkeys, k)
				}
			}
		}
	}
	return l
}

// Advisory lock classes of the holds' limits, beside the shards'
// (inventory.ShardLockClass): a passenger's key on an opening day, an
// account's phone on one, and the account itself. A transaction takes
// shards, then passengers, then phones, then accounts, each in ascending
// order, so two never wait on each other.
const (
	passengerLockClass = 4243
	personLockClass    = 4244
	// AccountLockClass: taken shared by every transaction writing an
	// account's new holds, to its COMMIT, and exclusive by a late payment's
	// retake while it decides whether the passenger has held again
	// (RetakeAndConfirm). Shared, so the hot path's writers never wait on
	// each other for it.
	AccountLockClass = 4245
)

// accountLockKey folds an account's id into an advisory lock's second key.
func accountLockKey(userID int64) int32 { return int32(uint32(userID) ^ uint32(userID>>32)) }

// queueAccountLocks adds to b the shared locks of a batch's accounts, after
// the phones' (AccountLockClass).
func queueAccountLocks(b *pgx.Batch, users []int64) {
	keys := make([]int32, len(users))
	for i, u := range users {
		keys[i] = accountLockKey(u)
	}
	slices.Sort(keys)
	b.Queue(`SELECT pg_advisory_xact_lock_shared($1, k) FROM unnest($2::int[]) AS k`, AccountLockClass, slices.Compact(keys))
}

// queueLockAccount adds to b the exclusive lock of one account: the new
// holds of the account wait for the transaction that takes it.
func queueLockAccount(b *pgx.Batch, userID int64) {
	b.Queue(`SELECT pg_advisory_xact_lock($1, $2)`, AccountLockClass, accountLockKey(userID)).Exec(func(pgconn.CommandTag) error { return nil })
}

// lockKey folds a limit's key into an advisory lock's second key: two keys
// that collide only take turns for nothing.
func lockKey(parts ...string) int32 {
	h := fnv.New32a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return int32(h.Sum32())
}

// queueLocks adds to b the locks of the batch's passengers on their days,
// held to COMMIT, before the read queue adds: a concurrent transaction
// naming one of them (another writer, another process) has committed its
// keys, or waits for this one's.
func (l *passengerLimit) queueLocks(b *pgx.Batch) {
	if len(l.pkeys) == 0 {
		return
	}
	keys := make([]int32, len(l.pkeys))
	for i, k := range l.pkeys {
		keys[i] = lockKey(l.days[i].Format(time.DateOnly), k)
	}
	slices.Sort(keys)
	b.Queue(`SELECT pg_advisory_xact_lock($1, k) FROM unnest($2::int[]) AS k`, passengerLockClass, slices.Compact(keys))
}

// personCap finds the rows of a batch that would take a person (the
// verified accounts of one phone) past PersonDailyCap on an opening day.
// The INSERT counts a person's durable holds too, but in one statement it
// cannot see the batch's own rows: two accounts of one phone in one batch
// would both pass. So the batch's rows are counted here, in order, on top
// of the durable holds read under the phones' locks; a row some other rule
// then leaves out still counted, which can only refuse, never let through.
type personCap struct {
	cap   int
	users []int64
	days  []time.Time
	phone map[int]string // batch row -> day|phone, verified accounts only
	held  map[string]int // day|phone -> live and confirmed holds
}

func (c *Committer) newPersonCap(users []int64, days []time.Time) *personCap {
	return &personCap{cap: c.rulesNow().PersonDailyCap, users: users, days: days, phone: map[int]string{}, held: map[string]int{}}
}

// queueLocks adds to b the locks of the batch's phones on their days, held
// to COMMIT: accounts of one phone holding in concurrent transactions (other
// writers, other processes) take turns, so the later reads the earlier's
// hold. Every phone of the batch's accounts is locked, verified or not, so
// an account verified between this statement and the read is covered.
func (pc *personCap) queueLocks(b *pgx.Batch) {
	if pc.cap <= 0 {
		return
	}
	b.Queue(`SELECT pg_advisory_xact_lock($1, k) FROM (
			SELECT DISTINCT hashtext(to_char(x.day, 'YYYY-MM-DD') || '|' || u.phone_hash) AS k
			FROM unnest($2::bigint[], $3::date[]) AS x(user_id, day)
			JOIN users u ON u.id = x.user_id AND u.phone_hash IS NOT NULL
			ORDER BY 1) AS phones`, personLockClass, pc.users, pc.days)
}

// queue adds to b, after queueLocks, the read of each verified phone's
// live and confirmed holds on its day.
func (pc *personCap) queue(b *pgx.Batch) {
	if pc.cap <= 0 {
		return
	}
	b.Queue(`SELECT x.i::int, to_char(x.day, 'YYYY-MM-DD') || '|' || u.phone_hash,
			(SELECT count(*) FROM users v JOIN holds h ON h.user_id = v.id
			 WHERE v.phone_hash = u.phone_hash AND v.id_verification_status = 'VERIFIED'
			   AND h.opening_day = x.day AND h.state IN ('HELD', 'CONFIRMED'))
		FROM unnest($1::bigint[], $2::date[]) WITH ORDINALITY AS x(user_id, day, i)
		JOIN users u ON u.id = x.user_id AND u.phone_hash IS NOT NULL AND u.id_verification_status = 'VERIFIED'`,
		pc.users, pc.days).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var i, n int
			var key string
			if err := rows.Scan(&i, &key, &n); err != nil {
				return fmt.Errorf("person cap: %w", err)
			}
			pc.phone[i-1], pc.held[key] = key, n
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("person cap: %w", err)
		}
		return nil
	})
}

// refused: the rows over their person's cap, in batch order, skipping the
// rows already refused. Called once, after queue's read.
func (pc *personCap) refused(already map[int]bool) map[int]bool {
	over := map[int]bool{}
	for i := range pc.users {
		key, ok := pc.phone[i]
		if !ok || already[i] {
			continue
		}
		if pc.held[key] >= pc.cap {
			over[i] = true
			continue
		}
		pc.held[key]++
	}
	return over
}

// queue adds the read of the accounts already holding the batch's
// passengers to b.
func (l *passengerLimit) queue(b *pgx.Batch) {
	if len(l.pkeys) == 0 {
		return
	}
	b.Queue(`
		SELECT k.day, k.pkey, p.user_id
		FROM unnest($1::date[], $2::text[]) AS k(day, pkey)
		JOIN fraud_passenger_day p ON p.day = k.day AND p.pkey = k.pkey
		JOIN holds x ON x.id = p.hold_id AND x.state IN ('HELD', 'CONFIRMED')
		GROUP BY 1, 2, 3`, l.days, l.pkeys).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var day time.Time
			var k string
			var u int64
			if err := rows.Scan(&day, &k, &u); err != nil {
				return fmt.Errorf("passenger limit: %w", err)
			}
			dk := day.Format(time.DateOnly) + k
			if l.users[dk] == nil {
				l.users[dk] = map[int64]bool{}
			}
			l.users[dk][u] = true
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("passenger limit: %w", err)
		}
		return nil
	})
}

// refused: the rows of batch the limit refuses, once queue's read is done.
// It counts the rows it lets through, so it is called once.
func (l *passengerLimit) refused(batch []*pendingHold, accounts int) map[int]bool {
	refused := map[int]bool{}
	if l.keys == nil {
		return refused
	}
	for i, p := range batch {
		day := p.row.OpeningDay.Format(time.DateOnly)
		for _, k := range l.keys[i] {
			others := len(l.users[day+k])
			if l.users[day+k][p.row.UserID] {
				others--
			}
			if others >= accounts {
				refused[i] = true
				break
			}
		}
		if refused[i] {
			continue
		}
		for _, k := range l.keys[i] {
			if l.users[day+k] == nil {
				l.users[day+k] = map[int64]bool{}
			}
			l.users[day+k][p.row.UserID] = true
		}
	}
	return refused
}

// queuePassengers queues the inserted holds' passenger keys for the
// passenger limit, in the holds' transaction: a limit must be as durable
// as what it limits.
func (c *Committer) queuePassengers(b *pgx.Batch, batch []*pendingHold, keys [][]string, inserted map[uuid.UUID]bool) {
	if keys == nil {
		return
	}
	var days []time.Time
	var ks []string
	var users []int64
	var holds []uuid.UUID
	for i, p := range batch {
		if !inserted[p.row.ID] {
			continue
		}
		for _, k := range keys[i] {
			days, ks, users, holds = append(days, p.row.OpeningDay), append(ks, k), append(users, p.row.UserID), append(holds, p.row.ID)
		}
	}
	if len(ks) == 0 {
		return
	}
	b.Queue(`INSERT INTO fraud_passenger_day (day, pkey, user_id, hold_id)
		SELECT * FROM unnest($1::date[], $2::text[], $3::bigint[], $4::uuid[]) ON CONFLICT DO NOTHING`,
		days, ks, users, holds)
}

// queueSignals queues the inserted holds' fraud signals in the batch's
// transaction (one narrow row; fraud.Drain writes them later), and in the
// same row the attempts the passenger limit refused: a third account
// trying a passenger two others hold is a ring's evidence that nothing else
// records. An invalid signal is logged and dropped, never a hold.
func (c *Committer) queueSignals(ctx context.Context, b *pgx.Batch, batch []*pendingHold, inserted map[uuid.UUID]bool, refused map[int]bool) error {
	if c.fraud == nil || c.fraud.Discarding() || len(inserted)+len(refused) == 0 {
		return nil
	}
	sigs := make([]fraud.Signal, 0, len(inserted))
	var tried []fraud.Signal
	for i, p := range batch {
		r := p.row
		if !inserted[r.ID] && !refused[i] {
			continue
		}
		s := fraud.Signal{HoldID: r.ID, ShardID: r.ShardID, UserID: r.UserID, DeviceID: r.Client.DeviceID, IP: r.Client.IP,
			Attested: r.Client.Attested, SolveMS: r.Client.SolveMS, HeldAt: r.HeldAt}
		for _, ps := range r.Passengers {
			s.Passengers = append(s.Passengers, fraud.Passenger{Name: ps.Name, Age: ps.Age, IDType: ps.IDType, IDRef: ps.IDRef})
		}
		if refused[i] {
			tried = append(tried, s)
		} else {
			sigs = append(sigs, s)
		}
	}
	return c.fraud.QueueInbox(ctx, b, sigs, tried)
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
