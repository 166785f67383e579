package web

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"tatkal/booking"
	"tatkal/booking/admission"
	"tatkal/booking/bookingstate"
	"tatkal/booking/i18n"
	"tatkal/booking/india"
	"tatkal/booking/payment"
	"tatkal/booking/payment/pspapi"
	"tatkal/views"
)

// search finds trains; the bands come from the cached availability.
func (p *Pages) search(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	page := views.SearchPage{Stations: p.stations(r), Date: q.Get("date")}
	from, to := stationCode(q.Get("from"), page.Stations), stationCode(q.Get("to"), page.Stations)
	page.From, page.To = stationLabel(from, page.Stations), stationLabel(to, page.Stations)
	if page.Date == "" {
		page.Date = p.cfg.Now().In(booking.IST).AddDate(0, 0, 1).Format(time.DateOnly)
	}
	f := views.SiteFrame{Active: "search"}
	status := http.StatusOK
	if from != "" || to != "" {
		date, err := time.ParseInLocation(time.DateOnly, page.Date, booking.IST)
		var found []booking.Journey
		if err != nil {
			err = booking.Errorf(booking.EINVALID, "BAD_DATE", "Choose a journey date.")
		} else {
			found, err = p.cfg.Booking.Search(r.Context(), from, to, date)
		}
		switch {
		case err == nil:
			page.Searched = true
			for _, j := range found {
				page.Results = append(page.Results, journeyRow(r, j))
			}
		case booking.ErrorCode(err) == booking.EINVALID:
			f.Error, status = errText(r, err), http.StatusBadRequest
		default:
			p.fail(w, r, "Search", err)
			return
		}
	}
	p.render(w, r, status, "Search", f, views.SiteSearch(f, page))
}

func journeyRow(r *http.Request, j booking.Journey) views.JourneyRow {
	l := langOf(r)
	row := views.JourneyRow{Train: j.Train, TrainName: j.TrainName, Class: j.Class, Fare: india.Rupees(j.Fare.TotalPaise),
		Opens: i18n.DateTime(l, j.OpensAt.In(booking.IST)), Band: j.Band, BandNote: j.BandErr, From: j.From, To: j.To}
	if !j.Departs.IsZero() {
		row.Departs = i18n.DateTime(l, j.Departs.In(booking.IST))
	}
	if !j.Arrives.IsZero() {
		row.Arrives = i18n.DateTime(l, j.Arrives.In(booking.IST))
	}
	if j.Band == booking.BandFew || j.Band == booking.BandAvailable {
		row.BandNote = i18n.Format(l, "band.about", j.ApproxCount)
	}
	if j.Band == booking.BandWaitlist {
		row.BandNote = i18n.Format(l, "band.wlplaces", j.ApproxCount)
	}
	if j.BandErr != "" {
		row.BandNote = i18n.Text(l, "band.unknown")
	}
	row.Holdable = holdable(j.Band) || j.Band == ""
	row.Href = "/book?" + journeyQuery(j.Train, j.Date.Format(time.DateOnly), j.Class, j.From, j.To)
	return row
}

// langOf is the page language of the request ("en" or "hi").
func langOf(r *http.Request) string { return views.Lang(r.Context()) }

func journeyQuery(train, date, class, from, to string) string {
	return "train=" + url.QueryEscape(train) + "&date=" + url.QueryEscape(date) + "&class=" + url.QueryEscape(class) +
		"&from=" + url.QueryEscape(from) + "&to=" + url.QueryEscape(to)
}

type journeyForm struct {
	train, class, from, to string
	date                   time.Time
}

func parseJourney(get func(string) string) (journeyForm, error) {
	j := journeyForm{train: get("train"), class: get("class"), from: get("from"), to: get("to")}
	d, err := time.ParseInLocation(time.DateOnly, get("date"), booking.IST)
	if err != nil || j.train == "" || j.class == "" || j.from == "" || j.to == "" {
		return j, booking.Errorf(booking.EINVALID, "BAD_JOURNEY", "Choose a train from the search results.")
	}
	j.date = d
	return j, nil
}

// window is one journey's booking page: the countdown before the window,
// the hold form once it is open.
func (p *Pages) window(w http.ResponseWriter, r *http.Request) {
	p.renderWindow(w, r, http.StatusOK, views.SiteFrame{}, nil)
}

func (p *Pages) renderWindow(w http.ResponseWriter, r *http.Request, status int, f views.SiteFrame, selected map[int64]bool) {
	p.renderWindowWith(w, r, status, f, selected, r.PostFormValue("admission"), r.PostFormValue("otp_mode") == "1", false)
}

// renderWindowWith renders the window page; with an admission token (the
// waiting room let the passenger in) the hold form carries it and the
// booking-time challenge: the proof of work, or with otp the code sent by
// SMS that stands in for it. noneChosen marks the passenger choice as the
// reason a hold was refused.
func (p *Pages) renderWindowWith(w http.ResponseWriter, r *http.Request, status int, f views.SiteFrame, selected map[int64]bool, admissionToken string, otp, noneChosen bool) {
	get := r.URL.Query().Get
	if r.Method == http.MethodPost {
		get = r.PostFormValue
	}
	j, err := parseJourney(get)
	if err != nil {
		p.fail(w, r, "Book", err)
		return
	}
	sh, err := p.cfg.Booking.Catalog().Find(r.Context(), j.train, j.date, j.class, "TQ")
	if err != nil {
		p.fail(w, r, "Book", err)
		return
	}
	f_, t_ := stopIndex(sh, j.from), stopIndex(sh, j.to)
	if f_ < 0 || t_ <= f_ {
		p.fail(w, r, "Book", booking.Errorf(booking.EINVALID, "BAD_JOURNEY", "Train %s does not run from %s to %s.", j.train, j.from, j.to))
		return
	}
	saved, err := p.cfg.Booking.SavedPassengers(r.Context(), sessionOf(r).UserID)
	if err != nil {
		p.fail(w, r, "Book", err)
		return
	}
	now := p.cfg.Now()
	fare := booking.ComputeFare(sh.Fare, sh.Superfast, sh.Stops[t_].Km-sh.Stops[f_].Km, 1)
	page := views.WindowPage{Train: sh.Train, TrainName: sh.TrainName, Class: sh.Class, From: j.from, To: j.to, Date: j.date.Format(time.DateOnly),
		DateLabel: i18n.Date(langOf(r), j.date),
		Mode:      sh.Mode, OpensAtISO: sh.OpensAt.Format(time.RFC3339Nano), OpensAt: i18n.DateTime(langOf(r), sh.OpensAt.In(booking.IST)), ClosesAt: i18n.DateTime(langOf(r), sh.ClosesAt.In(booking.IST)),
		ServerTimeISO: now.Format(time.RFC3339Nano), Open: !now.Before(sh.OpensAt) && now.Before(sh.ClosesAt), Closed: !now.Before(sh.ClosesAt),
		Fare: india.Rupees(fare.TotalPaise), Passengers: savedRows(saved), Selected: selected, MaxPassengers: p.cfg.Booking.Rules().MaxPassengers,
		NoneChosen: noneChosen, Key: newAttemptKey(), Admission: admissionToken, AdmissionUntilISO: isoOrEmpty(admissionExpiry(r.Context())), OTP: otp, PreQueue: !now.Before(sh.OpensAt.Add(-PreQueue)) && now.Before(sh.ClosesAt), FairnessHref: "/v1/windows/" + strconv.FormatInt(sh.ID, 10) + "/fairness"}
	if sessionOf(r).UserID != 0 {
		page.Unresolved = p.unresolvedOn(r, sh.ID) // tdr.go
	}
	if p.cfg.Booking.LightForm(sh.ID) {
		// The single-step form for a hot train: no band (one call less),
		// passengers and payment method in one submit.
		p.lightForm(r, &page)
	} else if a, err := p.cfg.Booking.Availability(r.Context(), sh.Train, sh.Date, sh.Class, sh.Quota, j.from, j.to); err == nil {
		page.Band = a.Band
	}
	// What is left of the day's cap, shown before the window and turning
	// Hold off with the reason once none is left (the committer's count).
	if left, limit, err := p.cfg.Booking.TatkalLeft(r.Context(), sessionOf(r).UserID, sh); err == nil {
		page.LeftKnown, page.Left, page.Cap = true, left, limit
	} else {
		p.cfg.Log.Warn("tatkal left today", "err", err)
	}
	page.Waitlist = page.Band == booking.BandWaitlist
	if page.Band == booking.BandSoldOut {
		page.Alternatives = p.alternatives(r, j.from, j.to, j.date, sh.Train, sh.Class)
	}
	// Nothing is ticked until the passenger ticks it: a default choice is
	// a ticket in the wrong name for whoever does not look.
	f.Active = "search"
	p.render(w, r, status, "Book "+sh.Train, f, views.SiteWindow(views.SiteFrame{CSRF: p.csrfToken(r)}, page))
}

func isoOrEmpty(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Format(time.RFC3339Nano)
}

// alternatives are the journeys between the same stations on the same day
// that can still be held (seats or waitlist places), other than the one
// sold out: what a passenger can do instead of pressing a dead button.
func (p *Pages) alternatives(r *http.Request, from, to string, date time.Time, train, class string) []views.JourneyRow {
	found, err := p.cfg.Booking.Search(r.Context(), from, to, date)
	if err != nil {
		return nil
	}
	var out []views.JourneyRow
	for _, j := range found {
		if (j.Train == train && j.Class == class) || !holdable(j.Band) {
			continue
		}
		out = append(out, journeyRow(r, j))
	}
	return out
}

// holdable: a band that a hold can still take something from.
func holdable(band string) bool {
	return band == booking.BandAvailable || band == booking.BandFew || band == booking.BandWaitlist
}

// stationCode is the code of what was typed in a station field: a
// suggestion "Mumbai Central (MMCT)", a station's name, or a code.
func stationCode(in string, stations []views.Station) string {
	in = strings.TrimSpace(in)
	if i, j := strings.LastIndex(in, "("), strings.LastIndex(in, ")"); i >= 0 && j > i {
		return strings.ToUpper(strings.TrimSpace(in[i+1 : j]))
	}
	for _, s := range stations {
		if strings.EqualFold(s.Name, in) {
			return s.Code
		}
	}
	return strings.ToUpper(in)
}

// stationLabel is how a station field shows a code: as its suggestion.
func stationLabel(code string, stations []views.Station) string {
	for _, s := range stations {
		if s.Code == code {
			return s.Name + " (" + s.Code + ")"
		}
	}
	return code
}

// stopInfo is a train's stop: the station's name, and its arrival and
// departure in minutes after the origin's departure (nil at the ends).
type stopInfo struct {
	name           string
	arrive, depart *int
}

// stop reads one stop of a train (the e-ticket's boarding point and
// arrival, with station names).
func (p *Pages) stop(r *http.Request, train, code string) (stopInfo, error) {
	var s stopInfo
	err := p.cfg.Pool.QueryRow(r.Context(), `SELECT st.name, ts.arrive_min, ts.depart_min FROM train_stops ts
		JOIN stations st ON st.code = ts.station_code WHERE ts.train_number = $1 AND ts.station_code = $2`, train, code).Scan(&s.name, &s.arrive, &s.depart)
	if err != nil {
		return s, fmt.Errorf("stop %s of train %s: %w", code, train, err)
	}
	return s, nil
}

// stations are every station's code and name, for the search form's
// suggestions.
func (p *Pages) stations(r *http.Request) []views.Station {
	rows, err := p.cfg.Pool.Query(r.Context(), `SELECT code, name FROM stations ORDER BY name`)
	if err != nil {
		p.cfg.Log.Warn("stations", "err", err)
		return nil
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (views.Station, error) {
		var s views.Station
		return s, row.Scan(&s.Code, &s.Name)
	})
	if err != nil {
		p.cfg.Log.Warn("stations", "err", err)
	}
	return out
}

func stopIndex(sh *booking.Shard, code string) int {
	for i, s := range sh.Stops {
		if s.Code == code {
			return i
		}
	}
	return -1
}

// hold takes seats for the ticked passengers (booking.Holds.Hold, as
// POST /v1/bookings/hold does), then shows the hold with its countdown.
func (p *Pages) hold(w http.ResponseWriter, r *http.Request) {
	selected, ids := tickedPassengers(r)
	j, err := parseJourney(r.PostFormValue)
	if err != nil {
		p.fail(w, r, "Book", err)
		return
	}
	if len(ids) == 0 {
		p.renderWindowWith(w, r, http.StatusConflict, views.SiteFrame{Error: views.T(r.Context(), "choose.none")}, selected,
			r.PostFormValue("admission"), r.PostFormValue("otp_mode") == "1", true)
		return
	}
	s := sessionOf(r)
	again := func(err error) {
		if c := booking.ErrorCode(err); c == booking.EINTERNAL || c == booking.EOVERLOADED {
			p.fail(w, r, "Book", err)
			return
		}
		p.renderWindow(w, r, http.StatusConflict, views.SiteFrame{Error: errText(r, err)}, selected)
	}
	pax, err := p.cfg.Booking.PassengersForHold(r.Context(), s.UserID, j.class, ids)
	if err != nil {
		again(err)
		return
	}
	key := r.PostFormValue("key")
	if len(key) < 8 || len(key) > 128 {
		again(booking.Errorf(booking.EINVALID, "BAD_KEY", "This form is stale; reload the page."))
		return
	}
	check, err := p.checkAdmission(r, key)
	if err != nil {
		again(err)
		return
	}
	c := s.caller()
	if p.cfg.Admission != nil {
		c.Device = p.cfg.Admission.BoundDevice(s.UserID, p.deviceBinding(r))
	}
	res, err := p.cfg.Booking.Hold(r.Context(), c, booking.HoldRequest{UserID: s.UserID, IdempotencyKey: key, Train: j.train, Date: j.date,
		Class: j.class, Quota: "TQ", From: j.from, To: j.to, Passengers: pax, SessionToken: s.token, DeviceToken: p.deviceBinding(r),
		AdmissionToken: r.PostFormValue("admission"), Check: check})
	if err != nil {
		if admission.IsHighDemand(err) {
			p.busy(w, r)
			return
		}
		again(err)
		return
	}
	if res.Status == "SOLD_OUT" {
		again(booking.Errorf(booking.ECONFLICT, "SOLD_OUT", "No seats are left for this journey and the Tatkal waitlist is full. Nothing was charged."))
		return
	}
	if r.PostFormValue("light") == "1" && r.PostFormValue("method") != "" {
		p.payAfterHold(w, r, res.HoldID)
		return
	}
	http.Redirect(w, r, "/bookings/"+res.HoldID.String(), http.StatusSeeOther)
}

// tickedPassengers are the saved passengers ticked on the hold form.
func tickedPassengers(r *http.Request) (map[int64]bool, []int64) {
	r.ParseForm() //nolint:errcheck // an unparsable form has no fields, refused later
	selected := map[int64]bool{}
	var ids []int64
	for _, v := range r.PostForm["pax"] {
		id, err := strconv.ParseInt(v, 10, 64)
		if err == nil && !selected[id] {
			selected[id] = true
			ids = append(ids, id)
		}
	}
	return selected, ids
}

func holdIDOf(r *http.Request) (uuid.UUID, error) {
	id, err := uuid.Parse(chi.URLParam(r, "hold_id"))
	if err != nil {
		return uuid.UUID{}, booking.Errorf(booking.ENOTFOUND, "NO_SUCH_HOLD", "There is no such booking.")
	}
	return id, nil
}

// loadBooking is the caller's hold in words (bookingstate, as the API's
// status) and the page model for it.
func (p *Pages) loadBooking(r *http.Request) (views.BookingPage, booking.HoldView, bookingstate.Words, error) {
	id, err := holdIDOf(r)
	if err != nil {
		return views.BookingPage{}, booking.HoldView{}, bookingstate.Words{}, err
	}
	v, err := p.cfg.Booking.Status(r.Context(), sessionOf(r).UserID, id)
	if err != nil {
		return views.BookingPage{}, v, bookingstate.Words{}, err
	}
	pays, err := p.cfg.Payments.ForHold(r.Context(), v.ID)
	if err != nil {
		return views.BookingPage{}, v, bookingstate.Words{}, err
	}
	words := bookingstate.Describe(v, pays, p.cfg.Now())
	l := langOf(r)
	page := views.BookingPage{HoldID: v.ID.String(), State: words.State, Message: words.Say(l), Title: words.Title(), Waitlist: words.Waitlist,
		PNR: v.PNR, Train: v.Train, Class: v.Class, TotalWords: i18n.RupeesInWords(l, v.Fare.TotalPaise),
		From: v.From, To: v.To, Date: i18n.Date(l, v.Date), Total: india.Rupees(v.Fare.TotalPaise), WaitlistNo: v.WaitlistNo,
		Ticket: words.State == bookingstate.Confirmed || words.State == bookingstate.Confirming || words.State == bookingstate.Waitlisted}
	if sh, err := p.cfg.Booking.Catalog().ByID(r.Context(), v.ShardID); err == nil {
		page.TrainName = sh.TrainName
		page.Departs = i18n.DateTime(l, sh.DepartsAt.In(booking.IST)) + " (" + i18n.Format(l, "from.origin", sh.Stops[0].Code) + ")"
		if from, err := p.stop(r, sh.Train, v.From); err == nil {
			page.FromName = from.name
			if from.depart != nil {
				page.Boards = i18n.DateTime(l, sh.DepartsAt.Add(time.Duration(*from.depart)*time.Minute).In(booking.IST))
			}
		}
		if to, err := p.stop(r, sh.Train, v.To); err == nil {
			page.ToName = to.name
			if to.arrive != nil {
				page.Arrives = i18n.DateTime(l, sh.DepartsAt.Add(time.Duration(*to.arrive)*time.Minute).In(booking.IST))
			}
		}
	}
	for i, x := range v.Passengers {
		row := views.PassengerRow{Name: x.Name, Age: strconv.Itoa(x.Age), Gender: x.Gender, Berth: "—"}
		if i < len(v.Berths) && v.BookingStat == booking.BookingConfirmed {
			b := v.Berths[i]
			row.Berth = b.Coach + " / " + strconv.Itoa(b.BerthNo) + " " + b.Type
		} else if v.WaitlistNo > 0 {
			row.Berth = i18n.Format(l, "berth.wl", v.WaitlistNo)
		}
		page.Passengers = append(page.Passengers, row)
	}
	for _, l := range v.Fare.Breakup {
		page.Fare = append(page.Fare, views.FareLineRow{Item: l.Item, Amount: india.Rupees(l.Paise)})
	}
	if words.HoldExpiresAt != nil {
		page.HoldExpiresISO = words.HoldExpiresAt.Format(time.RFC3339)
		page.HoldExpires = i18n.Clock(words.HoldExpiresAt.In(booking.IST), true)
	}
	if words.NextCheckMs > 0 && words.State != bookingstate.Held {
		page.Refresh = max(1, words.NextCheckMs/1000)
	}
	// Not while CONFIRMING (the core is still recording the berths), nor
	// once the chart is prepared.
	page.Cancellable = (words.State == bookingstate.Confirmed || words.State == bookingstate.Waitlisted) && v.ChartState == "OPEN"
	page.PDFOff = page.Ticket && !p.cfg.Booking.NonEssentialEnabled()
	switch {
	case v.ChartState == "CHARTED" && !p.cfg.Booking.NonEssentialEnabled():
		page.Chart = "off.chart" // no time: the line says only that it is off
	case v.ChartState == "CHARTED":
		page.Chart, page.ChartAt = chartWords(v)
	}
	return page, v, words, nil
}

// booking shows a hold or booking: countdown and pay form while held,
// waiting for the bank with the refund-by time, the ticket once confirmed.
func (p *Pages) booking(w http.ResponseWriter, r *http.Request) {
	p.renderBooking(w, r, http.StatusOK, views.SiteFrame{Notice: noticeOf(r)})
}

func (p *Pages) renderBooking(w http.ResponseWriter, r *http.Request, status int, f views.SiteFrame) {
	p.renderBookingWith(w, r, status, f, nil)
}

// renderBookingWith renders the booking; typed, when set, is the payment
// form as the passenger sent it (kept, with its errors).
func (p *Pages) renderBookingWith(w http.ResponseWriter, r *http.Request, status int, f views.SiteFrame, typed *views.PayChoice) {
	page, _, words, err := p.loadBooking(r)
	if err != nil {
		p.fail(w, r, "Booking", err)
		return
	}
	if words.State == bookingstate.Held {
		uid := sessionOf(r).UserID
		pref, err := p.cfg.Payments.PreferenceOf(r.Context(), uid)
		if err != nil {
			p.fail(w, r, "Booking", err)
			return
		}
		page.Pay, page.Banks, page.PayKey = views.PayChoice{Method: pref.Method, VPA: pref.VPA, Bank: pref.Bank}, payment.Banks(), "webpay-"+uuid.NewString()
		if typed != nil {
			page.Pay = *typed
		}
		if bal, _, err := p.cfg.Payments.Wallet(r.Context(), uid, 0); err == nil {
			page.WalletBalance = india.Rupees(bal)
		}
	}
	f.Active = "bookings"
	p.render(w, r, status, "Booking", f, views.SiteBooking(views.SiteFrame{CSRF: p.csrfToken(r)}, page))
}

// pay starts the payment (payment.Service.Initiate, as the API does): the
// wallet answers at once; a gateway's customer page (UPI collect, card,
// net banking) is where the browser goes next.
func (p *Pages) pay(w http.ResponseWriter, r *http.Request) {
	id, err := holdIDOf(r)
	if err != nil {
		p.fail(w, r, "Pay", err)
		return
	}
	s := sessionOf(r)
	method, vpa, bank := r.PostFormValue("method"), strings.TrimSpace(r.PostFormValue("vpa")), r.PostFormValue("bank")
	v, err := p.cfg.Payments.Initiate(r.Context(), s.caller(), payment.InitiateRequest{HoldID: id, Method: method, VPA: vpa, Bank: bank,
		IdempotencyKey: r.PostFormValue("key"), Guard: p.cfg.Admission.InstrumentGuard(method, vpa, s.UserID)})
	if err != nil {
		if c := booking.ErrorCode(err); c == booking.EINTERNAL || c == booking.EOVERLOADED || c == booking.ENOTFOUND {
			p.fail(w, r, "Pay", err)
			return
		}
		// What was typed stays, the message under its field.
		typed := &views.PayChoice{Method: method, VPA: vpa, Bank: bank}
		f := views.SiteFrame{Error: errText(r, err)}
		if field, ok := fieldOf[booking.ErrorReason(err)]; ok {
			typed.Set(field, errText(r, err))
			f.Error = views.T(r.Context(), "err.form")
		}
		p.renderBookingWith(w, r, http.StatusConflict, f, typed)
		return
	}
	if v.NextAction != nil && v.NextAction.URL != "" {
		p.toGateway(w, r, v, "/bookings/"+id.String())
		return
	}
	http.Redirect(w, r, "/bookings/"+id.String(), http.StatusSeeOther)
}

// release gives the seats back at once (an explicit abandon, seeds/000 section 6.3).
func (p *Pages) release(w http.ResponseWriter, r *http.Request) {
	id, err := holdIDOf(r)
	if err == nil {
		_, err = p.cfg.Booking.Cancel(r.Context(), sessionOf(r).UserID, id)
	}
	if err != nil {
		if booking.ErrorCode(err) == booking.ECONFLICT {
			p.renderBooking(w, r, http.StatusConflict, views.SiteFrame{Error: errText(r, err)})
			return
		}
		p.fail(w, r, "Release", err)
		return
	}
	http.Redirect(w, r, "/bookings/"+id.String()+"?notice=released", http.StatusSeeOther)
}

// toGateway shows the way to the gateway's page: a link, since the site's
// CSP lets forms post only here (form-action 'self' also binds redirects).
func (p *Pages) toGateway(w http.ResponseWriter, r *http.Request, v payment.View, back string) {
	l, by := langOf(r), i18n.Clock(v.Deadline.In(booking.IST), true)
	g := views.GatewayPage{URL: v.NextAction.URL, Back: back, Title: i18n.Text(l, "gw.title"),
		Message: i18n.Format(l, "gw.message", india.Rupees(v.AmountPaise), by), Button: i18n.Text(l, "gw.button")}
	if v.NextAction.Type == pspapi.NextActionCollect {
		g.Title, g.Button = i18n.Text(l, "gw.upi.title"), i18n.Text(l, "gw.upi.button")
		g.Message = i18n.Format(l, "gw.upi.message", india.Rupees(v.AmountPaise), v.NextAction.VPA, by)
	}
	p.render(w, r, http.StatusOK, g.Title, views.SiteFrame{Active: "bookings"}, views.SiteGateway(g))
}

// chartWords says in catalogue keys what the prepared chart made of a
// booking, and when.
func chartWords(v booking.HoldView) (key, at string) {
	at = i18n.Clock(v.ChartedAt.In(booking.IST), false)
	switch {
	case v.BookingStat == booking.BookingConfirmed:
		return "chart.final", at
	case v.BookingStat == booking.BookingCancelled && v.CancelReason == booking.ChartCancelReason:
		return "chart.cancelled", at
	}
	return "chart.done", at
}
