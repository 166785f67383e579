package booking_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"tatkal/booking"
	"tatkal/booking/inventory"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
)

// soldOutWorld is a one-berth shard without a waitlist, sold to users[0],
// served by two processes (a and b: two stacks on one PostgreSQL and one
// Redis), each of which has had the script answer SOLD_OUT once, so both
// answer the shard's later attempts from memory.
type soldOutWorld struct {
	a, b  *teststack.Stack
	shard int64
	date  time.Time
	users []int64
	held  booking.HoldResult
	next  atomic.Int64 // the next fresh user
	keys  atomic.Int64
	// answers counts the sold-out answers from memory (pause point
	// soldout.answer) of each process.
	answers map[*teststack.Stack]*atomic.Int64
}

func newSoldOutWorld(t *testing.T, p *pauser) *soldOutWorld {
	t.Helper()
	env := testenv.New(t)
	w := &soldOutWorld{answers: map[*teststack.Stack]*atomic.Int64{}}
	counting := func(n *atomic.Int64, p *pauser) booking.PauseFunc {
		return func(ctx context.Context, point string) {
			if point == "soldout.answer" {
				n.Add(1)
			}
			if p != nil {
				p.pause(ctx, point)
			}
		}
	}
	na, nb := &atomic.Int64{}, &atomic.Int64{}
	w.a = teststack.Start(t, env, teststack.Options{Pause: counting(na, p)})
	w.b = teststack.Start(t, env, teststack.Options{Pause: counting(nb, nil)})
	w.answers[w.a], w.answers[w.b] = na, nb
	w.shard, w.date = w.a.DemoShard(t, 1, 0)
	w.users = w.a.Users(t, "so", 40)
	w.held = w.hold(t, w.a, "HELD")
	w.hold(t, w.a, "SOLD_OUT")
	w.hold(t, w.b, "SOLD_OUT")
	return w
}

// hold is a whole-route attempt by a fresh user through s, which must be
// answered want.
func (w *soldOutWorld) hold(t *testing.T, s *teststack.Stack, want string) booking.HoldResult {
	t.Helper()
	res, err := w.try(s, w.users[w.next.Add(1)-1])
	if err != nil || res.Status != want {
		t.Fatalf("hold: %+v %v, want %s", res, err, want)
	}
	return res
}

// try is a whole-route attempt by user u through s, under a new key.
func (w *soldOutWorld) try(s *teststack.Stack, u int64) (booking.HoldResult, error) {
	key := "soldout-key-" + strconv.FormatInt(w.keys.Add(1), 10)
	return s.Service.Hold(context.Background(), teststack.Caller(u), holdReq(u, key, w.date, "MMCT", "NDLS", pax("Sold Out", 30, "F")))
}

// tryAsync is try in a goroutine (to be paused); its answer comes on the channel.
func (w *soldOutWorld) tryAsync(t *testing.T, s *teststack.Stack, u int64) <-chan booking.HoldResult {
	done := make(chan booking.HoldResult, 1)
	go func() {
		res, err := w.try(s, u)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	return done
}

// recheck is the bound both processes run with (the service's default).
const recheck = inventory.DefaultSoldOutRecheck

// A seat cancelled through one process is offered again by the other
// within the recheck bound, while until then both answer from memory; the
// canceller's own process offers it at once.
func TestSoldOutAnsweredFromMemoryUntilASeatComesBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newSoldOutWorld(t, nil)
	for _, s := range []*teststack.Stack{w.a, w.b} {
		before := w.answers[s].Load()
		w.hold(t, s, "SOLD_OUT")
		if w.answers[s].Load() != before+1 {
			t.Fatal("a primed sold-out shard was not answered from memory")
		}
	}
	if _, err := w.b.Service.Cancel(ctx, w.users[0], w.held.HoldID); err != nil {
		t.Fatal(err)
	}
	cancelled := time.Now()
	// b cancelled: b offers the seat at once; its holder gives it back.
	u := w.users[w.next.Load()]
	again := w.hold(t, w.b, "HELD")
	if _, err := w.b.Service.Cancel(ctx, u, again.HoldID); err != nil {
		t.Fatal(err)
	}
	// a, past the bound, may not answer from the view it read before.
	time.Sleep(time.Until(cancelled.Add(recheck)))
	w.hold(t, w.a, "HELD")
	w.a.CheckInvariants(t, w.shard)
}

// Many goroutines on both processes while the seat is cancelled: no
// attempt begun a bound after the cancellation and answered before anyone
// began the attempt that took the seat again is answered SOLD_OUT from
// memory; the seat is taken again; PostgreSQL and Redis agree.
func TestSoldOutCacheUnderConcurrentCancels(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newSoldOutWorld(t, nil)
	type answer struct {
		begin, end time.Time
		memory     bool
		status     string
	}
	var mu sync.Mutex
	var answers []answer
	var wg sync.WaitGroup
	stop := time.Now().Add(time.Second)
	for g := range 8 {
		wg.Go(func() {
			s, u := []*teststack.Stack{w.a, w.b}[g%2], w.users[10+g]
			for time.Now().Before(stop) {
				before := w.answers[s].Load()
				begin := time.Now()
				res, err := w.try(s, u)
				if err != nil {
					t.Errorf("hold: %v", err)
					return
				}
				// Another goroutine of s answering from memory at once
				// makes this count as memory too: conservative for the check.
				a := answer{begin: begin, end: time.Now(), memory: w.answers[s].Load() > before, status: res.Status}
				mu.Lock()
				answers = append(answers, a)
				mu.Unlock()
				if res.Status == "HELD" {
					return // this user now has a live hold
				}
			}
		})
	}
	time.Sleep(300 * time.Millisecond) // the goroutines answer from memory
	if _, err := w.a.Service.Cancel(ctx, w.users[0], w.held.HoldID); err != nil {
		t.Fatal(err)
	}
	cancelled := time.Now()
	wg.Wait()
	var memory, held int
	retaken := stop
	for _, a := range answers {
		if a.status == "HELD" {
			held++
			if a.begin.Before(retaken) {
				retaken = a.begin
			}
		}
	}
	for _, a := range answers {
		if a.status == "SOLD_OUT" && a.memory {
			memory++
			if a.begin.After(cancelled.Add(recheck)) && a.end.Before(retaken) {
				t.Errorf("an attempt begun %v after the cancel, with the seat free throughout, was answered SOLD_OUT from memory",
					a.begin.Sub(cancelled))
			}
		}
	}
	if memory == 0 || held != 1 {
		t.Fatalf("%d answers from memory, %d holds; want some and exactly one", memory, held)
	}
	w.a.CheckInvariants(t, w.shard)
}

// The cache decided SOLD_OUT, and the seat comes back before it answers:
// the answer stands (it was true when read, inside the request), holds
// nothing, and the next attempt is offered the seat.
func TestSoldOutReleaseBetweenTheCachesCheckAndItsAnswer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := &pauser{}
	w := newSoldOutWorld(t, p)
	reached, release := p.arm("soldout.answer")
	done := w.tryAsync(t, w.a, w.users[30])
	waitFor(t, reached, "the cache to decide SOLD_OUT")
	if _, err := w.a.Service.Cancel(ctx, w.users[0], w.held.HoldID); err != nil {
		t.Fatal(err)
	}
	close(release)
	if res := <-done; res.Status != "SOLD_OUT" || res.HoldID != uuid.Nil {
		t.Fatalf("the paused attempt: %+v, want a SOLD_OUT holding nothing", res)
	}
	w.hold(t, w.a, "HELD")
	w.a.CheckInvariants(t, w.shard)
}

// The cache's re-check has read SAME from Redis and not yet published it
// when the seat comes back. Through another process: the view published is
// dated at the re-check's start, so it answers for at most the bound after
// the cancellation. Through this process: it is not published at all.
func TestSoldOutReleaseDuringTheCachesRecheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, by := range []string{"other process", "same process"} {
		t.Run(by, func(t *testing.T) {
			t.Parallel()
			p := &pauser{}
			w := newSoldOutWorld(t, p)
			canceller := w.b
			if by == "same process" {
				canceller = w.a
			}
			time.Sleep(recheck) // the view needs vouching for again
			reached, release := p.arm("soldout.checked")
			done := w.tryAsync(t, w.a, w.users[30])
			waitFor(t, reached, "the re-check to read Redis")
			if _, err := canceller.Service.Cancel(ctx, w.users[0], w.held.HoldID); err != nil {
				t.Fatal(err)
			}
			cancelled := time.Now()
			close(release)
			res := <-done
			if by == "same process" {
				// Nothing published: the attempt went to the script.
				if res.Status != "HELD" {
					t.Fatalf("re-check raced this process's cancel: %+v, want HELD", res)
				}
				w.a.CheckInvariants(t, w.shard)
				return
			}
			if res.Status != "SOLD_OUT" {
				t.Fatalf("the paused attempt: %+v, want SOLD_OUT (read before the cancel)", res)
			}
			time.Sleep(time.Until(cancelled.Add(recheck)))
			w.hold(t, w.a, "HELD")
			w.a.CheckInvariants(t, w.shard)
		})
	}
}
