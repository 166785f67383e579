package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// RawHoldLua is the least a hold can be: check a counter, take from it,
// record the hold. The real HOLD script does this plus per-user limits, an
// idempotency record and a scan of every berth's leg mask.
const RawHoldLua = `
local left = tonumber(redis.call('GET', KEYS[1]) or '0')
local n = tonumber(ARGV[3])
if left < n then return 0 end
redis.call('DECRBY', KEYS[1], n)
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return 1`

// rawKeys makes the ceiling's keys (one hash tag, as a shard's keys have)
// with a counter that never runs out during the phase.
func rawKeys(ctx context.Context, env *runEnv, name string) ([]string, *redis.Script, func(), error) {
	tag := "bench:{raw" + env.runID + name + "}:"
	keys := []string{tag + "cnt", tag + "holds"}
	rdb := env.opts.Redis
	if err := rdb.Set(ctx, keys[0], 1<<50, time.Hour).Err(); err != nil {
		return nil, nil, nil, fmt.Errorf("raw lua keys: %w", err)
	}
	script := redis.NewScript(RawHoldLua)
	if err := script.Load(ctx, rdb).Err(); err != nil {
		return nil, nil, nil, fmt.Errorf("raw lua load: %w", err)
	}
	// UNLINK frees the large hash off Redis's main thread.
	cleanup := func() { rdb.Unlink(context.WithoutCancel(ctx), keys...) }
	return keys, script, cleanup, nil
}

func rawArgs(g, n int, exp string) []any {
	return []any{"h" + strconv.Itoa(g) + "-" + strconv.Itoa(n), strconv.Itoa(g) + "|" + exp, 1}
}

// rawLua is raw ceiling A: the minimal script, one call per round trip.
func rawLua(ctx context.Context, env *runEnv) (Phase, error) {
	keys, script, cleanup, err := rawKeys(ctx, env, "a")
	if err != nil {
		return Phase{}, err
	}
	defer cleanup()
	rdb := env.opts.Redis
	exp := strconv.FormatInt(time.Now().Add(3*time.Minute).UnixMilli(), 10)
	t, elapsed := closedLoop(ctx, env.opts.Concurrency, env.opts.Duration, func(g int, t *tally, more func() bool) {
		for n := 0; more(); n++ {
			start := time.Now()
			err := script.EvalSha(ctx, rdb, keys, rawArgs(g, n, exp)...).Err()
			t.lat = append(t.lat, time.Since(start))
			if err != nil {
				t.fail("lua: " + err.Error())
				continue
			}
			t.ops++
		}
	})
	return t.phase("raw A: Lua hold-style script", elapsed), nil
}

// rawLuaPipelined is raw ceiling A with PipelineBatch calls per round trip.
func rawLuaPipelined(ctx context.Context, env *runEnv) (Phase, error) {
	keys, script, cleanup, err := rawKeys(ctx, env, "p")
	if err != nil {
		return Phase{}, err
	}
	defer cleanup()
	rdb := env.opts.Redis
	batch := env.opts.PipelineBatch
	exp := strconv.FormatInt(time.Now().Add(3*time.Minute).UnixMilli(), 10)
	t, elapsed := closedLoop(ctx, env.opts.Concurrency, env.opts.Duration, func(g int, t *tally, more func() bool) {
		for n := 0; more(); {
			start := time.Now()
			cmds, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
				for range batch {
					script.EvalSha(ctx, p, keys, rawArgs(g, n, exp)...)
					n++
				}
				return nil
			})
			t.lat = append(t.lat, time.Since(start))
			if err != nil {
				t.fail("lua pipeline: " + err.Error())
			}
			for _, c := range cmds {
				if c.Err() == nil {
					t.ops++
				}
			}
		}
	})
	return t.phase(fmt.Sprintf("raw A: same, pipelined x%d", batch), elapsed), nil
}

// pgRow is one hold-like row waiting for its group commit.
type pgRow struct {
	id      uuid.UUID
	user    int64
	key     string
	berth   int32
	pax     string
	fare    int64
	expires time.Time
	done    chan error
}

// rawPG is raw ceiling B: clients hand hold-like rows to Writers writers
// that each take whatever is queued the moment they are free (no timer) and
// write it with one INSERT ... SELECT FROM unnest, one statement and so one
// transaction per batch, into a scratch table shaped like holds (primary
// key, unique idempotency key, jsonb passengers) and dropped afterwards.
// It leaves out what the service adds: the shard lock, the epoch join, the
// daily-cap subquery and the River expiry jobs.
func rawPG(ctx context.Context, env *runEnv) (Phase, error) {
	pool := env.opts.Pool
	table := pgx.Identifier{"bench_holds_" + env.runID}.Sanitize()
	if _, err := pool.Exec(ctx, `CREATE TABLE `+table+` (
		id              uuid PRIMARY KEY,
		shard_id        bigint NOT NULL,
		user_id         bigint NOT NULL,
		idempotency_key text NOT NULL,
		berths          int[] NOT NULL,
		passengers      jsonb NOT NULL,
		fare_paise      bigint NOT NULL,
		state           text NOT NULL,
		expires_at      timestamptz NOT NULL,
		created_at      timestamptz NOT NULL DEFAULT now(),
		UNIQUE (user_id, idempotency_key))`); err != nil {
		return Phase{}, fmt.Errorf("create scratch table: %w", err)
	}
	defer pool.Exec(context.WithoutCancel(ctx), `DROP TABLE IF EXISTS `+table) //nolint:errcheck
	insert := `INSERT INTO ` + table + ` (id, shard_id, user_id, idempotency_key, berths, passengers, fare_paise, state, expires_at)
		SELECT h.id, $1, h.user_id, h.key, ARRAY[h.berth], h.pax::jsonb, h.fare, 'HELD', h.expires
		FROM unnest($2::uuid[], $3::bigint[], $4::text[], $5::int[], $6::text[], $7::bigint[], $8::timestamptz[])
		     AS h(id, user_id, key, berth, pax, fare, expires)`

	in := make(chan *pgRow, 8192)
	stop := make(chan struct{})
	var writers sync.WaitGroup
	for range env.opts.Writers {
		writers.Go(func() {
			// Flushes outlive ctx so every queued client gets its answer.
			wctx := context.WithoutCancel(ctx)
			batch := make([]*pgRow, 0, 1000)
			for {
				select {
				case <-stop:
					return
				case r := <-in:
					batch = append(batch[:0], r)
				drain:
					for len(batch) < cap(batch) {
						select {
						case r := <-in:
							batch = append(batch, r)
						default:
							break drain
						}
					}
					err := flushRows(wctx, env, insert, batch)
					for _, r := range batch {
						r.done <- err
					}
				}
			}
		})
	}
	pax := `[{"name":"Bench Passenger","age":34,"gender":"F","id_type":"PAN","id_ref":"ABCDE1234F"}]`
	t, elapsed := closedLoop(ctx, env.opts.Concurrency, env.opts.Duration, func(g int, t *tally, more func() bool) {
		user := env.cycle[g]
		for n := 0; more(); n++ {
			id, err := uuid.NewV7()
			if err != nil {
				t.fail("uuid: " + err.Error())
				return
			}
			r := &pgRow{id: id, user: user, key: "raw-" + env.runID + "-" + strconv.Itoa(n), berth: int32(n % env.shard.Total),
				pax: pax, fare: 250000, expires: time.Now().Add(3 * time.Minute), done: make(chan error, 1)}
			start := time.Now()
			in <- r
			err = <-r.done
			t.lat = append(t.lat, time.Since(start))
			if err != nil {
				t.fail("insert: " + err.Error())
				continue
			}
			t.ops++
		}
	})
	close(stop)
	writers.Wait()
	return t.phase(fmt.Sprintf("raw B: PG group commit, %d writers", env.opts.Writers), elapsed), nil
}

func flushRows(ctx context.Context, env *runEnv, insert string, batch []*pgRow) error {
	n := len(batch)
	ids, users := make([]uuid.UUID, n), make([]int64, n)
	keys, paxs := make([]string, n), make([]string, n)
	berths, fares, exps := make([]int32, n), make([]int64, n), make([]time.Time, n)
	for i, r := range batch {
		ids[i], users[i], keys[i], berths[i], paxs[i], fares[i], exps[i] = r.id, r.user, r.key, r.berth, r.pax, r.fare, r.expires
	}
	if _, err := env.opts.Pool.Exec(ctx, insert, env.shard.ID, ids, users, keys, berths, paxs, fares, exps); err != nil {
		return fmt.Errorf("insert %d rows: %w", n, err)
	}
	return nil
}
