// Package chaos_test runs the booking stack as several real processes (three
// serve, two workers) on one database and Redis, spreads a rush over them
// and breaks things mid-rush: a serve process and a worker killed with
// SIGKILL, and the shard's seat state wiped from Redis. The judge is the
// invariants, checked against PostgreSQL, Redis and the reservation core
// after the stack has drained, with no manual step in between.
package chaos_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"tatkal/booking"
	"tatkal/booking/auth"
	"tatkal/booking/inventory"
	"tatkal/booking/payment"
	"tatkal/booking/payment/pspapi"
	"tatkal/booking/payment/pspsim"
	"tatkal/booking/prs"
	"tatkal/booking/seed"
	"tatkal/booking/testenv"
	"tatkal/booking/teststack"
)

func TestMain(m *testing.M) {
	if ok, err := teststack.RunProcessFromEnv(); ok {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	goleak.VerifyTestMain(m, testenv.LeakOptions()...)
}

// holdWindow is short, so a hold whose answer died with its serve process
// is swept within the test.
const holdWindow = 20 * time.Second

// env is the processes' environment beside the stack's: the short hold
// window, a sweeper every 2 s, and a payment the gateway has no record of
// failed after 15 s, not the default 2 min (a creation lost with a killed
// process or a stopped PostgreSQL; the simulator answers real ones within
// a second), so the drain stays short.
var env = []string{"TATKAL_HOLD_WINDOW=" + holdWindow.String(), teststack.SweepIntervalEnv + "=2s",
	teststack.NotCreatedAfterEnv + "=15s"}

// traveller is one passenger of the rush and what the stack told them.
type traveller struct {
	user      int64
	token     string
	holdID    string // set when a hold was answered HELD or WAITLIST_OFFERED
	soldOut   bool
	failure   string // the last refusal that ended the attempt
	paymentID string
	payState  string
}

func TestSeveralProcessesSurviveKillsAndWipes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs five processes on PostgreSQL and Redis")
	}
	ctx := context.Background()
	st, shardID, date, users := newRush(t, teststack.Options{}, 120)
	// The first serve process stops for good inside its fifth group
	// commit, between the batch's statements and COMMIT, where it is killed.
	serves := []*teststack.Process{st.StartProcess(t, true, append(env, teststack.PauseEnv+"=commit.before-commit@5")...)}
	for range 2 {
		serves = append(serves, st.StartProcess(t, true, env...))
	}
	workers := []*teststack.Process{st.StartProcess(t, false, env...), st.StartProcess(t, false, env...)}
	urls := []string{serves[0].URL, serves[1].URL, serves[2].URL}

	c := newClient(urls, date)
	travellers := newTravellers(st, users)
	// The faults, at fixed points of the rush.
	c.rushWith(ctx, travellers, func(wait func(n int64), done func() int64) {
		if err := serves[0].WaitFor("paused at commit.before-commit", time.Minute); err != nil {
			t.Error(err)
		}
		serves[0].Kill()
		t.Logf("killed serve 1 of 3 mid-group-commit after %d travellers", done())
		wait(int64(len(users)) * 7 / 20)
		workers[0].Kill()
		t.Logf("killed worker 1 of 2 after %d travellers", done())
		wait(int64(len(users)) / 2)
		if err := st.Service.Store().Wipe(ctx, shardID); err != nil {
			t.Errorf("wipe the shard: %v", err)
		}
		t.Logf("wiped the shard's seat state from Redis after %d travellers", done())
	})

	held := report(t, travellers, c)
	checkInvariants(t, st, shardID, date, held)
}

// newRush starts a stack (opts, with the rush's rules and gateways) and
// seeds the rush: a shard of 40 berths and n travellers with money in
// their wallets.
func newRush(t *testing.T, opts teststack.Options, n int) (*teststack.Stack, int64, time.Time, []int64) {
	t.Helper()
	rules := booking.DefaultRules()
	rules.HoldWindow = holdWindow
	// In process: the simulators and the gateways' callback endpoint.
	// Gateways that decline, lose and repeat callbacks, but whose customers
	// all answer within a second, so every payment can end within the test.
	var routes []pspapi.RouteConfig
	for _, rc := range pspsim.DefaultRoutes() {
		rc.LatencyP50Ms, rc.LatencyP99Ms, rc.TimeoutRate, rc.PendingRate, rc.LateSuccessRate = 10, 80, 0, 0, 0
		rc.DeclineRate, rc.LostCallbackRate, rc.DuplicateCallbackRate, rc.CallbackDelayMs = 0.15, 0.2, 0.2, 0
		rc.AutoApproveMs, rc.AbandonRate, rc.CapacityTPS = 300, 0, 0
		routes = append(routes, rc)
	}
	opts.Rules, opts.Routes = &rules, routes
	st := teststack.New(t, opts)
	ctx := context.Background()
	shardID, date := st.DemoShard(t, 40, 0)
	hash, err := auth.HashPassword("chaos", auth.Argon2Params{MemoryKiB: 64, Time: 1, Threads: 1})
	teststack.Must(t, err, "hash")
	users, err := seed.Users(ctx, st.Pool, seed.UsersSpec{Count: n, Prefix: "chaos_", PasswordHash: hash, WalletRupees: 20_000,
		CreatedAt: time.Now().AddDate(0, 0, -30)})
	teststack.Must(t, err, "seed users")

	return st, shardID, date, users
}

func newTravellers(st *teststack.Stack, users []int64) []*traveller {
	travellers := make([]*traveller, len(users))
	for i, u := range users {
		travellers[i] = &traveller{user: u, token: st.Token(u)}
	}
	return travellers
}

// rush sends every traveller through the serve processes, 24 at a time,
// counting in done those whose journey has ended.
func (c *client) rush(ctx context.Context, travellers []*traveller, done *atomic.Int64) {
	var wg sync.WaitGroup
	next := make(chan *traveller)
	for g := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for tv := range next {
				c.travel(ctx, tv, g)
				done.Add(1)
			}
		}()
	}
	for _, tv := range travellers {
		next <- tv
	}
	close(next)
	wg.Wait()
}

// rushWith runs the rush and, beside it, faults, which may wait(n) until n
// travellers are done before breaking something; both have ended when it
// returns.
func (c *client) rushWith(ctx context.Context, travellers []*traveller, faults func(wait func(n int64), done func() int64)) {
	var done atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		faults(func(n int64) {
			for done.Load() < n {
				time.Sleep(5 * time.Millisecond)
			}
		}, done.Load)
	}()
	c.rush(ctx, travellers, &done)
	wg.Wait()
}

// report logs what the rush's travellers were told and returns the holds
// answered HELD or WAITLIST_OFFERED; a rush that neither filled nor sold
// out the shard, or that was answered an error other than 503 with
// Retry-After, fails the test.
func report(t *testing.T, travellers []*traveller, c *client) []string {
	t.Helper()
	var held []string
	failures := map[string]int{}
	soldOut := 0
	for _, tv := range travellers {
		if tv.holdID != "" {
			held = append(held, tv.holdID)
		}
		if tv.soldOut {
			soldOut++
		}
		if tv.failure != "" {
			failures[tv.failure]++
		}
	}
	t.Logf("rush: %d held, %d sold out, refusals %v", len(held), soldOut, failures)
	if n := c.badAnswers.Load(); n != 0 {
		t.Errorf("%d answers were a 5xx other than 503 with Retry-After (last: %v)", n, c.lastBad.Load())
	}
	if len(held) == 0 || soldOut == 0 {
		t.Fatalf("the rush neither filled nor sold out the shard: %d held, %d sold out", len(held), soldOut)
	}

	return held
}

// checkInvariants waits for the stack to drain and checks the shard's
// invariants against PostgreSQL, Redis and the reservation core: every
// HELD answer durable, no berth sold twice, every payment one ticket or a
// full refund, each PNR once in the core, the wallets and the money.
func checkInvariants(t *testing.T, st *teststack.Stack, shardID int64, date time.Time, held []string) {
	t.Helper()
	ctx := context.Background()
	drain(t, st, shardID)

	// Every HELD answer has its durable row.
	var durable int
	teststack.Must(t, st.Pool.QueryRow(ctx, `SELECT count(*) FROM holds WHERE id::text = ANY($1)`, held).Scan(&durable), "count holds")
	if durable != len(held) {
		t.Errorf("%d holds answered HELD, %d of them in PostgreSQL", len(held), durable)
	}
	// No berth sold twice on any leg.
	var oversold int
	teststack.Must(t, st.Pool.QueryRow(ctx, `SELECT count(*) FROM booking_passengers a JOIN booking_passengers b
		ON a.shard_id = b.shard_id AND a.berth_idx = b.berth_idx AND (a.booking_id, a.seq) < (b.booking_id, b.seq)
		AND int4range(a.from_seq, a.to_seq) && int4range(b.from_seq, b.to_seq)
		WHERE a.shard_id = $1 AND a.status = 'CONFIRMED' AND b.status = 'CONFIRMED'`, shardID).Scan(&oversold), "count oversold")
	if oversold != 0 {
		t.Errorf("%d oversold berth-legs", oversold)
	}
	// Every payment ended as exactly one ticket or a full refund, and no
	// ticket stands without a payment.
	var payments, tickets, refunded, wrong, unpaid int
	teststack.Must(t, st.Pool.QueryRow(ctx, `
		WITH p AS (SELECT p.*, (SELECT count(*) FROM bookings b WHERE b.hold_id = p.hold_id AND b.status = 'CONFIRMED') AS confirmed,
		                      (SELECT coalesce(sum(r.amount_paise), 0) FROM refunds r WHERE r.payment_id = p.id AND r.state = 'PROCESSED') AS refund
		           FROM payments p JOIN holds h ON h.id = p.hold_id WHERE h.shard_id = $1)
		SELECT count(*),
		       count(*) FILTER (WHERE state = 'SUCCESS' AND confirmed = 1 AND refund = 0),
		       count(*) FILTER (WHERE state IN ('SUCCESS', 'REFUNDED') AND confirmed = 0 AND refund = amount_paise),
		       count(*) FILTER (WHERE NOT ((state = 'SUCCESS' AND confirmed = 1 AND refund = 0)
		                                OR (state IN ('SUCCESS', 'REFUNDED') AND confirmed = 0 AND refund = amount_paise)
		                                OR (state = 'FAILED' AND confirmed = 0 AND refund = 0))),
		       (SELECT count(*) FROM bookings b WHERE b.shard_id = $1 AND b.status = 'CONFIRMED'
		          AND NOT EXISTS (SELECT 1 FROM payments x WHERE x.hold_id = b.hold_id AND x.state = 'SUCCESS'))
		FROM p`, shardID).Scan(&payments, &tickets, &refunded, &wrong, &unpaid), "check payments")
	t.Logf("payments: %d, %d tickets, %d refunded in full", payments, tickets, refunded)
	if wrong != 0 || unpaid != 0 || tickets == 0 {
		t.Errorf("payments: %d of %d ended neither as one ticket nor as a full refund; %d tickets without a payment; %d tickets",
			wrong, payments, unpaid, tickets)
	}
	// The reservation core holds every ticket exactly once, and nothing else.
	exported, err := prs.NewClient(st.Core.URL, st.CoreKey, nil).Export(ctx, date)
	teststack.Must(t, err, "export from the core")
	inCore := map[string]int{}
	for _, b := range exported {
		if b.Status == "CONFIRMED" {
			inCore[b.PNR]++
		}
	}
	rows, err := st.Pool.Query(ctx, `SELECT pnr FROM bookings WHERE shard_id = $1 AND status = 'CONFIRMED'`, shardID)
	teststack.Must(t, err, "read PNRs")
	var pnrs []string
	for rows.Next() {
		var pnr string
		teststack.Must(t, rows.Scan(&pnr), "scan PNR")
		pnrs = append(pnrs, pnr)
	}
	teststack.Must(t, rows.Err(), "read PNRs")
	for _, pnr := range pnrs {
		if inCore[pnr] != 1 {
			t.Errorf("PNR %s is in the core %d times", pnr, inCore[pnr])
		}
		delete(inCore, pnr)
	}
	if len(inCore) != 0 {
		t.Errorf("the core holds bookings we did not confirm: %v", inCore)
	}
	// The wallets balance, and the money in is the tickets plus the refunds.
	bad, err := payment.CheckLedger(ctx, st.Pool)
	teststack.Must(t, err, "check the ledger")
	if len(bad) != 0 {
		t.Errorf("wallets that do not balance: %v", bad)
	}
	var in, fares, refunds int64
	teststack.Must(t, st.Pool.QueryRow(ctx, `SELECT
		coalesce((SELECT sum(p.amount_paise) FROM payments p JOIN holds h ON h.id = p.hold_id
			WHERE h.shard_id = $1 AND p.state IN ('SUCCESS', 'REFUNDED')), 0),
		coalesce((SELECT sum(b.fare_paise) FROM bookings b WHERE b.shard_id = $1 AND b.status <> 'CANCELLED'), 0),
		coalesce((SELECT sum(r.amount_paise) FROM refunds r JOIN payments p ON p.id = r.payment_id JOIN holds h ON h.id = p.hold_id
			WHERE h.shard_id = $1), 0)`, shardID).Scan(&in, &fares, &refunds), "money")
	if in != fares+refunds {
		t.Errorf("money in %d paise, tickets %d, refunds %d: %d unaccounted", in, fares, refunds, in-fares-refunds)
	}
}

// drain waits until every payment is final, every ticket has reached the
// core and the shard's invariants hold (a hold whose answer died with its
// serve process is swept at its expiry), failing the test if the stack
// does not get there by itself.
func drain(t *testing.T, st *teststack.Stack, shardID int64) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(holdWindow + 150*time.Second)
	var open, unsynced int
	var rep inventory.Report
	for {
		teststack.Must(t, st.Pool.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM payments p JOIN holds h ON h.id = p.hold_id WHERE h.shard_id = $1
				AND (p.state NOT IN ('SUCCESS', 'FAILED', 'REFUNDED')
				     OR EXISTS (SELECT 1 FROM refunds r WHERE r.payment_id = p.id AND r.state <> 'PROCESSED'))),
			(SELECT count(*) FROM bookings WHERE shard_id = $1 AND status = 'CONFIRMED' AND prs_state <> 'SYNCED')`,
			shardID).Scan(&open, &unsynced), "drain")
		var err error
		rep, err = inventory.Check(ctx, st.Pool, st.Service.Store(), shardID, holdWindow)
		teststack.Must(t, err, "check the shard")
		if open == 0 && unsynced == 0 && rep.OK() && rep.Ready {
			return
		}
		if time.Now().After(deadline) {
			var why, jobs string
			st.Pool.QueryRow(ctx, `SELECT coalesce(string_agg(p.state || ' ' || p.method || ' review:' || (SELECT count(*) FROM payment_reviews v WHERE v.payment_id = p.id)::text || ' '
					|| coalesce(r.state, '-') || ' ' || (now() - p.created_at)::text, '; '), '')
				FROM payments p JOIN holds h ON h.id = p.hold_id LEFT JOIN refunds r ON r.payment_id = p.id
				WHERE h.shard_id = $1 AND (p.state NOT IN ('SUCCESS', 'FAILED', 'REFUNDED') OR r.state <> 'PROCESSED')`,
				shardID).Scan(&why) //nolint:errcheck // a diagnostic
			st.Pool.QueryRow(ctx, `SELECT coalesce(string_agg(kind || ' ' || state::text || ' x' || n, '; '), '')
				FROM (SELECT kind, state, count(*) AS n FROM river_job WHERE state <> 'completed' GROUP BY 1, 2) j`).Scan(&jobs) //nolint:errcheck
			t.Fatalf("not drained: %d payments open (%s), %d tickets not at the core; jobs: %s; shard:\n%s", open, why, unsynced, jobs, rep)
		}
		time.Sleep(time.Second)
	}
}

// client speaks the /v1 API to the serve processes: a request that finds
// its process gone or answers 5xx is sent again, with the same
// idempotency key, to the next process, as a load balancer would.
type client struct {
	http *http.Client
	urls []string
	date string // the shard's journey date
	// badAnswers counts 5xx answers other than 503 with Retry-After
	// (lastBad is the last of them): a store that is down is a 503 to retry.
	badAnswers atomic.Int64
	lastBad    atomic.Value
	// seen, when set, is told every answer's status (0: no answer) and
	// reason.
	seen func(status int, reason string)
}

func newClient(urls []string, date time.Time) *client {
	return &client{http: &http.Client{Timeout: 10 * time.Second}, urls: urls, date: date.Format(time.DateOnly)}
}

type answer struct {
	status int
	body   map[string]any
}

func (a answer) str(k string) string { s, _ := a.body[k].(string); return s }

func (c *client) call(ctx context.Context, g int, method, path, token, idem string, body any) (answer, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return answer{}, err
	}
	var last error
	giveUp := time.Now().Add(40 * time.Second)
	for attempt := 0; time.Now().Before(giveUp); attempt++ {
		base := c.urls[(g+attempt)%len(c.urls)]
		req, err := http.NewRequestWithContext(ctx, method, base+path, bytes.NewReader(raw))
		if err != nil {
			return answer{}, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", idem)
		resp, err := c.http.Do(req)
		if err != nil {
			if c.seen != nil {
				c.seen(0, "")
			}
			last = err
			time.Sleep(10 * time.Millisecond)
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		a := answer{status: resp.StatusCode}
		json.Unmarshal(b, &a.body) //nolint:errcheck // a body that is not JSON reads as empty
		if c.seen != nil {
			c.seen(resp.StatusCode, a.str("reason"))
		}
		if resp.StatusCode >= 500 && (resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "") {
			c.badAnswers.Add(1)
			c.lastBad.Store(fmt.Sprintf("%s %s: %d %s %s", method, path, resp.StatusCode, a.str("reason"), a.str("detail")))
		}
		if resp.StatusCode >= 500 {
			last = fmt.Errorf("%d %s", resp.StatusCode, a.str("reason"))
			time.Sleep(time.Duration(min(50*(attempt+1), 1000)) * time.Millisecond)
			continue
		}
		return a, nil
	}
	return answer{}, fmt.Errorf("gave up after 40 s: %w", last)
}

// travel is one passenger's rush: hold, then pay (every other one by
// wallet, the rest by UPI through the gateway simulator).
func (c *client) travel(ctx context.Context, tv *traveller, g int) {
	stations := teststack.Stations12951
	from := g % 4
	to := from + 1 + int(tv.user)%(len(stations)-1-from)
	key := "chaos-" + strconv.FormatInt(tv.user, 10)
	// A different person per account: the same passenger on many accounts'
	// holds is what the rules refuse.
	var letters [5]byte
	for i, u := 0, tv.user; i < len(letters); i, u = i+1, u/26 {
		letters[i] = byte('A' + u%26)
	}
	a, err := c.call(ctx, g, http.MethodPost, "/v1/bookings/hold", tv.token, key+"-hold", map[string]any{
		"train_no": "12951", "journey_date": c.date, "class": "3A", "quota": "TQ", "from": stations[from], "to": stations[to],
		"passengers": []map[string]any{{"name": "Chaos " + string(letters[:]), "age": 30 + g%40, "gender": "F",
			"id_type": "PAN", "id_ref": string(letters[:]) + "1234F"}}})
	switch {
	case err != nil:
		tv.failure = "hold: " + err.Error()
		return
	case a.str("status") == "SOLD_OUT":
		tv.soldOut = true
		return
	case a.str("hold_id") == "" || (a.str("status") != "HELD" && a.str("status") != "WAITLIST_OFFERED"):
		tv.failure = fmt.Sprintf("hold: %d %s", a.status, a.str("reason"))
		return
	}
	tv.holdID = a.str("hold_id")
	pay := map[string]any{"hold_id": tv.holdID, "method": "WALLET"}
	if tv.user%2 == 1 {
		pay = map[string]any{"hold_id": tv.holdID, "method": "UPI", "vpa": "chaos" + strconv.FormatInt(tv.user, 10) + "@okaxis"}
	}
	if a, err = c.call(ctx, g, http.MethodPost, "/v1/payments/initiate", tv.token, key+"-pay", pay); err != nil {
		tv.failure = "pay: " + err.Error()
		return
	}
	if a.status >= 300 {
		tv.failure = fmt.Sprintf("pay: %d %s", a.status, a.str("reason"))
		return
	}
	tv.paymentID, tv.payState = a.str("payment_id"), a.str("state")
}
