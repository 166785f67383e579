package web

import (
	"bytes"
	"context"
	"encoding/base64"
	"net/http"
	"strings"

	"tatkal/booking"
	"tatkal/booking/eticket"
	"tatkal/booking/i18n"
	"tatkal/views"
)

// ticketRules are the Tatkal rules printed on every e-ticket (DOMAIN.md,
// "Cancellation and refunds", "Window and limits"), in the catalogue.
var ticketRules = []string{"rule.1", "rule.2", "rule.3", "rule.4"}

// ticketPage is the booking's e-ticket; only a booking (confirmed,
// confirming or waitlisted) has one.
func (p *Pages) ticketPage(r *http.Request) (views.TicketPage, []byte, error) {
	page, v, _, err := p.loadBooking(r)
	if err != nil {
		return views.TicketPage{}, nil, err
	}
	if !page.Ticket || v.PNR == "" {
		return views.TicketPage{}, nil, booking.Errorf(booking.ENOTFOUND, "NO_TICKET", "This booking has no ticket (yet): see its status.")
	}
	png, err := eticket.QR(v.PNR)
	if err != nil {
		return views.TicketPage{}, nil, err
	}
	t := views.TicketPage{BookingPage: page, QRDataURI: "data:image/png;base64," + base64.StdEncoding.EncodeToString(png),
		Booked: i18n.DateTime(langOf(r), v.CreatedAt.In(booking.IST))}
	for _, k := range ticketRules {
		t.Rules = append(t.Rules, views.T(r.Context(), k))
	}
	return t, png, nil
}

func (p *Pages) ticket(w http.ResponseWriter, r *http.Request) {
	t, _, err := p.ticketPage(r)
	if err != nil {
		p.fail(w, r, "E-ticket", err)
		return
	}
	p.render(w, r, http.StatusOK, "E-ticket "+t.PNR, views.SiteFrame{Active: "bookings"}, views.SiteTicket(views.SiteFrame{}, t))
}

// ticketPDF is the e-ticket as a PDF: what the page shows, with the QR of
// the PNR, in the passenger's language (Hindi in the Devanagari font
// shipped with the product; see booking/eticket on its shaping).
func (p *Pages) ticketPDF(w http.ResponseWriter, r *http.Request) {
	if p.switchedOff(w, r, "off.pdf") {
		return
	}
	t, _, err := p.ticketPage(r)
	if err != nil {
		p.fail(w, r, "E-ticket", err)
		return
	}
	var buf bytes.Buffer
	if err := eticket.WritePDF(&buf, ticketPDF(r.Context(), t)); err != nil {
		p.fail(w, r, "E-ticket", err)
		return
	}
	w.Header().Set("Content-Type", "application/pdf")
	w.Header().Set("Content-Disposition", `attachment; filename="tatkal-eticket-`+t.PNR+`.pdf"`)
	w.Header().Set("Cache-Control", "no-store")
	w.Write(buf.Bytes()) //nolint:errcheck
}

// ticketPDF describes the page's ticket for the PDF (booking/eticket
// draws it, as it draws the e-ticket message's attachment); amounts lose
// the page's ₹, the PDF writing its own currency word.
func ticketPDF(ctx context.Context, t views.TicketPage) eticket.Ticket {
	rs := func(s string) string { return strings.TrimPrefix(s, "₹") }
	out := eticket.Ticket{Lang: views.Lang(ctx), PNR: t.PNR, Status: views.T(ctx, t.Title), Train: t.Train, TrainName: t.TrainName,
		Class: t.Class, From: t.From, To: t.To, FromName: t.FromName, ToName: t.ToName, Boards: t.Boards, Arrives: t.Arrives,
		Date: t.Date, Departs: t.Departs, Booked: t.Booked, Total: rs(t.Total), TotalWords: t.TotalWords, Rules: t.Rules}
	for _, x := range t.Passengers {
		out.Passengers = append(out.Passengers, eticket.Passenger{Name: x.Name, Age: x.Age, Gender: x.Gender, Berth: x.Berth})
	}
	for _, l := range t.Fare {
		out.Fare = append(out.Fare, eticket.FareLine{Item: l.Item, Amount: rs(l.Amount)})
	}
	return out
}
