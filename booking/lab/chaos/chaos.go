package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"tatkal/booking/admission/token"
	"tatkal/booking/inventory"
	"tatkal/booking/lab/seed"
	"tatkal/booking/payment"
	"tatkal/booking/prs"
)

// Traveller is one passenger of the rush and what the stack told them.
type Traveller struct {
	User      int64
	Token     string // the session's bearer token
	Device    string // the device binding (POST /v1/devices/bind), sent as X-Device-Token
	HoldID    string // set when a hold was answered HELD or WAITLIST_OFFERED
	SoldOut   bool
	Failure   string // the last refusal that ended the attempt
	PaymentID string
	PayState  string
}

// Client speaks the /v1 API to the serve processes.
type Client struct {
	http *http.Client
	urls []string
	date string // the shard's journey date
	// Workers is how many travellers are on their way at once (24).
	Workers int
	// badAnswers counts 5xx answers other than 503 with Retry-After
	// (lastBad is the last of them): a store that is down is a 503 to retry.
	badAnswers atomic.Int64
	lastBad    atomic.Value
	// Seen, when set, is told every answer's status (0: no answer) and
	// reason; it is called from many goroutines.
	Seen func(status int, reason string)
}

// NewClient spreads requests over the serve processes at urls, for a
// rush on the shard of the journey date.
func NewClient(urls []string, date time.Time) *Client {
	return &Client{http: &http.Client{Timeout: 10 * time.Second}, urls: urls, date: date.Format(time.DateOnly), Workers: 24}
}

type answer struct {
	status int
	body   map[string]any
}

func (a answer) str(k string) string { s, _ := a.body[k].(string); return s }

// call sends body to path as the traveller (their token, and their bound
// device when they have one), retrying what says retry on the next
// process. A body that is a func(base string) any is made afresh for each
// attempt (a hold's booking challenge is used up by the attempt that
// carries it).
func (c *Client) call(ctx context.Context, g int, method, path string, tv *Traveller, idem string, body any) (answer, error) {
	var last error
	giveUp := time.Now().Add(40 * time.Second)
	for attempt := 0; time.Now().Before(giveUp); attempt++ {
		base := c.urls[(g+attempt)%len(c.urls)]
		v := body
		if f, ok := body.(func(string) any); ok {
			v = f(base)
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return answer{}, err
		}
		req, err := http.NewRequestWithContext(ctx, method, base+path, bytes.NewReader(raw))
		if err != nil {
			return answer{}, err
		}
		req.Header.Set("Authorization", "Bearer "+tv.Token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", idem)
		if tv.Device != "" {
			req.Header.Set("X-Device-Token", tv.Device)
		}
		resp, err := c.http.Do(req)
		if err != nil {
			if c.Seen != nil {
				c.Seen(0, "")
			}
			if ctx.Err() != nil {
				return answer{}, ctx.Err()
			}
			last = err
			time.Sleep(10 * time.Millisecond)
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		a := answer{status: resp.StatusCode}
		json.Unmarshal(b, &a.body) //nolint:errcheck // a body that is not JSON reads as empty
		if c.Seen != nil {
			c.Seen(resp.StatusCode, a.str("reason"))
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

// travel is one passenger's rush: bind the phone (every hold needs a
// bound device), hold, then pay (every other one by wallet, the rest by
// UPI through the gateway simulator).
func (c *Client) travel(ctx context.Context, tv *Traveller, g int) {
	from := g % 4
	to := from + 1 + int(tv.User)%(len(seed.Stations12951)-1-from)
	key := "chaos-" + strconv.FormatInt(tv.User, 10)
	if tv.Device == "" {
		a, err := c.call(ctx, g, http.MethodPost, "/v1/devices/bind", tv, key+"-bind",
			map[string]any{"device_token": fmt.Sprintf("chaos-phone-%012d", tv.User)})
		switch {
		case err != nil:
			tv.Failure = "bind device: " + err.Error()
			return
		case a.status != http.StatusOK || a.str("device_binding") == "":
			tv.Failure = fmt.Sprintf("bind device: %d %s", a.status, a.str("reason"))
			return
		}
		tv.Device = a.str("device_binding")
	}
	// A different person per account: the same passenger on many accounts'
	// holds is what the rules refuse.
	var letters [5]byte
	for i, u := 0, tv.User; i < len(letters); i, u = i+1, u/26 {
		letters[i] = byte('A' + u%26)
	}
	hold := map[string]any{
		"train_no": "12951", "journey_date": c.date, "class": "3A", "quota": "TQ", "from": seed.Stations12951[from], "to": seed.Stations12951[to],
		"passengers": []map[string]any{{"name": "Chaos " + string(letters[:]), "age": 30 + g%40, "gender": "F",
			"id_type": "PAN", "id_ref": string(letters[:]) + "1234F"}}}
	// Every hold carries a booking challenge solved for its attempt, asked
	// of the process it goes to.
	a, err := c.call(ctx, g, http.MethodPost, "/v1/bookings/hold", tv, key+"-hold", func(base string) any {
		if ch, ok := c.challenge(ctx, base, tv.Token, key+"-hold"); ok {
			hold["challenge"] = ch
		}
		return hold
	})
	switch {
	case err != nil:
		tv.Failure = "hold: " + err.Error()
		return
	case a.str("status") == "SOLD_OUT":
		tv.SoldOut = true
		return
	case a.str("hold_id") == "" || (a.str("status") != "HELD" && a.str("status") != "WAITLIST_OFFERED"):
		tv.Failure = fmt.Sprintf("hold: %d %s", a.status, a.str("reason"))
		return
	}
	tv.HoldID = a.str("hold_id")
	pay := map[string]any{"hold_id": tv.HoldID, "method": "WALLET"}
	if tv.User%2 == 1 {
		pay = map[string]any{"hold_id": tv.HoldID, "method": "UPI", "vpa": "chaos" + strconv.FormatInt(tv.User, 10) + "@okaxis"}
	}
	if a, err = c.call(ctx, g, http.MethodPost, "/v1/payments/initiate", tv, key+"-pay", pay); err != nil {
		tv.Failure = "pay: " + err.Error()
		return
	}
	if a.status >= 300 {
		tv.Failure = fmt.Sprintf("pay: %d %s", a.status, a.str("reason"))
		return
	}
	tv.PaymentID, tv.PayState = a.str("payment_id"), a.str("state")
}

// Rush runs every traveller through the serve processes, Workers at a
// time, and beside it faults, which may wait(n) until n travellers are
// done before breaking something; both have ended when it returns.
func (c *Client) Rush(ctx context.Context, travellers []*Traveller, faults func(wait func(n int64), done func() int64)) {
	var done atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		faults(func(n int64) {
			for done.Load() < n && ctx.Err() == nil {
				time.Sleep(5 * time.Millisecond)
			}
		}, done.Load)
	}()
	next := make(chan *Traveller)
	for g := range max(c.Workers, 1) {
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

// Outcome is what the rush's travellers were told.
type Outcome struct {
	Held     []string       // holds answered HELD or WAITLIST_OFFERED
	SoldOut  int            // travellers told SOLD_OUT
	Refusals map[string]int // what ended the others' attempts
	// BadAnswers are 5xx answers other than 503 with Retry-After;
	// LastBad describes the last.
	BadAnswers int64
	LastBad    string
}

// Outcome sums up the travellers' answers after Rush.
func (c *Client) Outcome(travellers []*Traveller) Outcome {
	o := Outcome{Refusals: map[string]int{}, BadAnswers: c.badAnswers.Load()}
	o.LastBad, _ = c.lastBad.Load().(string)
	for _, tv := range travellers {
		if tv.HoldID != "" {
			o.Held = append(o.Held, tv.HoldID)
		}
		if tv.SoldOut {
			o.SoldOut++
		}
		if tv.Failure != "" {
			o.Refusals[tv.Failure]++
		}
	}
	return o
}

func (o Outcome) String() string {
	return fmt.Sprintf("%d held, %d sold out, refusals %v", len(o.Held), o.SoldOut, o.Refusals)
}

// Violations are the rush's broken promises: an answer that was an
// error other than 503 with Retry-After, or a rush that neither filled
// nor sold out the shard (it tested nothing).
func (o Outcome) Violations() []string {
	var v []string
	if o.BadAnswers != 0 {
		v = append(v, fmt.Sprintf("%d answers were a 5xx other than 503 with Retry-After (last: %s)", o.BadAnswers, o.LastBad))
	}
	if len(o.Held) == 0 || o.SoldOut == 0 {
		v = append(v, fmt.Sprintf("the rush neither filled nor sold out the shard: %d held, %d sold out", len(o.Held), o.SoldOut))
	}
	return v
}

// Target is what the invariants are read from: the stack's database, its
// seat store in Redis and the reservation core.
type Target struct {
	Pool       *pgxpool.Pool
	Store      *inventory.Store
	CoreURL    string
	CoreKey    string
	HoldWindow time.Duration // the processes' hold window, for the seat check
}

// Drain waits until every payment of the shard is final, every ticket has
// reached the core and the shard's invariants hold (a hold whose answer
// died with its serve process is swept at its expiry). It fails when the
// stack does not get there by itself within timeout, saying what is left.
func Drain(ctx context.Context, t Target, shardID int64, timeout time.Duration, progress func(open, unsynced int, rep inventory.Report)) error {
	deadline := time.Now().Add(timeout)
	for {
		var open, unsynced int
		if err := t.Pool.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM payments p JOIN holds h ON h.id = p.hold_id WHERE h.shard_id = $1
				AND (p.state NOT IN ('SUCCESS', 'FAILED', 'REFUNDED')
				     OR EXISTS (SELECT 1 FROM refunds r WHERE r.payment_id = p.id AND r.state <> 'PROCESSED'))),
			(SELECT count(*) FROM bookings WHERE shard_id = $1 AND status = 'CONFIRMED' AND prs_state <> 'SYNCED')`,
			shardID).Scan(&open, &unsynced); err != nil {
			return fmt.Errorf("drain: %w", err)
		}
		rep, err := inventory.Check(ctx, t.Pool, t.Store, shardID, t.HoldWindow)
		if err != nil {
			return fmt.Errorf("check the shard: %w", err)
		}
		if open == 0 && unsynced == 0 && rep.OK() && rep.Ready {
			return nil
		}
		if progress != nil {
			progress(open, unsynced, rep)
		}
		if time.Now().After(deadline) {
			var why, jobs string
			t.Pool.QueryRow(ctx, `SELECT coalesce(string_agg(p.state || ' ' || p.method || ' review:' || (SELECT count(*) FROM payment_reviews v WHERE v.payment_id = p.id)::text || ' '
					|| coalesce(r.state, '-') || ' ' || (now() - p.created_at)::text, '; '), '')
				FROM payments p JOIN holds h ON h.id = p.hold_id LEFT JOIN refunds r ON r.payment_id = p.id
				WHERE h.shard_id = $1 AND (p.state NOT IN ('SUCCESS', 'FAILED', 'REFUNDED') OR r.state <> 'PROCESSED')`,
				shardID).Scan(&why) //nolint:errcheck // a diagnostic
			t.Pool.QueryRow(ctx, `SELECT coalesce(string_agg(kind || ' ' || state::text || ' x' || n, '; '), '')
				FROM (SELECT kind, state, count(*) AS n FROM river_job WHERE state <> 'completed' GROUP BY 1, 2) j`).Scan(&jobs) //nolint:errcheck
			return fmt.Errorf("not drained in %s: %d payments open (%s), %d tickets not at the core; jobs: %s; shard:\n%s",
				timeout, open, why, unsynced, jobs, rep)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// Verdict is the invariants' check after drain.
type Verdict struct {
	Held, Durable     int // holds answered HELD; of them, rows in PostgreSQL
	OversoldBerthLegs int
	Payments, Tickets int
	Refunded          int // payments refunded in full
	WrongPayments     int // neither one ticket nor a full refund (nor a failure)
	TicketsWithoutPay int
	CoreMissing       []string // PNRs not in the core exactly once
	CoreExtra         map[string]int
	UnbalancedWallets int
	MoneyIn, Fares    int64
	Refunds           int64
	Violations        []string // every broken promise, in words
}

// OK says whether every invariant held.
func (v Verdict) OK() bool { return len(v.Violations) == 0 }

// Check checks the shard's invariants after Drain, for the holds answered
// HELD during the rush (date: the shard's journey date, for the core's
// export). An error is a check that could not run; broken invariants are
// the verdict's Violations.
func Check(ctx context.Context, t Target, shardID int64, date time.Time, held []string) (Verdict, error) {
	v := Verdict{Held: len(held)}
	bad := func(format string, args ...any) { v.Violations = append(v.Violations, fmt.Sprintf(format, args...)) }
	if err := t.Pool.QueryRow(ctx, `SELECT count(*) FROM holds WHERE id::text = ANY($1)`, held).Scan(&v.Durable); err != nil {
		return v, fmt.Errorf("count holds: %w", err)
	}
	if v.Durable != len(held) {
		bad("%d holds answered HELD, %d of them in PostgreSQL", len(held), v.Durable)
	}
	// No berth sold twice on any leg.
	if err := t.Pool.QueryRow(ctx, `SELECT count(*) FROM booking_passengers a JOIN booking_passengers b
		ON a.shard_id = b.shard_id AND a.berth_idx = b.berth_idx AND (a.booking_id, a.seq) < (b.booking_id, b.seq)
		AND int4range(a.from_seq, a.to_seq) && int4range(b.from_seq, b.to_seq)
		WHERE a.shard_id = $1 AND a.status = 'CONFIRMED' AND b.status = 'CONFIRMED'`, shardID).Scan(&v.OversoldBerthLegs); err != nil {
		return v, fmt.Errorf("count oversold: %w", err)
	}
	if v.OversoldBerthLegs != 0 {
		bad("%d oversold berth-legs", v.OversoldBerthLegs)
	}
	// Every payment ended as exactly one ticket or a full refund, and no
	// ticket stands without a payment.
	if err := t.Pool.QueryRow(ctx, `
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
		FROM p`, shardID).Scan(&v.Payments, &v.Tickets, &v.Refunded, &v.WrongPayments, &v.TicketsWithoutPay); err != nil {
		return v, fmt.Errorf("check payments: %w", err)
	}
	if v.WrongPayments != 0 || v.TicketsWithoutPay != 0 || v.Tickets == 0 {
		bad("payments: %d of %d ended neither as one ticket nor as a full refund; %d tickets without a payment; %d tickets",
			v.WrongPayments, v.Payments, v.TicketsWithoutPay, v.Tickets)
	}
	// The reservation core holds every ticket exactly once, and nothing else.
	exported, err := prs.NewClient(t.CoreURL, t.CoreKey, nil).Export(ctx, date)
	if err != nil {
		return v, fmt.Errorf("export from the core: %w", err)
	}
	inCore := map[string]int{}
	for _, b := range exported {
		if b.Status == "CONFIRMED" {
			inCore[b.PNR]++
		}
	}
	rows, err := t.Pool.Query(ctx, `SELECT pnr FROM bookings WHERE shard_id = $1 AND status = 'CONFIRMED'`, shardID)
	if err != nil {
		return v, fmt.Errorf("read PNRs: %w", err)
	}
	var pnrs []string
	for rows.Next() {
		var pnr string
		if err := rows.Scan(&pnr); err != nil {
			rows.Close()
			return v, fmt.Errorf("read PNRs: %w", err)
		}
		pnrs = append(pnrs, pnr)
	}
	if err := rows.Err(); err != nil {
		return v, fmt.Errorf("read PNRs: %w", err)
	}
	for _, pnr := range pnrs {
		if inCore[pnr] != 1 {
			v.CoreMissing = append(v.CoreMissing, pnr)
			bad("PNR %s is in the core %d times", pnr, inCore[pnr])
		}
		delete(inCore, pnr)
	}
	if len(inCore) != 0 {
		v.CoreExtra = inCore
		bad("the core holds bookings we did not confirm: %v", inCore)
	}
	// The wallets balance, and the money in is the tickets plus the refunds.
	unbalanced, err := payment.CheckLedger(ctx, t.Pool)
	if err != nil {
		return v, fmt.Errorf("check the ledger: %w", err)
	}
	if v.UnbalancedWallets = len(unbalanced); v.UnbalancedWallets != 0 {
		bad("wallets that do not balance: %v", unbalanced)
	}
	if err := t.Pool.QueryRow(ctx, `SELECT
		coalesce((SELECT sum(p.amount_paise) FROM payments p JOIN holds h ON h.id = p.hold_id
			WHERE h.shard_id = $1 AND p.state IN ('SUCCESS', 'REFUNDED')), 0),
		coalesce((SELECT sum(b.fare_paise) FROM bookings b WHERE b.shard_id = $1 AND b.status <> 'CANCELLED'), 0),
		coalesce((SELECT sum(r.amount_paise) FROM refunds r JOIN payments p ON p.id = r.payment_id JOIN holds h ON h.id = p.hold_id
			WHERE h.shard_id = $1), 0)`, shardID).Scan(&v.MoneyIn, &v.Fares, &v.Refunds); err != nil {
		return v, fmt.Errorf("money: %w", err)
	}
	if v.MoneyIn != v.Fares+v.Refunds {
		bad("money in %d paise, tickets %d, refunds %d: %d unaccounted", v.MoneyIn, v.Fares, v.Refunds, v.MoneyIn-v.Fares-v.Refunds)
	}
	return v, nil
}

// Report is the verdict for a person: one line per invariant, PASS or FAIL.
func (v Verdict) Report() string {
	var b strings.Builder
	line := func(ok bool, format string, args ...any) {
		mark := "PASS"
		if !ok {
			mark = "FAIL"
		}
		fmt.Fprintf(&b, "  %s  %s\n", mark, fmt.Sprintf(format, args...))
	}
	line(v.Durable == v.Held, "every HELD answer durable: %d of %d holds in PostgreSQL", v.Durable, v.Held)
	line(v.OversoldBerthLegs == 0, "no berth sold twice: %d oversold berth-legs", v.OversoldBerthLegs)
	line(v.WrongPayments == 0 && v.TicketsWithoutPay == 0 && v.Tickets > 0,
		"every payment a ticket or a full refund: %d payments, %d tickets, %d refunded, %d neither, %d tickets unpaid",
		v.Payments, v.Tickets, v.Refunded, v.WrongPayments, v.TicketsWithoutPay)
	line(len(v.CoreMissing) == 0 && len(v.CoreExtra) == 0, "every ticket in the core once: %d not once, %d unknown there",
		len(v.CoreMissing), len(v.CoreExtra))
	line(v.UnbalancedWallets == 0 && v.MoneyIn == v.Fares+v.Refunds, "ledger balanced: %d wallets off; money in %d = fares %d + refunds %d paise",
		v.UnbalancedWallets, v.MoneyIn, v.Fares, v.Refunds)
	return b.String()
}

// challenge asks the process at base for a booking challenge for attempt
// and solves it; false when none was given (the hold then says why).
func (c *Client) challenge(ctx context.Context, base, tok, attempt string) (map[string]string, bool) {
	raw, _ := json.Marshal(map[string]string{"attempt": attempt})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/challenge", bytes.NewReader(raw))
	if err != nil {
		return nil, false
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, false
	}
	defer resp.Body.Close()
	var ch struct {
		Challenge string `json:"challenge"`
		Bits      int    `json:"difficulty_bits"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&ch) != nil {
		return nil, false
	}
	return map[string]string{"type": "POW_SHA256", "token": ch.Challenge, "nonce": token.Solve(ch.Challenge, ch.Bits)}, true
}
