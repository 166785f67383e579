package recon

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/xuri/excelize/v2"

	"tatkal/booking/india"
)

// numFmt is the custom number format of a cell's style.
func numFmt(t *testing.T, f *excelize.File, sheet, cell string) string {
	t.Helper()
	id, err := f.GetCellStyle(sheet, cell)
	if err != nil {
		t.Fatal(err)
	}
	st, err := f.GetStyle(id)
	if err != nil {
		t.Fatal(err)
	}
	if st.CustomNumFmt == nil {
		return ""
	}
	return *st.CustomNumFmt
}

// showMoney shows v as a spreadsheet shows it in a positive;negative
// format of ours (LibreOffice shows the same, checked by hand with
// soffice --convert-to csv): the second section for a negative, which
// then shows no sign of its own; digits fill the placeholders from the
// right, the leftmost taking any left; quoted text and \-escaped
// characters as they are.
func showMoney(format string, v float64) string {
	pos, neg, _ := strings.Cut(format, ";")
	sec := pos
	if v < 0 {
		sec = neg
	}
	cents := int64(math.Round(math.Abs(v) * 100))
	digits := []byte(strconv.FormatInt(cents/100, 10))
	intPart, decPart, _ := strings.Cut(sec, ".")
	var tokens []string // "P" a placeholder, "T…" text
	for i := 0; i < len(intPart); i++ {
		switch c := intPart[i]; c {
		case '"':
			j := strings.IndexByte(intPart[i+1:], '"')
			tokens = append(tokens, "T"+intPart[i+1:i+1+j])
			i += j + 1
		case '\\':
			tokens = append(tokens, "T"+intPart[i+1:i+2])
			i++
		case '#', '0':
			tokens = append(tokens, "P"+string(c))
		default:
			tokens = append(tokens, "T"+string(c))
		}
	}
	places := strings.Count(strings.Join(tokens, "|"), "P")
	var out []byte
	seen := 0
	for i := len(tokens) - 1; i >= 0; i-- {
		tok := tokens[i]
		switch {
		case tok[0] == 'T':
			out = append([]byte(tok[1:]), out...)
		case seen+1 == places:
			seen++
			if len(digits) == 0 && tok == "P0" {
				digits = []byte("0")
			}
			out = append(append([]byte(nil), digits...), out...)
			digits = nil
		case len(digits) > 0:
			seen++
			out = append([]byte{digits[len(digits)-1]}, out...)
			digits = digits[:len(digits)-1]
		default:
			seen++
			if tok == "P0" {
				out = append([]byte{'0'}, out...)
			}
		}
	}
	s := string(out)
	if strings.HasPrefix(decPart, "00") {
		s += "." + strconv.FormatInt(100+cents%100, 10)[1:]
	}
	return s
}

// The workbook's money formats show every amount as the console does.
func TestMoneyFormatsAreIndian(t *testing.T) {
	t.Parallel()
	for _, p := range []int64{0, 5, 99, 99999, 100000, 9999999, 10000000, 123456789, 999999999, 1000000000, 9999999999,
		1000000000000, 123456789012345} {
		for _, paise := range []int64{p, -p} {
			if got, want := showMoney(MoneyFormat(paise), rupees(paise)), india.Rupees(paise); got != want {
				t.Errorf("%d paise shown as %q in %q, the console shows %q", paise, got, MoneyFormat(paise), want)
			}
		}
	}
}
