package payment

import (
	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"tatkal/booking"
)

// InquiryArgs asks the gateway where a payment stands, again and again with
// backoff, until it is resolved. A Prompt inquiry asks once, soon after a
// create whose answer was lost: the passenger waiting for the bank's page
// gets it in seconds, and the payment's own inquiry keeps its schedule.
type InquiryArgs struct {
	PaymentID uuid.UUID `json:"payment_id"`
	Prompt    bool      `json:"prompt,omitempty"`
}

func (InquiryArgs) Kind() string { return "payment_inquiry" }
func (InquiryArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: booking.QueueMoney, MaxAttempts: 200}
}

// LateSuccessArgs resolves a payment that succeeded after its hold lapsed.
type LateSuccessArgs struct {
	PaymentID uuid.UUID `json:"payment_id"`
}

func (LateSuccessArgs) Kind() string { return "payment_late_success" }
func (LateSuccessArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: booking.QueueMoney, MaxAttempts: 200}
}

// RefundArgs executes one refund (wallet or gateway). Idempotent at the
// gateway by the refund id.
type RefundArgs struct {
	RefundID uuid.UUID `json:"refund_id"`
}

func (RefundArgs) Kind() string { return "refund_execute" }
func (RefundArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: booking.QueueMoney, MaxAttempts: 200}
}
