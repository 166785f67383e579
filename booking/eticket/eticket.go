// Package eticket draws the e-ticket PDF: the page the passenger downloads
// (booking/web) and the attachment of the e-ticket message (booking/notify)
// are the same document, drawn here from one plain description.
package eticket

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/go-pdf/fpdf"
	qrcode "github.com/skip2/go-qrcode"

	"tatkal/booking"
	"tatkal/booking/i18n"
	"tatkal/booking/india"
	"tatkal/static"
)

// Ticket is what an e-ticket shows, already in words, in Lang: "en" (or
// "") or "hi". Hindi is drawn in Noto Sans Devanagari (shipped in static/,
// OFL), Latin text (names, codes) in the core Helvetica. fpdf does not
// shape Devanagari: conjuncts and vowel signs that reorder (ि, half forms)
// are drawn in code-point order, legible but not as a typesetter would.
type Ticket struct {
	Lang                    string
	PNR, Status             string
	Train, TrainName, Class string
	From, To, Date, Departs string
	FromName, ToName        string // station names ("" : the codes alone)
	Boards, Arrives         string // at the boarding point, at the destination
	Booked                  string
	Passengers              []Passenger
	Fare                    []FareLine
	Total                   string
	TotalWords              string
	Rules                   []string
	Printed                 time.Time // zero: now
}

// Passenger is one row of the passenger table; Berth is "B1 / 12 LB",
// "TQWL/3" or "-".
type Passenger struct{ Name, Age, Gender, Berth string }

// FareLine is one line of the fare breakup, amount in rupees ("1234.00").
type FareLine struct{ Item, Amount string }

// QR is the PNR's QR code as PNG, as the page and the PDF show it.
func QR(pnr string) ([]byte, error) {
	png, err := qrcode.Encode(pnr, qrcode.Medium, 264)
	if err != nil {
		return nil, fmt.Errorf("QR of PNR %s: %w", pnr, err)
	}
	return png, nil
}

// PDF returns the ticket as a PDF.
func PDF(t Ticket) ([]byte, error) {
	var buf bytes.Buffer
	if err := WritePDF(&buf, t); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WritePDF writes the ticket as a PDF to out: the PNR with its QR code, the
// journey with station names, boarding point and arrival, passengers with
// coach and berth, the fare breakup with the total in words, and the
// Tatkal rules that apply, in the ticket's language.
func WritePDF(out io.Writer, t Ticket) error {
	qr, err := QR(t.PNR)
	if err != nil {
		return err
	}
	printed := t.Printed
	if printed.IsZero() {
		printed = time.Now()
	}
	lang := i18n.Norm(t.Lang)
	L := func(key string) string { return i18n.Text(lang, key) }
	pdf := fpdf.New("P", "mm", "A4", "")
	pdf.SetTitle("E-ticket PNR "+t.PNR, true)
	pdf.SetCreator("tatkal", false)
	w := &writer{pdf: pdf, tr: pdf.UnicodeTranslatorFromDescriptor("")}
	if lang == "hi" {
		pdf.AddUTF8FontFromBytes("deva", "", static.DevanagariFont())
		w.deva = true
	}
	pdf.AddPage()
	w.line(L("eticket.pdf.title"), 18, "B", 10)
	w.line(L("pnr")+" "+t.PNR, 14, "B", 8)
	w.line(L("status")+": "+t.Status, 11, "", 6)
	pdf.RegisterImageOptionsReader("qr", fpdf.ImageOptions{ImageType: "PNG"}, bytes.NewReader(qr))
	pdf.ImageOptions("qr", 160, 10, 38, 38, false, fpdf.ImageOptions{ImageType: "PNG"}, 0, "")
	pdf.SetY(52)
	row := func(k, v string) {
		w.put(k+": ", 10, "B", 6)
		w.put(v, 10, "", 6)
		pdf.Ln(6)
	}
	station := func(name, code string) string {
		if name == "" {
			return code
		}
		return name + " (" + code + ")"
	}
	row(L("train"), t.Train+" "+t.TrainName)
	row(L("journey"), station(t.FromName, t.From)+" - "+station(t.ToName, t.To)+", "+t.Date)
	if t.Boards != "" {
		row(L("boards"), station(t.FromName, t.From)+", "+t.Boards)
	}
	if t.Arrives != "" {
		row(L("arrival"), station(t.ToName, t.To)+", "+t.Arrives)
	}
	if t.Departs != "" {
		row(L("departs"), t.Departs)
	}
	row(L("class"), t.Class+" / "+L("tatkal")+" (TQ)")
	row(L("booked"), t.Booked)
	pdf.Ln(4)
	w.line(L("passengers"), 12, "B", 8)
	for i, x := range t.Passengers {
		w.put(fmt.Sprintf("%d. ", i+1), 10, "", 7)
		w.put(x.Name, 10, "B", 7)
		w.put(", "+x.Age+" "+x.Gender+"    "+L("coachberth")+": "+berthText(x.Berth), 10, "", 7)
		pdf.Ln(7)
	}
	pdf.Ln(4)
	w.line(L("farebreakup"), 12, "B", 8)
	rs := "Rs. "
	if lang == "hi" {
		rs = "रु "
	}
	for _, l := range t.Fare {
		y := pdf.GetY()
		w.put(L("fare."+l.Item), 10, "", 6)
		pdf.SetXY(110, y)
		w.put(rs+l.Amount, 10, "", 6)
		pdf.Ln(6)
	}
	y := pdf.GetY()
	w.put(L("total"), 10, "B", 7)
	pdf.SetXY(110, y)
	w.put(rs+t.Total, 10, "B", 7)
	pdf.Ln(7)
	if t.TotalWords != "" {
		w.put(t.TotalWords, 9, "", 5)
		pdf.Ln(5)
	}
	pdf.Ln(4)
	w.line(L("rules.title"), 12, "B", 8)
	for _, rule := range t.Rules {
		w.put("- "+rule, 9, "", 5)
		pdf.Ln(6)
	}
	pdf.Ln(2)
	w.put(L("pdf.printed")+" "+i18n.DateTime(lang, printed.In(booking.IST))+". "+L("pdf.carry"), 8, "", 4)
	return pdf.Output(out)
}

// writer draws text in runs: Devanagari (with the spaces, digits and
// punctuation around it) in the Devanagari font, Latin in Helvetica
// through cp1252, wrapping at the right margin.
type writer struct {
	pdf  *fpdf.Fpdf
	tr   func(string) string
	deva bool
}

func (w *writer) line(s string, size float64, style string, h float64) {
	w.put(s, size, style, h)
	w.pdf.Ln(h)
}

func (w *writer) put(s string, size float64, style string, h float64) {
	rs := []run{{text: s}}
	if w.deva {
		rs = runs(s)
	}
	// Word by word in cells: fpdf's Write wraps UTF-8 text by bytes, so a
	// Devanagari line broke every few letters.
	left, _, right, _ := w.pdf.GetMargins()
	pageW, _ := w.pdf.GetPageSize()
	for _, r := range rs {
		text := r.text
		if r.deva {
			w.pdf.SetFont("deva", "", size) // one weight shipped: bold is not faked
		} else {
			w.pdf.SetFont("Helvetica", style, size)
			text = w.tr(text)
		}
		for _, word := range strings.SplitAfter(text, " ") {
			if word == "" {
				continue
			}
			wd := w.pdf.GetStringWidth(word)
			if x := w.pdf.GetX(); x+wd > pageW-right && x > left {
				w.pdf.Ln(h)
			}
			w.pdf.CellFormat(wd, h, word, "", 0, "L", false, 0, "")
		}
	}
}

type run struct {
	text string
	deva bool
}

// runs splits s where it changes between Devanagari and Latin letters;
// neutral characters (spaces, digits, punctuation) stay with the run they
// are in.
func runs(s string) []run {
	var out []run
	var cur []rune
	deva, started := false, false
	for _, c := range s {
		isDeva := (c >= 0x0900 && c <= 0x097F) || c == 0x20B9 || c == 0x200C || c == 0x200D
		isLatin := (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c > 0x7F && !isDeva
		switch {
		case !started && (isDeva || isLatin):
			deva, started = isDeva, true
		case started && (isDeva && !deva || isLatin && deva):
			out = append(out, run{string(cur), deva})
			cur, deva = nil, isDeva
		}
		cur = append(cur, c)
	}
	if len(cur) > 0 {
		out = append(out, run{string(cur), deva})
	}
	return out
}

// berthText keeps the berth column ASCII (the page's dash is not in cp1252's
// core-font subset everywhere).
func berthText(b string) string {
	if b == "—" {
		return "-"
	}
	return b
}

// FromView describes the ticket of hold v (whose booking has a PNR) on
// shard sh, with status and rules already in words.
func FromView(v booking.HoldView, sh *booking.Shard, status string, rules []string) Ticket {
	t := Ticket{PNR: v.PNR, Status: status, Train: v.Train, Class: v.Class, From: v.From, To: v.To,
		Date: v.Date.Format("Mon 2 Jan 2006"), Booked: v.CreatedAt.In(booking.IST).Format("15:04 IST, 2 Jan 2006"),
		Total: india.Decimal(v.Fare.TotalPaise), Rules: rules}
	if sh != nil {
		t.TrainName = sh.TrainName
		t.Departs = sh.DepartsAt.In(booking.IST).Format("15:04, Mon 2 Jan") + " (from " + sh.Stops[0].Code + ")"
	}
	for i, x := range v.Passengers {
		row := Passenger{Name: x.Name, Age: strconv.Itoa(x.Age), Gender: x.Gender, Berth: "-"}
		if i < len(v.Berths) && v.BookingStat == booking.BookingConfirmed {
			b := v.Berths[i]
			row.Berth = b.Coach + " / " + strconv.Itoa(b.BerthNo) + " " + b.Type
		} else if v.WaitlistNo > 0 {
			row.Berth = "TQWL/" + strconv.Itoa(v.WaitlistNo)
		}
		t.Passengers = append(t.Passengers, row)
	}
	for _, l := range v.Fare.Breakup {
		t.Fare = append(t.Fare, FareLine{Item: l.Item, Amount: india.Decimal(l.Paise)})
	}
	return t
}
