package booking

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"tatkal/booking/db"
	"tatkal/booking/inventory"
	"tatkal/booking/prs"
)

// CoreClient is the reservation core as the booking side uses it.
type CoreClient interface {
	Sync(ctx context.Context, b prs.Booking) (prs.Ack, error)
	Cancel(ctx context.Context, pnr string) error
	SendChart(ctx context.Context, c prs.Chart) (prs.ChartAck, error)
}

// ResyncToCore sends a booking once more through the live sync, for
// reconciliation: the core's export lacks it or disagrees with it. A
// booking we believe synced is marked pending first, since the sync skips
// synced ones; a cancelled one is withdrawn again.
func (s CoreSync) ResyncToCore(ctx context.Context, bookingID int64) error {
	if _, err := s.pool.Exec(ctx, `UPDATE bookings SET prs_state = 'PENDING' WHERE id = $1 AND prs_state = 'SYNCED' AND status <> 'CANCELLED'`,
		bookingID); err != nil {
		return fmt.Errorf("resync booking %d: %w", bookingID, err)
	}
	return s.SyncToCore(ctx, bookingID)
}

// SyncToCore brings the reservation core in line with one booking: a
// confirmed or waitlisted booking is sent (idempotent by PNR), a cancelled
// one withdrawn. The passenger sees CONFIRMING until the core acknowledges.
// A retryable failure is returned for River to retry with backoff. A
// rejection is compensated: the booking is cancelled, its seats freed, the
// money refunded in full and the passenger told; unless the berth is held
// at the core by a booking we cancelled, which is repaired instead.
func (s CoreSync) SyncToCore(ctx context.Context, bookingID int64) error {
	if s.core == nil {
		return errors.New("no reservation core configured")
	}
	b, state, err := s.coreBooking(ctx, bookingID)
	if err != nil {
		return err
	}
	if b.Status == BookingCancelled {
		return s.withdrawFromCore(ctx, b.PNR, state)
	}
	if state != "PENDING" {
		return nil
	}
	s.pause.At(ctx, "coresync.before-send")
	ack, err := s.core.Sync(ctx, b)
	if rejected, ok := errors.AsType[*prs.RejectedError](err); ok && rejected.Reason == prs.ReasonBerthTaken {
		// Our own stale booking may be what holds the berth: withdraw it
		// and try once more before blaming this passenger's booking.
		repaired, rerr := s.withdrawStale(ctx, bookingID)
		if rerr != nil {
			return rerr
		}
		if repaired {
			ack, err = s.core.Sync(ctx, b)
		}
	}
	var rejected *prs.RejectedError
	switch {
	case err == nil:
		s.pause.At(ctx, "coresync.before-mark")
		return s.markSynced(ctx, bookingID, b, ack)
	case errors.As(err, &rejected):
		s.log.Warn("reservation core rejected a booking; compensating", "pnr", b.PNR, "reason", rejected.Reason)
		return s.compensateRejected(ctx, bookingID, rejected.Reason)
	default:
		return fmt.Errorf("sync PNR %s: %w", b.PNR, err)
	}
}

// markSynced records the core's acknowledgement, compare-and-set: a
// booking cancelled while its sync was in flight is not marked SYNCED but
// withdrawn from the core, which now has it. A booking whose status changed
// since it was read (a waitlisted one promoted) is not marked either: what
// the core got may be older than another sync's answer, so the booking is
// sent again as it is now.
func (s CoreSync) markSynced(ctx context.Context, bookingID int64, sent prs.Booking, ack prs.Ack) error {
	tag, err := s.pool.Exec(ctx, `UPDATE bookings SET prs_state = 'SYNCED', prs_ref = $2, prs_synced_at = now()
		WHERE id = $1 AND prs_state = 'PENDING' AND status = $3`, bookingID, ack.CoreRef, sent.Status)
	if err != nil {
		return fmt.Errorf("sync PNR %s: %w", sent.PNR, err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	var status, state string
	if err := s.pool.QueryRow(ctx, `SELECT status, prs_state FROM bookings WHERE id = $1`, bookingID).Scan(&status, &state); err != nil {
		return fmt.Errorf("sync PNR %s: %w", sent.PNR, err)
	}
	switch status {
	case BookingCancelled:
		s.log.Info("booking cancelled while its sync was in flight; withdrawing it from the core", "pnr", sent.PNR)
		return s.withdrawFromCore(ctx, sent.PNR, state)
	case sent.Status:
		return nil // marked by a concurrent sync of the same booking
	}
	s.log.Info("booking changed while its sync was in flight; sending it again", "pnr", sent.PNR, "sent", sent.Status, "now", status)
	return s.ResyncToCore(ctx, bookingID)
}

// withdrawFromCore cancels a PNR at the core whenever the core may have
// it: a sync whose answer was lost (a timeout) or that is still in flight
// may have stored it, so PENDING is no proof of absence; only a rejection
// is. The core answers by PNR: not found means it never had it (a sync
// still in flight then finds the booking cancelled in markSynced).
func (s CoreSync) withdrawFromCore(ctx context.Context, pnr, state string) error {
	if state == "REJECTED" {
		return nil // the core refused it: it never held it
	}
	if err := s.core.Cancel(ctx, pnr); err != nil && !errors.Is(err, prs.ErrNotFound) {
		return fmt.Errorf("cancel PNR %s at the core: %w", pnr, err)
	}
	return nil
}

// withdrawStale cancels at the core every booking of ours that we
// cancelled and that shared a berth with this one on an overlapping leg:
// if the core still holds one of them (its cancellation not through yet),
// that is what made it refuse this booking. It reports whether the core
// had any of them.
func (s CoreSync) withdrawStale(ctx context.Context, bookingID int64) (bool, error) {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT o.pnr FROM booking_passengers p
		JOIN booking_passengers op ON op.shard_id = p.shard_id AND op.berth_idx = p.berth_idx
			AND op.booking_id <> p.booking_id AND int4range(op.from_seq, op.to_seq) && int4range(p.from_seq, p.to_seq)
		JOIN bookings o ON o.id = op.booking_id
		WHERE p.booking_id = $1 AND p.berth_idx IS NOT NULL AND o.status = 'CANCELLED' AND o.prs_state <> 'REJECTED'`, bookingID)
	if err != nil {
		return false, fmt.Errorf("stale bookings on the berths of booking %d: %w", bookingID, err)
	}
	stale, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return false, fmt.Errorf("stale bookings on the berths of booking %d: %w", bookingID, err)
	}
	repaired := false
	for _, pnr := range stale {
		err := s.core.Cancel(ctx, pnr)
		switch {
		case errors.Is(err, prs.ErrNotFound):
		case err != nil:
			return false, fmt.Errorf("withdraw stale PNR %s from the core: %w", pnr, err)
		default:
			s.log.Warn("the core still held a booking we cancelled; withdrawn", "stale_pnr", pnr, "booking", bookingID)
			repaired = true
		}
	}
	return repaired, nil
}

func (s CoreSync) coreBooking(ctx context.Context, bookingID int64) (prs.Booking, string, error) {
	var b prs.Booking
	var shardID int64
	var state string
	var wl *int
	err := s.pool.QueryRow(ctx, `SELECT pnr, shard_id, from_seq, to_seq, status, waitlist_no, fare_paise, prs_state
		FROM bookings WHERE id = $1`, bookingID).Scan(&b.PNR, &shardID, &b.FromSeq, &b.ToSeq, &b.Status, &wl, &b.FarePaise, &state)
	if err != nil {
		return b, "", fmt.Errorf("read booking %d: %w", bookingID, err)
	}
	if wl != nil {
		b.WaitlistNo = *wl
	}
	shard, err := s.catalog.ByID(ctx, shardID)
	if err != nil {
		return b, "", err
	}
	b.Train, b.JourneyDate, b.Class, b.Quota = shard.Train, shard.Date.Format(time.DateOnly), shard.Class, shard.Quota
	b.From, b.To = shard.Stops[b.FromSeq].Code, shard.Stops[b.ToSeq].Code
	rows, err := s.pool.Query(ctx, `SELECT seq, name, age, gender, coalesce(coach, ''), coalesce(berth_no, 0), coalesce(berth_type, '')
		FROM booking_passengers WHERE booking_id = $1 ORDER BY seq`, bookingID)
	if err != nil {
		return b, "", fmt.Errorf("read booking %d passengers: %w", bookingID, err)
	}
	b.Passengers, err = pgx.CollectRows(rows, pgx.RowToStructByPos[prs.Passenger])
	if err != nil {
		return b, "", fmt.Errorf("read booking %d passengers: %w", bookingID, err)
	}
	return b, state, nil
}

// compensateRejected undoes a booking the core refused: cancelled, seats
// back, full refund, a message to the passenger; all in one transaction.
// Its locks follow the one order, the shard's first: taken after the
// booking's and the hold's, it closed a cycle with a promotion or a chart
// (the shard's exclusive lock, then the waitlisted bookings) that only the
// deadlock detector broke, a second later.
func (s CoreSync) compensateRejected(ctx context.Context, bookingID int64, reason string) error {
	var h HoldInfo
	var release bool
	err := db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		var shardID int64
		// Read unlocked: a booking, like its hold, never changes shard.
		if err := tx.QueryRow(ctx, `SELECT shard_id FROM bookings WHERE id = $1`, bookingID).Scan(&shardID); err != nil {
			return err
		}
		if err := inventory.LockShardShared(ctx, tx, shardID); err != nil {
			return err
		}
		var pnr, status string
		var userID int64
		var holdID [16]byte
		if err := tx.QueryRow(ctx, `SELECT pnr, status, user_id, hold_id FROM bookings WHERE id = $1 FOR UPDATE`, bookingID).
			Scan(&pnr, &status, &userID, &holdID); err != nil {
			return err
		}
		if status == BookingCancelled {
			return nil
		}
		s.pause.At(ctx, "compensate.booking-locked")
		var err error
		if h, err = LockHoldTx(ctx, tx, holdID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE bookings SET status = 'CANCELLED', prs_state = 'REJECTED', cancelled_at = now(),
			cancel_reason = $2 WHERE id = $1`, bookingID, "rejected by the reservation core: "+reason); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE booking_passengers SET status = 'CANCELLED' WHERE booking_id = $1`, bookingID); err != nil {
			return err
		}
		release = true
		// The seat-sync job frees the seats should the release below fail.
		if err := s.seatSyncLaterTx(ctx, tx, h.ID, h.ShardID); err != nil {
			return err
		}
		msgKey := "msg.corerejected"
		if paid, err := s.refunds.RefundHoldTx(ctx, tx, h.ID, RefundCoreRejected, 0); err != nil {
			return err
		} else if paid {
			msgKey = "msg.corerejectedpaid"
		}
		return NotifyT(ctx, tx, userID, "CORE_REJECTED", pnr, msgKey, pnr)
	})
	if err != nil {
		return fmt.Errorf("compensate booking %d: %w", bookingID, err)
	}
	if release {
		if _, err := s.store.Release(ctx, h.ShardID, h.ID.String(), inventory.ReleaseCancel, h.UserID, ""); err != nil {
			s.log.Warn("release in Redis failed; the seat-sync job will retry", "hold", h.ID, "err", err)
		}
	}
	return nil
}
