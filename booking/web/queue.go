package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"tatkal/booking"
	"tatkal/booking/admission"
	"tatkal/booking/httpx"
	"tatkal/booking/i18n"
	"tatkal/views"
)

// PreQueue is how long before the window the waiting room opens
// (seeds/000 section 4.4).
const PreQueue = 15 * time.Minute

func (p *Pages) admCaller(r *http.Request) admission.Caller {
	s := sessionOf(r)
	return admission.Caller{UserID: s.UserID, Verified: s.Verified, Agent: s.Agent, CreatedAt: s.CreatedAt, SessionToken: s.token,
		DeviceToken: p.deviceBinding(r), IP: httpx.ClientIP(r)}
}

// queueEnter joins the waiting room of a queue-mode journey (admission
// Enter, as POST /v1/queue/enter), then shows the passenger's place.
func (p *Pages) queueEnter(w http.ResponseWriter, r *http.Request) {
	j, err := parseJourney(r.PostFormValue)
	if err == nil && p.cfg.Admission == nil {
		err = booking.Errorf(booking.EUNAVAIL, "NO_WAITING_ROOM", "The waiting room is not running on this server.")
	}
	if err != nil {
		p.fail(w, r, "Waiting room", err)
		return
	}
	if _, err := p.cfg.Admission.Enter(r.Context(), p.admCaller(r), admission.Intent{TrainNo: j.train, JourneyDate: j.date, Class: j.class, Quota: "TQ"}); err != nil {
		p.queueFail(w, r, err)
		return
	}
	http.Redirect(w, r, "/queue?"+journeyQuery(j.train, j.date.Format(time.DateOnly), j.class, j.from, j.to), http.StatusSeeOther)
}

// queueFail answers a waiting-room refusal: the uniform high-demand page
// for what looks like overload (and suspected bots, on purpose), the
// reason for the rest.
func (p *Pages) queueFail(w http.ResponseWriter, r *http.Request, err error) {
	if admission.IsHighDemand(err) {
		p.busy(w, r)
		return
	}
	p.fail(w, r, "Waiting room", err)
}

// queue is the waiting room: place, wait and odds, reloaded at the pace
// the server asks (poll_after_ms), never faster; once admitted, the hold
// form with the booking-time challenge.
func (p *Pages) queue(w http.ResponseWriter, r *http.Request) {
	j, err := parseJourney(r.URL.Query().Get)
	if err == nil && p.cfg.Admission == nil {
		err = booking.Errorf(booking.EUNAVAIL, "NO_WAITING_ROOM", "The waiting room is not running on this server.")
	}
	if err != nil {
		p.fail(w, r, "Waiting room", err)
		return
	}
	sh, err := p.cfg.Booking.Catalog().Find(r.Context(), j.train, j.date, j.class, "TQ")
	if err != nil {
		p.fail(w, r, "Waiting room", err)
		return
	}
	v, err := p.cfg.Admission.Status(r.Context(), p.admCaller(r), p.cfg.Admission.Ticket(sh.ID, sessionOf(r).UserID))
	if err != nil {
		p.queueFail(w, r, err)
		return
	}
	if v.Status == "ADMITTED" && v.AdmissionToken != nil {
		// "You're in: hold within m:ss", counted down on the hold form.
		exp := p.cfg.Now().Add(time.Duration(v.ExpiresInS) * time.Second)
		p.renderWindowWith(w, r.WithContext(withAdmissionExpiry(r.Context(), exp)), http.StatusOK, views.SiteFrame{}, nil, *v.AdmissionToken, false, false)
		return
	}
	l := langOf(r)
	page := views.QueuePage{Status: v.Status, Message: queueWords(l, v), Odds: oddsWords(l, v.Odds), Refresh: max(1, (v.PollAfterMs+999)/1000),
		FairnessHref: "/v1/windows/" + strconv.FormatInt(sh.ID, 10) + "/fairness", Train: sh.Train, TrainName: sh.TrainName, Class: sh.Class,
		NowISO: p.cfg.Now().Format(time.RFC3339Nano)}
	if v.PositionHint != nil {
		page.Position = strconv.FormatInt(*v.PositionHint, 10)
	}
	if v.EstimatedWaitS != nil {
		page.Wait = clockWords(time.Duration(*v.EstimatedWaitS) * time.Second)
	}
	if !v.RandomiseUntil.IsZero() {
		page.RandomiseUntil = i18n.Clock(v.RandomiseUntil.In(booking.IST), true)
		if v.PositionHint == nil && p.cfg.Now().Before(v.RandomiseUntil) && v.Status == "WAITING" {
			// A live clock to the draw while the place is not drawn yet.
			page.DrawISO = v.RandomiseUntil.Format(time.RFC3339Nano)
		}
	}
	w.Header().Set("Retry-After", strconv.Itoa(page.Refresh))
	p.render(w, r, http.StatusOK, "Waiting room", views.SiteFrame{Active: "search"}, views.SiteQueue(page))
}

// challenge issues the booking-time proof of work for one hold attempt
// (admission Challenge, as POST /v1/challenge) to site.js's worker. It is
// a JSON answer to a same-origin fetch carrying the form's CSRF token.
func (p *Pages) challenge(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if p.cfg.Admission == nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`{"error":"no waiting room"}`)) //nolint:errcheck
		return
	}
	v, err := p.cfg.Admission.Challenge(r.Context(), p.admCaller(r), r.PostFormValue("attempt"))
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		json.NewEncoder(w).Encode(map[string]string{"error": errText(r, err)}) //nolint:errcheck
		return
	}
	json.NewEncoder(w).Encode(v) //nolint:errcheck
}

// challengeOTP is the booking-time challenge's accessible alternative, for
// a passenger whose browser cannot run the proof of work (no JavaScript,
// no Web Worker, too slow): a one-time code sent to the account's phone and
// email (admission RequestChallengeOTP, rate-limited like identity codes).
// The window page comes back asking for the code, the passengers ticked
// kept; the hold then uses the code up instead of a solved puzzle.
func (p *Pages) challengeOTP(w http.ResponseWriter, r *http.Request) {
	selected, _ := tickedPassengers(r)
	adm := r.PostFormValue("admission")
	if p.cfg.Admission == nil {
		p.fail(w, r, "Book", booking.Errorf(booking.EUNAVAIL, "NO_BOOKING_CHECK", "The booking check is not available on this server."))
		return
	}
	// This session becomes the account's booking session (one per account).
	sent, err := p.cfg.Admission.RequestChallengeOTPFor(r.Context(), p.admCaller(r))
	if err != nil {
		if booking.ErrorCode(err) == booking.EINTERNAL {
			p.fail(w, r, "Book", err)
			return
		}
		// Too soon or too many: the message says when; the puzzle stays.
		p.renderWindowWith(w, r, http.StatusTooManyRequests, views.SiteFrame{Error: errText(r, err)}, selected, adm, false, false)
		return
	}
	notice := views.T(r.Context(), "pow.otp.sent")
	if len(sent.Channels) == 0 {
		notice = ""
	}
	p.renderWindowWith(w, r, http.StatusOK, views.SiteFrame{Notice: notice}, selected, adm, true, false)
}

// checkAdmission is the booking check every hold carries, on every shard
// (issue 39: 16), as the API's hold does: the proof of work, or the code
// sent by SMS in its place (challengeOTP), from the account's booking
// session. It runs inside Hold once the request is valid
// (booking.HoldRequest.Check); a form without either is refused here.
func (p *Pages) checkAdmission(r *http.Request, key string) (func(context.Context) error, error) {
	if p.cfg.Admission == nil {
		return nil, nil
	}
	// A form without a proof is refused inside Hold too, after the
	// window's check: a passenger without JavaScript who holds early is
	// told when it opens, not to wait for a check their page cannot run.
	var missing error
	proof := admission.Proof{Challenge: r.PostFormValue("challenge"), Nonce: r.PostFormValue("nonce")}
	if r.PostFormValue("otp_mode") == "1" {
		proof = admission.Proof{Type: admission.ProofOTP, Code: strings.TrimSpace(r.PostFormValue("otp"))}
		if proof.Code == "" {
			missing = booking.Errorf(booking.EINVALID, "OTP_FORMAT", "Type the 6-digit code sent by SMS, then hold.")
		}
	} else if proof.Challenge == "" || proof.Nonce == "" {
		missing = booking.Errorf(booking.EINVALID, "CHALLENGE_REQUIRED", "Wait for the booking check to finish (the bar above the button), then hold.")
	}
	if missing != nil {
		return func(context.Context) error { return missing }, nil
	}
	c := p.admCaller(r)
	return func(ctx context.Context) error { return p.cfg.Admission.CheckHold(ctx, c, proof, key) }, nil
}

type admissionExpiryKey struct{}

func withAdmissionExpiry(ctx context.Context, t time.Time) context.Context {
	return context.WithValue(ctx, admissionExpiryKey{}, t)
}

// admissionExpiry is when the admission shown on the hold form lapses
// (zero when the form did not come from the waiting room's answer).
func admissionExpiry(ctx context.Context) time.Time {
	t, _ := ctx.Value(admissionExpiryKey{}).(time.Time)
	return t
}

// queueWords is the waiting room's answer in the page's language (the
// API's message is English; the page says the same from the catalogue).
func queueWords(l string, v admission.View) string {
	switch {
	case v.Status == "WAITING" && v.PositionHint != nil:
		return i18n.Format(l, "q.place", *v.PositionHint)
	case v.Status == "WAITING":
		return i18n.Format(l, "q.draw", i18n.Clock(v.RandomiseUntil.In(booking.IST), true))
	case v.Status == "SOLD_OUT":
		return i18n.Text(l, "q.soldout")
	case v.Status == "EXPIRED":
		return i18n.Text(l, "q.expired")
	}
	if l == "hi" {
		return i18n.Text(l, "q.other")
	}
	return v.Message
}

// oddsWords says the waiting room's odds in the page's language.
func oddsWords(l, odds string) string {
	var n int
	switch {
	case odds == "":
		return ""
	case strings.HasPrefix(odds, "No seats are free"):
		return i18n.Text(l, "q.odds.none")
	case strings.HasPrefix(odds, "Most people"):
		return i18n.Text(l, "q.odds.most")
	}
	if _, err := fmt.Sscanf(odds, "About 1 in %d", &n); err == nil {
		return i18n.Format(l, "q.odds.one", n)
	}
	return odds
}

// clockWords is a wait as "m:ss" (or "h:mm:ss").
func clockWords(d time.Duration) string {
	s := int(d.Round(time.Second).Seconds())
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s%3600/60, s%60)
	}
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}

func newAttemptKey() string { return "web-" + uuid.NewString() }
