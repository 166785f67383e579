package secrets

import (
	"slices"
	"strings"
	"testing"
)

func TestParseList(t *testing.T) {
	t.Parallel()
	a, b, c := strings.Repeat("a", 32), strings.Repeat("b", 32), strings.Repeat("c", 32)
	p, err := ParseList("X", " swiftpay="+a+", swiftpay="+b+",bharatpg="+c+",")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p["swiftpay"], []string{a, b}) || !slices.Equal(p["bharatpg"], []string{c}) || !slices.Equal(p.IDs(), []string{"bharatpg", "swiftpay"}) {
		t.Fatalf("parsed %v", p)
	}
	if again, err := ParseList("X", p.String()); err != nil || again.String() != p.String() {
		t.Fatalf("round trip: %v %v", again, err)
	}
	for v, want := range map[string]string{
		"swiftpay":                       "want gateway=secret",
		"=" + a:                          "want gateway=secret",
		"swiftpay=":                      "X (swiftpay) is not set",
		"swiftpay=whsec_dev_swiftpay":    "development value",
		"swiftpay=short":                 "guessable",
		"swiftpay=" + a + ",bharatpg=sk": "guessable",
	} {
		if _, err := ParseList("X", v); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "X") {
			t.Errorf("%q: %v, want an error naming X saying %q", v, err, want)
		}
	}
	if p, err := ParseList("X", ""); err != nil || len(p) != 0 {
		t.Fatalf("empty: %v %v", p, err)
	}
}
