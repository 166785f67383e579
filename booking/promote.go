package booking

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"tatkal/booking/db"
	"tatkal/booking/inventory"
)

// PromoteArgs promotes a shard's waitlist onto berths a cancellation freed
// before charting. Inserted in the cancellation's transaction; any number
// of them for one shard do the work once (Promote is idempotent).
type PromoteArgs struct {
	ShardID int64 `json:"shard_id"`
	// Cancelled is the booking whose cancellation freed the berths (for
	// the log; the promotion reads the shard as it stands).
	Cancelled int64 `json:"cancelled"`
}

func (PromoteArgs) Kind() string { return "tqwl_promote" }
func (PromoteArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: QueueHolds, MaxAttempts: 50}
}

// Promoted is one waitlisted booking confirmed onto freed berths.
type Promoted struct {
	BookingID int64
	HoldID    uuid.UUID
	PNR       string
	Berths    []int
}

// waitingBooking is a waitlisted booking as promotion needs it.
type waitingBooking struct {
	id, userID int64
	holdID     uuid.UUID
	pnr        string
	from, to   int
	wl         int
	passengers []Passenger
}

// promotionQueuedTx says whether cancelling a confirmed booking of shard
// queues a promotion: the shard is not charted and someone is waiting. The
// freed berths then go back on sale only through the promotion, so the
// waitlist gets them before any new hold: the booking is marked
// kept_for_promotion, which makes PostgreSQL itself say the berths are
// still taken (inventory.RecordState), so neither the sweeper nor a
// rebuild frees them while the promotion job waits, however long.
func (s Waitlist) promotionQueuedTx(ctx context.Context, tx pgx.Tx, shardID, cancelled int64) (bool, error) {
	var waiting bool
	err := tx.QueryRow(ctx, `SELECT sh.chart_state = 'OPEN' AND EXISTS (SELECT 1 FROM bookings b WHERE b.shard_id = sh.id
		AND b.status = 'WAITLISTED') FROM inventory_shards sh WHERE sh.id = $1`, shardID).Scan(&waiting)
	if err != nil || !waiting {
		return false, err
	}
	if _, err := tx.Exec(ctx, `UPDATE bookings SET kept_for_promotion = true WHERE id = $1`, cancelled); err != nil {
		return false, err
	}
	_, err = s.jobs.InsertTx(ctx, tx, PromoteArgs{ShardID: shardID, Cancelled: cancelled}, nil)
	return err == nil, err
}

// Promote confirms the shard's waitlisted bookings, in waitlist order, onto
// berths free for their whole journey: berths assigned, PNR status
// confirmed, the reservation core re-synced, the passenger told. It runs
// under the shard's exclusive lock with the epoch bumped, so no hold
// decided on the old Redis state can commit meanwhile. Then Redis learns
// only what changed (inventory.Store.Promote: the cancelled bookings'
// records gone, the promoted ones sold on their berths, the new epoch),
// fenced by the epoch the promotion started from; if Redis moved meanwhile
// or disagrees, the shard is rebuilt from PostgreSQL instead. A charted
// shard is left alone. Running it again promotes nothing twice.
func (s Waitlist) Promote(ctx context.Context, shardID int64) ([]Promoted, error) {
	var done []Promoted
	var epoch int64
	var cancelled []string
	err := db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if done, epoch, err = s.promoteTx(ctx, tx, shardID); err != nil {
			return err
		}
		// Cancelled bookings whose berths waited for this promotion kept
		// their records in Redis (kept_for_promotion, cleared above); any
		// cancelled one still there is stale, and goes.
		rows, err := tx.Query(ctx, `SELECT hold_id::text FROM bookings WHERE shard_id = $1 AND status = 'CANCELLED'`, shardID)
		if err != nil {
			return err
		}
		cancelled, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("promote waitlist of shard %d: %w", shardID, err)
	}
	s.pause.At(ctx, "promote.before-rebuild")
	promos := make([]inventory.Promotion, len(done))
	for i, p := range done {
		promos[i] = inventory.Promotion{HoldID: p.HoldID.String(), Berths: p.Berths}
	}
	out, err := s.store.Promote(ctx, shardID, epoch, cancelled, promos)
	if out != inventory.PromoteApplied {
		// Redis learns the new berths (and the freed ones no one took)
		// from PostgreSQL; if this fails the job is retried, and the
		// bumped epoch keeps the shard refusing holds until it succeeds.
		s.log.Info("promotion rebuilds the shard in Redis", "shard", shardID, "outcome", out, "err", err)
		if _, err := s.Rebuild(ctx, shardID); err != nil {
			return done, err
		}
	}
	for _, p := range done {
		s.log.Info("waitlisted booking promoted", "pnr", p.PNR, "shard", shardID, "berths", p.Berths)
	}
	return done, nil
}

func (s Waitlist) promoteTx(ctx context.Context, tx pgx.Tx, shardID int64) ([]Promoted, int64, error) {
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, $2)", inventory.ShardLockClass, int32(shardID)); err != nil {
		return nil, 0, err
	}
	var chart string
	var epoch int64
	if err := tx.QueryRow(ctx, `UPDATE inventory_shards SET epoch = epoch + 1 WHERE id = $1 RETURNING chart_state, epoch`, shardID).
		Scan(&chart, &epoch); err != nil {
		return nil, 0, err
	}
	// This promotion is the one the kept berths waited for, whatever it
	// finds (someone to promote, no one, or the shard charted): from its
	// commit they are free in PostgreSQL, and Redis learns it from the
	// caller (the PROMOTE script, or a rebuild).
	if _, err := tx.Exec(ctx, `UPDATE bookings SET kept_for_promotion = false WHERE shard_id = $1 AND kept_for_promotion`, shardID); err != nil {
		return nil, 0, err
	}
	if chart != "OPEN" {
		return nil, epoch, nil // charting settles the waitlist
	}
	shard, err := s.catalog.ByIDTx(ctx, tx, shardID)
	if err != nil {
		return nil, 0, err
	}
	waiting, err := s.waitlistTx(ctx, tx, shardID)
	if err != nil || len(waiting) == 0 {
		return nil, epoch, err
	}
	occ, err := occupiedTx(ctx, tx, shardID, len(shard.Berths))
	if err != nil {
		return nil, 0, err
	}
	var done []Promoted
	for _, w := range waiting {
		berths := occ.take(w.from, w.to, len(w.passengers))
		if berths == nil {
			continue // does not fit; a later, shorter journey may
		}
		if err := s.confirmOntoTx(ctx, tx, shard, w, berths); err != nil {
			return nil, 0, err
		}
		done = append(done, Promoted{BookingID: w.id, HoldID: w.holdID, PNR: w.pnr, Berths: berths})
		s.pause.At(ctx, "promote.between-bookings")
	}
	return done, epoch, nil
}

// waitlistTx lists the shard's waitlisted bookings in waitlist order,
// locked.
func (s Waitlist) waitlistTx(ctx context.Context, tx pgx.Tx, shardID int64) ([]waitingBooking, error) {
	rows, err := tx.Query(ctx, `SELECT b.id, b.user_id, b.hold_id, b.pnr, b.from_seq, b.to_seq, coalesce(b.waitlist_no, 0), h.passengers
		FROM bookings b JOIN holds h ON h.id = b.hold_id
		WHERE b.shard_id = $1 AND b.status = 'WAITLISTED' ORDER BY b.waitlist_no, b.id FOR UPDATE OF b, h`, shardID)
	if err != nil {
		return nil, err
	}
	var out []waitingBooking
	var w waitingBooking
	var pax []byte
	_, err = pgx.ForEachRow(rows, []any{&w.id, &w.userID, &w.holdID, &w.pnr, &w.from, &w.to, &w.wl, &pax}, func() error {
		x := w
		if err := json.Unmarshal(pax, &x.passengers); err != nil {
			return fmt.Errorf("passengers of %s: %w", w.pnr, err)
		}
		out = append(out, x)
		return nil
	})
	return out, err
}

// occupancy says which berths are taken on which legs.
type occupancy [][]bool // [berth][leg]

// occupiedTx reads what occupies the shard's berths: confirmed passengers
// and live holds.
func occupiedTx(ctx context.Context, tx pgx.Tx, shardID int64, berths int) (occupancy, error) {
	occ := make(occupancy, berths)
	for i := range occ {
		occ[i] = make([]bool, inventory.MaxLegs)
	}
	mark := func(b, from, to int) {
		if b >= 0 && b < berths {
			for l := from; l < to && l < inventory.MaxLegs; l++ {
				occ[b][l] = true
			}
		}
	}
	rows, err := tx.Query(ctx, `SELECT berth_idx, from_seq, to_seq FROM booking_passengers
		WHERE shard_id = $1 AND status = 'CONFIRMED'
		UNION ALL
		SELECT unnest(berths), from_seq, to_seq FROM holds WHERE shard_id = $1 AND state = 'HELD' AND kind = 'SEAT'`, shardID)
	if err != nil {
		return nil, err
	}
	var b, from, to int
	_, err = pgx.ForEachRow(rows, []any{&b, &from, &to}, func() error { mark(b, from, to); return nil })
	return occ, err
}

// take finds n berths free on legs from..to-1, marks them taken and
// returns them, lowest index first; nil when fewer are free.
func (o occupancy) take(from, to, n int) []int {
	var got []int
	for b := range o {
		free := true
		for l := from; l < to; l++ {
			if o[b][l] {
				free = false
				break
			}
		}
		if free {
			got = append(got, b)
			if len(got) == n {
				break
			}
		}
	}
	if len(got) < n {
		return nil
	}
	for _, b := range got {
		for l := from; l < to; l++ {
			o[b][l] = true
		}
	}
	return got
}

// confirmOntoTx confirms waitlisted booking w onto berths, tells the core
// and the passenger.
func (s Waitlist) confirmOntoTx(ctx context.Context, tx pgx.Tx, shard *Shard, w waitingBooking, berths []int) error {
	b32 := make([]int32, len(berths))
	var seats []string
	batch := &pgx.Batch{}
	for i, b := range berths {
		b32[i] = int32(b)
		info := berthInfo(shard, b)
		seats = append(seats, fmt.Sprintf("%s %s/%d %s", w.passengers[i].Name, info.Coach, info.BerthNo, info.Type))
		batch.Queue(`UPDATE booking_passengers SET berth_idx = $3, coach = $4, berth_no = $5, berth_type = $6, status = 'CONFIRMED'
			WHERE booking_id = $1 AND seq = $2`, w.id, i+1, b, info.Coach, info.BerthNo, info.Type)
	}
	batch.Queue(`UPDATE bookings SET status = 'CONFIRMED', waitlist_no = NULL, promoted_at = now(), prs_state = 'PENDING'
		WHERE id = $1 AND status = 'WAITLISTED'`, w.id)
	batch.Queue(`UPDATE holds SET kind = 'SEAT', berths = $2, updated_at = now(), state_version = state_version + 1 WHERE id = $1`,
		w.holdID, b32)
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return fmt.Errorf("confirm %s onto berths %v: %w", w.pnr, berths, err)
	}
	journey := fmt.Sprintf("%s %s %s %s-%s on %s", shard.Train, shard.TrainName, shard.Class, shard.Stops[w.from].Code,
		shard.Stops[w.to].Code, shard.Date.Format("2 Jan 2006"))
	if err := NotifyT(ctx, tx, w.userID, "PROMOTED", w.pnr, "msg.promoted", w.pnr, w.wl, journey, strings.Join(seats, ", ")); err != nil {
		return err
	}
	_, err := s.jobs.InsertTx(ctx, tx, CoreSyncArgs{BookingID: w.id, PNR: w.pnr}, nil)
	return err
}
