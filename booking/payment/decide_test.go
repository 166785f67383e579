package payment

import (
	"errors"
	"testing"

	"tatkal/booking"
	"tatkal/booking/payment/pspapi"
)

// TestDecideAnswer is the table of what each gateway answer means for a
// payment in each state: the callback's path and the inquiry's decide by
// it, and so does the confirmation group's set-based fast path.
func TestDecideAnswer(t *testing.T) {
	const fare = 150000
	ok := func(status string) pspapi.Payment {
		return pspapi.Payment{Status: status, AmountPaise: fare, Currency: currency}
	}
	other := pspapi.Payment{Status: pspapi.StatusSuccess, AmountPaise: fare + 100, Currency: currency}
	dollars := pspapi.Payment{Status: pspapi.StatusSuccess, AmountPaise: fare, Currency: "USD"}
	noCurrency := pspapi.Payment{Status: pspapi.StatusSuccess, AmountPaise: fare}
	hold := func(state string, pulled bool) answerFacts {
		return answerFacts{state: state, purpose: PurposeHold, amount: fare, pulled: pulled}
	}
	topUp := func(state string, pulled bool) answerFacts {
		return answerFacts{state: state, purpose: PurposeTopUp, amount: fare, pulled: pulled}
	}
	confirmed := hold(Success, true)
	confirmed.confirmed = true
	cases := []struct {
		name   string
		facts  answerFacts
		answer pspapi.Payment
		want   decision
		reason string // a refusal's reason, or errAmountUnknown's
	}{
		{"created, first word", hold(Initiated, true), ok(pspapi.StatusCreated), decision{move: moveAwaitUser}, ""},
		{"created, behind the bank", hold(PendingAtBank, false), ok(pspapi.StatusCreated), decision{move: moveNone}, ""},
		{"pending: the seats extended", hold(AwaitingUser, false), ok(pspapi.StatusPending), decision{move: moveAtBank}, ""},
		{"pending after success", hold(Success, false), ok(pspapi.StatusPending), decision{move: moveNone}, ""},
		{"failed", hold(PendingAtBank, false), ok(pspapi.StatusFailed), decision{move: moveFail}, ""},
		{"failed twice", hold(Failed, true), ok(pspapi.StatusFailed), decision{move: moveNone}, ""},
		{"failed after success: a person decides", hold(Success, true), ok(pspapi.StatusFailed), decision{move: moveReviewFailed}, ""},
		{"failed after a refund", hold(Refunded, false), ok(pspapi.StatusFailed), decision{move: moveReviewFailed}, ""},
		{"success pushed", hold(AwaitingUser, false), ok(pspapi.StatusSuccess), decision{move: moveCapture, counts: true}, ""},
		{"success pulled", hold(Unknown, true), ok(pspapi.StatusSuccess), decision{move: moveCapture, counts: true}, ""},
		{"success pushed after we gave up: confirmed by inquiry", hold(Failed, false), ok(pspapi.StatusSuccess),
			decision{move: moveCapture, counts: true, inquireLater: true}, ""},
		{"success pulled after we gave up", hold(Failed, true), ok(pspapi.StatusSuccess), decision{move: moveCapture, counts: true}, ""},
		{"success again, pushed", hold(Success, false), ok(pspapi.StatusSuccess), decision{move: moveNone}, ""},
		{"success confirmed by inquiry", hold(Success, true), ok(pspapi.StatusSuccess), decision{move: moveConfirmCapture}, ""},
		{"success inquired again", confirmed, ok(pspapi.StatusSuccess), decision{move: moveNone}, ""},
		{"top-up success pushed: the gateway is asked", topUp(AwaitingUser, false), ok(pspapi.StatusSuccess), decision{move: moveInquire}, ""},
		{"top-up success pulled: credited", topUp(AwaitingUser, true), ok(pspapi.StatusSuccess), decision{move: moveCapture, counts: true}, ""},
		{"callback with another amount: refused", hold(AwaitingUser, false), other, decision{}, "AMOUNT_MISMATCH"},
		{"callback in dollars: refused", hold(AwaitingUser, false), dollars, decision{}, "CURRENCY_MISMATCH"},
		{"callback without a currency", hold(AwaitingUser, false), noCurrency, decision{move: moveCapture, counts: true}, ""},
		{"inquiry without a currency proves nothing", hold(AwaitingUser, true), noCurrency, decision{}, "unknown"},
		{"inquiry: captured at another amount", hold(AwaitingUser, true), other, decision{move: moveCaptureOther, refund: true, counts: true}, ""},
		{"inquiry: captured in dollars, not refunded", hold(AwaitingUser, true), dollars, decision{move: moveCaptureOther, counts: true}, ""},
		{"inquiry: another amount after success", hold(Success, true), other, decision{move: moveReviewAmount}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := decide(tc.facts, tc.answer)
			switch {
			case tc.reason == "unknown":
				if !errors.Is(got.err, errAmountUnknown) {
					t.Fatalf("err %v, want errAmountUnknown", got.err)
				}
				return
			case tc.reason != "":
				var be *booking.Error
				if !errors.As(got.err, &be) || be.Reason != tc.reason {
					t.Fatalf("err %v, want a refusal %s", got.err, tc.reason)
				}
				return
			case got.err != nil:
				t.Fatalf("err %v", got.err)
			}
			if got != tc.want {
				t.Fatalf("decide = %+v, want %+v", got, tc.want)
			}
		})
	}
	if d := decide(hold(AwaitingUser, true), pspapi.Payment{Status: "SETTLED", AmountPaise: fare, Currency: currency}); d.err == nil {
		t.Fatalf("an unknown status decided %+v", d)
	}
}
