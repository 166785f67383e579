package views

import (
	"context"
	"strconv"

	"github.com/a-h/templ"
)

// SiteFrame is what every passenger page's frame needs: who is signed in,
// the form token, the language switch's return path and a notice.
type SiteFrame struct {
	Login    string // "" when signed out
	Verified bool
	CSRF     string
	Path     string // this page, for the language switch to come back to
	Active   string // the navigation entry of this page
	Notice   string
	Error    string
	// Banners are the operators' status banners shown now (booking/banner).
	Banners []SiteBanner
}

// SiteBanner is one status banner as the passenger sees it.
type SiteBanner struct {
	ID       int64
	Severity string // info, warning, critical
	Text     string
}

// SignInPage is the sign-in form.
type SignInPage struct {
	Login string
	Next  string
	// Challenge, when set, is the proof of work that opens the account's
	// lock for one sign-in (auth.Guard.Challenge), of Bits leading zero
	// bits, solved by Worker in the page; RetrySecs is the lock's wait.
	Challenge string
	Bits      int
	Worker    string
	RetrySecs int
}

// VerifyPage is identity verification by one-time code.
type VerifyPage struct {
	Sent     bool
	Verified bool
	Next     string
	Phone    string // the mobile number given, kept in the form
}

// SavedPassengerRow is one saved passenger.
type SavedPassengerRow struct {
	ID                      int64
	Name, Gender, BerthPref string
	Age                     int
	IDType, IDRef           string
	Validated               bool
}

// PassengerForm is the add-a-passenger form's values (kept on an error).
type PassengerForm struct {
	Name, Age, Gender, BerthPref, IDType, IDRef string
	Errs
}

// FirstBad is the first field refused, focused on the page.
func (f PassengerForm) FirstBad() string { return f.First }

// PassengersPage is the master list, the add form and the payment choice.
type PassengersPage struct {
	Passengers []SavedPassengerRow
	Form       PassengerForm
	IDTypes    []IDTypeOption
	Pref       PayChoice
	Banks      []string
	Verified   bool
	DeviceOK   bool
}

// PayChoice is a payment method with its details.
type PayChoice struct {
	Method, VPA, Bank string
	Errs
}

// FirstBad is the first field refused, focused on the page.
func (p PayChoice) FirstBad() string { return p.First }

// SearchPage is the search form and its results.
type SearchPage struct {
	Stations       []Station
	From, To, Date string
	Searched       bool
	Results        []JourneyRow
}

// JourneyRow is one train and class in the results.
type JourneyRow struct {
	Train, TrainName, Class string
	Departs, Arrives        string
	Opens                   string // IST
	Fare                    string
	Band                    string // AVAILABLE FEW WL SOLD_OUT, or ""
	BandNote                string
	Href                    string
	From, To                string
	// Holdable: a hold can still take a seat or a waitlist place (or the
	// band is unknown); a sold-out row offers no Book button.
	Holdable bool
}

// WindowPage is the booking page of one journey: the countdown to the
// window, then the hold form.
type WindowPage struct {
	Train, TrainName, Class, From, To, Date string
	DateLabel                               string // Date as the site writes dates
	Mode                                    string
	OpensAtISO, OpensAt, ClosesAt           string
	ServerTimeISO                           string
	Open, Closed                            bool
	Fare                                    string
	Band                                    string
	Passengers                              []SavedPassengerRow
	Selected                                map[int64]bool
	NoneChosen                              bool   // a hold was refused because nobody was ticked
	MaxPassengers                           int    // per ticket (rules), the most that may be ticked
	Key                                     string // the attempt's idempotency key
	// Admission is the waiting room's token once admitted (queue mode):
	// the form then carries it and the booking-time challenge.
	Admission string
	// AdmissionUntilISO is when the admission lapses: "you're in, hold
	// within m:ss".
	AdmissionUntilISO string
	// PreQueue: the waiting room is open (from 15 minutes before the window).
	PreQueue     bool
	FairnessHref string
	// OTP: the passenger chose the code by SMS instead of the proof of
	// work (a browser that cannot run the worker); the form asks for it.
	OTP bool
	// Light: the single-step form for a hot train (the light_form lever):
	// the hold form also asks how to pay (Pay, Banks) and the payment
	// starts with the hold, under its own key PayKey.
	Light  bool
	Pay    PayChoice
	Banks  []string
	PayKey string
	// LeftKnown: Left of the Cap Tatkal tickets of the opening day are
	// still the account's to book (booking.Service.TatkalLeft, the
	// committer's own count); none left disables Hold with the reason.
	LeftKnown bool
	Left, Cap int
	// Waitlist: a hold now would be a TQWL place, not a seat (the band).
	Waitlist bool
	// Alternatives are the open choices when this one is sold out.
	Alternatives []JourneyRow
	// Unresolved: the deadline (IST) of an earlier payment for this
	// journey the bank has not settled; the page warns before a new hold.
	Unresolved string
}

// FareLineRow is one line of a fare breakup.
type FareLineRow struct{ Item, Amount string }

// PassengerRow is a passenger on a booking with their berth.
type PassengerRow struct {
	Name, Age, Gender, Berth string
}

// BookingPage is a hold or booking: its state in words, the countdown
// while held, the pay form, the ticket once confirmed.
type BookingPage struct {
	HoldID                      string
	State, Message              string
	Title                       string // the state's headline, a catalogue key
	Waitlist                    bool   // TQWL places held, not seats
	TotalWords                  string // the total in words
	FromName, ToName            string // "Mumbai Central" (the codes are From, To)
	Boards, Arrives             string // at the boarding point, at the destination
	PNR                         string
	Train, TrainName, Class     string
	From, To, Date, Departs     string
	Passengers                  []PassengerRow
	Fare                        []FareLineRow
	Total                       string
	HoldExpiresISO, HoldExpires string
	Pay                         PayChoice
	PayKey                      string // the payment attempt's idempotency key
	Banks                       []string
	WalletBalance               string
	Refresh                     int // seconds; 0: final
	Ticket                      bool
	Cancellable                 bool
	WaitlistNo                  int
	// Chart is what the prepared chart made of the booking, a catalogue
	// key ("" before the chart); ChartAt when it was prepared (IST).
	Chart, ChartAt string
	// PDFOff: the e-ticket PDF is switched off for the peak (NON_ESSENTIAL);
	// the page says so instead of offering it.
	PDFOff bool
}

// TicketPage is the e-ticket.
type TicketPage struct {
	BookingPage
	QRDataURI string
	Rules     []string
	Booked    string
}

// HistoryRow is one entry of the booking history.
type HistoryRow struct {
	Href, Train, Journey, Date, State, PNR string
}

// CancelPage shows what a cancellation would do, before it is done.
type CancelPage struct {
	HoldID, PNR, What, Refund, Message string
	RefundPaise                        int64
	Allowed                            bool
}

// WalletRow is one ledger entry.
type WalletRow struct {
	At, Kind, Ref, Amount, Balance string
}

// WalletPage is the wallet: balance, ledger and top-up.
type WalletPage struct {
	Balance string
	Entries []WalletRow
	Banks   []string
	Pref    PayChoice
	Key     string
}

func int64String(n int64) string { return strconv.FormatInt(n, 10) }

// GatewayPage sends the passenger to a gateway's page.
type GatewayPage struct {
	Title, Message, Button, URL, Back string
}

// QueuePage is the waiting room.
type QueuePage struct {
	Train, TrainName, Class string
	Status, Message, Odds   string
	Position, Wait          string
	RandomiseUntil          string
	Refresh                 int // seconds, the server's pace
	FairnessHref            string
	// DrawISO is the draw's time while the place is not drawn yet (a
	// live clock to it); NowISO the server's time when answering.
	DrawISO, NowISO string
}

// FieldErrors are a form's messages per field name, shown under each
// field (aria-invalid, aria-describedby), the first bad field focused.
type FieldErrors interface{ Err(name string) string }

// Errs is a form's errors by field name and the first bad field.
type Errs struct {
	ByField map[string]string
	First   string
}

// Err is the message for the field, "" when it is fine.
func (e Errs) Err(name string) string { return e.ByField[name] }

// Set records a field's message; the first set is focused.
func (e *Errs) Set(name, msg string) {
	if e.ByField == nil {
		e.ByField = map[string]string{}
	}
	if e.First == "" {
		e.First = name
	}
	e.ByField[name] = msg
}

// IDTypeOption is an accepted photo ID with the shape of its number as an
// HTML pattern (the same rule as booking.AcceptedIDs).
type IDTypeOption struct{ Code, Pattern string }

// fieldAttrs mark a field the form refused: aria-invalid, described by its
// message (and its format hint), focused if it is the first.
func fieldAttrs(f FieldErrors, name, id string) templ.Attributes {
	desc := id + "-err"
	if id == "pidref" {
		desc = "pidref-hint " + desc
	}
	a := templ.Attributes{"aria-describedby": desc}
	if f.Err(name) != "" {
		a["aria-invalid"] = "true"
		if e, ok := f.(interface{ FirstBad() string }); ok && e.FirstBad() == name {
			a["autofocus"] = true
		}
	}
	return a
}

func idPattern(types []IDTypeOption, code string) string {
	for _, t := range types {
		if t.Code == code {
			return t.Pattern
		}
	}
	return ""
}

func idHint(ctx context.Context, code string) string {
	if code == "" {
		return T(ctx, "idfmt.none")
	}
	return T(ctx, "idfmt."+code)
}

// Station is a station's code and name (the search form's suggestions).
type Station struct{ Code, Name string }
