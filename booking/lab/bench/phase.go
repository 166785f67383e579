package bench

import (
	"bufio"
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// Phase is one measurement: closed-loop clients doing one kind of
// operation for the phase's duration.
type Phase struct {
	Name    string
	Elapsed time.Duration // from the start until the last client finished
	// Ops counts script calls (raw A), rows made durable (raw B), hold
	// decisions: HELD, WAITLIST_OFFERED and SOLD_OUT answers (the hold
	// phases), confirmations (wallet: hold, then pay, SUCCESS), callbacks
	// answered 200 (callbacks, duplicates).
	Ops int64
	// Durable counts HELD and WAITLIST_OFFERED answers: each is durable in
	// PostgreSQL before it is given. Payment phases: bookings confirmed
	// with a PNR (duplicates confirm nothing).
	Durable int64
	SoldOut int64
	// Errors counts failed operations by reason; they are not decisions.
	Errors map[string]int64
	// P50 and P99 are of one operation as its client saw it: a script
	// call, a pipeline of PipelineBatch calls, a row's wait for its commit,
	// a hold request, a whole hold → PNR sequence (wallet) or a callback.
	P50, P99 time.Duration
	// Wallet only: the hold step and the pay step (Initiate) apart.
	HoldP50, HoldP99, PayP50, PayP99 time.Duration
	// EndedEarly says why a phase stopped before its duration (its shard
	// sold out, or it ran out of users or prepared payments), at EndedAt;
	// "" when it ran its course.
	EndedEarly string
	EndedAt    time.Duration
	// Cycles only: the cancel that follows each durable hold, and the share
	// of client time spent in holds rather than cancels.
	CancelP50, CancelP99 time.Duration
	HoldShare            float64
	// Rush only: the time until the last durable answer (the sell-out),
	// and the decisions answered after it.
	FillTime       time.Duration
	AfterFill      int64
	AfterFillSpan  time.Duration
	SoldOutReached bool
	CPU            CPUUse
	// Group commit, for phases that write holds: the transactions their
	// holds went in (rows of one transaction share created_at, which is
	// now() at its start).
	Holds Batches
	// Payment phases: the confirmation groups their bookings went in
	// (bookings of one transaction share booked_at, its now()).
	Confirmations Batches
	// Statements is what the database's statements did in the phase
	// (pg_stat_statements), read around the same span as CPU.
	Statements Statements
}

// Units is what a phase's per-unit figures divide by: confirmations in the
// payment phases, durable holds in the hold-only ones, operations
// otherwise.
func (p Phase) Units() int64 {
	if p.Durable > 0 {
		return p.Durable
	}
	return p.Ops
}

// PerUnit is CPU cores used over the phase turned into milliseconds of one
// core per unit, or -1 when either is unknown.
func (p Phase) PerUnit(cores float64) float64 {
	if cores < 0 || p.Units() <= 0 || p.Elapsed <= 0 {
		return -1
	}
	return cores * p.Elapsed.Seconds() * 1000 / float64(p.Units())
}

// Batches is how rows were grouped into transactions.
type Batches struct {
	Rows, Transactions int64
	P50, Max           int
}

// Mean is the mean rows per transaction.
func (b Batches) Mean() float64 {
	if b.Transactions == 0 {
		return 0
	}
	return float64(b.Rows) / float64(b.Transactions)
}

// Rate is Ops per second of wall time.
func (p Phase) Rate() float64 { return perSecond(p.Ops, p.Elapsed) }

// DurableRate is Durable per second of wall time.
func (p Phase) DurableRate() float64 { return perSecond(p.Durable, p.Elapsed) }

// FillRate is durable holds per second until the shard sold out.
func (p Phase) FillRate() float64 { return perSecond(p.Durable, p.FillTime) }

// AfterFillRate is decisions per second once the shard was sold out.
func (p Phase) AfterFillRate() float64 { return perSecond(p.AfterFill, p.AfterFillSpan) }

func perSecond(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// tally is one client's record; each client has its own, merged at the
// end, so measuring adds no shared lock to the path being measured.
type tally struct {
	ops, durable, soldOut int64
	lat, cancelLat        []time.Duration
	holdLat, payLat       []time.Duration // wallet: the two steps apart
	holdTime, cancelTime  time.Duration
	ids                   []uuid.UUID // wallet: the payments made
	errs                  map[string]int64
	events                []event // rush: when each decision ended
}

type event struct {
	end     time.Duration // since the phase started
	durable bool
}

func (t *tally) fail(reason string) {
	if t.errs == nil {
		t.errs = map[string]int64{}
	}
	t.errs[reason]++
}

// closedLoop runs body on n clients until d has passed or ctx ends. Each
// client calls more() before every operation; an operation under way at the
// deadline finishes and counts, and Elapsed runs until the last one ends.
func closedLoop(ctx context.Context, n int, d time.Duration, body func(g int, t *tally, more func() bool)) (tally, time.Duration) {
	start := time.Now()
	deadline := start.Add(d)
	more := func() bool { return ctx.Err() == nil && time.Now().Before(deadline) }
	tallies := make([]tally, n)
	var wg sync.WaitGroup
	for g := range n {
		wg.Go(func() { body(g, &tallies[g], more) })
	}
	wg.Wait()
	elapsed := time.Since(start)
	var all tally
	for _, t := range tallies {
		all.ops += t.ops
		all.durable += t.durable
		all.soldOut += t.soldOut
		all.lat = append(all.lat, t.lat...)
		all.cancelLat = append(all.cancelLat, t.cancelLat...)
		all.holdLat = append(all.holdLat, t.holdLat...)
		all.payLat = append(all.payLat, t.payLat...)
		all.ids = append(all.ids, t.ids...)
		all.holdTime += t.holdTime
		all.cancelTime += t.cancelTime
		all.events = append(all.events, t.events...)
		for k, v := range t.errs {
			if all.errs == nil {
				all.errs = map[string]int64{}
			}
			all.errs[k] += v
		}
	}
	return all, elapsed
}

// phase turns a merged tally into a Phase.
func (t tally) phase(name string, elapsed time.Duration) Phase {
	p := Phase{Name: name, Elapsed: elapsed, Ops: t.ops, Durable: t.durable, SoldOut: t.soldOut, Errors: t.errs}
	p.P50, p.P99 = percentile(t.lat, 0.50), percentile(t.lat, 0.99)
	p.CancelP50, p.CancelP99 = percentile(t.cancelLat, 0.50), percentile(t.cancelLat, 0.99)
	p.HoldP50, p.HoldP99 = percentile(t.holdLat, 0.50), percentile(t.holdLat, 0.99)
	p.PayP50, p.PayP99 = percentile(t.payLat, 0.50), percentile(t.payLat, 0.99)
	if busy := t.holdTime + t.cancelTime; busy > 0 {
		p.HoldShare = float64(t.holdTime) / float64(busy)
	}
	if len(t.events) > 0 {
		for _, e := range t.events {
			if e.durable {
				p.FillTime = max(p.FillTime, e.end)
			}
		}
		for _, e := range t.events {
			if !e.durable && e.end > p.FillTime {
				p.AfterFill++
				p.SoldOutReached = true
			}
		}
		p.AfterFillSpan = elapsed - p.FillTime
	}
	return p
}

// percentile is the nearest-rank q-quantile of xs (sorted in place).
func percentile(xs []time.Duration, q float64) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	i := int(q*float64(len(xs))+0.999999) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}

// CPUUse is CPU time spent during a phase, in cores (CPU seconds per
// second of wall time): this process (the clients and, when the server runs
// in this process, the server too), Redis, PostgreSQL, and the whole
// machine. Redis and PostgreSQL are their own processes' CPU time from
// /proc when they run on this machine (PostgreSQL's counts every database
// of its server); elsewhere Redis is its INFO cpu and PostgreSQL is not
// known, and the rest of the machine stands for it. A figure that could
// not be read is negative.
type CPUUse struct {
	Process, Redis, PG, Machine float64
	// ScriptCalls and ScriptMicros are the Lua script calls Redis ran in
	// the phase (every client of that Redis counts) and the time it spent
	// in them, from INFO commandstats.
	ScriptCalls, ScriptMicros int64
	// WALBytes is the PostgreSQL WAL written in the phase (every database
	// of the server counts).
	WALBytes int64
}

// MicrosPerScript is Redis time per script call, or -1 when unknown.
func (c CPUUse) MicrosPerScript() float64 {
	if c.ScriptCalls <= 0 {
		return -1
	}
	return float64(c.ScriptMicros) / float64(c.ScriptCalls)
}

// PGOrRest is PostgreSQL's CPU use, or where that is unknown the rest of
// the machine, which stands for it.
func (c CPUUse) PGOrRest() float64 {
	if c.PG >= 0 {
		return c.PG
	}
	return c.Other()
}

// Other is the machine's CPU use outside this process and Redis.
func (c CPUUse) Other() float64 {
	if c.Machine < 0 || c.Redis < 0 {
		return -1
	}
	return max(c.Machine-c.Process-c.Redis, 0)
}

type cpuSample struct {
	at                  time.Time
	process, redis, pg  float64 // CPU seconds, -1 unknown
	busy                float64 // machine CPU seconds not idle
	scripts, scriptUsec int64
	wal                 int64 // WAL position in bytes, -1 unknown
}

func sampleCPU(ctx context.Context, rdb redis.UniversalClient, pool *pgxpool.Pool) cpuSample {
	s := cpuSample{at: time.Now(), redis: -1, pg: -1, busy: -1, scripts: -1, wal: -1}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		s.process = tvSeconds(ru.Utime) + tvSeconds(ru.Stime)
	}
	if info, err := rdb.Info(ctx, "server", "cpu", "commandstats").Result(); err == nil {
		if s.redis = redisProcCPU(redisPID(info)); s.redis < 0 {
			s.redis = redisCPU(info)
		}
		s.scripts, s.scriptUsec = redisScripts(info)
	}
	s.busy = machineBusy()
	var backend int
	if err := pool.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint, pg_backend_pid()`).Scan(&s.wal, &backend); err != nil {
		s.wal = -1
	} else {
		s.pg = pgServerCPU(backend)
	}
	return s
}

func (s cpuSample) since(before cpuSample) CPUUse {
	wall := s.at.Sub(before.at).Seconds()
	if wall <= 0 {
		return CPUUse{Process: -1, Redis: -1, PG: -1, Machine: -1, WALBytes: -1}
	}
	use := CPUUse{Process: (s.process - before.process) / wall, Redis: -1, PG: -1, Machine: -1}
	if s.pg >= 0 && before.pg >= 0 {
		use.PG = (s.pg - before.pg) / wall
	}
	if s.redis >= 0 && before.redis >= 0 {
		use.Redis = (s.redis - before.redis) / wall
	}
	if s.busy >= 0 && before.busy >= 0 {
		use.Machine = (s.busy - before.busy) / wall
	}
	if s.scripts >= 0 && before.scripts >= 0 {
		use.ScriptCalls, use.ScriptMicros = s.scripts-before.scripts, s.scriptUsec-before.scriptUsec
	}
	use.WALBytes = -1
	if s.wal >= 0 && before.wal >= 0 {
		use.WALBytes = s.wal - before.wal
	}
	return use
}

// redisScripts sums the calls and microseconds of EVAL and EVALSHA in an
// INFO commandstats answer; a script's own commands run inside that time.
func redisScripts(info string) (calls, usec int64) {
	for line := range strings.SplitSeq(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || (k != "cmdstat_evalsha" && k != "cmdstat_eval") {
			continue
		}
		for field := range strings.SplitSeq(v, ",") {
			name, num, _ := strings.Cut(field, "=")
			n, err := strconv.ParseInt(num, 10, 64)
			if err != nil {
				continue
			}
			switch name {
			case "calls":
				calls += n
			case "usec":
				usec += n
			}
		}
	}
	return calls, usec
}

func tvSeconds(tv syscall.Timeval) float64 { return float64(tv.Sec) + float64(tv.Usec)/1e6 }

// redisCPU sums used_cpu_sys and used_cpu_user of an INFO cpu answer.
func redisCPU(info string) float64 {
	total, found := 0.0, false
	for line := range strings.SplitSeq(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				total, found = total+f, true
			}
		}
	}
	if !found {
		return -1
	}
	return total
}

// machineBusy reads the CPU seconds all cores spent not idle from
// /proc/stat (Linux; -1 elsewhere). Ticks are USER_HZ, 100 on Linux.
func machineBusy() float64 {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return -1
	}
	fields := strings.Fields(sc.Text())
	if len(fields) < 6 || fields[0] != "cpu" {
		return -1
	}
	var busy float64
	for i, v := range fields[1:] {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return -1
		}
		// user nice system idle iowait irq softirq steal (guest is in user)
		if i == 3 || i == 4 || i >= 8 {
			continue
		}
		busy += n
	}
	return busy / 100
}
