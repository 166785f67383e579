package console

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"tatkal/views"
)

// Hub computes the funnel snapshot once per tick, for all subscribers at
// once, and only while someone watches. A subscriber that has not taken
// the previous snapshot gets the newest in its place (its buffer holds
// one), and one that falls too far behind is dropped, never waited on.
type Hub struct {
	tick    time.Duration
	compute func(context.Context) (views.FunnelView, error)
	log     *slog.Logger

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // the ticker

	mu      sync.Mutex
	subs    map[*Subscription]struct{}
	running bool
	closed  bool
	last    []byte
}

// Subscription receives snapshots as JSON.
type Subscription struct {
	C      chan []byte
	missed int
	hub    *Hub
	once   sync.Once
	done   chan struct{}
}

// Done is closed when the hub drops the subscription.
func (s *Subscription) Done() <-chan struct{} { return s.done }

// Close unsubscribes.
func (s *Subscription) Close() { s.hub.remove(s) }

// NewHub returns a hub; it runs only while it has subscribers.
func NewHub(tick time.Duration, compute func(context.Context) (views.FunnelView, error), log *slog.Logger) *Hub {
	ctx, cancel := context.WithCancel(context.Background())
	return &Hub{tick: tick, compute: compute, log: log, subs: map[*Subscription]struct{}{}, ctx: ctx, cancel: cancel}
}

// Close drops every subscriber, stops the ticker and waits for it, so no
// snapshot is computed after the process closes its connections.
func (h *Hub) Close() {
	h.mu.Lock()
	h.closed = true
	subs := make([]*Subscription, 0, len(h.subs))
	for s := range h.subs {
		subs = append(subs, s)
	}
	h.mu.Unlock()
	h.cancel()
	for _, s := range subs {
		h.remove(s)
	}
	h.wg.Wait()
}

// maxMissed is how many snapshots in a row a subscriber may miss before it is dropped.
const maxMissed = 5

// Subscribe registers a subscriber and starts the ticker if needed. The
// latest snapshot, if any, is delivered at once.
func (h *Hub) Subscribe() *Subscription {
	s := &Subscription{C: make(chan []byte, 1), hub: h, done: make(chan struct{})}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		s.once.Do(func() { close(s.done) })
		return s
	}
	h.subs[s] = struct{}{}
	if h.last != nil {
		s.C <- h.last
	}
	if !h.running {
		h.running = true
		h.wg.Go(h.run)
	}
	return s
}

func (h *Hub) remove(s *Subscription) {
	h.mu.Lock()
	delete(h.subs, s)
	h.mu.Unlock()
	s.once.Do(func() { close(s.done) })
}

// Subscribers counts the current subscribers.
func (h *Hub) Subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

func (h *Hub) run() {
	t := time.NewTicker(h.tick)
	defer t.Stop()
	for {
		h.mu.Lock()
		if len(h.subs) == 0 {
			h.running = false
			h.last = nil
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()
		ctx, cancel := context.WithTimeout(h.ctx, 3*h.tick+2*time.Second)
		snap, err := h.compute(ctx)
		cancel()
		if h.ctx.Err() != nil {
			return // closing; the subscribers are dropped by Close
		}
		if err != nil {
			h.log.Warn("funnel snapshot", "err", err)
			snap.Errors = append(snap.Errors, "Figures could not be read: "+userError(err))
		}
		b, err := json.Marshal(snap)
		if err == nil {
			h.Publish(b)
		}
		select {
		case <-t.C:
		case <-h.ctx.Done():
		}
	}
}

// Publish hands b to every subscriber without blocking.
func (h *Hub) Publish(b []byte) {
	h.mu.Lock()
	h.last = b
	var drop []*Subscription
	for s := range h.subs {
		select {
		case s.C <- b:
			s.missed = 0
		default:
			// Replace the unread snapshot with the newer one.
			select {
			case <-s.C:
			default:
			}
			select {
			case s.C <- b:
			default:
			}
			s.missed++
			if s.missed > maxMissed {
				drop = append(drop, s)
			}
		}
	}
	h.mu.Unlock()
	for _, s := range drop {
		h.remove(s)
	}
}
