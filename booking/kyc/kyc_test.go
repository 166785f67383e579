package kyc

import "testing"

// TestVerhoeff: the check digit of the textbook example, and a number is
// valid only with its own check digit.
func TestVerhoeff(t *testing.T) {
	if got := CheckDigit("236"); got != '3' {
		t.Fatalf("CheckDigit(236) = %c, want 3", got)
	}
	d := "23412341234"
	good := d + string(CheckDigit(d))
	if !ValidNumber(good) {
		t.Fatalf("%s should be valid", good)
	}
	for c := byte('0'); c <= '9'; c++ {
		if n := d + string(c); c != CheckDigit(d) && ValidNumber(n) {
			t.Errorf("%s valid with a wrong check digit", n)
		}
	}
	for _, bad := range []string{"", "12345678901", "1" + good[1:], "2341234123x4", good + "1"} {
		if ValidNumber(bad) {
			t.Errorf("%q should be invalid", bad)
		}
	}
}
