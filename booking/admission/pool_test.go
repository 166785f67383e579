package admission

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"tatkal/booking"
)

// TestStatusNeedsNoConnectionOnceWarm: a queue-status poll is answered
// from Redis and process memory, even when the catalog's shard and the
// unrevealed window have lapsed and the pool has no connection to give.
// In the rehearsal every poll that found one of them lapsed read it again
// on the pool (the window's reread also inserting a fresh seed); once the
// pool was slow (the direct run's jobs draining beside the queue run's
// rush), those reads queued past the 2 s reread period, so every poll
// read again, the controller's seal waited behind them, the window never
// revealed, and about 2,700 polls timed out with 0 bookings for 78 s.
// Now one caller per entry rereads while the others go on with what is
// known, and falls back to it when the pool does not answer in a second.
func TestStatusNeedsNoConnectionOnceWarm(t *testing.T) {
	t.Parallel()
	bb := setup(t, func(c *Config) { c.Catalog = booking.NewCatalog(c.Pool, 200*time.Millisecond) })
	shard := bb.shard(t, "3A", 10, time.Now().Add(time.Minute), "queue") // in the pre-queue: the window is not revealed
	in := intentOf(shard)
	ctx := context.Background()
	const n = 100
	callers := make([]Caller, n)
	for i := range callers {
		callers[i] = bb.caller(int64(i + 1))
		if _, err := bb.svc.Enter(ctx, callers[i], in); err != nil {
			t.Fatal(err)
		}
		if _, err := bb.svc.Status(ctx, callers[i], bb.svc.Ticket(shard.ID, callers[i].UserID)); err != nil {
			t.Fatal(err)
		}
	}
	// Every connection taken, as by a rush of confirmations in flight.
	pool := bb.env.Pool
	var conns []*pgxpool.Conn
	for range int(pool.Config().MaxConns) {
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	time.Sleep(windowReload + 100*time.Millisecond) // the shard and the window both lapse

	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := time.Now()
	for i, c := range callers {
		c.SessionToken = "st_again_" + strconv.Itoa(i) // a fresh session: no answer cached for it
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			if _, err := bb.svc.Status(pctx, c, bb.svc.Ticket(shard.ID, c.UserID)); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	failed := 0
	var first error
	for err := range errs {
		if failed == 0 {
			first = err
		}
		failed++
	}
	if failed > 0 {
		t.Fatalf("%d of %d polls failed with the pool taken (first: %v)", failed, n, first)
	}
	t.Logf("%d polls with the pool taken answered in %s", n, time.Since(start).Round(time.Millisecond))
}
