package booking

import (
	"container/list"
	"context"
	"errors"
	"sync"
	"time"
)

// boundedCache is a small LRU with a time to live per entry: at most max
// entries, each forgotten ttl after it was stored. Every in-process cache
// whose keys a caller can influence uses it, so no input grows memory
// without bound or keeps it for ever.
type boundedCache[K comparable, V any] struct {
	mu    sync.Mutex
	max   int
	ttl   time.Duration
	order *list.List // front: most recently used; values are *cacheEntry
	items map[K]*list.Element
}

type cacheEntry[K comparable, V any] struct {
	key    K
	val    V
	stored time.Time
}

func newBoundedCache[K comparable, V any](max int, ttl time.Duration) *boundedCache[K, V] {
	return &boundedCache[K, V]{max: max, ttl: ttl, order: list.New(), items: map[K]*list.Element{}}
}

// get returns the value stored for k and when, if it is younger than ttl.
func (c *boundedCache[K, V]) get(k K, now time.Time) (V, time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var zero V
	el, ok := c.items[k]
	if !ok {
		return zero, time.Time{}, false
	}
	e := el.Value.(*cacheEntry[K, V])
	if now.Sub(e.stored) >= c.ttl {
		c.order.Remove(el)
		delete(c.items, k)
		return zero, time.Time{}, false
	}
	c.order.MoveToFront(el)
	return e.val, e.stored, true
}

// put stores v for k, evicting the least recently used entry when full.
func (c *boundedCache[K, V]) put(k K, v V, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[k]; ok {
		e := el.Value.(*cacheEntry[K, V])
		e.val, e.stored = v, now
		c.order.MoveToFront(el)
		return
	}
	for c.order.Len() >= c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(*cacheEntry[K, V]).key)
	}
	c.items[k] = c.order.PushFront(&cacheEntry[K, V]{key: k, val: v, stored: now})
}

// len is the number of entries held (expired ones included until evicted).
func (c *boundedCache[K, V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// clear forgets everything.
func (c *boundedCache[K, V]) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.order.Init()
	c.items = map[K]*list.Element{}
}

// Flight lets one caller per key do a read while concurrent callers of
// the same key wait for its answer instead of doing it again: however many
// requests find a cache entry missing at once, one of them asks the
// database. The zero value is ready.
type Flight[K comparable, V any] struct {
	mu    sync.Mutex
	calls map[K]*flightCall[V]
}

var errReadPanicked = errors.New("the read this call waited for panicked")

type flightCall[V any] struct {
	done chan struct{}
	val  V
	err  error
}

// Busy reports whether a read of k is in flight: a caller holding a stale
// answer goes on with it rather than wait.
func (f *Flight[K, V]) Busy(k K) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.calls[k]
	return ok
}

// Do runs read for k unless a read of k is in flight, in which case it
// waits for that read's answer or for ctx, whichever comes first. A read
// that ended because its own caller's context did (that caller gave up,
// not the database) is no answer for the others: the first of them still
// waiting reads again.
func (f *Flight[K, V]) Do(ctx context.Context, k K, read func() (V, error)) (V, error) {
	f.mu.Lock()
	for {
		c, ok := f.calls[k]
		if !ok {
			break
		}
		f.mu.Unlock()
		select {
		case <-c.done:
			if c.err != nil && ctx.Err() == nil && (errors.Is(c.err, context.Canceled) || errors.Is(c.err, context.DeadlineExceeded)) {
				f.mu.Lock()
				continue
			}
			return c.val, c.err
		case <-ctx.Done():
			var zero V
			return zero, ctx.Err()
		}
	}
	if f.calls == nil {
		f.calls = map[K]*flightCall[V]{}
	}
	c := &flightCall[V]{done: make(chan struct{})}
	f.calls[k] = c
	f.mu.Unlock()
	c.err = errReadPanicked // until read returns
	defer func() {
		f.mu.Lock()
		delete(f.calls, k)
		f.mu.Unlock()
		close(c.done)
	}()
	c.val, c.err = read()
	return c.val, c.err
}
