// Package india holds the one Indian Standard Time and the one rupee
// formatter that the domain, the simulators, the console and the pages
// share. It imports nothing of ours, so any package may use it.
package india

import (
	"strconv"
	"time"
)

// IST is Indian Standard Time (UTC+05:30, no daylight saving); every
// window, departure and business day is in it.
var IST = time.FixedZone("IST", 5*3600+1800)

// Decimal writes paise as signed rupees with two decimals, as files and
// the API carry them: -1234 → "-12.34".
func Decimal(paise int64) string {
	sign := ""
	if paise < 0 {
		sign, paise = "-", -paise
	}
	return sign + strconv.FormatInt(paise/100, 10) + "." + twoDigits(paise%100)
}

// Rupees writes paise as a person reads rupees, with Indian digit
// grouping: 123456789 → "₹12,34,567.89", -5000 → "-₹50.00".
func Rupees(paise int64) string {
	sign := ""
	if paise < 0 {
		sign, paise = "-", -paise
	}
	whole := strconv.FormatInt(paise/100, 10)
	if n := len(whole); n > 3 {
		head, tail := whole[:n-3], whole[n-3:]
		var b []byte
		for i, c := range []byte(head) {
			if i > 0 && (len(head)-i)%2 == 0 {
				b = append(b, ',')
			}
			b = append(b, c)
		}
		whole = string(b) + "," + tail
	}
	return sign + "₹" + whole + "." + twoDigits(paise%100)
}

func twoDigits(n int64) string {
	if n < 10 {
		return "0" + strconv.FormatInt(n, 10)
	}
	return strconv.FormatInt(n, 10)
}
