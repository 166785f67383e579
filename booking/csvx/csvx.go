// Package csvx holds what every CSV tatkal writes for people shares: text
// that a spreadsheet opens as text, never as a formula it runs.
package csvx

import "strings"

// formulaStarts are the first characters that make Excel, LibreOffice or
// Google Sheets read a cell as a formula (or DDE) rather than text: "=",
// "+", "-", "@", a tab or a carriage return (OWASP's list), and the
// full-width signs some locales map to them.
const formulaStarts = "=+-@\t\r＝＋－＠"

// Text returns s as a text cell: one that starts like a formula gets an
// apostrophe in front, which spreadsheets read as "this is text" and show
// without the apostrophe. Every cell whose text can come from outside (a
// settlement file's references, a person's note) goes through it.
//
// Numbers we format ourselves ("-12.50", "2025-06-04") do not: a negative
// amount must stay a number a spreadsheet can add up. Text never passes as
// a number: the writer decides by column, not by what the value looks like.
func Text(s string) string {
	if s == "" {
		return s
	}
	for _, r := range formulaStarts {
		if strings.HasPrefix(s, string(r)) {
			return "'" + s
		}
	}
	return s
}

// BOM starts every CSV tatkal writes for people: without it Excel reads
// UTF-8 as the machine's legacy code page and shows "₹" and every
// non-English name as mojibake. Other readers skip it.
const BOM = "\ufeff"
