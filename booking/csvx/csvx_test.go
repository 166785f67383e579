package csvx_test

import (
	"testing"

	"tatkal/booking/csvx"
)

// Cells that a spreadsheet would run are turned into text; the rest pass.
func TestText(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`=HYPERLINK("http://evil.example/?x","Refund")`: `'=HYPERLINK("http://evil.example/?x","Refund")`,
		"=1+1":                      "'=1+1",
		"+1+1":                      "'+1+1",
		"-2+3":                      "'-2+3",
		"@SUM(A1:A2)":               "'@SUM(A1:A2)",
		"\t=1+1":                    "'\t=1+1",
		"\r=1+1":                    "'\r=1+1",
		"＝1+1":                      "'＝1+1",
		"=cmd|' /C calc'!A0":        "'=cmd|' /C calc'!A0",
		"":                          "",
		"pay_1":                     "pay_1",
		"SWP20250604":               "SWP20250604",
		"a=1":                       "a=1",
		" =1+1":                     " =1+1", // a leading space keeps it text in every spreadsheet
		"'=1+1":                     "'=1+1",
		"Refunded after a call":     "Refunded after a call",
		"0197a0c8-0000-7000-8000-1": "0197a0c8-0000-7000-8000-1",
	} {
		if got := csvx.Text(in); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
	}
}
