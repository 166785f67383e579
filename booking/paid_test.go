package booking

import "testing"

// TestSettleHold is the table of what a payment's outcome does to its
// hold, in each of the hold's states.
func TestSettleHold(t *testing.T) {
	held := HoldInfo{State: HoldHeld, Chart: ChartOpen}
	charted := HoldInfo{State: HoldHeld, Chart: ChartCharted}
	banned := HoldInfo{State: HoldHeld, Chart: ChartOpen, Banned: true}
	cases := []struct {
		name    string
		h       HoldInfo
		outcome PaymentOutcome
		others  int
		want    holdSettlement
	}{
		{"at the bank: extended", held, PaidAtBank, 0, holdSettlement{act: holdExtend}},
		{"failed: released", held, PaymentFailed, 0,
			holdSettlement{act: holdRelease, state: HoldReleased, reason: "payment failed", kind: "PAYMENT_FAILED", notice: "msg.payfailed"}},
		{"another amount: released", held, PaidOtherAmount, 0,
			holdSettlement{act: holdRelease, state: HoldReleased, reason: "payment amount mismatch"}},
		{"paid: a ticket", held, Paid, 0, holdSettlement{act: holdConfirm}},
		{"paid twice", held, Paid, 1, holdSettlement{refund: RefundDuplicateCharge, kind: "REFUND_STARTED", notice: "msg.refunddup"}},
		{"paid after the chart", charted, Paid, 0, holdSettlement{act: holdRelease, state: HoldCancelled,
			reason: "the payment came when the chart is prepared", refund: RefundHoldCancelled, kind: "REFUND_STARTED", notice: "msg.refundcharted"}},
		{"paid after a ban", banned, Paid, 0, holdSettlement{act: holdRelease, state: HoldCancelled,
			reason: "the payment came when the account is banned", refund: RefundHoldCancelled, kind: "REFUND_STARTED", notice: "msg.refundbanned"}},
		{"paid for a ticket already issued", HoldInfo{State: HoldConfirmed}, Paid, 0,
			holdSettlement{refund: RefundDuplicateCharge, kind: "REFUND_STARTED", notice: "msg.refundpaid"}},
		{"paid after the passenger cancelled", HoldInfo{State: HoldCancelled, StateReason: "cancelled by passenger"}, Paid, 0,
			holdSettlement{refund: RefundHoldCancelled, kind: "REFUND_STARTED", notice: "msg.refundcancelled"}},
		{"paid after a fraud review ended it", HoldInfo{State: HoldCancelled, StateReason: ReviewCancelReason(7)}, Paid, 0,
			holdSettlement{refund: RefundHoldCancelled, kind: "REFUND_STARTED", notice: "msg.refundreview"}},
		{"paid after it lapsed: a retake decides", HoldInfo{State: HoldExpired}, Paid, 0, holdSettlement{act: holdLate}},
		{"paid after it was released", HoldInfo{State: HoldReleased}, Paid, 0, holdSettlement{act: holdLate}},
		{"paid after it lapsed, paid before by another", HoldInfo{State: HoldExpired}, Paid, 1,
			holdSettlement{refund: RefundDuplicateCharge, kind: "REFUND_STARTED", notice: "msg.refunddup"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := settleHold(tc.h, tc.outcome, tc.others); got != tc.want {
				t.Fatalf("settleHold = %+v, want %+v", got, tc.want)
			}
		})
	}
}
