package i18n

import (
	"testing"
	"time"
)

func TestRupeesInWords(t *testing.T) {
	for _, c := range []struct {
		lang  string
		paise int64
		want  string
	}{
		{"en", 305200, "Rupees three thousand fifty-two only"},
		{"en", 12345678905, "Rupees twelve crore thirty-four lakh fifty-six thousand seven hundred eighty-nine and five paise only"},
		{"hi", 305200, "तीन हज़ार बावन रुपये मात्र"},
		{"hi", 10000, "एक सौ रुपये मात्र"},
		{"en", 0, "Rupees zero only"},
	} {
		if got := RupeesInWords(c.lang, c.paise); got != c.want {
			t.Errorf("%s %d: %q, want %q", c.lang, c.paise, got, c.want)
		}
	}
	if len(hiUpTo99) != 100 {
		t.Fatalf("Hindi numbers below 100: %d words", len(hiUpTo99))
	}
}

func TestDates(t *testing.T) {
	d := time.Date(2026, 12, 8, 17, 0, 0, 0, time.UTC)
	if got := DateTime("en", d); got != "17:00 IST, Tue 8 Dec 2026" {
		t.Errorf("en: %q", got)
	}
	if got := DateTime("hi", d); got != "17:00 IST, मंगल 8 दिसंबर 2026" {
		t.Errorf("hi: %q", got)
	}
}
