package i18n

import (
	"strconv"
	"time"
)

// The site's one date format: "Tue 8 Dec 2026", a time "17:00 IST", both
// "17:00 IST, Tue 8 Dec 2026", with the day and month named in the
// passenger's language. t is shown in its own location (the callers give
// IST).

var hiDays = [7]string{"रवि", "सोम", "मंगल", "बुध", "गुरु", "शुक्र", "शनि"}

var hiMonths = [12]string{"जनवरी", "फ़रवरी", "मार्च", "अप्रैल", "मई", "जून", "जुलाई", "अगस्त", "सितंबर", "अक्टूबर", "नवंबर", "दिसंबर"}

// Date is t's day: "Tue 8 Dec 2026" (Hindi: "मंगल 8 दिसंबर 2026").
func Date(lang string, t time.Time) string {
	if Norm(lang) == "hi" {
		return hiDays[t.Weekday()] + " " + strconv.Itoa(t.Day()) + " " + hiMonths[t.Month()-1] + " " + strconv.Itoa(t.Year())
	}
	return t.Format("Mon 2 Jan 2006")
}

// Clock is t's time of day, "17:00 IST"; with seconds "17:00:05 IST".
func Clock(t time.Time, seconds bool) string {
	if seconds {
		return t.Format("15:04:05") + " IST"
	}
	return t.Format("15:04") + " IST"
}

// DateTime is "17:00 IST, Tue 8 Dec 2026".
func DateTime(lang string, t time.Time) string {
	return Clock(t, false) + ", " + Date(lang, t)
}
