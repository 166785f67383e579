package india

import (
	"testing"
	"time"
)

func TestFormats(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		paise           int64
		decimal, rupees string
	}{
		{0, "0.00", "₹0.00"},
		{5, "0.05", "₹0.05"},
		{-1234, "-12.34", "-₹12.34"},
		{99999, "999.99", "₹999.99"},
		{100000, "1000.00", "₹1,000.00"},
		{123456789, "1234567.89", "₹12,34,567.89"},
		{-1000000000, "-10000000.00", "-₹1,00,00,000.00"},
	} {
		if got := Decimal(c.paise); got != c.decimal {
			t.Errorf("Decimal(%d) = %q, want %q", c.paise, got, c.decimal)
		}
		if got := Rupees(c.paise); got != c.rupees {
			t.Errorf("Rupees(%d) = %q, want %q", c.paise, got, c.rupees)
		}
	}
	if _, off := time.Date(2026, 1, 1, 0, 0, 0, 0, IST).Zone(); off != 19800 {
		t.Errorf("IST offset %d s", off)
	}
}
