package api_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"tatkal/booking"
	"tatkal/booking/admission"
	"tatkal/booking/admission/token"
	"tatkal/booking/api"
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
)

// The waiting-room rehearsal of issue 10: 600 verified travellers with
// bound devices on one queue-mode shard of 64 berths (TQWL cap 38), 30 %
// aggressive (they poll and retry four times as fast and ignore pacing),
// 70 % ordinary (they wait poll_after_ms and Retry-After, with jitter), all
// entering inside the randomisation window, through the HTTP API, every
// traveller behind ONE source address. Aggressive / ordinary success ≤ 1.25, no
// admitted traveller who comes back inside the pick-up window is refused a
// hold, and the invariant check passes against the database after.
//
// Time is compressed (a 3 s draw, polls paced between 250 ms and 5 s; the
// pick-up window stays 60 s), and those still waiting give up soon after
// every place is held, so the run takes about 20 s. The draw
// itself is fair by construction (fair_test.go and verify-window prove
// it); to measure what client behaviour does to the outcome rather than
// the draw's sampling noise, the window seed comes from the rehearsal seed
// and, once everyone has entered (one call, the same for both kinds),
// exactly 3 of every 10 consecutive places in the queue's order are made
// aggressive.
func TestWaitingRoomRehearsal(t *testing.T) {
	if testing.Short() {
		t.Skip("rehearsal: 600 travellers")
	}
	t.Parallel()
	// One run, every traveller behind one source address: the bug this
	// guards against (the per-address limiter answered ordinary polls 503,
	// and aggressive travellers won 9.57 times as often). The bound on the
	// mean of three seeds, and the waiting room against direct booking, are
	// booking/lab/rehearse's TestSmallRehearsal (its travellers share one
	// address too); a control with an address each never differed.
	r := rehearse(t, &rehearsal{seed: 1, travellers: 600, berths: 64, waitlist: 38, aggressive: 0.3})
	t.Log(r)
	if r.admittedRefused > 0 {
		t.Errorf("%d admitted travellers came back inside the pick-up window and were refused a hold", r.admittedRefused)
	}
	if r.ratio() > 1.25 {
		t.Errorf("aggressive / ordinary success = %.2f, more than 1.25", r.ratio())
	}
	// Liveness depends on the machine: on a loaded one (or under -race)
	// some may still be waiting at the 90 s deadline. The promises above
	// hold whatever the speed; a stuck queue does not sell at all.
	if r.ordinaryOK+r.aggressiveOK == 0 {
		t.Errorf("nothing sold in 90 s")
	}
}

type rehearsal struct {
	seed                       uint64
	travellers, berths         int
	waitlist                   int
	aggressive                 float64
	ordinaryN, aggressiveN     int
	ordinaryOK, aggressiveOK   int
	admitted, admittedRefused  int
	unfinished                 int
	requests, refused503       atomic.Int64
	ordinary503, ordinaryPolls atomic.Int64
	pickupLag                  []time.Duration // ordinary: admitted → first ADMITTED answer
	took                       time.Duration
	held                       atomic.Int64  // travellers answered 201 so far
	stop                       chan struct{} // closed when those still waiting may give up (see rehearse)
}

// stopped says whether those still waiting may give up.
func (r *rehearsal) stopped() bool {
	select {
	case <-r.stop:
		return true
	default:
		return false
	}
}

func (r *rehearsal) ratio() float64 {
	o := float64(r.ordinaryOK) / float64(max(r.ordinaryN, 1))
	a := float64(r.aggressiveOK) / float64(max(r.aggressiveN, 1))
	if o == 0 {
		if a == 0 {
			return 1
		}
		return 99
	}
	return a / o
}

func (r *rehearsal) String() string {
	slices.Sort(r.pickupLag)
	lag := func(q float64) time.Duration {
		if len(r.pickupLag) == 0 {
			return 0
		}
		return r.pickupLag[min(int(q*float64(len(r.pickupLag))), len(r.pickupLag)-1)].Round(time.Millisecond)
	}
	return fmt.Sprintf("ordinary %d/%d = %.1f%%, aggressive %d/%d = %.1f%%, ratio %.2f; admitted %d, refused after admission %d, unfinished %d; "+
		"%d requests, %d answered 503 (ordinary: %d of %d status polls); ordinary pick-up lag p50 %v p95 %v max %v; %v",
		r.ordinaryOK, r.ordinaryN, 100*float64(r.ordinaryOK)/float64(max(r.ordinaryN, 1)),
		r.aggressiveOK, r.aggressiveN, 100*float64(r.aggressiveOK)/float64(max(r.aggressiveN, 1)), r.ratio(),
		r.admitted, r.admittedRefused, r.unfinished, r.requests.Load(), r.refused503.Load(), r.ordinary503.Load(), r.ordinaryPolls.Load(),
		lag(0.5), lag(0.95), lag(1), r.took.Round(100*time.Millisecond))
}

// rehearsalConfig is the compressed-time waiting room of the rehearsal.
func rehearsalConfig(cfg *admission.Config) {
	cfg.Randomise = 3 * time.Second
	cfg.PollMin, cfg.PollMax = 250*time.Millisecond, 5*time.Second
	cfg.ChallengeBits = 4 // still solved on every hold, but not what is measured here
}

// waitingRoomServer serves the /v1 API of stack s with a waiting room
// configured by mod (same secret and prefix as the stack's own, so the
// stack's hold path and console see its tokens and records).
func waitingRoomServer(t *testing.T, s *teststack.Stack, mod func(*admission.Config)) (*admission.Service, *httptest.Server) {
	log := slog.New(slog.NewTextHandler(tlogWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg := admission.Config{Pool: s.Pool, Redis: s.Redis, Prefix: s.KeyPrefix, Store: s.Store, Catalog: s.Service.Catalog(),
		Funnel: s.Funnel, Rules: s.Service.Rules(), Secret: []byte(strings.Repeat("k", 32)), Log: log}
	mod(&cfg)
	adm, err := admission.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	router := chi.NewRouter()
	api.New(api.Config{Service: s.Service, Payments: s.Payments, Pool: s.Pool, Signer: s.Signer, Admission: adm, Log: log}).Routes(router)
	srv := httptest.NewServer(router)
	t.Cleanup(srv.Close)
	return adm, srv
}

// traveller is one rehearsal client.
type traveller struct {
	uid        int64
	aggressive bool
	http       *http.Client
	token      string
	device     string
	ticket     string
	rng        *rand.Rand
	enteredAt  time.Time
	pollAfter  float64   // poll_after_ms of the enter answer
	admittedAt time.Time // first ADMITTED answer
	offerEnds  time.Time
	ok         bool
	refused    bool // admitted, came back in time, no hold
	done       bool
}

func rehearse(t *testing.T, r *rehearsal) *rehearsal {
	ctx := context.Background()
	setupStart := time.Now()
	r.stop = make(chan struct{})
	s := teststack.New(t, teststack.Options{})
	adm, srv := waitingRoomServer(t, s, rehearsalConfig)

	// Travellers: verified accounts, each with its own device, bound now.
	ids := s.Users(t, fmt.Sprintf("fr%d", r.seed), r.travellers)
	shared := &http.Transport{MaxIdleConns: 4000, MaxIdleConnsPerHost: 4000, IdleConnTimeout: 30 * time.Second}
	ts := make([]*traveller, len(ids))
	for i, uid := range ids {
		ts[i] = &traveller{uid: uid, http: &http.Client{Transport: shared, Timeout: 30 * time.Second}, token: s.Token(uid),
			rng: rand.New(rand.NewPCG(r.seed, uint64(uid)))}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for _, tv := range ts {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			code, body, _ := tv.call(srv.URL, "POST", "/v1/devices/bind", nil, fmt.Sprintf(`{"device_token":"rehearsal-device-%08d"}`, tv.uid))
			tv.device, _ = body["device_binding"].(string)
			if code != 200 || tv.device == "" {
				t.Errorf("bind device of %d: %d %v", tv.uid, code, body)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	// The shard opens now; its window seed comes from the rehearsal seed.
	open := -time.Minute
	if _, err := seed.Demo(ctx, s.Pool, seed.DemoOptions{OpensIn: &open}); err != nil {
		t.Fatal(err)
	}
	date := time.Now().In(booking.IST).AddDate(0, 0, 9)
	date = time.Date(date.Year(), date.Month(), date.Day(), 0, 0, 0, 0, booking.IST)
	opens := time.Now().Add(200 * time.Millisecond).Truncate(time.Millisecond)
	shardID, err := seed.Shard(ctx, s.Pool, seed.ShardSpec{Train: "12951", Date: date, Class: "3A", Berths: r.berths,
		OpensAt: opens, Mode: "queue", WaitlistCap: &r.waitlist})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Service.Rebuild(ctx, shardID); err != nil {
		t.Fatal(err)
	}
	wseed := sha256.Sum256([]byte("rehearsal window " + strconv.FormatUint(r.seed, 10)))
	if _, err := s.Pool.Exec(ctx, `INSERT INTO admission_windows (shard_id, seed, seed_sha256, prequeue_opens_at, opens_at, randomise_until)
		VALUES ($1, $2, $3, $4, $5, $6)`, shardID, wseed[:], admission.Commitment(wseed[:]), opens.Add(-adm.Config().Prequeue),
		opens, opens.Add(adm.Config().Randomise)); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	t.Logf("set up in %v", start.Sub(setupStart).Round(100*time.Millisecond))
	deadline := start.Add(90 * time.Second)
	intent := fmt.Sprintf(`{"intent":{"train_no":"12951","journey_date":"%s","class":"3A"}}`, date.Format(time.DateOnly))
	hold := holdBody(date, "MMCT", "NDLS", 1)
	// Everyone enters in the first 1.5 s of the 3 s draw (one call, the
	// same for both kinds) ...
	for _, tv := range ts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Until(opens.Add(time.Duration(tv.rng.Float64() * 1500 * float64(time.Millisecond)))))
			tv.enter(t, r, srv.URL, deadline, intent)
		}()
	}
	wg.Wait()
	// ... then exactly 3 of every 10 consecutive places in the queue's
	// order become aggressive, and everyone waits in their own way.
	members, err := s.Redis.ZRange(ctx, s.KeyPrefix+":{q"+strconv.FormatInt(shardID, 10)+"}:z", 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	byUID := map[int64]*traveller{}
	for _, tv := range ts {
		byUID[tv.uid] = tv
	}
	var order []*traveller
	for _, m := range members {
		uid, _ := strconv.ParseInt(m, 10, 64)
		if tv := byUID[uid]; tv != nil {
			order = append(order, tv)
		}
	}
	pick := rand.New(rand.NewPCG(r.seed, 10))
	for blk := 0; blk < len(order); blk += 10 {
		n := min(10, len(order)-blk)
		for _, j := range pick.Perm(n)[:int(float64(n)*r.aggressive+0.5)] {
			order[blk+j].aggressive = true
		}
	}
	for _, tv := range ts {
		if tv.aggressive {
			r.aggressiveN++
		} else {
			r.ordinaryN++
		}
	}

	for _, tv := range ts {
		if tv.ticket == "" {
			continue // its enter failed, already reported
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			tv.run(t, r, srv.URL, deadline, hold)
		}()
	}
	// The admission controller, as the worker runs it; started now so
	// that, on a slow machine, nobody is admitted before the travellers
	// are back to polling (it admits nobody before the draw closes anyway).
	cctx, stop := context.WithCancel(ctx)
	ctlDone := make(chan struct{})
	go func() {
		defer close(ctlDone)
		adm.NewController(admission.ControllerConfig{Tick: 100 * time.Millisecond}).Run(cctx)
	}()
	defer func() { stop(); <-ctlDone }()
	// Once every place is held nobody still waiting can be sold one, so
	// after a grace the waiters give up instead of polling to the
	// deadline. The grace is the longest poll interval (with its jitter)
	// and more: a controller admitting past the places would have let
	// someone in whom the grace lets come back, be refused and fail the
	// test, as at the deadline.
	const grace = 8 * time.Second
	wctx, endWatch := context.WithCancel(ctx)
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		for r.held.Load() < int64(r.berths+r.waitlist) {
			select {
			case <-wctx.Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
		select {
		case <-wctx.Done():
		case <-time.After(grace):
			close(r.stop)
		}
	}()
	wg.Wait()
	endWatch()
	<-watchDone
	r.took = time.Since(start)

	// Outcomes against the database: every success is a hold row, no
	// place sold twice, seats and holds agree.
	var rows int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM holds WHERE shard_id = $1`, shardID).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	issued := map[int64]time.Time{}
	lrows, err := s.Pool.Query(ctx, `SELECT user_id, issued_at FROM admission_log WHERE shard_id = $1`, shardID)
	if err != nil {
		t.Fatal(err)
	}
	for lrows.Next() {
		var uid int64
		var at time.Time
		if err := lrows.Scan(&uid, &at); err != nil {
			t.Fatal(err)
		}
		issued[uid] = at
	}
	if err := lrows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, tv := range ts {
		switch {
		case tv.ok && tv.aggressive:
			r.aggressiveOK++
		case tv.ok:
			r.ordinaryOK++
		}
		if !tv.admittedAt.IsZero() {
			r.admitted++
			if at, ok := issued[tv.uid]; ok && !tv.aggressive {
				r.pickupLag = append(r.pickupLag, tv.admittedAt.Sub(at))
			}
		}
		if tv.refused {
			r.admittedRefused++
		}
		if !tv.done {
			r.unfinished++
		}
	}
	if rows != r.ordinaryOK+r.aggressiveOK {
		t.Errorf("%d hold rows for %d successful travellers", rows, r.ordinaryOK+r.aggressiveOK)
	}
	if rows > r.berths+r.waitlist {
		t.Errorf("oversold: %d holds for %d places", rows, r.berths+r.waitlist)
	}
	s.CheckInvariants(t, shardID)
	return r
}

// call sends one request as this traveller.
func (tv *traveller) call(base, method, path string, headers map[string]string, body string) (int, map[string]any, http.Header) {
	h := map[string]string{"X-Device-Token": tv.device}
	for k, v := range headers {
		h[k] = v
	}
	r, err := testenv.Do(testenv.Request{Method: method, URL: base + path, Token: tv.token, Header: h, Body: body, Client: tv.http})
	if err != nil {
		return 0, nil, nil
	}
	return r.Status, r.JSON, r.Header
}

// wait sleeps for what the server asked (ordinary: plus up to 20 % jitter;
// aggressive: a quarter of it), or until stop is closed (nil: never).
func (tv *traveller) wait(ms float64, stop <-chan struct{}) {
	if tv.aggressive {
		ms /= 4
	} else {
		ms *= 1 + 0.2*tv.rng.Float64()
	}
	select {
	case <-time.After(time.Duration(max(ms, 20) * float64(time.Millisecond))):
	case <-stop:
	}
}

func retryAfterMs(h http.Header) float64 {
	n, err := strconv.Atoi(h.Get("Retry-After"))
	if err != nil || n <= 0 {
		return 1000
	}
	return float64(n) * 1000
}

// req sends one request and counts it.
func (tv *traveller) req(r *rehearsal, base, method, path string, headers map[string]string, body string) (int, map[string]any, http.Header) {
	r.requests.Add(1)
	code, m, h := tv.call(base, method, path, headers, body)
	if code == http.StatusServiceUnavailable {
		r.refused503.Add(1)
	}
	return code, m, h
}

// enter joins the queue, retrying what says "retry" as asked.
func (tv *traveller) enter(t *testing.T, r *rehearsal, base string, deadline time.Time, intent string) {
	for time.Now().Before(deadline) {
		code, m, h := tv.req(r, base, "POST", "/v1/queue/enter", nil, intent)
		if code == 200 {
			tv.ticket, _ = m["queue_ticket"].(string)
			tv.pollAfter, _ = m["poll_after_ms"].(float64)
			tv.enteredAt = time.Now()
			return
		}
		if code != http.StatusServiceUnavailable {
			t.Errorf("traveller %d enter: %d %v", tv.uid, code, m)
			tv.done = true
			return
		}
		tv.wait(retryAfterMs(h), nil)
	}
}

// run is the rest of a traveller's visit: poll at the pace asked (or
// not), and on admission take a hold at once.
func (tv *traveller) run(t *testing.T, r *rehearsal, base string, deadline time.Time, hold string) {
	req := func(method, path string, headers map[string]string, body string) (int, map[string]any, http.Header) {
		return tv.req(r, base, method, path, headers, body)
	}
	// The first poll when the enter answer said (or sooner), counted from
	// the enter.
	elapsed := float64(time.Since(tv.enteredAt).Milliseconds())
	if tv.aggressive {
		elapsed *= 4 // wait gives them a quarter of what it is passed
	}
	tv.wait(tv.pollAfter-elapsed, r.stop)
	for time.Now().Before(deadline) && !r.stopped() {
		code, m, h := req("GET", "/v1/queue/status?ticket="+tv.ticket, nil, "")
		if !tv.aggressive {
			r.ordinaryPolls.Add(1)
			if code == http.StatusServiceUnavailable {
				r.ordinary503.Add(1)
			}
		}
		if code == http.StatusServiceUnavailable {
			tv.wait(retryAfterMs(h), nil)
			continue
		}
		if code != 200 {
			t.Errorf("traveller %d status: %d %v", tv.uid, code, m)
			tv.done = true
			return
		}
		switch m["status"] {
		case admission.Waiting:
			ms, _ := m["poll_after_ms"].(float64)
			tv.wait(ms, r.stop)
			continue
		case admission.SoldOut, admission.Expired:
			tv.done = true
			return
		case admission.Admitted:
		default:
			t.Errorf("traveller %d status: %v", tv.uid, m)
			tv.done = true
			return
		}
		tok, _ := m["admission_token"].(string)
		exp, _ := m["expires_in_s"].(float64)
		tv.admittedAt = time.Now()
		tv.offerEnds = tv.admittedAt.Add(time.Duration(exp) * time.Second)
		tv.takeHold(t, r, base, req, tok, hold)
		return
	}
}

// takeHold solves the booking challenge and holds, retrying what says
// "retry", until a hold, a final refusal or the end of the pick-up window.
func (tv *traveller) takeHold(t *testing.T, r *rehearsal, base string, req func(string, string, map[string]string, string) (int, map[string]any, http.Header), tok, plain string) {
	for attempt := 0; time.Now().Before(tv.offerEnds); attempt++ {
		key := fmt.Sprintf("rehearsal-%d-%d", tv.uid, attempt)
		code, ch, h := req("POST", "/v1/challenge", map[string]string{"X-Client-Attestation": "rehearsal"}, fmt.Sprintf(`{"attempt":%q}`, key))
		if code == http.StatusServiceUnavailable {
			tv.wait(retryAfterMs(h), nil)
			continue
		}
		chTok, _ := ch["challenge"].(string)
		bits, _ := ch["difficulty_bits"].(float64)
		if code != 200 || chTok == "" {
			t.Errorf("traveller %d challenge: %d %v", tv.uid, code, ch)
			tv.done = true
			return
		}
		body := strings.TrimSuffix(plain, "}") + fmt.Sprintf(`,"challenge":{"type":"POW_SHA256","token":%q,"nonce":%q}}`, chTok, token.Solve(chTok, int(bits)))
		code, m, h := req("POST", "/v1/bookings/hold", map[string]string{"Idempotency-Key": key, "X-Admission-Token": tok,
			"X-Client-Attestation": "rehearsal"}, body)
		switch {
		case code == http.StatusCreated:
			tv.ok, tv.done = true, true
			r.held.Add(1)
			return
		case code == http.StatusServiceUnavailable:
			tv.wait(retryAfterMs(h), nil)
		default: // SOLD_OUT, ADMISSION_EXPIRED, anything else: refused after admission
			tv.refused = time.Now().Before(tv.offerEnds)
			if tv.refused && m["status"] != "SOLD_OUT" {
				t.Logf("traveller %d refused after admission: %d %v", tv.uid, code, m)
			}
			tv.done = true
			return
		}
	}
	tv.refused = true // kept retrying what said "retry" for the whole pick-up window
	tv.done = true
}

type tlogWriter struct{ t testing.TB }

func (w tlogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestLimitsPenaliseOnlyTheOffender: behind one source address, with the
// per-address limit set to 5 a second, 40 signed-in, device-bound
// travellers enter and poll freely (their limits are per account and
// device); a traveller polling before its time gets the previous answer,
// free, noted once in its trace; one hammering enter is refused, its
// neighbour on the same address is not; unauthenticated requests are
// limited per address, and another address is unaffected.
func TestLimitsPenaliseOnlyTheOffender(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{})
	adm, srv := waitingRoomServer(t, s, func(c *admission.Config) { c.LimitIP, c.LimitAccount, c.LimitDevice = 5, 5, 5 })
	open := -time.Minute
	if _, err := seed.Demo(ctx, s.Pool, seed.DemoOptions{OpensIn: &open}); err != nil {
		t.Fatal(err)
	}
	date := time.Now().In(booking.IST).AddDate(0, 0, 9)
	date = time.Date(date.Year(), date.Month(), date.Day(), 0, 0, 0, 0, booking.IST)
	wl := 0
	shardID, err := seed.Shard(ctx, s.Pool, seed.ShardSpec{Train: "12951", Date: date, Class: "3A", Berths: 8,
		OpensAt: time.Now().Add(time.Minute), Mode: "queue", WaitlistCap: &wl})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Service.Rebuild(ctx, shardID); err != nil {
		t.Fatal(err)
	}
	intent := fmt.Sprintf(`{"intent":{"train_no":"12951","journey_date":"%s","class":"3A"}}`, date.Format(time.DateOnly))
	ids := s.Users(t, "lim", 40)
	client := &http.Client{Timeout: 10 * time.Second}
	ts := make([]*traveller, len(ids))
	for i, uid := range ids {
		ts[i] = &traveller{uid: uid, http: client, token: s.Token(uid)}
		code, body, _ := ts[i].call(srv.URL, "POST", "/v1/devices/bind", nil, fmt.Sprintf(`{"device_token":"limits-device-%08d"}`, uid))
		if ts[i].device, _ = body["device_binding"].(string); code != 200 {
			t.Fatalf("bind: %d %v", code, body)
		}
	}
	// 40 enters and 40 polls in well under a second, all from 127.0.0.1.
	for _, tv := range ts {
		code, body, _ := tv.call(srv.URL, "POST", "/v1/queue/enter", nil, intent)
		if tv.ticket, _ = body["queue_ticket"].(string); code != 200 {
			t.Fatalf("enter of %d behind a shared address: %d %v", tv.uid, code, body)
		}
	}
	for _, tv := range ts[1:] {
		if code, body, _ := tv.call(srv.URL, "GET", "/v1/queue/status?ticket="+tv.ticket, nil, ""); code != 200 {
			t.Fatalf("poll of %d behind a shared address: %d %v", tv.uid, code, body)
		}
	}
	// Traveller 0 polls 20 times at once: one real answer, 19 early polls
	// answered from the cache with the same answer, one note in its trace.
	early := adm.EarlyPolls.Load()
	var first map[string]any
	for i := range 20 {
		code, body, _ := ts[0].call(srv.URL, "GET", "/v1/queue/status?ticket="+ts[0].ticket, nil, "")
		if code != 200 {
			t.Fatalf("fast poll %d: %d %v", i, code, body)
		}
		if i == 0 {
			first = body
		} else if body["status"] != first["status"] || body["poll_after_ms"] != first["poll_after_ms"] {
			t.Fatalf("an early poll got a new answer: %v, then %v", first, body)
		}
	}
	if n := adm.EarlyPolls.Load() - early; n != 19 {
		t.Fatalf("%d early polls counted, want 19", n)
	}
	// Traveller 1 hammers enter: past 5 in a second it is refused; its
	// neighbour on the same address enters fine right after.
	refused := 0
	for range 30 {
		if code, _, _ := ts[1].call(srv.URL, "POST", "/v1/queue/enter", nil, intent); code == http.StatusServiceUnavailable {
			refused++
		}
	}
	if refused == 0 {
		t.Fatal("30 enters at once from one account were never refused")
	}
	if code, body, _ := ts[2].call(srv.URL, "POST", "/v1/queue/enter", nil, intent); code != 200 {
		t.Fatalf("the neighbour of a hammering client: %d %v", code, body)
	}
	reasons := func(uid int64) map[string]int {
		rs, err := adm.Refusals(ctx, uid)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]int{}
		for _, r := range rs {
			m[r.Reason]++
		}
		return m
	}
	if got := reasons(ts[0].uid); got[admission.RefusedEarlyPoll] != 1 || len(got) != 1 {
		t.Fatalf("trace of the fast poller: %v, want one EARLY_POLL", got)
	}
	if got := reasons(ts[1].uid); got[admission.RefusedRateLimit] != refused || len(got) != 1 {
		t.Fatalf("trace of the hammering client: %v, want %d RATE_LIMITED", got, refused)
	}
	if got := reasons(ts[2].uid); len(got) != 0 {
		t.Fatalf("trace of its neighbour: %v, want nothing", got)
	}
	// Unauthenticated: limited per address, another address unaffected.
	anon := &traveller{http: client}
	limited := 0
	for range 30 {
		if code, _, _ := anon.call(srv.URL, "GET", fmt.Sprintf("/v1/windows/%d/fairness", shardID), nil, ""); code == http.StatusServiceUnavailable {
			limited++
		}
	}
	if limited == 0 {
		t.Fatal("30 unauthenticated requests at once from one address, limit 5, never refused")
	}
	other := &traveller{http: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 77)}}).DialContext}}}
	if code, body, _ := other.call(srv.URL, "GET", fmt.Sprintf("/v1/windows/%d/fairness", shardID), nil, ""); code != 200 {
		t.Fatalf("another address: %d %v", code, body)
	}
}
