package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"tatkal/booking"
	"tatkal/booking/admission"
	"tatkal/booking/api/reply"
	"tatkal/booking/bookingstate"
	"tatkal/booking/httpx"
	"tatkal/booking/i18n"
	"tatkal/booking/india"
	"tatkal/booking/payment"
)

type holdRequest struct {
	TrainNo     string              `json:"train_no"`
	JourneyDate string              `json:"journey_date"`
	Class       string              `json:"class"`
	Quota       string              `json:"quota"`
	From        string              `json:"from"`
	To          string              `json:"to"`
	Passengers  []booking.Passenger `json:"passengers"`
	// Challenge is the booking check every hold carries, on every shard:
	// the solved challenge (POST /v1/challenge), or {"type":"OTP","code"}
	// with the code sent by SMS in its place (POST /v1/challenge/otp).
	Challenge *holdChallenge `json:"challenge"`
}

type holdChallenge struct {
	Type  string `json:"type"`
	Token string `json:"token"`
	Nonce string `json:"nonce"`
	Code  string `json:"code,omitempty"`
}

type fareJSON struct {
	TotalPaise  int64              `json:"total_paise"`
	TotalRupees string             `json:"total"`
	Breakup     []booking.FareLine `json:"breakup"`
}

type holdResponse struct {
	HoldID         *uuid.UUID          `json:"hold_id"`
	Status         string              `json:"status"`
	HoldExpiresAt  *time.Time          `json:"hold_expires_at,omitempty"`
	Berths         []booking.BerthInfo `json:"berths,omitempty"`
	WaitlistNo     int                 `json:"waitlist_no,omitempty"`
	PNR            *string             `json:"pnr,omitempty"`
	Fare           *fareJSON           `json:"fare,omitempty"`
	PaymentOptions []string            `json:"payment_options,omitempty"`
	Message        string              `json:"message"`
}

// soldOutBody is the SOLD_OUT answer, encoded once as reply.JSON would:
// a sold-out rush answers it with no JSON work.
var soldOutBody = func() []byte {
	b, err := json.Marshal(holdResponse{Status: "SOLD_OUT", Message: "No seats are left for this journey and the Tatkal waitlist is full."})
	if err != nil {
		panic(err)
	}
	return append(b, '\n')
}()

func fareOf(f booking.Fare) *fareJSON {
	return &fareJSON{TotalPaise: f.TotalPaise, TotalRupees: india.Decimal(f.TotalPaise), Breakup: f.Breakup}
}

// hold takes seats for a passenger: 201 for HELD or WAITLIST_OFFERED, 200
// for SOLD_OUT, a problem document otherwise.
func (a *API) hold(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		reply.Error(w, r, a.log, booking.Errorf(booking.EINVALID, "MISSING_IDEMPOTENCY_KEY", "Send an Idempotency-Key header, unique per booking attempt, so a retry never holds twice."))
		return
	}
	var req holdRequest
	if err := decode(w, r, &req); err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	if req.TrainNo == "" || req.Class == "" || req.From == "" || req.To == "" {
		reply.Error(w, r, a.log, booking.Errorf(booking.EINVALID, "MISSING_FIELD", "train_no, journey_date, class, from and to are required."))
		return
	}
	date, err := parseDate(req.JourneyDate)
	if err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	c := callerFrom(r.Context())
	if a.adm != nil {
		c.Device = a.adm.BoundDevice(c.UserID, r.Header.Get("X-Device-Token"))
	}
	// Every hold, on a direct shard as through the waiting room, carries
	// the booking check bound to this session and attempt, from the
	// account's one booking session (admission.Service.CheckHold); a wrong
	// challenge looks like high demand.
	// The check runs inside Hold once the request is valid (a malformed
	// one spends no challenge).
	var check func(context.Context) error
	if a.adm != nil {
		var p admission.Proof
		if ch := req.Challenge; ch != nil {
			p = admission.Proof{Type: ch.Type, Challenge: ch.Token, Nonce: ch.Nonce, Code: ch.Code}
		}
		ac := a.admCaller(r)
		check = func(ctx context.Context) error { return a.adm.CheckHold(ctx, ac, p, key) }
	}
	res, err := a.svc.Hold(r.Context(), c, booking.HoldRequest{
		UserID: c.UserID, IdempotencyKey: key, Train: req.TrainNo, Date: date, Class: req.Class, Quota: req.Quota,
		From: req.From, To: req.To, Passengers: req.Passengers, AdmissionToken: r.Header.Get("X-Admission-Token"),
		SessionToken: sessionToken(r), DeviceToken: r.Header.Get("X-Device-Token"), Client: a.clientSignals(r, req.Challenge, key),
		Check: check,
	})
	if err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	if res.Replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	if res.Status == "SOLD_OUT" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.Write(soldOutBody) //nolint:errcheck
		return
	}
	if res.Status != "HELD" && res.Status != "WAITLIST_OFFERED" {
		// A replay of a hold that is no longer live: what became of it.
		reply.JSON(w, http.StatusOK, replayedHold(res))
		return
	}
	resp := holdResponse{HoldID: &res.HoldID, Status: res.Status, HoldExpiresAt: &res.ExpiresAt, Berths: res.Berths,
		WaitlistNo: res.WaitlistNo, Fare: fareOf(res.Fare), PaymentOptions: []string{"WALLET", "UPI", "CARD", "NB"}}
	// The same words as the status and the pages (bookingstate's catalogue
	// keys): a waitlist place is never called a seat.
	until := i18n.Clock(res.ExpiresAt.In(booking.IST), true)
	if res.Status == "HELD" {
		resp.Message = i18n.Format("en", "st.held", until)
	} else {
		resp.Message = "No confirmed seats are left. " + i18n.Format("en", "st.held.wl", strconv.Itoa(res.WaitlistNo), until)
	}
	reply.JSON(w, http.StatusCreated, resp)
}

// replayedHold answers an Idempotency-Key whose hold is no longer live.
func replayedHold(res booking.HoldResult) holdResponse {
	resp := holdResponse{HoldID: &res.HoldID, Status: res.Status, Fare: fareOf(res.Fare)}
	if res.PNR != "" {
		resp.PNR = &res.PNR
	}
	switch {
	case res.Status == booking.BookingConfirmed:
		resp.Berths = res.Berths
		resp.Message = "This request was answered before and paid for: your ticket is PNR " + res.PNR + "."
	case res.Status == booking.BookingWaitlisted:
		resp.WaitlistNo = res.WaitlistNo
		resp.Message = "This request was answered before and paid for: PNR " + res.PNR + " is waitlisted at TQWL/" + strconv.Itoa(res.WaitlistNo) + "."
	case res.PNR != "": // the ticket was cancelled
		resp.Message = "This request was answered before: its ticket PNR " + res.PNR + " is cancelled."
	case res.Status == booking.HoldExpired:
		resp.Message = "This request was answered before, but the hold ran out before payment and its seats were released. Nothing was charged; hold again with a new Idempotency-Key."
	case res.Status == booking.HoldCancelled:
		resp.Message = "This request was answered before, but you cancelled that hold. Nothing was charged; hold again with a new Idempotency-Key."
	default:
		resp.Message = "This request was answered before, but that hold was released. Nothing was charged; hold again with a new Idempotency-Key."
	}
	return resp
}

type statusResponse struct {
	HoldID           uuid.UUID         `json:"hold_id"`
	State            string            `json:"state"`
	PNR              *string           `json:"pnr"`
	Train            string            `json:"train_no"`
	JourneyDate      string            `json:"journey_date"`
	Class            string            `json:"class"`
	From             string            `json:"from"`
	To               string            `json:"to"`
	Passengers       []passengerStatus `json:"passengers"`
	HoldExpiresAt    *time.Time        `json:"hold_expires_at,omitempty"`
	WaitlistNo       int               `json:"waitlist_no,omitempty"`
	Fare             *fareJSON         `json:"fare"`
	RefundDuePaise   int64             `json:"refund_due_paise"`
	Message          string            `json:"message"`
	NextCheckAfterMs int               `json:"next_check_after_ms,omitempty"`
	Payment          *payment.View     `json:"payment,omitempty"`
}

type passengerStatus struct {
	Name   string             `json:"name"`
	Age    int                `json:"age"`
	Gender string             `json:"gender"`
	Berth  *booking.BerthInfo `json:"berth,omitempty"`
}

func statusOf(v booking.HoldView, pays []payment.View, now time.Time) statusResponse {
	s := statusResponse{HoldID: v.ID, Train: v.Train, JourneyDate: v.Date.Format(time.DateOnly), Class: v.Class,
		From: v.From, To: v.To, WaitlistNo: v.WaitlistNo, Fare: fareOf(v.Fare), RefundDuePaise: v.RefundDue}
	for i, p := range v.Passengers {
		ps := passengerStatus{Name: p.Name, Age: p.Age, Gender: p.Gender}
		if i < len(v.Berths) {
			b := v.Berths[i]
			ps.Berth = &b
		}
		s.Passengers = append(s.Passengers, ps)
	}
	if v.PNR != "" {
		pnr := v.PNR
		s.PNR = &pnr
	}
	words := bookingstate.Describe(v, pays, now)
	s.State, s.Message, s.NextCheckAfterMs, s.HoldExpiresAt, s.Payment = words.State, words.Message, words.NextCheckMs, words.HoldExpiresAt, words.Payment
	return s
}

func (a *API) holdID(w http.ResponseWriter, r *http.Request) (uuid.UUID, bool) {
	id, err := uuid.Parse(chi.URLParam(r, "hold_id"))
	if err != nil {
		reply.Error(w, r, a.log, booking.Errorf(booking.EINVALID, "BAD_HOLD_ID", "%q is not a hold id.", chi.URLParam(r, "hold_id")))
		return uuid.UUID{}, false
	}
	return id, true
}

// status tells the owner where a hold or booking stands, in plain words.
func (a *API) status(w http.ResponseWriter, r *http.Request) {
	id, ok := a.holdID(w, r)
	if !ok {
		return
	}
	v, err := a.svc.Status(r.Context(), callerFrom(r.Context()).UserID, id)
	if err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	a.writeStatus(w, r, v)
}

func (a *API) writeStatus(w http.ResponseWriter, r *http.Request, v booking.HoldView) {
	var pays []payment.View
	if a.payments != nil {
		var err error
		if pays, err = a.payments.ForHold(r.Context(), v.ID); err != nil {
			reply.Error(w, r, a.log, err)
			return
		}
	}
	reply.JSON(w, http.StatusOK, statusOf(v, pays, a.now()))
}

type cancelRequest struct {
	// Cancel is what the passenger is cancelling: "hold" (the default: an
	// unpaid hold, refused as ALREADY_CONFIRMED once it became a ticket)
	// or "booking" (the ticket, under the Tatkal refund rules).
	Cancel string `json:"cancel"`
	// ExpectRefundPaise is the refund the passenger was shown (GET
	// .../cancel); if the rules now give another, nothing is cancelled.
	ExpectRefundPaise *int64 `json:"expect_refund_paise"`
}

// cancel cancels what the passenger saw: the hold by default, the booking
// only when asked for explicitly.
func (a *API) cancel(w http.ResponseWriter, r *http.Request) {
	id, ok := a.holdID(w, r)
	if !ok {
		return
	}
	var req cancelRequest
	if r.ContentLength != 0 {
		if err := decode(w, r, &req); err != nil {
			reply.Error(w, r, a.log, err)
			return
		}
	}
	user := callerFrom(r.Context()).UserID
	var v booking.HoldView
	var err error
	switch req.Cancel {
	case "", "hold":
		if req.ExpectRefundPaise != nil && *req.ExpectRefundPaise != 0 {
			err = booking.Errorf(booking.EINVALID, "BAD_CANCEL", "An unpaid hold has nothing to refund; expect_refund_paise must be 0 or absent.")
			break
		}
		v, err = a.svc.Cancel(r.Context(), user, id)
	case "booking":
		v, err = a.svc.CancelBooking(r.Context(), user, id, req.ExpectRefundPaise)
	default:
		err = booking.Errorf(booking.EINVALID, "BAD_CANCEL", "cancel must be \"hold\" or \"booking\", not %q.", req.Cancel)
	}
	if err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	a.writeStatus(w, r, v)
}

type cancelPreview struct {
	HoldID      string  `json:"hold_id"`
	PNR         *string `json:"pnr"`
	Cancel      string  `json:"cancel,omitempty"` // what a cancel would cancel: hold or booking
	Allowed     bool    `json:"allowed"`
	RefundPaise int64   `json:"refund_paise"`
	Refund      string  `json:"refund"`
	Reason      string  `json:"reason,omitempty"`
	Message     string  `json:"message"`
}

// cancelPreview says what a cancel would do now (what is cancelled, the
// refund the rules give), changing nothing.
func (a *API) cancelPreview(w http.ResponseWriter, r *http.Request) {
	id, ok := a.holdID(w, r)
	if !ok {
		return
	}
	q, err := a.svc.CancelPreview(r.Context(), callerFrom(r.Context()).UserID, id)
	if err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	p := cancelPreview{HoldID: q.HoldID.String(), Cancel: q.What, Allowed: q.Allowed, RefundPaise: q.RefundPaise,
		Refund: india.Decimal(q.RefundPaise), Reason: q.Reason, Message: q.Message}
	if q.PNR != "" {
		p.PNR = &q.PNR
	}
	reply.JSON(w, http.StatusOK, p)
}

type availabilityResponse struct {
	Train       string    `json:"train_no"`
	JourneyDate string    `json:"journey_date"`
	Class       string    `json:"class"`
	Quota       string    `json:"quota"`
	From        string    `json:"from"`
	To          string    `json:"to"`
	StatusBand  string    `json:"status_band"`
	ApproxCount int       `json:"approx_count"`
	AsOf        time.Time `json:"as_of"`
	TTLMs       int64     `json:"ttl_ms"`
}

// availability answers a cached band, a second old at most.
func (a *API) availability(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("train") == "" || q.Get("date") == "" || q.Get("class") == "" {
		reply.Error(w, r, a.log, booking.Errorf(booking.EINVALID, "MISSING_FIELD", "Query parameters train, date and class are required (quota, from and to are optional)."))
		return
	}
	date, err := parseDate(q.Get("date"))
	if err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	av, err := a.svc.Availability(r.Context(), q.Get("train"), date, q.Get("class"), q.Get("quota"), q.Get("from"), q.Get("to"))
	if err != nil {
		reply.Error(w, r, a.log, err)
		return
	}
	// Shared caches keep the answer as long as this process does (the
	// availability_staleness lever), in whole seconds.
	w.Header().Set("Cache-Control", "public, max-age="+strconv.Itoa(max(1, int(av.TTL.Round(time.Second)/time.Second))))
	reply.JSON(w, http.StatusOK, availabilityResponse{Train: av.Train, JourneyDate: av.Date.Format(time.DateOnly), Class: av.Class,
		Quota: av.Quota, From: av.From, To: av.To, StatusBand: av.Band, ApproxCount: av.ApproxCount, AsOf: av.AsOf,
		TTLMs: av.TTL.Milliseconds()})
}

func sessionToken(r *http.Request) string {
	tok, _ := bearer(r)
	return tok
}

// clientSignals are the request's facts kept as fraud signals with the hold.
func (a *API) clientSignals(r *http.Request, ch *holdChallenge, attempt string) booking.ClientSignals {
	cs := booking.ClientSignals{SolveMS: -1}
	if ip, err := netip.ParseAddr(httpx.ClientIP(r)); err == nil {
		cs.IP = ip
	}
	if a.adm != nil {
		var tok, nonce string
		if ch != nil {
			tok, nonce = ch.Token, ch.Nonce
		}
		cs.DeviceID, cs.Attested, cs.SolveMS = a.adm.ClientSignals(a.admCaller(r), tok, nonce, attempt)
	}
	return cs
}
