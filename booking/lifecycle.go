package booking

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"tatkal/booking/db"
	"tatkal/booking/funnel"
	"tatkal/booking/india"
	"tatkal/booking/inventory"
)

const holdViewSQL = `
	SELECT h.id, h.user_id, h.shard_id, h.kind, h.state, h.state_reason, h.expires_at, h.created_at,
	       h.passengers, h.berths, coalesce(h.waitlist_no, 0), h.fare_paise, h.fare_breakup,
	       h.from_seq, h.to_seq, coalesce(b.pnr, ''), coalesce(b.status, ''), coalesce(b.prs_state, ''), coalesce(b.refund_due_paise, 0),
	       sh.chart_state, coalesce(sh.charted_at, 'epoch'), sh.chart_core_state, coalesce(b.cancel_reason, '')
	FROM holds h LEFT JOIN bookings b ON b.hold_id = h.id JOIN inventory_shards sh ON sh.id = h.shard_id
	WHERE h.id = $1`

// Status returns the hold as its owner may see it; another user's hold is
// not found, exactly as a hold that does not exist.
func (s Lifecycle) Status(ctx context.Context, userID int64, id uuid.UUID) (HoldView, error) {
	v, err := s.view(ctx, s.pool, id)
	if err != nil {
		return HoldView{}, err
	}
	if v.UserID != userID {
		return HoldView{}, Errorf(ENOTFOUND, "NO_SUCH_HOLD", "No hold %s.", id)
	}
	return v, nil
}

// shardOn is the catalog's shard, read on q's connection when q is a
// transaction (cancel, charting): asking the pool from inside one
// deadlocks once every connection is held by such a transaction.
func (s Lifecycle) shardOn(ctx context.Context, q db.Querier, id int64) (*Shard, error) {
	if _, inTx := q.(pgx.Tx); inTx {
		return s.catalog.ByIDTx(ctx, q, id)
	}
	return s.catalog.ByID(ctx, id)
}

func (s Lifecycle) view(ctx context.Context, q db.Querier, id uuid.UUID) (HoldView, error) {
	var v HoldView
	var pax, breakup []byte
	var berths []int32
	var from, to int
	err := q.QueryRow(ctx, holdViewSQL, id).Scan(&v.ID, &v.UserID, &v.ShardID, &v.Kind, &v.State, &v.Reason,
		&v.ExpiresAt, &v.CreatedAt, &pax, &berths, &v.WaitlistNo, &v.Fare.TotalPaise, &breakup, &from, &to,
		&v.PNR, &v.BookingStat, &v.CoreState, &v.RefundDue, &v.ChartState, &v.ChartedAt, &v.ChartCore, &v.CancelReason)
	if errors.Is(err, pgx.ErrNoRows) {
		return HoldView{}, Errorf(ENOTFOUND, "NO_SUCH_HOLD", "No hold %s.", id)
	}
	if err != nil {
		return HoldView{}, fmt.Errorf("read hold %s: %w", id, err)
	}
	if err := json.Unmarshal(pax, &v.Passengers); err != nil {
		return HoldView{}, fmt.Errorf("read hold %s passengers: %w", id, err)
	}
	if err := json.Unmarshal(breakup, &v.Fare.Breakup); err != nil {
		return HoldView{}, fmt.Errorf("read hold %s fare: %w", id, err)
	}
	shard, err := s.shardOn(ctx, q, v.ShardID)
	if err != nil {
		return HoldView{}, err
	}
	if v.ChartedAt.Unix() == 0 {
		v.ChartedAt = time.Time{}
	}
	v.Train, v.Date, v.Class = shard.Train, shard.Date, shard.Class
	v.From, v.To = shard.Stops[from].Code, shard.Stops[to].Code
	for _, b := range berths {
		v.Berths = append(v.Berths, berthInfo(shard, int(b)))
	}
	return v, nil
}

// NewPNR makes a 10-digit PNR: the origin's region digit, the booking
// location, then seven random digits (DOMAIN.md, "Codes").
func NewPNR(region int, location string) (string, error) {
	n, err := rand.Int(rand.Reader, big.NewInt(10_000_000))
	if err != nil {
		return "", fmt.Errorf("pnr: %w", err)
	}
	return fmt.Sprintf("%d%s%07d", region, location, n.Int64()), nil
}

// Cancel releases a live hold its owner has not paid for. A cancel is of
// the thing the passenger saw: if the hold became a ticket meanwhile (the
// payment committed between the page and the click), nothing is cancelled
// and the answer is ALREADY_CONFIRMED; cancelling the ticket is a separate,
// explicit request (CancelBooking), so nobody loses a paid ticket by
// cancelling an unpaid hold. Cancelling a cancelled hold is refused as
// HOLD_CANCELLED and changes nothing.
func (s Lifecycle) Cancel(ctx context.Context, userID int64, id uuid.UUID) (HoldView, error) {
	v, err := s.Status(ctx, userID, id)
	if err != nil {
		return HoldView{}, err
	}
	s.pause.At(ctx, "cancel.before-update")
	err = db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		if err := inventory.LockShardShared(ctx, tx, v.ShardID); err != nil {
			return err
		}
		// The compare-and-set decides against a payment's confirmation: it
		// waits for one in flight and then matches nothing.
		tag, err := tx.Exec(ctx, `UPDATE holds SET state = 'CANCELLED', state_reason = 'cancelled by passenger',
			updated_at = now(), state_version = state_version + 1 WHERE id = $1 AND state = 'HELD'`, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 1 {
			return nil
		}
		now, err := s.view(ctx, tx, id)
		if err != nil {
			return err
		}
		if now.PNR != "" {
			q, err := s.quote(ctx, tx, now)
			if err != nil {
				return err
			}
			return Errorf(ECONFLICT, "ALREADY_CONFIRMED", "%s Nothing was cancelled. To cancel the ticket, ask to cancel the booking%s.",
				bookedAnswer(now), refundClause(q))
		}
		return Errorf(ECONFLICT, "HOLD_"+now.State, "Hold %s is %s; there is nothing to cancel.", id, now.State)
	})
	if err != nil {
		if ErrorCode(err) == EINTERNAL {
			return HoldView{}, fmt.Errorf("cancel hold %s: %w", id, err)
		}
		return HoldView{}, err
	}
	s.funnel.Add(v.ShardID, funnel.Released, 1)
	if _, err := s.store.Release(ctx, v.ShardID, id.String(), inventory.ReleaseHold, userID, ""); err != nil {
		s.log.Warn("release in Redis failed; the sweeper will free it at expiry", "hold", id, "err", err)
	}
	return s.Status(ctx, userID, id)
}

func bookedAnswer(v HoldView) string {
	if v.BookingStat == BookingCancelled {
		return fmt.Sprintf("Hold %s became ticket PNR %s, which is already cancelled.", v.ID, v.PNR)
	}
	return fmt.Sprintf("Your payment went through first: hold %s is now ticket PNR %s (%s).", v.ID, v.PNR, v.BookingStat)
}

func refundClause(q CancelQuote) string {
	if !q.Allowed {
		return ""
	}
	return fmt.Sprintf(" (refund under the Tatkal rules: Rs %s)", india.Decimal(q.RefundPaise))
}

// CancelQuote is what cancelling a hold's booking would do now, shown to
// the passenger before they confirm it.
type CancelQuote struct {
	HoldID      uuid.UUID
	PNR         string
	What        string // "hold" (unpaid: released, nothing charged), "booking", or "" when nothing can be cancelled
	Allowed     bool
	RefundPaise int64
	Reason      string // why not, when not allowed (a problem reason)
	Message     string
}

// CancelPreview answers what cancelling the hold or its booking would do,
// changing nothing.
func (s Lifecycle) CancelPreview(ctx context.Context, userID int64, id uuid.UUID) (CancelQuote, error) {
	v, err := s.Status(ctx, userID, id)
	if err != nil {
		return CancelQuote{}, err
	}
	return s.quote(ctx, s.pool, v)
}

// quote applies the cancellation rules (DOMAIN.md) to a hold as it stands:
// a confirmed Tatkal ticket refunds nothing; a waitlisted one the fare less
// clerkage per passenger, until 30 minutes before departure.
func (s Lifecycle) quote(ctx context.Context, on db.Querier, v HoldView) (CancelQuote, error) {
	q := CancelQuote{HoldID: v.ID, PNR: v.PNR}
	switch {
	case v.PNR == "" && v.State == HoldHeld:
		q.What, q.Allowed = "hold", true
		q.Message = "Cancelling releases the held seats. Nothing was charged."
		return q, nil
	case v.PNR == "":
		q.Reason, q.Message = "HOLD_"+v.State, fmt.Sprintf("Hold %s is %s; there is nothing to cancel.", v.ID, v.State)
		return q, nil
	case v.BookingStat == BookingCancelled:
		q.What, q.Reason = "booking", "ALREADY_CANCELLED"
		q.RefundPaise, q.Message = v.RefundDue, fmt.Sprintf("Ticket PNR %s is already cancelled.", v.PNR)
		return q, nil
	}
	q.What = "booking"
	if v.BookingStat == BookingConfirmed && v.CoreState == "PENDING" {
		// CONFIRMING: the reservation core is still recording the berths
		// (seeds/000 section 6.4); cancelling now would race that record.
		q.Reason, q.Message = "CONFIRMING", MsgConfirming
		return q, nil
	}
	if v.ChartState != "" && v.ChartState != "OPEN" {
		// Charting (or charted, or a failed chart awaiting ops): the
		// chart is the core's record of who travels; nothing leaves it.
		q.Reason, q.Message = "CHARTED", fmt.Sprintf("The chart of this train is being prepared or is prepared: ticket PNR %s can no longer be cancelled. Nothing was cancelled.", v.PNR)
		return q, nil
	}
	if v.BookingStat == BookingConfirmed {
		q.Allowed = true
		q.Message = fmt.Sprintf("Cancelling confirmed Tatkal ticket PNR %s refunds nothing (Tatkal rules); the berths go back on sale.", v.PNR)
		return q, nil
	}
	shard, err := s.shardOn(ctx, on, v.ShardID)
	if err != nil {
		return q, err
	}
	if !s.now().Before(shard.DepartsAt.Add(-30 * time.Minute)) {
		q.Reason, q.Message = "TOO_LATE", "Waitlisted tickets can be cancelled until 30 minutes before departure."
		return q, nil
	}
	q.Allowed = true
	q.RefundPaise = waitlistRefund(v, shard)
	q.Message = fmt.Sprintf("Cancelling waitlisted ticket PNR %s refunds Rs %s (the fare less clerkage of Rs %s per passenger).",
		v.PNR, india.Decimal(q.RefundPaise), india.Decimal(shard.Fare.Clerkage))
	return q, nil
}

// waitlistRefund is what a waitlisted ticket's cancellation refunds: the
// fare less clerkage per passenger.
func waitlistRefund(v HoldView, shard *Shard) int64 {
	return max(0, v.Fare.TotalPaise-shard.Fare.Clerkage*int64(len(v.Passengers)))
}

// MsgConfirming is why a ticket is not cancelled while CONFIRMING.
const MsgConfirming = "Your ticket is still being recorded by the reservation system (CONFIRMING). " +
	"It can be cancelled once it is confirmed, usually within a minute. Nothing was cancelled."

// CancelBooking cancels the ticket a hold became, under the Tatkal rules
// (see CancelPreview): the seats go back to the pool, a waitlisted ticket
// is refunded less clerkage, the reservation core is told. expectRefund,
// if not nil, is the refund the passenger was shown: if the rules now give
// another amount nothing is cancelled (REFUND_CHANGED). Cancelling a
// cancelled booking again changes nothing. A hold not yet paid for is not
// a booking (NOT_BOOKED): cancel it with Cancel.
func (s Lifecycle) CancelBooking(ctx context.Context, userID int64, id uuid.UUID, expectRefund *int64) (HoldView, error) {
	v, err := s.Status(ctx, userID, id)
	if err != nil {
		return HoldView{}, err
	}
	var done CancelDone
	err = db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		done, err = s.cancelBookingTx(ctx, tx, v, passengerCancelReason, expectRefund)
		return err
	})
	if err != nil {
		if ErrorCode(err) == EINTERNAL {
			return HoldView{}, fmt.Errorf("cancel booking of hold %s: %w", id, err)
		}
		return HoldView{}, err
	}
	s.AfterCancelBooking(ctx, done)
	return s.Status(ctx, userID, id)
}

// passengerCancelReason is the cancel reason of a passenger's own
// cancellation (site or API), the one the CONFIRMING rule binds.
const passengerCancelReason = "cancelled by passenger"

// CancelDone says what a booking cancellation did; pass it to
// AfterCancelBooking once its transaction commits.
type CancelDone struct {
	HoldID      uuid.UUID
	ShardID     int64
	UserID      int64
	Released    bool  // false: the booking was already cancelled
	RefundPaise int64 // refund requested under the rules
	// Promoting: the freed berths wait for the waitlist's promotion
	// (PromoteArgs, committed with the cancellation), which gives them
	// back in Redis; they are not released here.
	Promoting bool
}

// CancelBookingTx cancels the booking of hold id inside tx, for the
// operator's side (fraud enforcement): the same rules, refund and seat
// release as a passenger's CancelBooking, with reason recorded. Call
// AfterCancelBooking once tx commits.
func (s Lifecycle) CancelBookingTx(ctx context.Context, tx pgx.Tx, id uuid.UUID, reason string) (CancelDone, error) {
	v, err := s.view(ctx, tx, id)
	if err != nil {
		return CancelDone{}, err
	}
	return s.cancelBookingTx(ctx, tx, v, reason, nil)
}

func (s Lifecycle) cancelBookingTx(ctx context.Context, tx pgx.Tx, v HoldView, reason string, expectRefund *int64) (CancelDone, error) {
	id := v.ID
	done := CancelDone{HoldID: id, ShardID: v.ShardID}
	if err := inventory.LockShardShared(ctx, tx, v.ShardID); err != nil {
		return done, err
	}
	var bookingID int64
	err := tx.QueryRow(ctx, `SELECT id, user_id FROM bookings WHERE hold_id = $1 FOR UPDATE`, id).Scan(&bookingID, &done.UserID)
	if errors.Is(err, pgx.ErrNoRows) {
		return done, Errorf(ECONFLICT, "NOT_BOOKED", "Hold %s is %s and has no ticket to cancel; cancel the hold instead.", id, v.State)
	}
	if err != nil {
		return done, err
	}
	now, err := s.view(ctx, tx, id) // under the booking's lock
	if err != nil {
		return done, err
	}
	if now.BookingStat == BookingCancelled {
		return done, nil
	}
	quoted := now
	if reason != passengerCancelReason {
		// An operator's cancellation (fraud enforcement, charting) does
		// not wait for the core: the core-sync job below withdraws
		// whatever it has recorded. The passenger's CONFIRMING rule is
		// about what they were shown, not about the core.
		quoted.CoreState = ""
	}
	q, err := s.quote(ctx, tx, quoted)
	if err != nil {
		return done, err
	}
	if !q.Allowed && (q.Reason == "TOO_LATE" || q.Reason == "CHARTED") && reason == chartCancelReason {
		// Charting cancels the waitlist automatically, refunded less
		// clerkage, however close to departure it runs: the passenger's
		// 30-minute deadline is not the chart's.
		shard, err := s.catalog.ByIDTx(ctx, tx, now.ShardID)
		if err != nil {
			return done, err
		}
		q.Allowed, q.RefundPaise = true, waitlistRefund(now, shard)
	}
	if !q.Allowed {
		return done, Errorf(ECONFLICT, q.Reason, "%s", q.Message)
	}
	if expectRefund != nil && *expectRefund != q.RefundPaise {
		return done, Errorf(ECONFLICT, "REFUND_CHANGED", "The refund is now Rs %s, not the Rs %s you were shown. Nothing was cancelled.",
			india.Decimal(q.RefundPaise), india.Decimal(*expectRefund))
	}
	if _, err := tx.Exec(ctx, `UPDATE bookings SET status = 'CANCELLED', refund_due_paise = $2, cancelled_at = now(),
		cancel_reason = $3 WHERE id = $1`, bookingID, q.RefundPaise, reason); err != nil {
		return done, err
	}
	if q.RefundPaise > 0 {
		paid, err := s.refunds.RefundHoldTx(ctx, tx, id, RefundWaitlistCancelled, q.RefundPaise)
		if err != nil {
			return done, err
		}
		if paid {
			done.RefundPaise = q.RefundPaise
		}
	}
	// The core is told whatever it may hold (SyncToCore withdraws it).
	if _, err := s.jobs.InsertTx(ctx, tx, CoreSyncArgs{BookingID: bookingID, PNR: now.PNR}, nil); err != nil {
		return done, err
	}
	if _, err := tx.Exec(ctx, `UPDATE booking_passengers SET status = 'CANCELLED' WHERE booking_id = $1`, bookingID); err != nil {
		return done, err
	}
	done.Released = true
	if now.BookingStat == BookingConfirmed {
		// A berth freed before charting goes to the waitlist first: the
		// promotion's rebuild puts it back in Redis, taken or not.
		if done.Promoting, err = s.promotionQueuedTx(ctx, tx, v.ShardID, bookingID); err != nil || done.Promoting {
			return done, err
		}
	}
	_, err = s.jobs.InsertTx(ctx, tx, SeatSyncArgs{HoldID: id, ShardID: v.ShardID}, &river.InsertOpts{ScheduledAt: time.Now().Add(10 * time.Second)})
	return done, err
}

// AfterCancelBooking gives a cancelled booking's berths back in Redis once
// its transaction has committed; the seat-sync job committed with it
// repeats this should Redis be unreachable.
func (s Lifecycle) AfterCancelBooking(ctx context.Context, done CancelDone) {
	if !done.Released {
		return
	}
	s.funnel.Add(done.ShardID, funnel.Released, 1)
	if done.Promoting {
		return
	}
	if _, err := s.store.Release(ctx, done.ShardID, done.HoldID.String(), inventory.ReleaseCancel, done.UserID, ""); err != nil {
		s.log.Warn("release in Redis failed; the seat-sync job will retry", "hold", done.HoldID, "err", err)
	}
}

// ExpireHold releases a hold still HELD once its time is up. It returns a
// positive duration when the hold was extended and the job should come back
// later. Running it twice is harmless.
func (s Lifecycle) ExpireHold(ctx context.Context, id uuid.UUID) (time.Duration, error) {
	var shardID, userID int64
	var state string
	var expires time.Time
	var changed bool
	// One reading of the clock: a hold found not due is due later by a
	// positive duration, so its job always comes back.
	now := s.now()
	err := db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		// The shard's lock first, then the hold's, as on every path.
		b := &pgx.Batch{}
		QueueLockShardOfHold(b, id)
		b.Queue(`SELECT shard_id, user_id, state, expires_at FROM holds WHERE id = $1 FOR UPDATE`, id).QueryRow(func(row pgx.Row) error {
			return row.Scan(&shardID, &userID, &state, &expires)
		})
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		if state != HoldHeld || expires.After(now) {
			return nil
		}
		_, err := tx.Exec(ctx, `UPDATE holds SET state = 'EXPIRED', state_reason = 'hold window ended',
			updated_at = now(), state_version = state_version + 1 WHERE id = $1`, id)
		changed, state = err == nil, HoldExpired
		return err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil // never durable: nothing to expire
	}
	if err != nil {
		return 0, fmt.Errorf("expire hold %s: %w", id, err)
	}
	if state == HoldHeld {
		return expires.Sub(now), nil
	}
	if err := s.SyncSeat(ctx, id); err != nil {
		return 0, err
	}
	if changed {
		s.funnel.Add(shardID, funnel.Expired, 1)
		s.log.Info("hold expired", "hold", id, "shard", shardID)
	}
	return 0, nil
}

// SyncSeat makes Redis agree with PostgreSQL about one hold: released
// states free their seats, confirmed ones are marked sold, cancelled
// bookings free theirs, unless their berths are kept for the waitlist's
// promotion, which frees them itself. Idempotent.
func (s Lifecycle) SyncSeat(ctx context.Context, id uuid.UUID) error {
	var shardID, userID int64
	var state, bstatus string
	var kept bool
	err := s.pool.QueryRow(ctx, `SELECT h.shard_id, h.user_id, h.state, coalesce(b.status, ''), coalesce(b.kept_for_promotion, false)
		FROM holds h LEFT JOIN bookings b ON b.hold_id = h.id WHERE h.id = $1`, id).Scan(&shardID, &userID, &state, &bstatus, &kept)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sync seat %s: %w", id, err)
	}
	switch {
	case state == HoldHeld:
		return nil
	case bstatus == BookingCancelled && kept:
		return nil
	case bstatus == BookingCancelled:
		_, err = s.store.Release(ctx, shardID, id.String(), inventory.ReleaseCancel, userID, "")
	case state == HoldConfirmed:
		_, err = s.store.Confirm(ctx, shardID, id.String())
	default:
		_, err = s.store.Release(ctx, shardID, id.String(), inventory.ReleaseHold, userID, "")
	}
	if errors.Is(err, inventory.ErrNotReady) {
		return nil // the rebuild reads PostgreSQL, which already says the truth
	}
	if err != nil {
		return fmt.Errorf("sync seat %s: %w", id, err)
	}
	return nil
}
