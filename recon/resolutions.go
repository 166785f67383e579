package recon

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"tatkal/booking"
	"tatkal/booking/payment"
)

// Resolution is a code a person may close an exception with. A code is a
// claim about the money: where the exception says a customer was charged
// without a ticket, the claim that they are whole is checked against our
// records or the gateway, never taken on a note. None of them writes
// anything off: that takes two people (ProposeWriteOff, ApproveWriteOff).
type Resolution struct {
	Code    string
	Meaning string
	Needs   string // the evidence checked when it is used: one of the ev* below ("" a note)
}

// Evidence a resolution code needs.
const (
	evRefund    = "a refund of the payment recorded and not failed"
	evTicket    = "a ticket for the payment's hold"
	evNoCapture = "the gateway, asked now, holds no capture of the payment"
	evCaptured  = "the gateway, asked now, confirms the capture"
)

var resolutions = map[string]Resolution{
	"REFUNDED":               {"REFUNDED", "the customer's money was refunded", evRefund},
	"BOOKED":                 {"BOOKED", "the customer holds the ticket they paid for", evTicket},
	"NOT_CAPTURED":           {"NOT_CAPTURED", "the gateway never took the money", evNoCapture},
	"GATEWAY_CONFIRMED":      {"GATEWAY_CONFIRMED", "the gateway confirms the capture", evCaptured},
	"GATEWAY_CORRECTED":      {"GATEWAY_CORRECTED", "the gateway sent a corrected file", ""},
	"BANK_CORRECTED":         {"BANK_CORRECTED", "the bank corrected its statement", ""},
	"CORE_CORRECTED":         {"CORE_CORRECTED", "the reservation core corrected its record", ""},
	"CONTRACT_CHANGED":       {"CONTRACT_CHANGED", "the fee follows a contract change", ""},
	"TIMING_DIFFERENCE":      {"TIMING_DIFFERENCE", "the line is in another day's file", ""},
	"MATCHED_MANUALLY":       {"MATCHED_MANUALLY", "matched by hand to a record the rules could not pair", ""},
	"NOT_OUR_LINE":           {"NOT_OUR_LINE", "the line belongs to another merchant; the gateway is told", ""},
	"DUPLICATE_LINE_IGNORED": {"DUPLICATE_LINE_IGNORED", "the repeated line is one transaction", ""},
	"CHARGEBACK_ACCEPTED":    {"CHARGEBACK_ACCEPTED", "the dispute was lost or accepted", ""},
	"CHARGEBACK_WON":         {"CHARGEBACK_WON", "the dispute was won; the money comes back", ""},
	"RETURNED_TO_SENDER":     {"RETURNED_TO_SENDER", "the money was not ours and went back to whoever sent it", ""},
	"BOOKED_TO_LEDGER":       {"BOOKED_TO_LEDGER", "identified (interest, bank charges, a transfer of ours) and booked to its ledger account", ""},
}

// kindCodes are the codes each kind may be closed with.
var kindCodes = map[string][]string{
	// A customer charged without a ticket (or twice): only evidence closes it.
	PaidNotBooked:   {"REFUNDED", "BOOKED", "NOT_CAPTURED"},
	StatusMismatch:  {"REFUNDED", "NOT_CAPTURED", "GATEWAY_CONFIRMED"},
	DuplicateCharge: {"REFUNDED", "NOT_CAPTURED"},

	BookedNotPaid:       {"GATEWAY_CONFIRMED", "MATCHED_MANUALLY"},
	AmountMismatch:      {"REFUNDED", "GATEWAY_CORRECTED", "MATCHED_MANUALLY"},
	FeeMismatch:         {"GATEWAY_CORRECTED", "CONTRACT_CHANGED", "MATCHED_MANUALLY"},
	MissingInSettlement: {"GATEWAY_CONFIRMED", "TIMING_DIFFERENCE", "GATEWAY_CORRECTED"},
	RefundNotSettled:    {"TIMING_DIFFERENCE", "GATEWAY_CORRECTED", "MATCHED_MANUALLY"},
	RefundMismatch:      {"GATEWAY_CORRECTED", "MATCHED_MANUALLY"},
	PayoutMismatch:      {"BANK_CORRECTED", "TIMING_DIFFERENCE", "MATCHED_MANUALLY"},
	CoreMissing:         {"CORE_CORRECTED", "MATCHED_MANUALLY"},
	CoreOrphan:          {"CORE_CORRECTED", "MATCHED_MANUALLY"},
	CoreMismatch:        {"CORE_CORRECTED", "MATCHED_MANUALLY"},
	OrphanLine:          {"NOT_OUR_LINE", "GATEWAY_CORRECTED", "MATCHED_MANUALLY"},
	DuplicateLine:       {"DUPLICATE_LINE_IGNORED", "GATEWAY_CORRECTED"},
	Chargeback:          {"CHARGEBACK_ACCEPTED", "CHARGEBACK_WON"},
	// A bank line no file announces: a payout the rules could not pair, a
	// file still to come, the bank's mistake, or money that is not ours.
	UnexplainedCredit: {"MATCHED_MANUALLY", "TIMING_DIFFERENCE", "BANK_CORRECTED", "RETURNED_TO_SENDER", "BOOKED_TO_LEDGER"},
	UnexplainedDebit:  {"MATCHED_MANUALLY", "TIMING_DIFFERENCE", "BANK_CORRECTED", "BOOKED_TO_LEDGER"},
}

// CodesFor lists the codes an exception of kind may be closed with.
func CodesFor(kind string) []Resolution {
	var out []Resolution
	for _, c := range kindCodes[kind] {
		out = append(out, resolutions[c])
	}
	return out
}

// checkResolution refuses a code the kind does not take, then checks the
// evidence the code needs, with the exception locked in tx. It returns
// what was found, for the exception's history.
func checkResolution(ctx context.Context, tx pgx.Tx, e Exception, code string, pay Payments) (string, error) {
	if !slices.Contains(kindCodes[e.Kind], code) {
		return "", booking.Errorf(booking.EINVALID, "BAD_CODE", "%s is not a way to close a %s exception; choose one of %v.", code, e.Kind, kindCodes[e.Kind])
	}
	r := resolutions[code]
	if r.Needs == "" {
		return "", nil
	}
	if e.PaymentID == nil {
		return "", booking.Errorf(booking.ECONFLICT, "NO_EVIDENCE", "%s needs %s, and this exception names no payment.", code, r.Needs)
	}
	switch r.Needs {
	case evRefund:
		var refund, state string
		err := tx.QueryRow(ctx, `SELECT id::text, state FROM refunds WHERE payment_id = $1 AND state <> 'FAILED' ORDER BY initiated_at LIMIT 1`,
			*e.PaymentID).Scan(&refund, &state)
		if errors.Is(err, pgx.ErrNoRows) {
			return "", booking.Errorf(booking.ECONFLICT, "NO_EVIDENCE", "No refund of payment %s is recorded: refund it first (or ask the gateway), then close.", e.PaymentID)
		}
		if err != nil {
			return "", fmt.Errorf("resolve %s: refunds: %w", e.ID, err)
		}
		return fmt.Sprintf("evidence: refund %s, %s", refund, state), nil
	case evTicket:
		var pnr string
		err := tx.QueryRow(ctx, `SELECT b.pnr FROM bookings b JOIN payments p ON p.hold_id = b.hold_id
			WHERE p.id = $1 AND p.state = 'SUCCESS' AND b.status <> 'CANCELLED'`, *e.PaymentID).Scan(&pnr)
		if errors.Is(err, pgx.ErrNoRows) {
			return "", booking.Errorf(booking.ECONFLICT, "NO_EVIDENCE", "Payment %s has no ticket in our records.", e.PaymentID)
		}
		if err != nil {
			return "", fmt.Errorf("resolve %s: ticket: %w", e.ID, err)
		}
		return "evidence: PNR " + pnr, nil
	}
	if pay == nil {
		return "", booking.Errorf(booking.EUNAVAIL, "NO_GATEWAY", "This process cannot ask the gateway.")
	}
	a, err := pay.AskGateway(ctx, *e.PaymentID)
	if err != nil {
		return "", err
	}
	var ours string
	if err := tx.QueryRow(ctx, `SELECT state FROM payments WHERE id = $1`, *e.PaymentID).Scan(&ours); err != nil {
		return "", fmt.Errorf("resolve %s: payment: %w", e.ID, err)
	}
	switch {
	case r.Needs == evNoCapture && a.Captured():
		return "", booking.Errorf(booking.ECONFLICT, "GATEWAY_DISAGREES", "Asked the gateway: %s. The customer was charged: refund or book, then close.", a)
	case r.Needs == evCaptured && (!a.Captured() || ours != payment.Success):
		return "", booking.Errorf(booking.ECONFLICT, "GATEWAY_DISAGREES", "Asked the gateway: %s; our payment is %s. Not confirmed.", a, ours)
	}
	return "evidence: asked the gateway: " + a.String(), nil
}
