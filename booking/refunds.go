package booking

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Refund reasons (refunds.reason).
const (
	RefundLateSuccessNoSeat = "LATE_SUCCESS_NO_SEAT"
	RefundDuplicateCharge   = "DUPLICATE_CHARGE"
	RefundHoldExpired       = "HOLD_EXPIRED"
	RefundHoldCancelled     = "HOLD_CANCELLED"
	RefundWaitlistCancelled = "WAITLIST_CANCELLED"
	RefundCoreRejected      = "CORE_REJECTED"
	// RefundAmountMismatch returns a capture the gateway made for another
	// amount than ours (migrations/006).
	RefundAmountMismatch = "AMOUNT_MISMATCH"
	// RefundAppealUpheld returns the full fare of a booking a fraud
	// decision cancelled, once an appeal against it is upheld.
	RefundAppealUpheld = "APPEAL_UPHELD"
	// RefundTDR returns the whole fare of a confirmed ticket whose train
	// ran over 3 hours late or did not run, on finance's approval of the
	// passenger's TDR (booking/tdr).
	RefundTDR = "TDR"
)

// Refunds records refund requests inside the booking's own transaction
// (payment.Refunds): the domain decides that money goes back, payment owns
// the payments and refunds tables and the job that pays it out.
type Refunds interface {
	// RefundHoldTx requests, in tx, a refund of amount paise (0: all of
	// it) of the hold's captured payment, and reports whether it had one.
	RefundHoldTx(ctx context.Context, tx pgx.Tx, holdID uuid.UUID, reason string, amount int64) (bool, error)
}
