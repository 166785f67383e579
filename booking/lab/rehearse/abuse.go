package rehearse

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"tatkal/booking"
	"tatkal/booking/admission/token"
	"tatkal/booking/app"
	"tatkal/booking/auth"
	"tatkal/booking/fraud"
	"tatkal/booking/lab/seed"
)

// AbuseOptions is one abuse population (fraud.PlanPopulation) raced
// through the HTTP API in one window, as the rehearsal lab drives
// travellers: every account signs in, verifies its phone, binds its
// device, holds at its planned moment with its planned passengers (after a
// challenge solved in its planned time), and pays with its planned UPI
// address or card on the gateway's page. So its signals are the live
// path's: the group commit records the hold's, the confirmation the
// gateway's instrument.
type AbuseOptions struct {
	Population fraud.Population
	// URL is a running deployment to drive (which must trust this
	// process's address in TATKAL_TRUSTED_PROXIES, or every account shows
	// one address); empty: an own stack on free loopback ports.
	URL string
	// Scratch runs the own stack on a scratch database and Redis prefix,
	// removed after (the tests); otherwise on cfg's, and the population stays.
	Scratch bool
	// Speed divides every planned moment's distance from the opening (the
	// rush's tail), so a test's window is shorter; 1: real time. Solve
	// times and a ring's burst spread are kept as planned.
	Speed float64
	// Cluster clusters the window once every payment has resolved, and
	// measures it.
	Cluster bool
	// Progress, if set, receives a line per step.
	Progress io.Writer
	Log      *slog.Logger
}

// AbuseReport is what the drive did and, with Cluster, what clustering found.
type AbuseReport struct {
	Generated fraud.Generated
	Accounts  int
	Held      int
	Booked    int
	// Refused counts what the live path refused, by step and code (a ring
	// that shares past a live limit is refused there).
	Refused map[string]int
	// WithDevice and WithInstrument count the window's signals that carry
	// a bound device and a payment instrument, as the live path recorded.
	WithDevice, WithInstrument int
	// Tries counts the accounts whose script first tried customers past the
	// passenger limit (fraud.Account.Attempt), and TriesRecorded the
	// refused attempts the live path recorded for the window.
	Tries, TriesRecorded int
	Quality              *fraud.Quality
	Elapsed              time.Duration
}

// String is the report in lines.
func (r AbuseReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "window %s (shard %d): %d accounts (%d in rings, %d in families, %d honest), %d held, %d booked through the API in %s\n",
		r.Generated.OpensAt.Format(time.RFC3339), r.Generated.ShardID, r.Accounts, len(r.Generated.Ring), len(r.Generated.Family),
		len(r.Generated.Honest), r.Held, r.Booked, r.Elapsed.Round(time.Second))
	fmt.Fprintf(&b, "signals recorded by the live path: %d with a bound device, %d with a payment instrument; %d refused attempts recorded (%d planned)\n",
		r.WithDevice, r.WithInstrument, r.TriesRecorded, r.Tries)
	if len(r.Refused) > 0 {
		keys := make([]string, 0, len(r.Refused))
		for k := range r.Refused {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = fmt.Sprintf("%s %d", k, r.Refused[k])
		}
		fmt.Fprintf(&b, "refused by the live path: %s\n", strings.Join(parts, ", "))
	}
	if r.Quality != nil {
		fmt.Fprintf(&b, "%s\n", r.Quality)
	}
	return b.String()
}

// abuser is one account of the population on its way through the API.
type abuser struct {
	*traveller
	acct fraud.Account
	uid  int64
}

var otpCode = regexp.MustCompile(`\b\d{6}\b`)

// Abuse drives o's population through the API.
func Abuse(ctx context.Context, cfg app.Config, o AbuseOptions) (AbuseReport, error) {
	if o.Speed <= 0 {
		o.Speed = 1
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	progress := func(format string, args ...any) {
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, format+"\n", args...)
		}
	}
	started := time.Now()
	o.Population.WithinLimits = true // what the live path refuses never becomes a signal
	pl, err := fraud.PlanPopulation(o.Population)
	if err != nil {
		return AbuseReport{}, err
	}
	var t *target
	if o.URL != "" {
		t, err = attach(ctx, cfg, o.URL)
	} else {
		t, err = startOwn(ctx, cfg, log, !o.Scratch, cleanRoutes())
	}
	if err != nil {
		return AbuseReport{}, err
	}
	defer t.close()
	rep := AbuseReport{Accounts: len(pl.Accounts), Refused: map[string]int{}}
	for _, a := range pl.Accounts {
		if len(a.Attempt) > 0 {
			rep.Tries++
		}
	}
	var refusedMu sync.Mutex
	refused := func(step string, a answer) {
		code := a.str("reason")
		if code == "" {
			code = fmt.Sprint(a.code)
		}
		refusedMu.Lock()
		rep.Refused[step+" "+code]++
		refusedMu.Unlock()
	}

	open := -time.Minute
	if _, err := seed.Demo(ctx, t.pool, seed.DemoOptions{OpensIn: &open}); err != nil {
		return rep, fmt.Errorf("seed the network: %w", err)
	}
	hash, err := auth.HashPassword(password, auth.Argon2Params{MemoryKiB: 64, Time: 1, Threads: 1})
	if err != nil {
		return rep, err
	}
	ids, err := fraud.CreateAccounts(ctx, t.pool, pl, hash, true)
	if err != nil {
		return rep, err
	}
	transport := &http.Transport{MaxIdleConns: 2000, MaxIdleConnsPerHost: 2000, IdleConnTimeout: 30 * time.Second}
	defer transport.CloseIdleConnections()
	mr := &modeRun{opts: Defaults(), t: t, mode: "abuse", seed: o.Population.Seed, base: t.base, pspURL: t.pspURL,
		http: &http.Client{Transport: transport, Timeout: 30 * time.Second},
		noRedirect: &http.Client{Transport: transport, Timeout: 30 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		stats: newStats(time.Now().Add(time.Hour), &Options{Duration: time.Minute, Capacity: DefaultCapacity}), decideCtx: ctx}
	as := make([]*abuser, len(pl.Accounts))
	ts := make([]*traveller, len(pl.Accounts))
	byTraveller := map[*traveller]*abuser{}
	for i, acct := range pl.Accounts {
		tv := &traveller{profile: profile{Index: i}, run: mr, login: acct.Login, rng: newRand(o.Population.Seed, uint64(i)),
			ip: acct.Signal.IP.String()}
		as[i], ts[i] = &abuser{traveller: tv, acct: acct, uid: ids[acct.Login]}, tv
		byTraveller[tv] = as[i]
	}

	// Before the window: sign in, verify the phone, bind the device.
	progress("abuse: %d accounts sign in, verify their phones and bind their devices", len(as))
	setupCtx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	err = forEach(setupCtx, ts, 16, func(tv *traveller) error { return byTraveller[tv].prepare(setupCtx, refused) })
	cancel()
	if err != nil {
		return rep, err
	}

	// The window: a shard with a berth for every planned passenger, opening
	// once the earliest challenge can be fetched after now.
	berths := 0
	lead := time.Duration(0)
	for _, a := range pl.Accounts {
		berths += len(a.Signal.Passengers)
		lead = max(lead, time.Duration(a.Signal.SolveMS)*time.Millisecond-a.Signal.HeldAt.Sub(pl.OpensAt))
	}
	opens := time.Now().Add(lead + 2*time.Second).Truncate(time.Millisecond)
	date, shardID, err := abuseShard(ctx, t, berths, opens)
	if err != nil {
		return rep, err
	}
	mr.opens, mr.date, mr.shardID = opens, date, shardID
	rep.Generated = pl.Who(ids)
	rep.Generated.OpensAt, rep.Generated.ShardID = opens, shardID
	progress("abuse: window opens %s on shard %d (%d berths)", opens.Format(time.TimeOnly), shardID, berths)

	// The rush, then every payment resolved.
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, a := range as {
		wg.Add(1)
		go func() {
			defer wg.Done()
			held := a.rush(ctx, pl.OpensAt, o.Speed, refused)
			if held {
				mu.Lock()
				rep.Held++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	progress("abuse: %d of %d accounts held; waiting for their payments", rep.Held, len(as))
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(300 * time.Millisecond) {
		var open, booked int
		if err := t.pool.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM payments p JOIN holds h ON h.id = p.hold_id WHERE h.shard_id = $1 AND p.state NOT IN ('SUCCESS', 'FAILED', 'REFUNDED')),
			(SELECT count(*) FROM bookings WHERE shard_id = $1)`, shardID).Scan(&open, &booked); err != nil {
			return rep, fmt.Errorf("count payments: %w", err)
		}
		rep.Booked = booked
		if open == 0 {
			break
		}
		if time.Now().After(deadline) {
			var states string
			t.pool.QueryRow(ctx, `SELECT coalesce(string_agg(s, ', '), '') FROM (SELECT p.method || ' ' || p.state || ' ' || count(*) AS s
				FROM payments p JOIN holds h ON h.id = p.hold_id WHERE h.shard_id = $1 GROUP BY p.method, p.state) x`, shardID).Scan(&states) //nolint:errcheck
			progress("abuse: %d payments unresolved after 2 minutes (%s)", open, states)
			break
		}
	}
	if _, err := fraud.Drain(ctx, t.pool); err != nil {
		return rep, err
	}
	if err := t.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE device_id <> ''), count(*) FILTER (WHERE instrument_fp <> ''),
		(SELECT count(*) FROM fraud_refused_attempts WHERE window_opens_at = $1)
		FROM fraud_signals WHERE window_opens_at = $1`, opens).Scan(&rep.WithDevice, &rep.WithInstrument, &rep.TriesRecorded); err != nil {
		return rep, fmt.Errorf("count signals: %w", err)
	}
	rep.Elapsed = time.Since(started)
	progress("abuse: %d booked after %s", rep.Booked, rep.Elapsed.Round(time.Second))
	if o.Cluster {
		svc := &fraud.Service{Pool: t.pool, Clusterer: fraud.Clusterer{Config: fraud.DefaultConfig()}}
		res, err := svc.ClusterWindow(ctx, opens)
		if err != nil {
			return rep, err
		}
		q := fraud.Measure(res, rep.Generated)
		rep.Quality = &q
	}
	return rep, nil
}

// abuseShard creates the window's sandbox shard of train 12951 3A on the
// first journey date from ten days on that has none, and loads it.
func abuseShard(ctx context.Context, t *target, berths int, opens time.Time) (time.Time, int64, error) {
	d := time.Now().In(booking.IST)
	for i := 10; i < 200; i++ {
		date := time.Date(d.Year(), d.Month(), d.Day()+i, 0, 0, 0, 0, booking.IST)
		zero := 0
		id, err := seed.Shard(ctx, t.pool, seed.ShardSpec{Train: "12951", Date: date, Class: "3A", Berths: berths,
			OpensAt: opens, WaitlistCap: &zero})
		if errors.Is(err, seed.ErrShardExists) {
			continue
		}
		if err != nil {
			return date, 0, fmt.Errorf("seed the shard: %w", err)
		}
		if _, err := t.pool.Exec(ctx, `UPDATE inventory_shards SET sandbox = true WHERE id = $1`, id); err != nil {
			return date, 0, err
		}
		return date, id, t.load(ctx, id)
	}
	return time.Time{}, 0, errors.New("no free journey date for the window's shard")
}

// prepare signs in, verifies the account's phone (reading the code as
// the SIM in the account's phone would, from the messages sent) and binds
// the planned device; a device past its live limit is refused, and the
// account binds one of its own.
func (a *abuser) prepare(ctx context.Context, refused func(string, answer)) error {
	if err := a.logIn(ctx, password); err != nil {
		return err
	}
	r := a.call(ctx, "POST", "/v1/auth/otp/request", nil, fmt.Sprintf(`{"phone":%q}`, a.acct.Phone), false)
	if r.code != 200 {
		return fmt.Errorf("otp request of %s: %d %v", a.login, r.code, r.body)
	}
	var body string
	if err := a.run.t.pool.QueryRow(ctx, `SELECT body FROM notifications WHERE user_id = $1 AND kind = 'OTP'
		ORDER BY id DESC LIMIT 1`, a.uid).Scan(&body); err != nil {
		return fmt.Errorf("the code sent to %s: %w", a.login, err)
	}
	v := a.call(ctx, "POST", "/v1/auth/otp/verify", nil, fmt.Sprintf(`{"code":%q}`, otpCode.FindString(body)), false)
	if v.code != 200 || v.str("token") == "" {
		return fmt.Errorf("otp verify of %s: %d %v", a.login, v.code, v.body)
	}
	a.token = v.str("token")
	if b := a.bind(ctx, "abuse-device-"+a.acct.Signal.DeviceID); b.code != 200 {
		refused("bind", b)
		if b = a.bind(ctx, "abuse-device-own-"+a.acct.Login); b.code != 200 {
			return fmt.Errorf("bind a device of %s: %d %v", a.login, b.code, b.body)
		}
	}
	return nil
}

// rush fetches the challenge at its planned lead, holds at its planned
// moment and pays; it says whether the hold was taken.
func (a *abuser) rush(ctx context.Context, planOpens time.Time, speed float64, refused func(string, answer)) bool {
	at := a.run.opens.Add(time.Duration(float64(a.acct.Signal.HeldAt.Sub(planOpens)) / speed))
	key := fmt.Sprintf("abuse-%s-%d", a.login, a.run.seed)
	sleepUntil := func(t time.Time) bool {
		select {
		case <-time.After(time.Until(t)):
			return true
		case <-ctx.Done():
			return false
		}
	}
	challenge := func(key string) (tok, nonce string, ok bool) {
		ch := a.call(ctx, "POST", "/v1/challenge", nil, fmt.Sprintf(`{"attempt":%q}`, key), false)
		if ch.code != 200 {
			refused("challenge", ch)
			at = time.Now().Add(time.Duration(retryAfterMs(ch.header)) * time.Millisecond)
			return "", "", false
		}
		tok = ch.str("challenge")
		return tok, token.Solve(tok, int(ch.num("difficulty_bits"))), true
	}
	var tok, nonce string
	ready := false
	if len(a.acct.Attempt) > 0 {
		// The script first books the customers it was given, one of whom two
		// other accounts already hold: the passenger limit refuses it with
		// the uniform answer (and records the attempt), and the script falls
		// back on the account's own passengers at once, with a challenge
		// fetched beside the first.
		if !sleepUntil(at.Add(-time.Duration(a.acct.Signal.SolveMS) * time.Millisecond)) {
			return false
		}
		tryKey := key + "-try"
		tryTok, tryNonce, ok := challenge(tryKey)
		if ok {
			tok, nonce, ready = challenge(key)
			if !sleepUntil(at) {
				return false
			}
			try := a.call(ctx, "POST", "/v1/bookings/hold", map[string]string{"Idempotency-Key": tryKey},
				a.holdBody(a.acct.Attempt, tryTok, tryNonce), true)
			if try.code == http.StatusCreated { // the limit let it through after all: the script keeps it
				a.payFor(ctx, try.str("hold_id"), refused)
				return true
			}
			refused("try", try)
		}
	}
	var hold answer
	for attempt := 0; attempt < 4; attempt++ {
		if !ready {
			if !sleepUntil(at.Add(-time.Duration(a.acct.Signal.SolveMS) * time.Millisecond)) {
				return false
			}
			var ok bool
			if tok, nonce, ok = challenge(key); !ok {
				continue
			}
		}
		ready = false
		if !sleepUntil(at) {
			return false
		}
		hold = a.call(ctx, "POST", "/v1/bookings/hold", map[string]string{"Idempotency-Key": key}, a.holdBody(a.acct.Signal.Passengers, tok, nonce), true)
		if hold.code == http.StatusCreated {
			break
		}
		refused("hold", hold)
		if hold.code != 503 && hold.code != 429 && hold.code != 0 {
			return false
		}
		at = time.Now().Add(time.Duration(retryAfterMs(hold.header)) * time.Millisecond)
	}
	if hold.code != http.StatusCreated {
		return false
	}
	a.payFor(ctx, hold.str("hold_id"), refused)
	return true
}

func (a *abuser) holdBody(pax []fraud.Passenger, challenge, nonce string) string {
	var ps []string
	for i, p := range pax {
		ps = append(ps, fmt.Sprintf(`{"name":%q,"age":%d,"gender":"%s","id_type":%q,"id_ref":%q}`,
			p.Name, p.Age, []string{"M", "F"}[(a.Index+i)%2], p.IDType, p.IDRef))
	}
	return fmt.Sprintf(`{"train_no":"12951","journey_date":"%s","class":"3A","quota":"TQ","from":"MMCT","to":"NDLS","passengers":[%s],`+
		`"challenge":{"type":"POW_SHA256","token":%q,"nonce":%q}}`,
		a.run.date.Format(time.DateOnly), strings.Join(ps, ","), challenge, nonce)
}

// payFor pays the hold with the planned instrument: a UPI address (one
// past its live limit is refused, and the account pays with its own) or a
// card, typed on the gateway's page.
func (a *abuser) payFor(ctx context.Context, holdID string, refused func(string, answer)) {
	method, inst := "UPI", a.acct.Signal.Instrument
	if n, ok := strings.CutPrefix(inst, "card:"); ok {
		method, inst = "CARD", n
	} else {
		inst = strings.TrimPrefix(inst, "upi:")
	}
	var p answer
	for attempt := 0; attempt < 4; attempt++ {
		body := fmt.Sprintf(`{"hold_id":%q,"method":%q,"vpa":%q,"idempotency_key":"abuse-pay-%s-%d"}`, holdID, method, inst, a.login, attempt)
		if method == "CARD" {
			body = fmt.Sprintf(`{"hold_id":%q,"method":"CARD","idempotency_key":"abuse-pay-%s-%d"}`, holdID, a.login, attempt)
		}
		p = a.call(ctx, "POST", "/v1/payments/initiate", nil, body, true)
		if p.code == 200 || p.code == 201 {
			break
		}
		refused("pay", p)
		if method == "UPI" && !strings.HasPrefix(inst, "abuse-own-") {
			inst = "abuse-own-" + strings.ToLower(a.login) + "@upi" // the address past its limit: the account's own
		}
		if !a.pause(ctx, retryAfterMs(p.header)) {
			return
		}
	}
	// The collect request or the bank's page may come a moment after the
	// answer (the gateway is slow): the customer waits for it.
	next, ok := p.body["next_action"].(map[string]any)
	for try := 0; !ok && try < 20 && p.str("payment_id") != ""; try++ {
		if !a.pause(ctx, 500) {
			return
		}
		p = a.call(ctx, "GET", "/v1/payments/"+p.str("payment_id"), nil, "", false)
		next, ok = p.body["next_action"].(map[string]any)
	}
	if !ok {
		refused("no page", p)
		return
	}
	u, _ := next["url"].(string)
	if u == "" {
		u = a.run.pspURL + "/gw/" + p.str("gateway") + "/pay/" + p.str("psp_ref")
	}
	form := url.Values{"otp": {"123456"}}
	if method == "CARD" {
		form.Set("card_number", inst)
	}
	if code := a.decide(ctx, u+"/approve", form.Encode()); code != http.StatusSeeOther {
		refused("approve", answer{code: code})
	}
}
