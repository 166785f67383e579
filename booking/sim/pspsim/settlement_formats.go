package pspsim

import (
	"strconv"
	"time"

	"tatkal/booking/india"
	"tatkal/booking/payment/pspapi"
)

// HeaderSettlementFormat names the format of a settlement file download,
// so a reader can tell a gateway's revision of its layout.
const HeaderSettlementFormat = "X-Settlement-Format"

// Settlement formats, each with its header row in pspapi (the layouts are
// described there).
const (
	FormatSwiftpay = "swiftpay-v1"
	FormatBharatpg = "bharatpg-v1"
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
		return settlementFormat{name: FormatSwiftpay, header: pspapi.SwiftpayColumns, row: swiftpayRow}
	}
	return settlementFormat{name: FormatBharatpg, header: pspapi.BharatpgColumns, row: bharatpgRow}
}

func swiftpayRow(l settlementLine, settleOn time.Time, payout string) []string {
	gross := l.AmountPaise
	if l.Type != lineCapture {
		gross = -gross
	}
	return []string{
		l.Type, l.PSPRef, l.MerchantRef, l.RefundRef, l.RefundMerchantRef, l.Method,
		india.Decimal(gross), india.Decimal(l.FeePaise), india.Decimal(l.GSTPaise), india.Decimal(l.net()),
		l.EventTime.In(india.IST).Format("02/01/2006 15:04:05"), settleOn.Format("02/01/2006"), payout,
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
