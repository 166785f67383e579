// Package eticket draws the e-ticket PDF: the page the passenger downloads
// (booking/web) and the attachment of the e-ticket message (booking/notify)
// are the same document, drawn here from one plain description.
package eticket

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/go-pdf/fpdf"
	qrcode "github.com/skip2/go-qrcode"

	"tatkal/booking"
	"tatkal/booking/india"
)

// Ticket is what an e-ticket shows, already in words (English: the PDF's
// core fonts have no Devanagari, and amounts are "Rs." for the same reason).
type Ticket struct {
	PNR, Status             string
	Train, TrainName, Class string
	From, To, Date, Departs string
	Booked                  string
	Passengers              []Passenger
	Fare                    []FareLine
	Total                   string
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
// journey, passengers with coach and berth, the fare breakup and the Tatkal
// rules that apply.
func WritePDF(out io.Writer, t Ticket) error {
	qr, err := QR(t.PNR)
	if err != nil {
		return err
	}
	printed := t.Printed
	if printed.IsZero() {
		printed = time.Now()
	}
	pdf := fpdf.New("P", "mm", "A4", "")
	pdf.SetTitle("E-ticket PNR "+t.PNR, false)
	pdf.SetCreator("tatkal", false)
	tr := pdf.UnicodeTranslatorFromDescriptor("") // UTF-8 to the core fonts' cp1252
	pdf.AddPage()
	pdf.SetFont("Helvetica", "B", 18)
	pdf.Cell(120, 10, "Tatkal e-ticket")
	pdf.Ln(11)
	pdf.SetFont("Helvetica", "B", 14)
	pdf.Cell(120, 8, "PNR "+t.PNR)
	pdf.Ln(8)
	pdf.SetFont("Helvetica", "", 11)
	pdf.Cell(120, 6, tr("Status: "+t.Status))
	pdf.RegisterImageOptionsReader("qr", fpdf.ImageOptions{ImageType: "PNG"}, bytes.NewReader(qr))
	pdf.ImageOptions("qr", 160, 10, 38, 38, false, fpdf.ImageOptions{ImageType: "PNG"}, 0, "")
	pdf.SetY(52)
	row := func(k, v string) {
		pdf.SetFont("Helvetica", "B", 10)
		pdf.CellFormat(40, 6, tr(k), "", 0, "L", false, 0, "")
		pdf.SetFont("Helvetica", "", 10)
		pdf.CellFormat(150, 6, tr(v), "", 1, "L", false, 0, "")
	}
	row("Train", t.Train+" "+t.TrainName)
	row("Journey", t.From+" to "+t.To+", "+t.Date)
	if t.Departs != "" {
		row("Departs", t.Departs)
	}
	row("Class / quota", t.Class+" / Tatkal (TQ)")
	row("Booked", t.Booked)
	pdf.Ln(4)
	pdf.SetFont("Helvetica", "B", 12)
	pdf.Cell(0, 8, "Passengers")
	pdf.Ln(8)
	pdf.SetFont("Helvetica", "B", 10)
	pdf.CellFormat(10, 7, "#", "1", 0, "C", false, 0, "")
	pdf.CellFormat(80, 7, "Name", "1", 0, "L", false, 0, "")
	pdf.CellFormat(25, 7, "Age / sex", "1", 0, "L", false, 0, "")
	pdf.CellFormat(60, 7, "Coach / berth", "1", 1, "L", false, 0, "")
	pdf.SetFont("Helvetica", "", 10)
	for i, x := range t.Passengers {
		pdf.CellFormat(10, 7, fmt.Sprint(i+1), "1", 0, "C", false, 0, "")
		pdf.CellFormat(80, 7, tr(x.Name), "1", 0, "L", false, 0, "")
		pdf.CellFormat(25, 7, x.Age+" "+x.Gender, "1", 0, "L", false, 0, "")
		pdf.CellFormat(60, 7, tr(berthText(x.Berth)), "1", 1, "L", false, 0, "")
	}
	pdf.Ln(4)
	pdf.SetFont("Helvetica", "B", 12)
	pdf.Cell(0, 8, "Fare")
	pdf.Ln(8)
	pdf.SetFont("Helvetica", "", 10)
	for _, l := range t.Fare {
		pdf.CellFormat(90, 6, tr(l.Item), "B", 0, "L", false, 0, "")
		pdf.CellFormat(40, 6, "Rs. "+l.Amount, "B", 1, "R", false, 0, "")
	}
	pdf.SetFont("Helvetica", "B", 10)
	pdf.CellFormat(90, 7, "Total", "", 0, "L", false, 0, "")
	pdf.CellFormat(40, 7, "Rs. "+t.Total, "", 1, "R", false, 0, "")
	pdf.Ln(4)
	pdf.SetFont("Helvetica", "B", 12)
	pdf.Cell(0, 8, "Tatkal rules")
	pdf.Ln(8)
	pdf.SetFont("Helvetica", "", 9)
	for _, rule := range t.Rules {
		pdf.MultiCell(0, 5, tr("- "+rule), "", "L", false)
	}
	pdf.Ln(2)
	pdf.SetFont("Helvetica", "I", 8)
	pdf.MultiCell(0, 4, "Printed "+printed.In(booking.IST).Format("15:04 IST, 2 Jan 2006")+
		". Carry the photo ID named on this ticket. Scan the QR code to check the PNR.", "", "L", false)
	return pdf.Output(out)
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
