package booking

import (
	"context"
	"errors"
	"sync"
	"time"

	"tatkal/booking/inventory"
)

// Availability bands, as the seed design names them.
const (
	BandAvailable = "AVAILABLE"
	BandFew       = "FEW"
	BandWaitlist  = "WL"
	BandSoldOut   = "SOLD_OUT"
)

// Availability is an eventually consistent answer, cached briefly so a
// flood of page loads costs Redis one script call per journey per second.
type Availability struct {
	Train, Class, Quota string
	Date                time.Time
	From, To            string
	Band                string
	ApproxCount         int
	AsOf                time.Time
	TTL                 time.Duration
}

type availCache struct {
	ttl     time.Duration
	mu      sync.Mutex
	entries map[string]Availability
}

func newAvailCache(ttl time.Duration) *availCache {
	return &availCache{ttl: ttl, entries: map[string]Availability{}}
}

// Availability reports the band for a journey.
func (s *Service) Availability(ctx context.Context, train string, date time.Time, class, quota, from, to string) (Availability, error) {
	if quota == "" {
		quota = "TQ"
	}
	shard, err := s.catalog.Find(ctx, train, date, class, quota)
	if err != nil {
		return Availability{}, err
	}
	if from == "" {
		from = shard.Stops[0].Code
	}
	if to == "" {
		to = shard.Stops[len(shard.Stops)-1].Code
	}
	f, ok1 := shard.StopSeq(from)
	t, ok2 := shard.StopSeq(to)
	if !ok1 || !ok2 || f >= t {
		return Availability{}, Errorf(EINVALID, "BAD_JOURNEY", "Train %s does not run from %q to %q.", train, from, to)
	}
	key := shard.Key() + "|" + from + "|" + to
	now := time.Now()
	s.avail.mu.Lock()
	a, ok := s.avail.entries[key]
	s.avail.mu.Unlock()
	if ok && now.Sub(a.AsOf) < s.avail.ttl {
		a.TTL = s.avail.ttl - now.Sub(a.AsOf)
		return a, nil
	}
	got, err := s.store.Available(ctx, shard.ID, f, t)
	if errors.Is(err, inventory.ErrNotReady) {
		s.TriggerRebuild(shard.ID)
		return Availability{}, Errorf(EUNAVAIL, "SHARD_REBUILDING", "Seat counts for this train are being refreshed; retry in a moment.")
	}
	if err != nil {
		return Availability{}, Errorf(EUNAVAIL, "SEATS_UNREACHABLE", "Seat counts are not available right now; retry in a moment.")
	}
	a = Availability{Train: train, Class: class, Quota: quota, Date: shard.Date, From: from, To: to,
		AsOf: now, TTL: s.avail.ttl, ApproxCount: got.Free}
	switch {
	case got.Free == 0 && got.WaitlistLeft > 0 && s.rules.Waitlist:
		a.Band, a.ApproxCount = BandWaitlist, got.WaitlistLeft
	case got.Free == 0:
		a.Band = BandSoldOut
	case got.Free*10 <= got.Total || got.Free <= 4:
		a.Band = BandFew
	default:
		a.Band = BandAvailable
	}
	s.avail.mu.Lock()
	s.avail.entries[key] = a
	s.avail.mu.Unlock()
	return a, nil
}
