package chaos

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"tatkal/booking/lab/localsrv"
)

// PostgresDown is how long postgres-restart keeps PostgreSQL down.
const PostgresDown = 4 * time.Second

// Answers counts answers by HTTP status (0: no answer) and by reason.
type Answers struct {
	Status  map[int]int
	Reasons map[string]int
}

// Succeeded is how many answers were 2xx.
func (a Answers) Succeeded() int {
	n := 0
	for status, k := range a.Status {
		if status >= 200 && status < 300 {
			n += k
		}
	}
	return n
}

func (a Answers) String() string { return fmt.Sprintf("statuses %v, reasons %v", a.Status, a.Reasons) }

// Tally counts what the serve processes answered while a fault was on
// (between Begin and End) and after it; its Seen is the Client's.
type Tally struct {
	phase         atomic.Int32 // 0 before the fault, 1 while it is on, 2 after
	mu            sync.Mutex
	during, after Answers
}

// NewTally counts nothing until Begin.
func NewTally() *Tally {
	return &Tally{during: Answers{map[int]int{}, map[string]int{}}, after: Answers{map[int]int{}, map[string]int{}}}
}

// Begin starts the fault's window; End ends it.
func (t *Tally) Begin() { t.phase.Store(1) }

// End ends the fault's window: what follows counts as after.
func (t *Tally) End() { t.phase.Store(2) }

// Seen counts one answer (Client.Seen); it is safe from many goroutines.
func (t *Tally) Seen(status int, reason string) {
	var a *Answers
	switch t.phase.Load() {
	case 1:
		a = &t.during
	case 2:
		a = &t.after
	default:
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	a.Status[status]++
	if reason != "" {
		a.Reasons[reason]++
	}
}

// Counts are copies of what was answered during the fault and after it.
func (t *Tally) Counts() (during, after Answers) {
	t.mu.Lock()
	defer t.mu.Unlock()
	cp := func(a Answers) Answers { return Answers{maps.Clone(a.Status), maps.Clone(a.Reasons)} }
	return cp(t.during), cp(t.after)
}

// OutageViolations are the broken promises of a store that was down
// during the fault (what names it): nobody was told 503 to retry while it
// was down, or nothing succeeded once it was back.
func (t *Tally) OutageViolations(what string) []string {
	during, after := t.Counts()
	var v []string
	if during.Status[503] == 0 {
		v = append(v, fmt.Sprintf("no request was answered 503 while %s was down: %v", what, during.Status))
	}
	if after.Succeeded() == 0 {
		v = append(v, fmt.Sprintf("nothing succeeded after %s came back: %v", what, after.Status))
	}
	return v
}

// RestartPostgres is the postgres-restart fault: pg is stopped (a fast
// shutdown: every connection dropped, open transactions rolled back) and
// started again after down. tally's window is the time it is down; say
// reports each step with done, the travellers done by then.
func RestartPostgres(pg *localsrv.Postgres, down time.Duration, tally *Tally, done func() int64, say func(string, ...any)) error {
	tally.Begin()
	defer tally.End()
	say("stopping PostgreSQL (fast shutdown) after %d travellers", done())
	if err := pg.Stop(); err != nil {
		return fmt.Errorf("stop PostgreSQL: %w", err)
	}
	say("stopped PostgreSQL after %d travellers", done())
	time.Sleep(down)
	if err := pg.Start(); err != nil {
		return fmt.Errorf("start PostgreSQL again: %w", err)
	}
	say("started PostgreSQL again after %d travellers (down %s)", done(), down)
	return nil
}

// RedisFailover is the redis-failover fault: the master of rc serving the
// shard's meta key and its replica, found before the rush.
type RedisFailover struct {
	rc              *localsrv.RedisCluster
	master, replica *localsrv.RedisNode
}

// NewRedisFailover finds the master serving key (a shard's MetaKey) and
// its replica.
func NewRedisFailover(ctx context.Context, rc *localsrv.RedisCluster, key string) (*RedisFailover, error) {
	master, err := rc.Master(ctx, key)
	if err != nil {
		return nil, err
	}
	replica, err := rc.ReplicaOf(ctx, master)
	if err != nil {
		return nil, err
	}
	return &RedisFailover{rc: rc, master: master, replica: replica}, nil
}

// Pull kills the master with SIGKILL and waits for its replica to take
// over (localsrv.RedisCluster.WaitFailover). tally's window is from the
// kill to the takeover; say reports each step with done, the travellers
// done by then.
func (f *RedisFailover) Pull(tally *Tally, done func() int64, say func(string, ...any)) error {
	tally.Begin()
	defer tally.End()
	f.master.Kill()
	killed := time.Now()
	say("killed the shard's Redis master %s (SIGKILL) after %d travellers", f.master.Addr, done())
	forced, err := f.rc.WaitFailover(f.replica)
	if err != nil {
		return err
	}
	say("replica %s took over in %s (told to: %v), after %d travellers", f.replica.Addr,
		time.Since(killed).Round(time.Millisecond), forced, done())
	return nil
}
