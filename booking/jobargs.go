package booking

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// JobInserter is the part of a River client the booking service uses: jobs
// go in with the state change that causes them, in the same transaction.
type JobInserter interface {
	InsertTx(ctx context.Context, tx pgx.Tx, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
	InsertManyFastTx(ctx context.Context, tx pgx.Tx, params []river.InsertManyParams) (int, error)
	// InsertManyTx puts a few jobs in with one statement (InsertManyFastTx
	// is COPY, for many).
	InsertManyTx(ctx context.Context, tx pgx.Tx, params []river.InsertManyParams) ([]*rivertype.JobInsertResult, error)
}

// QueueHolds carries hold expiry and seat-state sync, kept apart from slower
// work so a backlog elsewhere never delays a seat coming back.
const QueueHolds = "holds"

// ExpireHoldArgs releases a hold still HELD at its expiry.
type ExpireHoldArgs struct {
	HoldID  uuid.UUID `json:"hold_id"`
	ShardID int64     `json:"shard_id"`
}

func (ExpireHoldArgs) Kind() string { return "hold_expire" }
func (ExpireHoldArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueHolds, MaxAttempts: 50}
}

// ExpireHoldGroupArgs expires the holds of one group commit that end in the
// same second: one job for them rather than one each, as a job is a row
// with five indexes written inside the hold path's transaction. A hold that
// is not due yet (its window was extended) or whose expiry fails gets an
// ExpireHoldArgs job of its own (eachOrAlone).
type ExpireHoldGroupArgs struct {
	Holds []ExpireHoldArgs `json:"holds"`
}

func (ExpireHoldGroupArgs) Kind() string { return "hold_expire_group" }
func (ExpireHoldGroupArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueHolds, MaxAttempts: 50}
}

// SeatSyncArgs makes Redis agree with PostgreSQL about one hold after a
// confirmation or cancellation (the same call is also made at once; the job
// repeats it in case Redis was unreachable then).
type SeatSyncArgs struct {
	HoldID  uuid.UUID `json:"hold_id"`
	ShardID int64     `json:"shard_id"`
}

func (SeatSyncArgs) Kind() string { return "seat_sync" }
func (SeatSyncArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueHolds, MaxAttempts: 50}
}

// SweepArgs runs the periodic sweeper: overdue holds, Redis holds without a
// row, shards whose Redis state is missing.
type SweepArgs struct{}

func (SweepArgs) Kind() string { return "hold_sweep" }
func (SweepArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueHolds, MaxAttempts: 3}
}

// CoreSyncArgs sends a confirmed booking to the reservation core. Retried
// with backoff for hours: the core may be down; the PNR makes it idempotent.
type CoreSyncArgs struct {
	BookingID int64  `json:"booking_id"`
	PNR       string `json:"pnr"`
}

func (CoreSyncArgs) Kind() string { return "core_sync" }
func (CoreSyncArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueMoney, MaxAttempts: 200}
}

// CoreSyncGroupArgs sends the bookings of one confirmation group to the
// reservation core: one job for the group rather than one per booking, as
// a job is a row with five indexes written at the busiest moment of a rush.
// A booking whose sync fails gets a CoreSyncArgs job of its own, with its
// retries (eachOrAlone).
type CoreSyncGroupArgs struct {
	Bookings []CoreSyncArgs `json:"bookings"`
}

func (CoreSyncGroupArgs) Kind() string { return "core_sync_group" }
func (CoreSyncGroupArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueMoney, MaxAttempts: 200}
}

// SeatSyncGroupArgs is SeatSyncArgs for the holds of one confirmation
// group; a hold whose sync fails gets a SeatSyncArgs job of its own.
type SeatSyncGroupArgs struct {
	Holds []SeatSyncArgs `json:"holds"`
}

func (SeatSyncGroupArgs) Kind() string { return "seat_sync_group" }
func (SeatSyncGroupArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueHolds, MaxAttempts: 50}
}

// QueueMoney carries payment inquiries, refunds and core sync.
const QueueMoney = "money"
