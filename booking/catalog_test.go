package booking

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/testenv"
)

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// Sixty lookups of a 500 KB train number used to add 23 MB that was never
// freed: now they are refused before any lookup and nothing is kept.
//
// Not parallel: it measures the process's heap, which parallel tests'
// stacks would grow beside it (seen in CI: 9.6 MB that was not ours).
func TestCatalogRefusesMalformedIntentsAndKeepsNothing(t *testing.T) {
	env := testenv.New(t)
	ctx := context.Background()
	c := NewCatalog(env.Pool, time.Minute)
	date := time.Now().In(IST).AddDate(0, 0, 3)
	before := heapInUse()
	for i := range 60 {
		train := strings.Repeat("9", 500<<10-3) + strconv.Itoa(100+i) // each one different, as an attacker's would be
		_, err := c.Find(ctx, train, date, "3A", "TQ")
		if ErrorCode(err) != EINVALID || ErrorReason(err) != "BAD_TRAIN_NO" || len(err.Error()) > 200 {
			t.Fatalf("500 KB train number: %v", ErrorReason(err))
		}
	}
	if grew := int64(heapInUse()) - int64(before); grew > 4<<20 {
		t.Fatalf("heap grew by %d bytes after 60 refused lookups", grew)
	}
	for _, tc := range []struct{ train, class, quota, reason string }{
		{"1295", "3A", "TQ", "BAD_TRAIN_NO"},
		{"12a51", "3A", "TQ", "BAD_TRAIN_NO"},
		{"12951", "4A", "TQ", "BAD_CLASS"},
		{"12951", strings.Repeat("A", 1000), "TQ", "BAD_CLASS"},
		{"12951", "3A", "XX", "BAD_QUOTA"},
	} {
		if _, err := c.Find(ctx, tc.train, date, tc.class, tc.quota); ErrorReason(err) != tc.reason {
			t.Errorf("%.10s %.10s %s: %v, want %s", tc.train, tc.class, tc.quota, err, tc.reason)
		}
	}
	if n := c.Cached(); n != 0 {
		t.Fatalf("%d entries cached for malformed intents", n)
	}
}

// Well-formed intents that match nothing are remembered briefly and in a
// bounded number; a shard created after a miss is found once the miss has
// aged out.
func TestCatalogMissesAreBoundedAndExpire(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	open := -time.Hour
	if _, err := seed.Demo(ctx, env.Pool, seed.DemoOptions{OpensIn: &open}); err != nil {
		t.Fatal(err)
	}
	c := NewCatalog(env.Pool, 300*time.Millisecond)
	start := time.Date(2027, 1, 1, 0, 0, 0, 0, IST)
	for i := range catalogMaxMissing + 500 {
		if _, err := c.Find(ctx, "99999", start.AddDate(0, 0, i), "SL", "TQ"); ErrorCode(err) != ENOTFOUND {
			t.Fatalf("missing shard: %v", err)
		}
	}
	if n := c.Cached(); n > catalogMaxMissing {
		t.Fatalf("%d misses cached, bound is %d", n, catalogMaxMissing)
	}

	date := time.Now().In(IST).AddDate(0, 0, 9)
	date = time.Date(date.Year(), date.Month(), date.Day(), 0, 0, 0, 0, IST)
	if _, err := c.Find(ctx, "12951", date, "2A", "TQ"); ErrorCode(err) != ENOTFOUND {
		t.Fatalf("before the shard exists: %v", err)
	}
	if _, err := seed.Shard(ctx, env.Pool, seed.ShardSpec{Train: "12951", Date: date, Class: "2A", Berths: 4, OpensAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(350 * time.Millisecond)
	if s, err := c.Find(ctx, "12951", date, "2A", "TQ"); err != nil || s.Class != "2A" {
		t.Fatalf("after the miss aged out: %v", err)
	}
}

func TestBoundedCacheEvictsOldestAndExpired(t *testing.T) {
	t.Parallel()
	c := newBoundedCache[int, int](3, time.Minute)
	now := time.Now()
	for i := range 5 {
		c.put(i, i, now)
	}
	if c.len() != 3 {
		t.Fatalf("len %d, want 3", c.len())
	}
	if _, _, ok := c.get(0, now); ok {
		t.Fatal("the oldest entry survived")
	}
	if v, _, ok := c.get(4, now); !ok || v != 4 {
		t.Fatal("the newest entry is gone")
	}
	if _, _, ok := c.get(4, now.Add(time.Minute)); ok {
		t.Fatal("an expired entry was served")
	}
	if c.len() != 2 {
		t.Fatalf("expired entry kept: len %d", c.len())
	}
}

// TestCatalogByIDTxNeedsNoSecondConnection: a transaction that misses the
// catalog's cache reads the shard on its own connection. With every pool
// connection held by such transactions (a rush of confirmations when the
// cache entry lapses), asking the pool instead waits until the contexts
// run out: the rehearsal saw every payment of a window time out that way.
func TestCatalogByIDTxNeedsNoSecondConnection(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	open := -time.Hour
	if _, err := seed.Demo(ctx, env.Pool, seed.DemoOptions{OpensIn: &open}); err != nil {
		t.Fatal(err)
	}
	date := time.Now().In(IST).AddDate(0, 0, 9)
	date = time.Date(date.Year(), date.Month(), date.Day(), 0, 0, 0, 0, IST)
	id, err := seed.Shard(ctx, env.Pool, seed.ShardSpec{Train: "12951", Date: date, Class: "2A", Berths: 4, OpensAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	// Hold every connection of the pool in a transaction.
	var txs []pgx.Tx
	for range int(env.Pool.Config().MaxConns) {
		tx, err := env.Pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx) //nolint:errcheck
		txs = append(txs, tx)
	}
	c := NewCatalog(env.Pool, time.Minute)
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := c.ByID(short, id); err == nil {
		t.Fatal("ByID found a free connection in a pool whose every connection is held: the test proves nothing")
	}
	c = NewCatalog(env.Pool, time.Minute)
	short2, cancel2 := context.WithTimeout(ctx, 10*time.Second)
	defer cancel2()
	s, err := c.ByIDTx(short2, txs[0], id)
	if err != nil || s.ID != id || s.Class != "2A" {
		t.Fatalf("ByIDTx inside a transaction, pool exhausted: %+v %v", s, err)
	}
	if s2, err := c.ByID(short2, id); err != nil || s2 != s {
		t.Fatalf("ByIDTx did not fill the cache: %v", err)
	}
}

// A lapsed entry is still read again: the caller that finds it lapsed
// while nobody else is reading it waits for PostgreSQL and sees the change
// (the others, meanwhile, are answered with the entry they had).
func TestCatalogRereadsALapsedEntry(t *testing.T) {
	t.Parallel()
	env := testenv.New(t)
	ctx := context.Background()
	open := -time.Hour
	if _, err := seed.Demo(ctx, env.Pool, seed.DemoOptions{OpensIn: &open}); err != nil {
		t.Fatal(err)
	}
	date := time.Now().In(IST).AddDate(0, 0, 9)
	date = time.Date(date.Year(), date.Month(), date.Day(), 0, 0, 0, 0, IST)
	id, err := seed.Shard(ctx, env.Pool, seed.ShardSpec{Train: "12951", Date: date, Class: "2A", Berths: 4, OpensAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	const ttl = 200 * time.Millisecond
	c := NewCatalog(env.Pool, ttl)
	read := time.Now()
	s, err := c.Find(ctx, "12951", date, "2A", "TQ")
	if err != nil {
		t.Fatal(err)
	}
	closes := s.ClosesAt.Add(time.Hour)
	if _, err := env.Pool.Exec(ctx, `UPDATE inventory_shards SET window_closes_at = $2 WHERE id = $1`, id, closes); err != nil {
		t.Fatal(err)
	}
	// Only while the entry is fresh for certain: a loaded machine may take
	// longer than ttl to get here.
	if s, _ := c.ByID(ctx, id); s.ClosesAt.Equal(closes) && time.Since(read) < ttl {
		t.Fatal("a fresh entry was read again")
	}
	time.Sleep(time.Until(read.Add(ttl + 50*time.Millisecond)))
	if s, err := c.ByID(ctx, id); err != nil || !s.ClosesAt.Equal(closes) {
		t.Fatalf("after the entry lapsed: %v, closes %v, want %v", err, s.ClosesAt, closes)
	}
	if s, err := c.Find(ctx, "12951", date, "2A", "TQ"); err != nil || !s.ClosesAt.Equal(closes) {
		t.Fatalf("by intent after the entry lapsed: %v", err)
	}
}

func TestFlightReadsOnceForConcurrentCallers(t *testing.T) {
	t.Parallel()
	var f Flight[int, int]
	var reads atomic.Int32
	release := make(chan struct{})
	var wg sync.WaitGroup
	got := make(chan int, 20)
	var started sync.WaitGroup
	started.Add(20)
	for range 20 {
		wg.Go(func() {
			started.Done()
			v, err := f.Do(context.Background(), 1, func() (int, error) {
				reads.Add(1)
				<-release
				return 7, nil
			})
			if err == nil {
				got <- v
			}
		})
	}
	started.Wait()
	time.Sleep(200 * time.Millisecond) // the others join the read in flight
	close(release)
	wg.Wait()
	close(got)
	n := 0
	for v := range got {
		if v != 7 {
			t.Fatalf("got %d", v)
		}
		n++
	}
	if n != 20 || reads.Load() != 1 {
		t.Fatalf("%d answers, %d reads", n, reads.Load())
	}
	if f.Busy(1) {
		t.Fatal("still busy after the read")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	block := make(chan struct{})
	go f.Do(context.Background(), 2, func() (int, error) { <-block; return 0, nil }) //nolint:errcheck
	for !f.Busy(2) {
		time.Sleep(time.Millisecond)
	}
	if _, err := f.Do(ctx, 2, func() (int, error) { return 0, nil }); err != context.Canceled {
		t.Fatalf("a waiter whose context ended: %v", err)
	}
	close(block)
}

// A read that failed because its own caller gave up (its context ended)
// is not the answer of the callers waiting on it: one of them reads again,
// and they all get that read's value. A read that failed for any other
// reason is everyone's answer.
func TestFlightRereadsWhenTheReaderGaveUp(t *testing.T) {
	t.Parallel()
	var f Flight[int, int]
	var reads atomic.Int32
	leaderCtx, giveUp := context.WithCancel(context.Background())
	leading := make(chan struct{})
	leaderDone := make(chan error, 1)
	go func() {
		_, err := f.Do(leaderCtx, 1, func() (int, error) {
			reads.Add(1)
			close(leading)
			<-leaderCtx.Done()
			return 0, fmt.Errorf("load: %w", leaderCtx.Err())
		})
		leaderDone <- err
	}()
	<-leading
	var wg sync.WaitGroup
	got := make(chan error, 10)
	for range 10 {
		wg.Go(func() {
			v, err := f.Do(context.Background(), 1, func() (int, error) {
				reads.Add(1)
				time.Sleep(50 * time.Millisecond)
				return 7, nil
			})
			if err == nil && v != 7 {
				err = fmt.Errorf("got %d", v)
			}
			got <- err
		})
	}
	time.Sleep(100 * time.Millisecond) // the ten wait on the leader's read
	giveUp()
	if err := <-leaderDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("the leader: %v", err)
	}
	wg.Wait()
	close(got)
	for err := range got {
		if err != nil {
			t.Fatalf("a waiter: %v, want the reread's value", err)
		}
	}
	if n := reads.Load(); n != 2 {
		t.Fatalf("%d reads, want the leader's and one reread", n)
	}
	// A database error is the answer for everyone waiting.
	failing := make(chan struct{})
	var errs sync.WaitGroup
	wrong := errors.New("relation does not exist")
	bad := make(chan error, 5)
	go func() {
		_, err := f.Do(context.Background(), 2, func() (int, error) { <-failing; return 0, wrong })
		bad <- err
	}()
	time.Sleep(50 * time.Millisecond)
	for range 4 {
		errs.Go(func() {
			_, err := f.Do(context.Background(), 2, func() (int, error) { return 1, nil })
			bad <- err
		})
	}
	time.Sleep(50 * time.Millisecond)
	close(failing)
	errs.Wait()
	for range 5 {
		if err := <-bad; !errors.Is(err, wrong) {
			t.Fatalf("after a database error: %v", err)
		}
	}
}
