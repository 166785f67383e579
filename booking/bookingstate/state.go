// Package bookingstate says, in words, where a passenger's hold or booking
// stands: the one place the JSON API's status and the passenger pages take
// their state and message from (seeds/000 sections 3 and 6.4).
package bookingstate

import (
	"strconv"
	"time"

	"tatkal/booking"
	"tatkal/booking/india"
	"tatkal/booking/payment"
)

// States a passenger can be told.
const (
	Held            = "HELD"
	PaymentPending  = "PAYMENT_PENDING"
	Confirming      = "CONFIRMING"
	Confirmed       = "CONFIRMED"
	Waitlisted      = "WAITLISTED"
	Cancelled       = "CANCELLED"
	Expired         = "EXPIRED"
	Failed          = "FAILED"
	Refunded        = "REFUNDED"
	RefundInitiated = "REFUND_INITIATED"
)

// Words is the passenger's state, what to tell them and when to look again.
type Words struct {
	State   string
	Message string
	// NextCheckMs is when a client should ask again (0: the state is final).
	NextCheckMs int
	// HoldExpiresAt is set while seats are held awaiting payment.
	HoldExpiresAt *time.Time
	// Payment is the hold's latest payment, if any.
	Payment *payment.View
	// ResolveBy is when a payment in doubt ends in a ticket or a refund.
	ResolveBy *time.Time
}

// Describe turns a hold's durable state and its payments (newest first)
// into words.
func Describe(v booking.HoldView, pays []payment.View, now time.Time) Words {
	var s Words
	switch {
	case v.BookingStat == booking.BookingConfirmed && v.CoreState == "PENDING":
		s.State, s.NextCheckMs = Confirming, 2000
		s.Message = "Payment received and berths allotted: PNR " + v.PNR + ". The reservation system is recording your ticket; this takes a moment."
	case v.BookingStat == booking.BookingConfirmed:
		s.State, s.Message = Confirmed, "Your ticket is confirmed. PNR "+v.PNR+"."
	case v.BookingStat == booking.BookingWaitlisted:
		s.State, s.Message = Waitlisted, "Your ticket is waitlisted at TQWL/"+strconv.Itoa(v.WaitlistNo)+". PNR "+v.PNR+"."
	case v.BookingStat == booking.BookingCancelled && v.RefundDue > 0:
		s.State, s.Message = Cancelled, "Your ticket is cancelled. ₹"+india.Decimal(v.RefundDue)+" will be refunded."
	case v.BookingStat == booking.BookingCancelled:
		s.State, s.Message = Cancelled, "Your ticket is cancelled. Confirmed Tatkal tickets are not refunded on cancellation."
	case v.State == booking.HoldHeld:
		exp := v.ExpiresAt
		s.State, s.HoldExpiresAt, s.NextCheckMs = Held, &exp, 5000
		s.Message = "Seats held until " + v.ExpiresAt.In(booking.IST).Format("15:04:05") + " IST. Pay before then to get your ticket."
		if now.After(v.ExpiresAt) {
			s.Message = "Your hold has run out; the seats are being released."
		}
	case v.State == booking.HoldExpired:
		s.State, s.Message = Expired, "Your hold ran out before payment; the seats were released. Nothing was charged."
	case v.State == booking.HoldCancelled && booking.CancelledByReview(v.Reason):
		s.State, s.Message = Cancelled, "This hold was cancelled after a fraud review of your account's bookings; the seats were released. "+
			"A payment for it that goes through is refunded in full. You may appeal the decision."
	case v.State == booking.HoldCancelled:
		s.State, s.Message = Cancelled, "You cancelled this hold; the seats were released. Nothing was charged."
	default:
		s.State, s.Message = v.State, "This hold was released. Nothing was charged."
	}
	describePayment(&s, v, pays)
	return s
}

// describePayment turns the latest payment of a hold into the passenger's
// state and message (seeds/000 section 3 and the payments issue, part 5).
func describePayment(s *Words, v booking.HoldView, pays []payment.View) {
	if len(pays) == 0 {
		return
	}
	latest := pays[0]
	s.Payment = &latest
	for _, p := range pays {
		if p.Refund != nil {
			r := p.Refund
			if r.State == "PROCESSED" {
				s.State = Refunded
				s.Message = "₹" + india.Decimal(r.AmountPaise) + " was refunded"
				if r.GatewayRef != "" {
					s.Message += " (reference " + r.GatewayRef + ")"
				}
				if r.ExpectedAt != nil && r.GatewayRef != "" {
					s.Message += "; it reaches your bank by " + r.ExpectedAt.In(booking.IST).Format("2 Jan") + "."
				} else {
					s.Message += " to your wallet."
				}
			} else if v.BookingStat != booking.BookingConfirmed && v.BookingStat != booking.BookingWaitlisted {
				s.State = RefundInitiated
				why := RefundReason(r.Reason)
				if r.Reason == booking.RefundHoldCancelled && booking.CancelledByReview(v.Reason) {
					why = "the hold was cancelled after a fraud review before the payment arrived"
				}
				s.Message = "₹" + india.Decimal(r.AmountPaise) + " is being refunded automatically (" + why + ")."
			}
			if v.BookingStat == "" || v.BookingStat == booking.BookingCancelled {
				return
			}
		}
	}
	if v.BookingStat != "" {
		return
	}
	by := latest.Deadline.In(booking.IST).Format("15:04")
	switch latest.State {
	case payment.Initiated, payment.AwaitingUser, payment.PendingAtBank, payment.Unknown:
		s.State = PaymentPending
		s.Message = "Waiting for your bank. You will get a ticket or an automatic refund by " + by + " IST. " + LateSuccessRule
		if v.State == booking.HoldCancelled && booking.CancelledByReview(v.Reason) {
			// No ticket can come of it any more: only the refund.
			s.State = Cancelled
			s.Message = "This hold was cancelled after a fraud review of your account's bookings; the seats were released. " +
				"If your bank still completes the payment, it is refunded in full automatically by " + by + " IST. You may appeal the decision."
		}
		s.NextCheckMs = 3000
		d := latest.Deadline
		s.ResolveBy = &d
	case payment.Failed:
		if v.State != booking.HoldHeld {
			s.State, s.Message = Failed, "The payment failed and nothing was charged. The seats were released."
		}
	case payment.Success:
		s.State = PaymentPending
		s.Message = "Payment received; your ticket is being issued."
		s.NextCheckMs = 2000
	}
}

// LateSuccessRule is what happens when the bank confirms a payment after
// its hold ended (booking.Service.RetakeAndConfirm), as the rules page
// publishes it (catalogue key rule.latesuccess).
const LateSuccessRule = "If your bank confirms after your hold has ended, we still book your ticket at the same fare if seats are free and you have not booked this journey again since; otherwise the whole amount is refunded automatically."

// RefundReason says in words why money is being returned.
func RefundReason(r string) string {
	switch r {
	case booking.RefundLateSuccessNoSeat:
		return "your bank confirmed the payment after the seats were gone"
	case booking.RefundDuplicateCharge:
		return "you were charged twice"
	case booking.RefundHoldCancelled:
		return "you cancelled before the payment arrived"
	case booking.RefundWaitlistCancelled:
		return "waitlisted ticket cancelled, less clerkage"
	case booking.RefundCoreRejected:
		return "the reservation system could not issue the ticket"
	case booking.RefundAppealUpheld:
		return "your appeal against the cancellation was upheld: the full fare"
	case booking.RefundAmountMismatch:
		return "your bank was charged a different amount than the fare"
	case booking.RefundTDR:
		return "your TDR was approved (the train ran late or did not run): the full fare"
	}
	return "refund"
}
