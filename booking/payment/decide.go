package payment

import (
	"fmt"

	"tatkal/booking"
	"tatkal/booking/india"
	"tatkal/booking/payment/pspapi"
)

// move is what a gateway's answer does to one of our payments.
type move int

const (
	// moveNone: nothing changes (a duplicate, an answer behind ours).
	moveNone move = iota
	// moveAwaitUser: the gateway made the payment; the passenger acts next.
	moveAwaitUser
	// moveAtBank: the bank has it; a hold's seats get one extension.
	moveAtBank
	// moveFail: it failed; a hold's seats go back, the passenger is told.
	moveFail
	// moveReviewFailed, moveReviewAmount: a payment we took as captured is
	// contradicted (failed, another amount): a person decides.
	moveReviewFailed
	moveReviewAmount
	// moveConfirmCapture: our answer to an inquiry confirms a success a
	// callback brought.
	moveConfirmCapture
	// moveInquire: a callback says a top-up succeeded; money goes into a
	// wallet only on the gateway's own answer to us, so it is asked.
	moveInquire
	// moveCapture: the fare was captured: the wallet is credited, or the
	// hold settled (a ticket, or the money owed back).
	moveCapture
	// moveCaptureOther: money was taken at another amount or currency: it
	// buys nothing, the seats go back, a review is raised, and the amount
	// is refunded when it is in rupees.
	moveCaptureOther
)

// answerFacts are what deciding an answer needs: the payment as locked,
// and how the answer came.
type answerFacts struct {
	state, purpose string
	amount         int64 // ours, paise
	confirmed      bool  // the gateway confirmed the capture to us
	// pulled: we asked the gateway (create answer, status inquiry); not
	// pulled: it told us (a signed callback).
	pulled bool
}

// decision is a move and what comes with it.
type decision struct {
	move move
	// err refuses the answer: nothing changes (a callback's amount against
	// ours, which the gateway's answer to an inquiry then decides; an
	// answer proving nothing).
	err error
	// inquireLater: a callback's success after we had given up on the
	// payment; an inquiry confirms it.
	inquireLater bool
	// refund: moveCaptureOther in rupees, refunded.
	refund bool
	// counts: the answer captures the payment now, whose UPI address is
	// counted against its account once committed.
	counts bool
}

// decide says what answer p means for a payment, f. A pushed success is
// acted on for tickets, to keep them fast, and confirmed by inquiry
// afterwards; a pushed success never credits a wallet by itself. A gateway
// that contradicts a success, or captures another amount, raises a payment
// review instead of being ignored. No I/O.
func decide(f answerFacts, p pspapi.Payment) decision {
	captured := f.state == Success || f.state == Refunded
	if p.Status == pspapi.StatusSuccess {
		mismatch := p.AmountPaise != f.amount || (p.Currency != "" && p.Currency != currency)
		switch {
		case !f.pulled && p.AmountPaise != f.amount:
			// A callback's word against ours: refuse it; HandleWebhook asks
			// the gateway directly, whose answer decides.
			return decision{err: booking.Errorf(booking.EINVALID, "AMOUNT_MISMATCH", "The gateway reports ₹%s for a ₹%s payment.",
				india.Decimal(p.AmountPaise), india.Decimal(f.amount))}
		case !f.pulled && mismatch:
			return decision{err: booking.Errorf(booking.EINVALID, "CURRENCY_MISMATCH", "The gateway reports a payment in %q, not %s.",
				p.Currency, currency)}
		case f.pulled && (p.AmountPaise <= 0 || p.Currency == ""):
			return decision{err: errAmountUnknown}
		case f.pulled && mismatch && captured:
			// Already acted on (a callback carried the right amount): the
			// gateway now says otherwise. A person compares the records.
			return decision{move: moveReviewAmount}
		case f.pulled && mismatch:
			return decision{move: moveCaptureOther, refund: p.Currency == currency, counts: true}
		}
	}
	switch p.Status {
	case pspapi.StatusCreated:
		if f.state == Initiated || f.state == Unknown {
			return decision{move: moveAwaitUser}
		}
	case pspapi.StatusPending:
		if f.state == Initiated || f.state == Unknown || f.state == AwaitingUser {
			return decision{move: moveAtBank}
		}
	case pspapi.StatusFailed:
		switch {
		case captured:
			// We took it as paid (a ticket may be issued, a wallet
			// credited) and the gateway now says it failed: a forged or
			// mistaken success, or a gateway error. Never ignored.
			return decision{move: moveReviewFailed}
		case f.state != Failed:
			return decision{move: moveFail}
		}
	case pspapi.StatusSuccess:
		switch {
		case captured && f.pulled && !f.confirmed:
			return decision{move: moveConfirmCapture}
		case captured:
			// A duplicate callback or a repeated inquiry.
		case f.purpose == PurposeTopUp && !f.pulled:
			return decision{move: moveInquire}
		default:
			return decision{move: moveCapture, counts: true, inquireLater: !f.pulled && resolved(f.state)}
		}
	default:
		return decision{err: errUnknownStatus(p.Status)}
	}
	return decision{move: moveNone}
}

func errUnknownStatus(status string) error { return fmt.Errorf("unknown gateway status %q", status) }
