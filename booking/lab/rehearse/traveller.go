package rehearse

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"tatkal/booking/admission/token"
)

// Outcomes of a traveller's visit.
const (
	Booked   = "booked"
	Declined = "declined"
	Expired  = "expired"
	SoldOut  = "sold_out"
	Refund   = "refund_due"
	Waiting  = "still_waiting"
	Errored  = "error"
)

// banks for net banking.
var banks = []string{"SBI", "HDFC", "ICICI", "AXIS", "KOTAK", "PNB", "BOB", "CANARA"}

// stations of train 12951 in order (the rehearsal's journeys).
var stations = []string{"MMCT", "BVI", "ST", "BRC", "RTM", "NAD", "KOTA", "NDLS"}

// profile is what the seed decides about traveller i, the same in both
// modes: kind, party, journey, payment and the bank's answer.
type profile struct {
	Index      int           `json:"index"`
	Aggressive bool          `json:"aggressive"`
	Party      int           `json:"party"`
	From       string        `json:"from"`
	To         string        `json:"to"`
	Method     string        `json:"method"`
	Decline    bool          `json:"decline"`
	Arrival    time.Duration `json:"-"`
	ArrivalS   float64       `json:"arrival_s"`
	Think      time.Duration `json:"-"` // time on the bank's page
}

// profiles draws every traveller's profile from seed: exactly
// round(n × aggressive) aggressive travellers.
func profiles(o Options, seed uint64) []profile {
	rng := rand.New(rand.NewPCG(seed, 0x7a7ca1))
	n := o.Travellers
	aggr := make([]bool, n)
	for _, i := range rng.Perm(n)[:int(float64(n)*o.Aggressive+0.5)] {
		aggr[i] = true
	}
	out := make([]profile, n)
	for i := range out {
		r := rand.New(rand.NewPCG(seed, uint64(i)+1))
		p := profile{Index: i, Aggressive: aggr[i]}
		switch x := r.Float64(); {
		case x < 0.5:
			p.Party = 1
		case x < 0.75:
			p.Party = 2
		case x < 0.9:
			p.Party = 3
		default:
			p.Party = 4
		}
		// Mixed segments: most travel end to end, the rest a sub-journey.
		if r.Float64() < 0.6 {
			p.From, p.To = stations[0], stations[len(stations)-1]
		} else {
			a := r.IntN(len(stations) - 1)
			b := a + 1 + r.IntN(len(stations)-1-a)
			p.From, p.To = stations[a], stations[b]
		}
		switch x := r.Float64(); {
		case x < 0.3:
			p.Method = "WALLET"
		case x < 0.7:
			p.Method = "UPI"
		case x < 0.9:
			p.Method = "CARD"
		default:
			p.Method = "NB"
		}
		p.Decline = p.Method != "WALLET" && r.Float64() < 0.1
		p.Arrival = time.Duration(r.Float64() * float64(o.Arrivals))
		p.ArrivalS = p.Arrival.Seconds()
		p.Think = time.Duration(500+r.IntN(1500)) * time.Millisecond
		out[i] = p
	}
	return out
}

// Step is one thing a traveller did, at a time from the opening.
type Step struct {
	AtS  float64 `json:"at_s"`
	What string  `json:"what"`
}

// traveller is one simulated passenger in one mode.
type traveller struct {
	profile
	run     *modeRun
	login   string
	uid     int64
	marked  bool // entered (Options.Stratify's barrier)
	token   string
	device  string
	ip      string // sent as X-Forwarded-For when set (a stack that trusts the driver's address)
	rng     *rand.Rand
	outcome string
	endAt   time.Time
	mu      sync.Mutex
	steps   []Step
}

func (tv *traveller) note(format string, args ...any) {
	tv.mu.Lock()
	defer tv.mu.Unlock()
	if len(tv.steps) < 200 {
		tv.steps = append(tv.steps, Step{AtS: round3(time.Since(tv.run.opens).Seconds()), What: fmt.Sprintf(format, args...)})
	}
}

func round3(x float64) float64 { return float64(int64(x*1000)) / 1000 }

// answer is one HTTP answer.
type answer struct {
	code   int
	body   map[string]any
	header http.Header
}

func (a answer) str(k string) string { s, _ := a.body[k].(string); return s }
func (a answer) num(k string) float64 {
	f, _ := a.body[k].(float64)
	return f
}

// call sends one request as this traveller, counting it at the edge and,
// for the hold and payment calls, at the backend.
func (tv *traveller) call(ctx context.Context, method, path string, headers map[string]string, body string, backend bool) answer {
	st := tv.run.stats
	req, err := http.NewRequestWithContext(ctx, method, tv.run.base+path, strings.NewReader(body))
	if err != nil {
		return answer{}
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if tv.token != "" {
		req.Header.Set("Authorization", "Bearer "+tv.token)
	}
	if tv.device != "" {
		req.Header.Set("X-Device-Token", tv.device)
	}
	if tv.ip != "" {
		req.Header.Set("X-Forwarded-For", tv.ip)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	start := time.Now()
	st.edge.Add(1)
	if backend {
		st.backend.Add(1)
		st.perSecond(start, func(s *second) { s.Backend++ })
	}
	resp, err := tv.run.http.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			st.transport.Add(1)
		}
		return answer{}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{code: resp.StatusCode, header: resp.Header}
	json.Unmarshal(raw, &a.body) //nolint:errcheck
	if a.code == http.StatusServiceUnavailable || a.code == http.StatusTooManyRequests {
		st.rejected.Add(1)
		st.noteRejection(fmt.Sprintf("%s %s %d %s", method, pathPattern(path), a.code, a.str("reason")))
		if backend {
			st.backendRejected.Add(1)
			st.perSecond(start, func(s *second) { s.Rejected++ })
		}
	} else if backend {
		st.latency(time.Since(start))
	}
	return a
}

// pause waits as this traveller does: ordinary travellers what the
// server asked plus up to 30 % jitter, aggressive ones the multiplier
// faster (never under 50 ms).
func (tv *traveller) pause(ctx context.Context, ms float64) bool {
	if ms <= 0 {
		ms = 1000
	}
	if tv.Aggressive {
		ms /= tv.run.opts.RetryMultiplier
	} else {
		ms *= 1 + 0.3*tv.rng.Float64()
	}
	d := time.Duration(max(ms, 50) * float64(time.Millisecond))
	select {
	case <-time.After(d):
		return true
	case <-ctx.Done():
		return false
	}
}

func retryAfterMs(h http.Header) float64 {
	n, err := strconv.Atoi(h.Get("Retry-After"))
	if err != nil || n <= 0 {
		return 1000
	}
	return float64(n) * 1000
}

// signIn signs in with the password and binds the traveller's device,
// retrying what says "retry".
func (tv *traveller) signIn(ctx context.Context, password string) error {
	if err := tv.logIn(ctx, password); err != nil {
		return err
	}
	a := tv.bind(ctx, "rehearsal-device-"+tv.login)
	if a.code != 200 {
		return fmt.Errorf("bind device of %s: %d %v", tv.login, a.code, a.body)
	}
	return nil
}

// logIn signs in with the password, retrying what says "retry".
func (tv *traveller) logIn(ctx context.Context, password string) error {
	for ctx.Err() == nil {
		a := tv.call(ctx, "POST", "/v1/auth/login", nil, fmt.Sprintf(`{"login":%q,"password":%q}`, tv.login, password), false)
		if a.code == 200 {
			tv.token = a.str("token")
			tv.uid = int64(a.num("user_id"))
			return nil
		}
		if a.code != 503 && a.code != 429 && a.code != 0 {
			return fmt.Errorf("sign in %s: %d %v", tv.login, a.code, a.body)
		}
		time.Sleep(time.Duration(100+tv.rng.IntN(400)) * time.Millisecond)
	}
	return ctx.Err()
}

// bind binds the device token to the account, retrying what says
// "retry", and answers the last answer (the binding is kept on 200).
func (tv *traveller) bind(ctx context.Context, deviceToken string) answer {
	var a answer
	for ctx.Err() == nil {
		a = tv.call(ctx, "POST", "/v1/devices/bind", nil, fmt.Sprintf(`{"device_token":%q}`, deviceToken), false)
		if a.code == 200 {
			tv.device = a.str("device_binding")
			return a
		}
		if a.code != 503 && a.code != 0 {
			return a
		}
		time.Sleep(time.Duration(100+tv.rng.IntN(400)) * time.Millisecond)
	}
	return a
}

// letters spells n in letters (names may not carry digits).
func letters(n int) string {
	b := []byte{}
	for {
		b = append(b, byte('a'+n%26))
		n /= 26
		if n == 0 {
			break
		}
	}
	b[0] -= 'a' - 'A'
	return string(b)
}

// holdBody is the traveller's hold request. Its passengers are the run's
// own (the run's letters in name and PAN): the same people on every run
// of a rehearsal's database are on a new account each run, and from the
// third run on the resale check (a passenger on too many accounts' holds
// in a day) refused their holds as HIGH_DEMAND, as it should.
func (tv *traveller) holdBody() string {
	var ps []string
	run := tv.runLetters()
	for i := 0; i < tv.Party; i++ {
		ps = append(ps, fmt.Sprintf(`{"name":"Yatri %s %s %c","age":%d,"gender":"%s","id_type":"PAN","id_ref":"RH%s%04dZ"}`,
			letters(tv.Index), run, 'A'+i, 22+(tv.Index+i*17)%50, []string{"M", "F"}[(tv.Index+i)%2], strings.ToUpper(run), (tv.Index*4+i)%10000))
	}
	return fmt.Sprintf(`{"train_no":"12951","journey_date":"%s","class":"3A","quota":"TQ","from":"%s","to":"%s","passengers":[%s]`,
		tv.run.date.Format(time.DateOnly), tv.From, tv.To, strings.Join(ps, ","))
}

// runLetters are three letters of the traveller's run, in its passengers'
// names and IDs and its UPI address: what one person uses is the run's own.
func (tv *traveller) runLetters() string { return letters(tv.run.idx + 26*26) }

// vpa is the traveller's UPI address, the run's own: the same address on
// a new account every run was refused from the fourth run of a rehearsal's
// database on (an instrument on more than three accounts in 30 days is
// answered HIGH_DEMAND, as it should be), 78 payments in a five-seed run.
func (tv *traveller) vpa() string {
	return fmt.Sprintf("rh%s%d@upi", strings.ToLower(tv.runLetters()), tv.Index)
}

// visit is the traveller's whole rush, from arrival to a terminal answer
// or the end of the observation window.
func (tv *traveller) visit(ctx context.Context) {
	defer func() {
		tv.markEntered()
		if tv.outcome == "" {
			tv.outcome = Waiting
			tv.note("still waiting when the window ended")
		} else {
			tv.endAt = time.Now()
			tv.run.stats.finished.Add(1)
		}
	}()
	select {
	case <-time.After(time.Until(tv.run.opens.Add(tv.Arrival))):
	case <-ctx.Done():
		return
	}
	tv.note("arrives (%s, party of %d, %s-%s, pays by %s)", kind(tv.Aggressive), tv.Party, tv.From, tv.To, tv.Method)
	var admissionToken string
	holdCtx := ctx
	if tv.run.mode == Queue {
		var ok bool
		if admissionToken, ok = tv.queue(ctx); !ok {
			return
		}
		// Admitted, the traveller takes the seats offered even if the
		// window ends meanwhile, as they pay: cut at the window, the holds
		// of those admitted last went to whoever learnt of their admission
		// first, the fastest pollers (CI: aggressive 1.3-1.5× ordinary in
		// every seed on a loaded machine).
		holdCtx = tv.run.decideCtx
	}
	holdID, ok := tv.hold(holdCtx, admissionToken)
	if !ok {
		return
	}
	tv.pay(ctx, holdID)
}

// markEntered passes Options.Stratify's barrier, once.
func (tv *traveller) markEntered() {
	if tv.run.stratified != nil && !tv.marked {
		tv.marked = true
		tv.run.entered.Done()
	}
}

func kind(aggressive bool) string {
	if aggressive {
		return "aggressive"
	}
	return "ordinary"
}

// queue enters the waiting room and waits until admitted.
func (tv *traveller) queue(ctx context.Context) (string, bool) {
	intent := fmt.Sprintf(`{"intent":{"train_no":"12951","journey_date":"%s","class":"3A"}}`, tv.run.date.Format(time.DateOnly))
	var ticket string
	var wait float64
	for ctx.Err() == nil {
		a := tv.call(ctx, "POST", "/v1/queue/enter", nil, intent, false)
		if a.code == 200 {
			ticket, wait = a.str("queue_ticket"), a.num("poll_after_ms")
			tv.note("in the queue, ticket %s", short(ticket))
			if tv.run.stratified != nil {
				tv.markEntered()
				select {
				case <-tv.run.stratified:
				case <-ctx.Done():
					return "", false
				}
				if tv.Aggressive {
					tv.note("becomes aggressive (place in the drawn order)")
				}
			}
			break
		}
		if a.code != 503 && a.code != 429 && a.code != 0 {
			tv.markEntered()
			tv.fail(fmt.Sprintf("queue enter: %d %s %s", a.code, a.str("code"), a.str("detail")))
			return "", false
		}
		if !tv.pause(ctx, retryAfterMs(a.header)) {
			return "", false
		}
	}
	for {
		if !tv.pause(ctx, wait) {
			return "", false
		}
		a := tv.call(ctx, "GET", "/v1/queue/status?ticket="+url.QueryEscape(ticket), nil, "", false)
		if a.code == 503 || a.code == 429 || a.code == 0 {
			wait = retryAfterMs(a.header)
			continue
		}
		if a.code != 200 {
			tv.fail(fmt.Sprintf("queue status: %d %s %s", a.code, a.str("code"), a.str("detail")))
			return "", false
		}
		switch a.str("status") {
		case "WAITING":
			wait = a.num("poll_after_ms")
			continue
		case "ADMITTED":
			tv.note("admitted")
			tv.run.stats.perSecond(time.Now(), func(s *second) { s.Admitted++ })
			return a.str("admission_token"), true
		case "SOLD_OUT":
			tv.end(SoldOut, "the queue says sold out")
			return "", false
		case "EXPIRED":
			tv.end(Expired, "the admission offer expired")
			return "", false
		default:
			tv.fail("queue status " + a.str("status"))
			return "", false
		}
	}
}

func short(s string) string {
	if len(s) > 10 {
		return s[:10] + "…"
	}
	return s
}

func (tv *traveller) end(outcome, why string) {
	tv.outcome = outcome
	tv.note("%s: %s", outcome, why)
}

func (tv *traveller) fail(why string) {
	tv.outcome = Errored
	tv.note("error: %s", why)
	tv.run.stats.noteError(why)
}

// hold takes the seats, solving the booking challenge every hold carries
// (direct and through the queue), retrying what says "retry" at the
// traveller's pace.
func (tv *traveller) hold(ctx context.Context, admissionToken string) (string, bool) {
	key := fmt.Sprintf("rh-%s-%d", tv.login, tv.run.seed)
	plain := tv.holdBody()
	for attempt := 0; ctx.Err() == nil; attempt++ {
		headers := map[string]string{"Idempotency-Key": key, "X-Client-Attestation": "rehearsal"}
		ch := tv.call(ctx, "POST", "/v1/challenge", map[string]string{"X-Client-Attestation": "rehearsal"}, fmt.Sprintf(`{"attempt":%q}`, key), false)
		if ch.code != 200 {
			if ch.code == 503 || ch.code == 429 || ch.code == 0 {
				if !tv.pause(ctx, retryAfterMs(ch.header)) {
					return "", false
				}
				continue
			}
			tv.fail(fmt.Sprintf("challenge: %d %s %s", ch.code, ch.str("code"), ch.str("detail")))
			return "", false
		}
		chTok := ch.str("challenge")
		body := plain + fmt.Sprintf(`,"challenge":{"type":"POW_SHA256","token":%q,"nonce":%q}}`, chTok, token.Solve(chTok, int(ch.num("difficulty_bits"))))
		if admissionToken != "" {
			headers["X-Admission-Token"] = admissionToken
		}
		a := tv.call(ctx, "POST", "/v1/bookings/hold", headers, body, true)
		switch {
		case a.code == http.StatusCreated && a.str("status") == "HELD":
			tv.note("held %d berth(s), fare ₹%s", tv.Party, fareOf(a))
			tv.run.stats.perSecond(time.Now(), func(s *second) { s.Holds++ })
			return a.str("hold_id"), true
		case a.code == http.StatusOK && a.str("status") == "SOLD_OUT":
			tv.end(SoldOut, "no seats left")
			return "", false
		case a.code == 503 || a.code == 429 || a.code == 0:
			tv.note("hold refused, retryable (%d)", a.code)
			if !tv.pause(ctx, retryAfterMs(a.header)) {
				return "", false
			}
		case a.code == http.StatusConflict && strings.Contains(a.str("code"), "SOLD_OUT"):
			tv.end(SoldOut, "no seats left")
			return "", false
		case a.str("code") == "ADMISSION_EXPIRED":
			tv.end(Expired, "the admission expired before the hold")
			return "", false
		default:
			tv.fail(fmt.Sprintf("hold: %d %s %s", a.code, a.str("code"), a.str("detail")))
			return "", false
		}
	}
	return "", false
}

func fareOf(a answer) string {
	if f, ok := a.body["fare"].(map[string]any); ok {
		s, _ := f["total"].(string)
		return s
	}
	return "?"
}

// pay pays for the hold by the traveller's method, decides on the bank's
// page as seeded, and polls the booking until a terminal answer.
func (tv *traveller) pay(ctx context.Context, holdID string) {
	key := fmt.Sprintf("rh-pay-%s-%d", tv.login, tv.run.seed)
	// A traveller who has seats held pays whether or not we are still
	// watching: the payment (and the bank's page) runs into the drain.
	pctx := tv.run.decideCtx
	var p answer
	for pctx.Err() == nil {
		p = tv.call(pctx, "POST", "/v1/payments/initiate", nil, fmt.Sprintf(`{"hold_id":%q,"method":%q,"vpa":%q,"bank":%q,"idempotency_key":%q}`,
			holdID, tv.Method, tv.vpa(), banks[tv.Index%len(banks)], key), true)
		if p.code == 201 || p.code == 200 {
			break
		}
		if p.code != 503 && p.code != 429 && p.code != 0 {
			tv.fail(fmt.Sprintf("pay: %d %s %s", p.code, p.str("code"), p.str("detail")))
			return
		}
		if !tv.pause(pctx, retryAfterMs(p.header)) {
			return
		}
	}
	if p.code != 201 && p.code != 200 {
		return
	}
	tv.note("payment started by %s: %s", tv.Method, p.str("state"))
	tv.run.stats.perSecond(time.Now(), func(s *second) { s.Payments++ })
	if next, ok := p.body["next_action"].(map[string]any); ok {
		u, _ := next["url"].(string)
		if u == "" {
			u = tv.run.pspURL + "/gw/" + p.str("gateway") + "/pay/" + p.str("psp_ref")
		}
		// The customer on the bank's page decides whether or not we are
		// still watching: the decision outlives the window, into the drain.
		dctx := tv.run.decideCtx
		select {
		case <-time.After(tv.Think):
		case <-dctx.Done():
			return
		}
		decision := "approve"
		if tv.Decline {
			decision = "decline"
		}
		tv.decide(dctx, u+"/"+decision, "otp=123456")
		tv.note("pressed %s on the bank's page", decision)
	}
	wait := 500.0
	for {
		if !tv.pause(ctx, wait) {
			return
		}
		a := tv.call(ctx, "GET", "/v1/bookings/"+holdID+"/status", nil, "", false)
		if a.code != 200 {
			wait = retryAfterMs(a.header)
			continue
		}
		state := a.str("state")
		pstate := ""
		if pm, ok := a.body["payment"].(map[string]any); ok {
			pstate, _ = pm["state"].(string)
		}
		switch {
		case state == "CONFIRMED" || state == "WAITLISTED":
			tv.end(Booked, "PNR "+a.str("pnr"))
			tv.run.stats.perSecond(time.Now(), func(s *second) { s.Booked++ })
			return
		case state == "REFUNDED" || state == "REFUND_INITIATED":
			tv.end(Refund, "paid but no ticket: refund due")
			return
		case state == "EXPIRED":
			tv.end(Expired, "the hold ran out before the payment resolved")
			return
		case state == "FAILED" || pstate == "FAILED":
			// Let the seats go at once, as the site's "cancel" does.
			tv.call(ctx, "POST", "/v1/bookings/"+holdID+"/cancel", nil, `{"cancel":"hold"}`, false)
			tv.end(Declined, "the bank declined")
			return
		case state == "CANCELLED":
			tv.end(Declined, "cancelled")
			return
		}
		wait = a.num("next_check_after_ms")
		if wait <= 0 {
			wait = 1000
		}
	}
}

// decide presses a button on the gateway's page with the form's fields (a
// card's 3-D Secure page wants a one-time password, and takes the card's
// number).
func (tv *traveller) decide(ctx context.Context, u, form string) int {
	for try := 0; try < 5 && ctx.Err() == nil; try++ {
		req, err := http.NewRequestWithContext(ctx, "POST", u, strings.NewReader(form))
		if err != nil {
			return 0
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := tv.run.noRedirect.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body) //nolint:errcheck
			resp.Body.Close()
			if resp.StatusCode < 500 {
				return resp.StatusCode
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
	return 0
}

// pathPattern is path without its ids and query, so refusals group by
// endpoint: /v1/bookings/{id}/cancel, not one line per booking.
func pathPattern(path string) string {
	path, _, _ = strings.Cut(path, "?")
	parts := strings.Split(path, "/")
	for i, p := range parts {
		if len(p) >= 16 || (p != "" && strings.Trim(p, "0123456789") == "") {
			parts[i] = "{id}"
		}
	}
	return strings.Join(parts, "/")
}
