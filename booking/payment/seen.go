package payment

import "sync"

// seenEvents remembers the webhook events this process has applied and
// recorded, so that a gateway's duplicate deliveries (gateways retry, and
// send one event several times) are acknowledged without touching
// PostgreSQL. It is only a speed-up: the unique key of webhook_events
// decides, and an event this process never saw or has forgotten is looked
// up there, under its payment's lock (webhookEvent.check). Oldest entries
// are forgotten first.
type seenEvents struct {
	mu   sync.Mutex
	set  map[string]struct{}
	ring []string
	next int
}

func newSeenEvents(capacity int) *seenEvents {
	return &seenEvents{set: make(map[string]struct{}, capacity), ring: make([]string, capacity)}
}

func seenKey(gateway, eventID string) string { return gateway + "\x00" + eventID }

func (s *seenEvents) has(key string) bool {
	s.mu.Lock()
	_, ok := s.set[key]
	s.mu.Unlock()
	return ok
}

func (s *seenEvents) add(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.set[key]; ok {
		return
	}
	if old := s.ring[s.next]; old != "" {
		delete(s.set, old)
	}
	s.ring[s.next] = key
	s.set[key] = struct{}{}
	s.next = (s.next + 1) % len(s.ring)
}
