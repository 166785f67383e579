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
func (s *Service) SyncGroupToCore(ctx context.Context, bookings []CoreSyncArgs) error {
	return syncEachOrAlone(ctx, s, "core sync", bookings, 2,
		func(ctx context.Context, b CoreSyncArgs) error { return s.SyncToCore(ctx, b.BookingID) })
}

// SyncSeats is the work of a SeatSyncGroupArgs job: SyncSeat for each of
// its holds, one after another (a Redis call each).
func (s *Service) SyncSeats(ctx context.Context, holds []SeatSyncArgs) error {
	return syncEachOrAlone(ctx, s, "seat sync", holds, 1,
		func(ctx context.Context, h SeatSyncArgs) error { return s.SyncSeat(ctx, h.HoldID) })
}

// aloneAfter is how long after its group's run a failed item's own job
// first runs: a core or Redis that failed the whole group is not asked for
// every item again at once.
const aloneAfter = 2 * time.Second

// syncEachOrAlone runs a group job's items, at most parallel at once, and
// gives each item that failed a job of its own, all inserted together, so
// the group never repeats what succeeded and a failing item keeps the
// retries and backoff of its own kind. Its error is only a failure to
// enqueue those: River then runs the whole group again, which is safe as
// every sync is idempotent.
func syncEachOrAlone[T river.JobArgs](ctx context.Context, s *Service, what string, items []T, parallel int,
	sync func(context.Context, T) error) error {
	failed := make([]bool, len(items))
	var g errgroup.Group
	g.SetLimit(parallel)
	for i, it := range items {
		g.Go(func() error {
			if err := sync(ctx, it); err != nil {
				s.log.Warn(what+" failed in its group; it gets a job of its own", "item", it, "err", err)
				failed[i] = true
			}
			return nil
		})
	}
	g.Wait() //nolint:errcheck // each item's error is its own
	var alone []river.InsertManyParams
	at := s.now().Add(aloneAfter)
	for i, it := range items {
		if failed[i] {
			alone = append(alone, river.InsertManyParams{Args: it, InsertOpts: &river.InsertOpts{ScheduledAt: at}})
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
