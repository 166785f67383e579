package booking

import (
	"context"
	"errors"
	"strings"
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

// availCache holds answers per shard and journey. Its keys are built only
// from a shard that exists and two of its stops, and it is bounded anyway,
// in size and age, like every cache a caller's input reaches.
type availCache struct {
	ttl     time.Duration
	entries *boundedCache[string, Availability]
}

const availCacheMax = 16384

// availCacheMaxAge bounds what the availability_staleness lever may ask
// for (console/levers.StalenessMax); entries are kept this long, and each
// answer checks its age against the staleness in force.
const availCacheMaxAge = 10 * time.Second

func newAvailCache(ttl time.Duration) *availCache {
	return &availCache{ttl: ttl, entries: newBoundedCache[string, Availability](availCacheMax, max(ttl, availCacheMaxAge))}
}

// stationCode is the shape of a station code: 1-5 capital letters.
func stationCode(s string) bool {
	return len(s) >= 1 && len(s) <= 5 && strings.Trim(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") == ""
}

// Availability reports the band for a journey.
func (s *Service) Availability(ctx context.Context, train string, date time.Time, class, quota, from, to string) (Availability, error) {
	if quota == "" {
		quota = "TQ"
	}
	if (from != "" && !stationCode(from)) || (to != "" && !stationCode(to)) {
		return Availability{}, Errorf(EINVALID, "BAD_STATION", "Stations are codes of 1-5 capital letters, like NDLS.")
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
	ttl := s.availTTL() // the availability_staleness lever, else a second
	if a, _, ok := s.avail.entries.get(key, now); ok && now.Sub(a.AsOf) < ttl {
		a.TTL = ttl - now.Sub(a.AsOf)
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
	a := Availability{Train: train, Class: class, Quota: quota, Date: shard.Date, From: from, To: to,
		AsOf: now, TTL: ttl, ApproxCount: got.Free}
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
	s.avail.entries.put(key, a, now)
	return a, nil
}
