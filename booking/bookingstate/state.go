// Package bookingstate says, in words, where a passenger's hold or booking
// stands: the one place the JSON API's status and the passenger pages take
// their state and message from (seeds/000 sections 3 and 6.4).
package bookingstate

import (
	"strconv"
	"time"

	"tatkal/booking"
	"tatkal/booking/i18n"
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
	// Key and Args are Message in the catalogue (booking/i18n), so a page
	// says it in the passenger's language (Say); Message is its English,
	// the API's words. Times among Args are IST clock strings, amounts
	// rupee strings, so no language formats them differently.
	Key  string
	Args []any
	// Waitlist: the hold is for TQWL places, not seats; its state title
	// and words say so (never "seats held").
	Waitlist bool
}

// say sets the message from the catalogue.
func (s *Words) say(key string, args ...any) {
	s.Key, s.Args = key, args
	s.Message = i18n.Format("en", key, Localize("en", args)...)
}

// Say is the message in lang.
func (s Words) Say(lang string) string {
	if s.Key == "" {
		return s.Message
	}
	return i18n.Format(lang, s.Key, Localize(lang, s.Args)...)
}

// Title is the catalogue key of the state's headline: a waitlist hold has
// its own.
func (s Words) Title() string {
	if s.Waitlist && s.State == Held {
		return "state.HELD_WL"
	}
	return "state." + s.State
}

// Describe turns a hold's durable state and its payments (newest first)
// into words.
func Describe(v booking.HoldView, pays []payment.View, now time.Time) Words {
	var s Words
	switch {
	case v.BookingStat == booking.BookingConfirmed && v.CoreState == "PENDING":
		s.State, s.NextCheckMs = Confirming, 2000
		s.say("st.confirming", v.PNR)
	case v.BookingStat == booking.BookingConfirmed:
		s.State = Confirmed
		s.say("st.confirmed", v.PNR)
	case v.BookingStat == booking.BookingWaitlisted:
		s.State = Waitlisted
		s.say("st.waitlisted", strconv.Itoa(v.WaitlistNo), v.PNR)
	case v.BookingStat == booking.BookingCancelled && v.RefundDue > 0:
		s.State = Cancelled
		s.say("st.cancelled.refund", india.Rupees(v.RefundDue))
	case v.BookingStat == booking.BookingCancelled:
		s.State = Cancelled
		s.say("st.cancelled.norefund")
	case v.State == booking.HoldHeld:
		exp := v.ExpiresAt
		s.State, s.HoldExpiresAt, s.NextCheckMs = Held, &exp, 5000
		s.Waitlist = v.Kind == booking.KindWaitlist
		until := i18n.Clock(v.ExpiresAt.In(booking.IST), true)
		switch {
		case now.After(v.ExpiresAt):
			s.say("st.held.out")
		case s.Waitlist:
			// What is held (a place on the waitlist, no berth), what
			// happens at charting, what is refunded.
			s.say("st.held.wl", strconv.Itoa(v.WaitlistNo), until)
		default:
			s.say("st.held", until)
		}
	case v.State == booking.HoldExpired:
		s.State = Expired
		s.say("st.expired")
	case v.State == booking.HoldCancelled && booking.CancelledByReview(v.Reason):
		s.State = Cancelled
		s.say("st.reviewcancelled")
	case v.State == booking.HoldCancelled:
		s.State = Cancelled
		s.say("st.released")
	default:
		s.State = v.State
		s.say("st.other")
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
				switch {
				case r.ExpectedAt != nil && r.GatewayRef != "":
					s.say("st.refunded.bank", india.Rupees(r.AmountPaise), r.GatewayRef, DateArg{*r.ExpectedAt})
				case r.GatewayRef != "":
					s.say("st.refunded.ref", india.Rupees(r.AmountPaise), r.GatewayRef)
				default:
					s.say("st.refunded.wallet", india.Rupees(r.AmountPaise))
				}
			} else if v.BookingStat != booking.BookingConfirmed && v.BookingStat != booking.BookingWaitlisted {
				s.State = RefundInitiated
				why := reasonKey(r.Reason)
				if r.Reason == booking.RefundHoldCancelled && booking.CancelledByReview(v.Reason) {
					why = "why.reviewhold"
				}
				s.say("st.refunding", india.Rupees(r.AmountPaise), KeyArg(why))
			}
			if v.BookingStat == "" || v.BookingStat == booking.BookingCancelled {
				return
			}
		}
	}
	if v.BookingStat != "" {
		return
	}
	by := i18n.Clock(latest.Deadline.In(booking.IST), false)
	switch latest.State {
	case payment.Initiated, payment.AwaitingUser, payment.PendingAtBank, payment.Unknown:
		s.State = PaymentPending
		s.say("st.pending", by, KeyArg("rule.latesuccess"))
		if v.State == booking.HoldCancelled && booking.CancelledByReview(v.Reason) {
			// No ticket can come of it any more: only the refund.
			s.State = Cancelled
			s.say("st.pending.review", by)
		}
		s.NextCheckMs = 3000
		d := latest.Deadline
		s.ResolveBy = &d
	case payment.Failed:
		if v.State != booking.HoldHeld {
			s.State = Failed
			s.say("st.failed")
		}
	case payment.Success:
		s.State = PaymentPending
		s.say("st.paid")
		s.NextCheckMs = 2000
	}
}

// LateSuccessRule is what happens when the bank confirms a payment after
// its hold ended (booking.Settlement.RetakeAndConfirm), as the rules page
// publishes it (catalogue key rule.latesuccess).
var LateSuccessRule = i18n.Text("en", "rule.latesuccess")

// RefundReason says in words why money is being returned.
func RefundReason(r string) string { return i18n.Text("en", reasonKey(r)) }

// reasonKey is the catalogue key of a refund's reason.
func reasonKey(r string) string {
	switch r {
	case booking.RefundLateSuccessNoSeat:
		return "why.latenoseat"
	case booking.RefundDuplicateCharge:
		return "why.duplicate"
	case booking.RefundHoldCancelled:
		return "why.holdcancelled"
	case booking.RefundWaitlistCancelled:
		return "why.wlcancelled"
	case booking.RefundCoreRejected:
		return "why.corerejected"
	case booking.RefundAppealUpheld:
		return "why.appeal"
	case booking.RefundAmountMismatch:
		return "why.mismatch"
	case booking.RefundTDR:
		return "why.tdr"
	}
	return "why.refund"
}

// KeyArg is a message argument that is itself a catalogue key, said in
// the message's language; DateArg a day, named in it.
type (
	KeyArg  string
	DateArg struct{ T time.Time }
)

// Localize turns a message's args into strings of lang.
func Localize(lang string, args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		switch a := a.(type) {
		case KeyArg:
			out[i] = i18n.Text(lang, string(a))
		case DateArg:
			out[i] = i18n.Date(lang, a.T.In(booking.IST))
		default:
			out[i] = a
		}
	}
	return out
}
