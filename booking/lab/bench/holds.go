package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"tatkal/booking"
	"tatkal/booking/admission/token"
)

// passenger is the one traveller of a bench account's holds: valid, with
// an ID, and a different person per account (one passenger on every
// account's holds is what the live limit across accounts refuses).
// benchDevice stands for a bound device: the bench calls the service
// in-process, past the edges that verify a binding.
const benchDevice = "bench-device"

func passenger(g int, user int64) booking.Passenger {
	gender := "F"
	if g%2 == 1 {
		gender = "M"
	}
	var letters [5]byte
	for i := range letters {
		letters[i] = byte('A' + user%26)
		user /= 26
	}
	return booking.Passenger{Name: "Bench Passenger " + string(letters[:]), Age: 34, Gender: gender, IDType: "PAN", IDRef: string(letters[:]) + "1234F"}
}

// journey picks random boarding and alighting stops, so the script meets
// fragmented leg masks as a real shard's would.
func journey(rng *rand.Rand, stops int) (int, int) {
	from := rng.IntN(stops - 1)
	return from, from + 1 + rng.IntN(stops-1-from)
}

func (env *runEnv) idemKey(phase string, g, n int) string {
	return "bench-" + env.runID + "-" + phase + "-" + strconv.Itoa(g) + "-" + strconv.Itoa(n)
}

func reasonOf(err error) string {
	if r := booking.ErrorReason(err); r != "" {
		return r
	}
	return string(booking.ErrorCode(err))
}

// serviceCycle calls Holds.Hold directly. Each client is one user; after
// every durable answer it cancels through Lifecycle.Cancel, so the seats come
// back and the hot shard keeps free berths: it shows what recycling a
// hold costs beside taking it.
func serviceCycle(ctx context.Context, env *runEnv) (Phase, error) {
	t, elapsed := closedLoop(ctx, env.opts.Concurrency, env.opts.Duration, func(g int, t *tally, more func() bool) {
		rng := rand.New(rand.NewPCG(uint64(g), 1))
		for n := 0; more(); n++ {
			env.holdThenCancel(ctx, t, rng, env.shard, "c", g, n)
		}
	})
	return t.phase("cycle: Service.Hold, then Service.Cancel", elapsed), nil
}

// holdThenCancel is one turn of a cycle: client g's user holds on sh with
// the phase's key prefix and, given a hold, cancels it at once. It reports
// whether the hold was decided (a decision, not a failure).
func (env *runEnv) holdThenCancel(ctx context.Context, t *tally, rng *rand.Rand, sh *booking.Shard, prefix string, g, n int) bool {
	svc, user := env.opts.Service, env.cycle[g]
	from, to := journey(rng, len(env.stops))
	start := time.Now()
	res, err := svc.Hold(ctx, booking.Caller{UserID: user, Verified: true, CreatedAt: env.created, Device: benchDevice}, booking.HoldRequest{
		UserID: user, IdempotencyKey: env.idemKey(prefix, g, n), Train: sh.Train, Date: sh.Date, Class: sh.Class, Quota: sh.Quota,
		From: env.stops[from], To: env.stops[to], Passengers: []booking.Passenger{passenger(g, user)}})
	d := time.Since(start)
	t.lat, t.holdTime = append(t.lat, d), t.holdTime+d
	if err != nil {
		t.fail("hold: " + reasonOf(err))
		return false
	}
	t.ops++
	if res.Status == "SOLD_OUT" {
		t.soldOut++
		return true
	}
	t.durable++
	start = time.Now()
	_, err = svc.Cancel(ctx, user, res.HoldID)
	d = time.Since(start)
	t.cancelLat, t.cancelTime = append(t.cancelLat, d), t.cancelTime+d
	if err != nil {
		t.fail("cancel: " + reasonOf(err))
	}
	return true
}

// holdOnly runs clients that each hold with a fresh user per durable
// answer and never cancel: a client told SOLD_OUT asks again with a new
// key, one given a hold moves on to the next user. call makes one attempt
// and returns whether the answer was durable and a failure reason ("" for
// an answer). With rush set every client asks for the whole route and the
// end of each decision is recorded, to find the sell-out; without it the
// journeys are random.
func holdOnly(ctx context.Context, env *runEnv, name string, users []int64, rush bool,
	call func(g, n int, user int64, from, to int) (durable bool, failure string)) Phase {
	t, elapsed := holdLoop(ctx, env, users, env.opts.Duration, time.Now(), rush, rush, call)
	return t.phase(name, elapsed)
}

// holdLoop is holdOnly's clients for d: a fresh user per durable answer,
// the whole route when wholeRoute, and with track the end of each decision
// recorded (since begin).
func holdLoop(ctx context.Context, env *runEnv, users []int64, d time.Duration, begin time.Time, wholeRoute, track bool,
	call func(g, n int, user int64, from, to int) (durable bool, failure string)) (tally, time.Duration) {
	var next atomic.Int64
	return closedLoop(ctx, env.opts.Concurrency, d, func(g int, t *tally, more func() bool) {
		take := func() (int64, bool) {
			i := next.Add(1) - 1
			if i >= int64(len(users)) {
				return 0, false
			}
			return users[i], true
		}
		rng := rand.New(rand.NewPCG(uint64(g), 3))
		user, ok := take()
		for n := 0; ok && more(); n++ {
			from, to := 0, len(env.stops)-1
			if !wholeRoute {
				from, to = journey(rng, len(env.stops))
			}
			start := time.Now()
			durable, failure := call(g, n, user, from, to)
			t.lat = append(t.lat, time.Since(start))
			if failure != "" {
				t.fail(failure)
				continue
			}
			t.ops++
			if track {
				t.events = append(t.events, event{end: time.Since(begin), durable: durable})
			}
			if !durable {
				t.soldOut++
				continue
			}
			t.durable++
			user, ok = take()
		}
		if !ok {
			t.fail("ran out of fresh users (raise FreshUsers)")
		}
	})
}

// serviceHolds is the hold path without HTTP: Holds.Hold on the hot
// shard, whose waitlist never fills, so every answer is a durable hold:
// HELD while a berth is free for the journey, WAITLIST_OFFERED after, each
// the same script and the same group-committed write.
func serviceHolds(ctx context.Context, env *runEnv) (Phase, error) {
	return holdOnly(ctx, env, "service: Service.Hold, fresh users", env.fresh[0], false, env.serviceHold(ctx, "s")), nil
}

// serviceHold is one Holds.Hold on the hot shard with the phase's key
// prefix, as holdOnly's call.
func (env *runEnv) serviceHold(ctx context.Context, prefix string) func(g, n int, user int64, from, to int) (bool, string) {
	svc, sh := env.opts.Service, env.shard
	return func(g, n int, user int64, from, to int) (bool, string) {
		res, err := svc.Hold(ctx, booking.Caller{UserID: user, Verified: true, CreatedAt: env.created, Device: benchDevice}, booking.HoldRequest{
			UserID: user, IdempotencyKey: env.idemKey(prefix, g, n), Train: sh.Train, Date: sh.Date, Class: sh.Class, Quota: sh.Quota,
			From: env.stops[from], To: env.stops[to], Passengers: []booking.Passenger{passenger(g, user)}})
		if err != nil {
			return false, "hold: " + reasonOf(err)
		}
		return res.Status != "SOLD_OUT", ""
	}
}

// bindDevices binds a device of each user's own through POST
// /v1/devices/bind, as the app does before its first hold (every hold
// needs a bound device), Concurrency at a time, before the phase that
// spends them and outside its measurement.
func bindDevices(ctx context.Context, env *runEnv, users []int64) error {
	hc := &http.Client{Timeout: 30 * time.Second}
	var next atomic.Int64
	var mu sync.Mutex
	g, ctx := errgroup.WithContext(ctx)
	for range env.opts.Concurrency {
		g.Go(func() error {
			for i := next.Add(1) - 1; i < int64(len(users)); i = next.Add(1) - 1 {
				user := users[i]
				b, err := bindDevice(ctx, hc, env, user)
				if err != nil {
					return err
				}
				mu.Lock()
				env.devices[user] = b
				mu.Unlock()
			}
			return nil
		})
	}
	return g.Wait()
}

// bindDevice is one user's binding, retried while the server sheds load.
func bindDevice(ctx context.Context, hc *http.Client, env *runEnv, user int64) (string, error) {
	body := fmt.Sprintf(`{"device_token":"bench-%s-device-%012d"}`, env.runID, user)
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, env.baseURL+"/v1/devices/bind", strings.NewReader(body))
		if err != nil {
			return "", err
		}
		req.Header.Set("Authorization", "Bearer "+env.tokens[user])
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return "", fmt.Errorf("bind a device for %d: %w", user, err)
		}
		var a struct {
			Binding string `json:"device_binding"`
			Reason  string `json:"reason"`
		}
		derr := json.NewDecoder(resp.Body).Decode(&a)
		resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusOK && derr == nil && a.Binding != "":
			return a.Binding, nil
		case resp.StatusCode == http.StatusServiceUnavailable && attempt < 50:
			time.Sleep(time.Duration(10*(attempt+1)) * time.Millisecond)
		default:
			return "", fmt.Errorf("bind a device for %d: %d %s", user, resp.StatusCode, a.Reason)
		}
	}
}

// httpHolds is serviceHolds through the HTTP API.
func httpHolds(ctx context.Context, env *runEnv) (Phase, error) {
	c := newClient(env)
	defer c.close()
	return holdOnly(ctx, env, "HTTP: POST /v1/bookings/hold, fresh users", env.fresh[1], false, func(g, n int, user int64, from, to int) (bool, string) {
		return c.hold(ctx, env, env.shard, user, env.idemKey("h", g, n), from, to, g)
	}), nil
}

// httpRush is the 10:00 rush through HTTP on the rush shard, which has the
// real waitlist cap: every client asks for the whole route and keeps what
// it gets, so the shard fills (HELD, then the Tatkal waitlist) and then
// answers SOLD_OUT.
func httpRush(ctx context.Context, env *runEnv) (Phase, error) {
	c := newClient(env)
	defer c.close()
	return holdOnly(ctx, env, "rush: HTTP, whole route, no cancels", env.rush, true, func(g, n int, user int64, from, to int) (bool, string) {
		return c.hold(ctx, env, env.rushShard, user, env.idemKey("r", g, n), from, to, g)
	}), nil
}

// client speaks the /v1 API over loopback, as a load generator does: one
// kept-alive connection per bench client (kept), each used by its client
// alone, with net/http's request writer and response reader but not its
// Transport, whose per-connection goroutines and hand-offs cost the shared
// CPU as much as the server's own work on a sold-out answer or a duplicate
// callback. A gateway's or a phone's client runs on its own machine.
type client struct {
	base string
	addr string
	kept []*keptConn // by bench client
	// noChallenge: the server runs no waiting room (the bench's own API
	// server), so its holds carry no challenge.
	noChallenge atomic.Bool
}

// keptConn is one bench client's connection to the server.
type keptConn struct {
	conn net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
}

func newClient(env *runEnv) *client {
	u, _ := url.Parse(env.baseURL)
	return &client{base: env.baseURL, addr: u.Host, kept: make([]*keptConn, env.opts.Concurrency)}
}

func (c *client) close() {
	for i, k := range c.kept {
		if k != nil {
			k.conn.Close()
			c.kept[i] = nil
		}
	}
}

// do sends req over bench client g's kept connection, dialled when it has
// none, and reads the whole answer: its status, and its JSON into a. A
// status of 0 is a transport failure; the connection is closed then, and
// when the server says it closes it.
func (c *client) do(g int, req *http.Request, a any) (int, error) {
	k := c.kept[g]
	if k == nil {
		conn, err := net.Dial("tcp", c.addr)
		if err != nil {
			return 0, err
		}
		k = &keptConn{conn: conn, r: bufio.NewReader(conn), w: bufio.NewWriter(conn)}
		c.kept[g] = k
	}
	status, keep, err := k.roundTrip(req, a)
	if !keep {
		k.conn.Close()
		c.kept[g] = nil
	}
	return status, err
}

func (k *keptConn) roundTrip(req *http.Request, a any) (status int, keep bool, err error) {
	k.conn.SetDeadline(time.Now().Add(30 * time.Second)) //nolint:errcheck // a failed write or read says it
	if err := req.Write(k.w); err != nil {
		return 0, false, err
	}
	if err := k.w.Flush(); err != nil {
		return 0, false, err
	}
	resp, err := http.ReadResponse(k.r, req)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	derr := json.NewDecoder(resp.Body).Decode(a)
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, false, err
	}
	if derr != nil {
		derr = fmt.Errorf("%d unreadable answer: %w", resp.StatusCode, derr)
	}
	return resp.StatusCode, !resp.Close, derr
}

type holdBody struct {
	TrainNo     string              `json:"train_no"`
	JourneyDate string              `json:"journey_date"`
	Class       string              `json:"class"`
	Quota       string              `json:"quota"`
	From        string              `json:"from"`
	To          string              `json:"to"`
	Passengers  []booking.Passenger `json:"passengers"`
	Challenge   *holdChallenge      `json:"challenge,omitempty"`
}

// holdChallenge is the solved booking challenge every hold carries.
type holdChallenge struct {
	Type  string `json:"type"`
	Token string `json:"token"`
	Nonce string `json:"nonce"`
}

// challenge asks for the booking challenge of attempt idem and solves it
// (the bench's app makes it the lightest: the figure is the hold's).
func (c *client) challenge(ctx context.Context, tok, idem string, g int) (*holdChallenge, string) {
	if c.noChallenge.Load() {
		return nil, ""
	}
	body, _ := json.Marshal(map[string]string{"attempt": idem})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/challenge", bytes.NewReader(body))
	if err != nil {
		return nil, "challenge: request"
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	var ch struct {
		Challenge string `json:"challenge"`
		Bits      int    `json:"difficulty_bits"`
		Reason    string `json:"reason"`
	}
	status, err := c.do(g, req, &ch)
	if status == http.StatusServiceUnavailable && ch.Reason == "NO_WAITING_ROOM" {
		c.noChallenge.Store(true)
		return nil, ""
	}
	if status != http.StatusOK || err != nil {
		return nil, "challenge: " + strconv.Itoa(status) + " " + ch.Reason
	}
	return &holdChallenge{Type: "POW_SHA256", Token: ch.Challenge, Nonce: token.Solve(ch.Challenge, ch.Bits)}, ""
}

// answer is the part of a hold answer or problem document the bench reads.
type answer struct {
	HoldID *uuid.UUID `json:"hold_id"`
	Status string     `json:"status"`
	Reason string     `json:"reason"`
}

// hold posts one hold and reads the whole answer (so the connection goes
// back to the pool), then classifies it: 201 is durable, 200 is SOLD_OUT,
// anything else is a failure named by status and reason.
func (c *client) hold(ctx context.Context, env *runEnv, sh *booking.Shard, user int64, idem string, from, to, g int) (durable bool, failure string) {
	ch, failure := c.challenge(ctx, env.tokens[user], idem, g)
	if failure != "" {
		return false, failure
	}
	body, err := json.Marshal(holdBody{TrainNo: sh.Train, JourneyDate: sh.Date.Format(time.DateOnly), Class: sh.Class,
		Quota: sh.Quota, From: env.stops[from], To: env.stops[to], Passengers: []booking.Passenger{passenger(g, user)}, Challenge: ch})
	if err != nil {
		return false, "hold: encode"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/bookings/hold", bytes.NewReader(body))
	if err != nil {
		return false, "hold: request"
	}
	req.Header.Set("Authorization", "Bearer "+env.tokens[user])
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", idem)
	req.Header.Set("X-Device-Token", env.devices[user])
	var a answer
	status, err := c.do(g, req, &a)
	switch {
	case status == 0:
		return false, "hold: transport"
	case err != nil:
		return false, "hold: " + strconv.Itoa(status) + " unreadable answer"
	case status == http.StatusCreated && a.HoldID != nil:
		return true, ""
	case status == http.StatusOK && a.Status == "SOLD_OUT":
		return false, ""
	}
	return false, "hold: " + strconv.Itoa(status) + " " + a.Reason
}
