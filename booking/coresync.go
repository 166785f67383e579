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
}

// SyncToCore brings the reservation core in line with one booking: a
// confirmed or waitlisted booking is sent (idempotent by PNR), a cancelled
// one withdrawn. The passenger sees CONFIRMING until the core acknowledges.
// A retryable failure is returned for River to retry with backoff. A
// rejection is compensated: the booking is cancelled, its seats freed, the
// money refunded in full and the passenger told.
func (s *Service) SyncToCore(ctx context.Context, bookingID int64) error {
	if s.core == nil {
		return errors.New("no reservation core configured")
	}
	b, state, err := s.coreBooking(ctx, bookingID)
	if err != nil {
		return err
	}
	if b.Status == BookingCancelled {
		if state != "SYNCED" {
			return nil // the core never had it
		}
		if err := s.core.Cancel(ctx, b.PNR); err != nil && !errors.Is(err, prs.ErrNotFound) {
			return fmt.Errorf("cancel PNR %s at the core: %w", b.PNR, err)
		}
		return nil
	}
	if state != "PENDING" {
		return nil
	}
	ack, err := s.core.Sync(ctx, b)
	var rejected *prs.RejectedError
	switch {
	case err == nil:
		_, err := s.pool.Exec(ctx, `UPDATE bookings SET prs_state = 'SYNCED', prs_ref = $2, prs_synced_at = now()
			WHERE id = $1 AND prs_state = 'PENDING'`, bookingID, ack.CoreRef)
		if err != nil {
			return fmt.Errorf("sync PNR %s: %w", b.PNR, err)
		}
		return nil
	case errors.As(err, &rejected):
		s.log.Warn("reservation core rejected a booking; compensating", "pnr", b.PNR, "reason", rejected.Reason)
		return s.compensateRejected(ctx, bookingID, rejected.Reason)
	default:
		return fmt.Errorf("sync PNR %s: %w", b.PNR, err)
	}
}

func (s *Service) coreBooking(ctx context.Context, bookingID int64) (prs.Booking, string, error) {
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
func (s *Service) compensateRejected(ctx context.Context, bookingID int64, reason string) error {
	var h HoldInfo
	var release bool
	err := db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
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
		var err error
		if h, err = LockHoldTx(ctx, tx, holdID); err != nil {
			return err
		}
		if err := inventory.LockShardShared(ctx, tx, h.ShardID); err != nil {
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
		msg := fmt.Sprintf("We are sorry: PNR %s could not be issued by the reservation system and is cancelled.", pnr)
		if paymentID, paid, err := capturedPayment(ctx, tx, h.ID); err != nil {
			return err
		} else if paid {
			if _, _, err := s.RequestRefundTx(ctx, tx, paymentID, RefundCoreRejected, 0); err != nil {
				return err
			}
			msg += " Your full fare is being refunded automatically."
		}
		return Notify(ctx, tx, userID, "CORE_REJECTED", pnr, "Booking cancelled: PNR "+pnr, msg)
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
