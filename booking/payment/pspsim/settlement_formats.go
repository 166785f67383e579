package pspsim

import (
	"strconv"
	"time"
)

// HeaderSettlementFormat names the format of a settlement file download,
// so a reader can tell a gateway's revision of its layout.
const HeaderSettlementFormat = "X-Settlement-Format"

// Settlement formats. Each gateway writes its own, as real ones do:
//
// swiftpay-v1: signed amounts in rupees with two decimals, dates as
// DD/MM/YYYY and times as DD/MM/YYYY HH:MM:SS in IST; types CAPTURE,
// REFUND, CHARGEBACK. Gross is negative for refunds and chargebacks; Net =
// Gross - MDR - GST.
//
// bharatpg-v1: unsigned amounts in paise with the direction in entry_type
// (SALE, RFND, CHBK) and a signed settled_paise; settlement_date as
// YYYYMMDD, txn_timestamp RFC 3339 in UTC; utr is the payout reference.
const (
	FormatSwiftpay = "swiftpay-v1"
	FormatBharatpg = "bharatpg-v1"
)

// SwiftpayColumns and BharatpgColumns are the header rows.
var (
	SwiftpayColumns = []string{"Txn Type", "SwiftPay Txn ID", "Merchant Order ID", "Refund ID", "Merchant Refund ID",
		"Payment Mode", "Gross Amount (INR)", "MDR (INR)", "GST on MDR (INR)", "Net Amount (INR)", "Txn Date",
		"Settlement Date", "Payout Ref"}
	BharatpgColumns = []string{"settlement_date", "utr", "entry_type", "pg_txn_id", "merchant_txn_ref",
		"merchant_refund_ref", "pg_refund_id", "pay_method", "txn_amount_paise", "commission_paise", "igst_paise",
		"settled_paise", "txn_timestamp"}
)

type settlementFormat struct {
	name   string
	header []string
	row    func(l settlementLine, settleOn time.Time, payout string) []string
}

// formatOf is the gateway's file format: swiftpay writes its own, every
// other gateway the bharatpg layout.
func formatOf(gw string) settlementFormat {
	if gw == "swiftpay" {
		return settlementFormat{name: FormatSwiftpay, header: SwiftpayColumns, row: swiftpayRow}
	}
	return settlementFormat{name: FormatBharatpg, header: BharatpgColumns, row: bharatpgRow}
}

func swiftpayRow(l settlementLine, settleOn time.Time, payout string) []string {
	gross := l.AmountPaise
	if l.Type != lineCapture {
		gross = -gross
	}
	return []string{
		l.Type, l.PSPRef, l.MerchantRef, l.RefundRef, l.RefundMerchantRef, l.Method,
		decimalRupees(gross), decimalRupees(l.FeePaise), decimalRupees(l.GSTPaise), decimalRupees(l.net()),
		l.EventTime.In(ist()).Format("02/01/2006 15:04:05"), settleOn.Format("02/01/2006"), payout,
	}
}

var bharatpgTypes = map[string]string{lineCapture: "SALE", lineRefund: "RFND", lineChargeback: "CHBK"}

func bharatpgRow(l settlementLine, settleOn time.Time, payout string) []string {
	n := func(v int64) string { return strconv.FormatInt(v, 10) }
	return []string{
		settleOn.Format("20060102"), payout, bharatpgTypes[l.Type], l.PSPRef, l.MerchantRef, l.RefundMerchantRef,
		l.RefundRef, l.Method, n(l.AmountPaise), n(l.FeePaise), n(l.GSTPaise), n(l.net()),
		l.EventTime.UTC().Format(time.RFC3339),
	}
}
