package recon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"tatkal/booking"
	"tatkal/booking/db"
	"tatkal/booking/india"
	"tatkal/booking/payment"
)

// ResolveArgs carries out one exception's automatic resolution. It is
// inserted with the exception, in the run's transaction, and again when a
// file behind it is accepted or it is approved or reopened: River keeps one
// unfinished job per exception (a finished one does not block the next),
// and the resolution itself checks the exception's state under its lock, so
// a retried or resumed job does nothing twice.
type ResolveArgs struct {
	ExceptionID uuid.UUID `json:"exception_id"`
}

func (ResolveArgs) Kind() string { return "recon_resolve" }
func (ResolveArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: booking.QueueMoney, MaxAttempts: 25, UniqueOpts: river.UniqueOpts{ByArgs: true,
		ByState: []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRetryable,
			rivertype.JobStateRunning, rivertype.JobStateScheduled}}}
}

// Payments is the part of the payment orchestrator a resolution uses: the
// same calls the live path makes (*payment.Service satisfies it).
type Payments interface {
	// RequestRefundTx records a refund in the resolution's transaction.
	RequestRefundTx(ctx context.Context, tx pgx.Tx, paymentID uuid.UUID, reason string, amount int64) (uuid.UUID, bool, error)
	// ConfirmCapture asks the gateway, now, about a payment a file says it
	// captured, and applies the gateway's answer (never the file's)
	// through the live path, then the late-success path for a success
	// nothing came of: the seats retaken or the money refunded, once.
	ConfirmCapture(ctx context.Context, id uuid.UUID) (payment.GatewayAnswer, error)
	// AskGateway asks the gateway about a payment and changes nothing.
	AskGateway(ctx context.Context, id uuid.UUID) (payment.GatewayAnswer, error)
	// Inquire is the status inquiry job's step: it asks the gateway about
	// an unresolved payment and applies only the gateway's answer.
	Inquire(ctx context.Context, id uuid.UUID) (time.Duration, error)
}

// Bookings is the part of the booking service a resolution uses
// (*booking.Service satisfies it).
type Bookings interface {
	// ResyncToCore sends a booking to the reservation core again, once.
	ResyncToCore(ctx context.Context, bookingID int64) error
}

var (
	_ Payments = (*payment.Service)(nil)
	_ Bookings = (*booking.Service)(nil)
)

// ResolveWorker runs ResolveArgs; jobs/ registers it.
type ResolveWorker struct {
	river.WorkerDefaults[ResolveArgs]
	Recon    *Service
	Payments Payments
	Bookings Bookings
}

func (w *ResolveWorker) Work(ctx context.Context, job *river.Job[ResolveArgs]) error {
	return w.Recon.Resolve(ctx, job.Args.ExceptionID, w.Payments, w.Bookings)
}

// Resolve carries out an exception's automatic resolution, once, holding
// the exception's lock throughout: a person resolving or writing it off at
// the same moment waits, then finds it closed (never a second money move).
// An exception already closed, waiting for a person's approval, or resting
// on a file no second person has accepted, is left alone.
func (s *Service) Resolve(ctx context.Context, id uuid.UUID, pay Payments, bk Bookings) error {
	return db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		e, err := scanException(tx.QueryRow(ctx, `SELECT `+exceptionCols+` FROM reconciliation_exceptions WHERE id = $1 FOR UPDATE`, id))
		if err != nil {
			return fmt.Errorf("resolve %s: %w", id, err)
		}
		if e.State != StateOpen && e.State != StateInvestigating {
			return nil
		}
		if e.NeedsApproval && e.ApprovedBy == "" {
			return nil
		}
		return s.resolveLocked(ctx, tx, e, "job:recon_resolve", pay, bk)
	})
}

// resolveLocked is Resolve with the exception locked in tx, in actor's
// name (the job, or the person who asked the gateway now).
func (s *Service) resolveLocked(ctx context.Context, tx pgx.Tx, e Exception, actor string, pay Payments, bk Bookings) error {
	id := e.ID
	moves := e.PaymentID != nil && (e.Kind == DuplicateCharge || e.Kind == PaidNotBooked || (e.Kind == StatusMismatch && e.Path == PathAuto))
	if moves {
		// A payment a person is already reviewing (payment_reviews: the
		// gateway contradicted itself, or captured another amount) is not
		// moved automatically: the review's person decides. The run sends
		// such exceptions to a person; this catches a review opened since.
		var review int64
		err := tx.QueryRow(ctx, `SELECT id FROM payment_reviews WHERE payment_id = $1 AND resolved_at IS NULL ORDER BY id LIMIT 1`,
			*e.PaymentID).Scan(&review)
		switch {
		case err == nil:
			return s.closeTx(ctx, tx, id, actor, StateInvestigating, "", fmt.Sprintf("payment review #%d is open: a person decides", review))
		case !errors.Is(err, pgx.ErrNoRows):
			return fmt.Errorf("resolve %s: reviews: %w", id, err)
		}
		// A file a person uploaded is evidence only once a second person
		// accepts it; its acceptance enqueues this job again.
		file, err := unacceptedFile(ctx, tx, e)
		if err != nil || file != 0 {
			return err
		}
	}
	switch {
	case e.Kind == DuplicateCharge:
		// The same refund the live path makes for a second charge, recorded
		// with the resolution in one transaction. Both charges are SUCCESS
		// in our own records (the gateway's word); the file only found them.
		refundID, _, err := pay.RequestRefundTx(ctx, tx, *e.PaymentID, booking.RefundDuplicateCharge, 0)
		if err != nil {
			return err
		}
		var userID int64
		if err := tx.QueryRow(ctx, `SELECT user_id FROM payments WHERE id = $1`, *e.PaymentID).Scan(&userID); err != nil {
			return err
		}
		if err := booking.NotifyT(ctx, tx, userID, "REFUND_STARTED", e.PaymentID.String(), "msg.refunddup", india.Decimal(e.AmountPaise)); err != nil {
			return err
		}
		s.cfg.Pause.At(ctx, "recon.resolve.before-commit")
		return s.closeTx(ctx, tx, id, actor, StateResolved, "AUTO_REFUND", "duplicate charge refunded: refund "+refundID.String())

	case e.Kind == PaidNotBooked || (e.Kind == StatusMismatch && e.Path == PathAuto):
		// A retried or resumed job whose effect already happened only closes.
		done, err := s.settled(ctx, tx, e)
		if err != nil {
			return err
		}
		if done {
			return s.closeOutcome(ctx, tx, id, actor, *e.PaymentID)
		}
		state, err := s.paymentState(ctx, tx, *e.PaymentID)
		if err != nil {
			return err
		}
		if state == payment.Failed || state == payment.Refunded {
			return s.closeTx(ctx, tx, id, actor, StateInvestigating, "", "our payment is "+state+"; a person must decide")
		}
		// The file's line is a trigger, not the truth: the gateway is asked
		// now and only its answer moves money (confirm, or the late-success
		// path: the seats retaken or the money refunded).
		answer, err := pay.ConfirmCapture(ctx, *e.PaymentID)
		switch {
		case booking.ErrorCode(err) == booking.ECONFLICT:
			return s.closeTx(ctx, tx, id, actor, StateInvestigating, "", booking.ErrorMessage(err))
		case err != nil:
			return fmt.Errorf("resolve %s: %w", id, err) // the gateway did not answer: retried
		case !answer.Captured():
			return s.closeTx(ctx, tx, id, actor, StateInvestigating, "",
				"asked the gateway: "+answer.String()+"; the file's capture is not the gateway's word, a person must look")
		}
		// A worker killed here has moved the money but not closed the
		// exception: the resumed job finds it settled and only closes it.
		s.cfg.Pause.At(ctx, "recon.resolve.after-effect")
		return s.closeOutcome(ctx, tx, id, actor, *e.PaymentID)

	case e.Path == PathResync:
		var ev struct {
			BookingID int64 `json:"booking_id"`
		}
		json.Unmarshal(e.Evidence, &ev) //nolint:errcheck // checked below
		if ev.BookingID == 0 {
			return s.closeTx(ctx, tx, id, actor, StateInvestigating, "", "no booking to re-sync; a person must look")
		}
		// Send it once more through the live sync.
		if err := bk.ResyncToCore(ctx, ev.BookingID); err != nil {
			return fmt.Errorf("resolve %s: re-sync: %w", id, err)
		}
		// Once only: a person takes over if the next run still finds it.
		if _, err := tx.Exec(ctx, `UPDATE reconciliation_exceptions SET path = 'MANUAL' WHERE id = $1`, id); err != nil {
			return err
		}
		return event(ctx, tx, id, actor, "RESYNCED", "", "", "sent to the core again; the next run clears it or a person takes over")
	}
	return nil
}

// paymentState reads our payment's state.
func (s *Service) paymentState(ctx context.Context, q db.Querier, id uuid.UUID) (string, error) {
	var state string
	if err := q.QueryRow(ctx, `SELECT state FROM payments WHERE id = $1`, id).Scan(&state); err != nil {
		return "", fmt.Errorf("payment %s: %w", id, err)
	}
	return state, nil
}

// settled says whether an exception's payment has already come to
// something since it was found: refunded, or (paid, not booked) booked.
func (s *Service) settled(ctx context.Context, q db.Querier, e Exception) (bool, error) {
	var done bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM refunds WHERE payment_id = $1)
		OR ($2 AND EXISTS (SELECT 1 FROM bookings b JOIN payments p ON p.hold_id = b.hold_id WHERE p.id = $1))`,
		*e.PaymentID, e.Kind == PaidNotBooked).Scan(&done)
	if err != nil {
		return false, fmt.Errorf("exception %s: %w", e.ID, err)
	}
	return done, nil
}

// closeOutcome resolves a locked exception with what its payment became.
func (s *Service) closeOutcome(ctx context.Context, tx pgx.Tx, id uuid.UUID, actor string, paymentID uuid.UUID) error {
	outcome, err := s.outcome(ctx, tx, paymentID)
	if err != nil {
		return err
	}
	return s.closeTx(ctx, tx, id, actor, StateResolved, "AUTO_"+outcome, "settled through the payment path: "+outcome)
}

// outcome says what the payment became: a ticket, a refund, or a late
// success still being worked on by its own job.
func (s *Service) outcome(ctx context.Context, q db.Querier, id uuid.UUID) (string, error) {
	var booked, refunded bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM bookings b JOIN payments p ON p.hold_id = b.hold_id WHERE p.id = $1),
		EXISTS (SELECT 1 FROM refunds WHERE payment_id = $1)`, id).Scan(&booked, &refunded)
	switch {
	case err != nil:
		return "", fmt.Errorf("payment %s outcome: %w", id, err)
	case refunded:
		return "REFUND", nil
	case booked:
		return "TICKET", nil
	}
	return "LATE_SUCCESS_QUEUED", nil
}

// lockOpen locks an exception; done reports that it is closed already.
func lockOpen(ctx context.Context, tx pgx.Tx, id uuid.UUID) (done bool, err error) {
	var state string
	if err := tx.QueryRow(ctx, `SELECT state FROM reconciliation_exceptions WHERE id = $1 FOR UPDATE`, id).Scan(&state); err != nil {
		return false, fmt.Errorf("exception %s: %w", id, err)
	}
	return state != StateOpen && state != StateInvestigating, nil
}

// close moves an exception to state with a resolution code, in its own transaction.
func (s *Service) close(ctx context.Context, id uuid.UUID, actor, state, code, note string) error {
	return db.Transact(ctx, s.pool, func(tx pgx.Tx) error {
		if done, err := lockOpen(ctx, tx, id); err != nil || done {
			return err
		}
		return s.closeTx(ctx, tx, id, actor, state, code, note)
	})
}
