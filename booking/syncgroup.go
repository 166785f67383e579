package booking

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"golang.org/x/sync/errgroup"

	"tatkal/booking/db"
)

// SyncGroupToCore is the work of a CoreSyncGroupArgs job: SyncToCore for
// each of its bookings, two at once. Two, so that a group's last PNR does
// not wait for all the others, yet the core sees at most twice the calls
// at once it saw with a job per booking (one a worker).
func (s CoreSync) SyncGroupToCore(ctx context.Context, bookings []CoreSyncArgs) error {
	return eachOrAlone(ctx, s.Service, "core sync", bookings, 2,
		func(ctx context.Context, b CoreSyncArgs) (time.Duration, error) {
			return 0, s.SyncToCore(ctx, b.BookingID)
		})
}

// SyncSeats is the work of a SeatSyncGroupArgs job: SyncSeat for each of
// its holds, one after another (a Redis call each).
func (s Lifecycle) SyncSeats(ctx context.Context, holds []SeatSyncArgs) error {
	return eachOrAlone(ctx, s.Service, "seat sync", holds, 1,
		func(ctx context.Context, h SeatSyncArgs) (time.Duration, error) { return 0, s.SyncSeat(ctx, h.HoldID) })
}

// ExpireHolds is the work of an ExpireHoldGroupArgs job: ExpireHold for
// each of its holds, four at once, so a group of a hundred is done in a
// fraction of a second. A hold not due yet gets a job of its own at its new
// expiry.
func (s Lifecycle) ExpireHolds(ctx context.Context, holds []ExpireHoldArgs) error {
	return eachOrAlone(ctx, s.Service, "hold expiry", holds, 4,
		func(ctx context.Context, h ExpireHoldArgs) (time.Duration, error) { return s.ExpireHold(ctx, h.HoldID) })
}

// aloneAfter is how long after its group's run a failed item's own job
// first runs: a core or Redis that failed the whole group is not asked for
// every item again at once.
const aloneAfter = 2 * time.Second

// eachOrAlone runs a group job's items, at most parallel at once, and gives
// each item that failed, or asked to come back later, a job of its own, all
// inserted together, so the group never repeats what succeeded and a
// failing item keeps the retries and backoff of its own kind. Its error is
// only a failure to enqueue those: River then runs the whole group again,
// which is safe as every item's work is idempotent.
func eachOrAlone[T river.JobArgs](ctx context.Context, s *Service, what string, items []T, parallel int,
	work func(context.Context, T) (later time.Duration, err error)) error {
	again := make([]time.Duration, len(items)) // 0: done
	var g errgroup.Group
	g.SetLimit(parallel)
	for i, it := range items {
		g.Go(func() error {
			later, err := work(ctx, it)
			switch {
			case err != nil:
				s.log.Warn(what+" failed in its group; it gets a job of its own", "item", it, "err", err)
				again[i] = aloneAfter
			case later > 0:
				again[i] = later
			}
			return nil
		})
	}
	g.Wait() //nolint:errcheck // each item's error is its own
	var alone []river.InsertManyParams
	now := s.now()
	for i, it := range items {
		if again[i] > 0 {
			alone = append(alone, river.InsertManyParams{Args: it, InsertOpts: &river.InsertOpts{ScheduledAt: now.Add(again[i])}})
		}
	}
	if len(alone) == 0 {
		return nil
	}
	// The group's own deadline may be what failed them.
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := db.Transact(ictx, s.pool, func(tx pgx.Tx) error {
		_, err := s.jobs.InsertManyTx(ictx, tx, alone)
		return err
	})
	if err != nil {
		return fmt.Errorf("%s: jobs of their own for %d of %d: %w", what, len(alone), len(items), err)
	}
	return nil
}
