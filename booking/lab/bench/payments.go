package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"tatkal/booking"
	"tatkal/booking/payment"
	"tatkal/booking/payment/pspapi"
	"tatkal/booking/sim/pspsim"
)

// The payment phases. Each confirmation takes one fresh user (one live hold
// per account, two Tatkal tickets a day) and one berth, so each phase has a
// shard of its own, without a waitlist, sized for its users: a SOLD_OUT
// answer ends the phase early, and the report says so.

// endOnce records the first reason a phase stopped before its duration.
type endOnce struct {
	once  sync.Once
	begin time.Time
	why   string
	at    time.Duration
}

func (e *endOnce) end(why string) {
	e.once.Do(func() { e.why, e.at = why, time.Since(e.begin) })
}

func (e *endOnce) apply(p *Phase) {
	if e.why != "" {
		p.EndedEarly, p.EndedAt = e.why, e.at
	}
}

// walletConfirmations is hold → pay with the wallet → PNR: each client
// takes a fresh wallet-funded user, holds one seat on a random journey
// (Holds.Hold) and pays with payment.Service.Initiate (WALLET), which
// debits the wallet and confirms the hold with a PNR in one transaction.
// A sequence counts when Initiate answers SUCCESS; latency is of the whole
// sequence, and of the hold and pay steps apart.
func walletConfirmations(ctx context.Context, env *runEnv) (Phase, error) {
	svc, pays, sh, users := env.opts.Service, env.opts.Payments, env.walletShard, env.walletUsers
	var next atomic.Int64
	var stop atomic.Bool
	end := &endOnce{begin: time.Now()}
	t, elapsed := closedLoop(ctx, env.opts.Concurrency, env.opts.Duration, func(g int, t *tally, more func() bool) {
		rng := rand.New(rand.NewPCG(uint64(g), 5))
		for n := 0; more() && !stop.Load(); n++ {
			i := next.Add(1) - 1
			if i >= int64(len(users)) {
				end.end("ran out of wallet users (raise WalletUsers)")
				stop.Store(true)
				return
			}
			user := users[i]
			caller := booking.Caller{UserID: user, Verified: true, CreatedAt: env.created, Device: benchDevice}
			from, to := journey(rng, len(env.stops))
			start := time.Now()
			res, err := svc.Hold(ctx, caller, booking.HoldRequest{UserID: user, IdempotencyKey: env.idemKey("w", g, n),
				Train: sh.Train, Date: sh.Date, Class: sh.Class, Quota: sh.Quota, From: env.stops[from], To: env.stops[to],
				Passengers: []booking.Passenger{passenger(g, user)}})
			held := time.Since(start)
			if err != nil {
				t.fail("hold: " + reasonOf(err))
				continue
			}
			if res.Status == "SOLD_OUT" {
				t.soldOut++
				end.end("the wallet shard sold out")
				stop.Store(true)
				continue
			}
			if res.Status != "HELD" {
				t.fail("hold: " + res.Status)
				continue
			}
			paying := time.Now()
			v, err := pays.Initiate(ctx, caller, payment.InitiateRequest{HoldID: res.HoldID, Method: payment.Wallet,
				IdempotencyKey: env.idemKey("wp", g, n)})
			paid := time.Since(paying)
			if err != nil {
				t.fail("pay: " + reasonOf(err))
				continue
			}
			if v.State != payment.Success {
				t.fail("pay: answered " + v.State)
				continue
			}
			t.ops++
			t.durable++
			t.lat = append(t.lat, time.Since(start))
			t.holdLat, t.payLat = append(t.holdLat, held), append(t.payLat, paid)
			t.ids = append(t.ids, v.ID)
		}
	})
	ph := t.phase("wallet: Service.Hold, then Initiate WALLET → PNR, fresh users", elapsed)
	end.apply(&ph)
	env.walletPayments, env.walletRate = t.ids, ph.DurableRate()
	return ph, nil
}

// webhook is one prepared gateway callback: a payment AWAITING_USER at the
// bench's gateway simulator and the signed SUCCESS event for it.
type webhook struct {
	payment uuid.UUID
	gateway string
	secret  []byte
	body    []byte
}

// callbackRun is what the callback preparation made, for the callback and
// duplicate phases and the checks after them.
type callbackRun struct {
	hooks   []webhook
	took    time.Duration
	failed  map[string]int64 // preparation failures by reason
	sent    int              // delivered in the measured phase
	drained int              // delivered after it, unmeasured
	// setBased: of those in the phase, how many the server's confirmation
	// groups took set-based (payment.Service.SetBasedSuccesses).
	setBased int64
}

// benchRoutes are the simulator's routes for the preparation: UPI on every
// gateway, no latency and no faults, and a customer who never answers
// (AutoApproveMs -1), so every payment stays AWAITING_USER until the bench
// sends its callback.
func benchRoutes(gws []payment.GatewayConfig) []pspapi.RouteConfig {
	var out []pspapi.RouteConfig
	for _, g := range gws {
		for _, m := range []string{pspapi.UPI, pspapi.Card, pspapi.NetBanking} {
			out = append(out, pspapi.RouteConfig{Gateway: g.ID, Method: m, AutoApproveMs: -1, ExpireAfterMs: 60 * 60 * 1000})
		}
	}
	return out
}

// prepareCallbacks makes the callback phase's payments through the real
// path: a fresh user holds one seat on the callback shard (Holds.Hold),
// then a payment.Service (built as the server builds its own, by
// opts.NewPayments, but wired to a gateway simulator of the bench's own on
// loopback, in a scratch schema) initiates a UPI payment for it, which
// creates it at the gateway over HTTP and records the answer:
// AWAITING_USER with the gateway's psp_ref. The simulator's customer never
// answers and its background loop is not run, so nothing resolves by
// itself. Each payment then gets its SUCCESS webhook body, signed at send
// time with its gateway's secret.
func prepareCallbacks(ctx context.Context, env *runEnv) error {
	opts := env.opts
	begin := time.Now()
	simGws := make([]pspsim.GatewayConfig, 0, len(opts.Gateways))
	secrets := map[string][]byte{}
	for _, g := range opts.Gateways {
		simGws = append(simGws, pspsim.GatewayConfig{ID: g.ID, APIKeys: []string{g.APIKey}, WebhookSecret: g.WebhookSecrets[0]})
		secrets[g.ID] = g.WebhookSecrets[0]
	}
	schema := "bench_psp_" + env.runID
	sim, err := pspsim.New(ctx, pspsim.Config{Pool: opts.Pool, Schema: schema, Gateways: simGws, Log: opts.Log,
		Seed: 1, Routes: benchRoutes(opts.Gateways)})
	if err != nil {
		return fmt.Errorf("gateway simulator: %w", err)
	}
	defer opts.Pool.Exec(context.WithoutCancel(ctx), `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`) //nolint:errcheck
	defer sim.Close()
	simURL, stopSim, err := serveHandler(sim.Handler())
	if err != nil {
		return err
	}
	defer stopSim()
	var gws []payment.GatewayConfig
	for _, g := range opts.Gateways {
		gws = append(gws, payment.GatewayConfig{ID: g.ID, BaseURL: simURL, APIKey: g.APIKey, WebhookSecrets: g.WebhookSecrets})
	}
	// The server's own orchestrator pays at the server's gateways, not at
	// this simulator: a second one, built as the server builds its own, with
	// this simulator's route health under a prefix of the run's.
	pays := opts.NewPayments(gws, "bench:pay"+env.runID)

	svc, sh, users := opts.Service, env.callbackShard, env.callbackUsers
	if opts.Callbacks <= 0 {
		// A callback confirms without the wallet's hold and debit steps: seen
		// here at 3 to 5 times the wallet's rate, so prepare for 8 times.
		want := 2*opts.Concurrency + int(8*env.walletRate*opts.Duration.Seconds()+0.5)
		users = users[:min(want, len(users))]
	}
	var next atomic.Int64
	var soldOut atomic.Bool
	ids := make([][]uuid.UUID, opts.Concurrency)
	fails := make([]map[string]int64, opts.Concurrency)
	var wg sync.WaitGroup
	for g := range opts.Concurrency {
		wg.Go(func() {
			fail := func(why string) {
				if fails[g] == nil {
					fails[g] = map[string]int64{}
				}
				fails[g][why]++
			}
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for n := 0; ctx.Err() == nil && !soldOut.Load(); n++ {
				i := next.Add(1) - 1
				if i >= int64(len(users)) {
					return
				}
				user := users[i]
				caller := booking.Caller{UserID: user, Verified: true, CreatedAt: env.created, Device: benchDevice}
				from, to := journey(rng, len(env.stops))
				res, err := svc.Hold(ctx, caller, booking.HoldRequest{UserID: user, IdempotencyKey: env.idemKey("p", g, n),
					Train: sh.Train, Date: sh.Date, Class: sh.Class, Quota: sh.Quota, From: env.stops[from], To: env.stops[to],
					Passengers: []booking.Passenger{passenger(g, user)}})
				switch {
				case err != nil:
					fail("prepare hold: " + reasonOf(err))
					continue
				case res.Status == "SOLD_OUT":
					soldOut.Store(true)
					continue
				case res.Status != "HELD":
					fail("prepare hold: " + res.Status)
					continue
				}
				v, err := pays.Initiate(ctx, caller, payment.InitiateRequest{HoldID: res.HoldID, Method: payment.UPI,
					VPA: "bench.payer@okaxis", IdempotencyKey: env.idemKey("pp", g, n)})
				if err != nil {
					fail("prepare payment: " + reasonOf(err))
					continue
				}
				if v.State != payment.AwaitingUser {
					fail("prepare payment: " + v.State + " " + v.FailureReason)
					continue
				}
				ids[g] = append(ids[g], v.ID)
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	run := &callbackRun{failed: map[string]int64{}}
	var all []uuid.UUID
	for g := range ids {
		all = append(all, ids[g]...)
		for k, v := range fails[g] {
			run.failed[k] += v
		}
	}
	if soldOut.Load() {
		run.failed["prepare hold: the callback shard sold out"]++
	}
	rows, err := opts.Pool.Query(ctx, `SELECT id, psp, coalesce(psp_ref, ''), amount_paise, state FROM payments WHERE id = ANY($1)`, all)
	if err != nil {
		return fmt.Errorf("read prepared payments: %w", err)
	}
	type row struct {
		id                  uuid.UUID
		gateway, ref, state string
		amount              int64
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		err := r.Scan(&x.id, &x.gateway, &x.ref, &x.amount, &x.state)
		return x, err
	})
	if err != nil {
		return fmt.Errorf("read prepared payments: %w", err)
	}
	// In the order they were made, so the phase sends the oldest first.
	slices.SortFunc(got, func(a, b row) int { return bytes.Compare(a.id[:], b.id[:]) })
	for _, p := range got {
		if p.state != payment.AwaitingUser || p.ref == "" || secrets[p.gateway] == nil {
			return fmt.Errorf("prepared payment %s is %s at %q with psp_ref %q, want AWAITING_USER at a known gateway", p.id, p.state, p.gateway, p.ref)
		}
		body, err := json.Marshal(pspapi.Webhook{EventID: "evt_bench_" + env.runID + "_" + p.id.String(), PSPRef: p.ref,
			MerchantRef: p.id.String(), Gateway: p.gateway, Method: pspapi.UPI, Status: pspapi.StatusSuccess, AmountPaise: p.amount,
			BankRef: "BENCH" + strconv.Itoa(len(run.hooks)), BankEventTime: time.Now().UTC()})
		if err != nil {
			return fmt.Errorf("encode webhook: %w", err)
		}
		run.hooks = append(run.hooks, webhook{payment: p.id, gateway: p.gateway, secret: secrets[p.gateway], body: body})
	}
	if len(run.hooks) == 0 {
		return fmt.Errorf("no payment could be prepared for the callback phase: %v", run.failed)
	}
	run.took = time.Since(begin)
	env.callbacks = run
	opts.Log.Info("bench callbacks prepared", "payments", len(run.hooks), "took", run.took.Round(time.Millisecond))
	return nil
}

// callbackPhase posts each prepared payment's signed SUCCESS webhook, once,
// to POST /v1/internal/payments/callback over HTTP: the server verifies the
// signature, dedups by event id, applies SUCCESS and confirms the hold (a
// PNR) in one transaction, then records the event. A phase that runs out
// of prepared payments ends early and says so.
func callbackPhase(ctx context.Context, env *runEnv) (Phase, error) {
	run := env.callbacks
	c := newClient(env)
	defer c.close()
	var next atomic.Int64
	end := &endOnce{begin: time.Now()}
	setBased := env.opts.Payments.SetBasedSuccesses()
	t, elapsed := closedLoop(ctx, env.opts.Concurrency, env.opts.Duration, func(g int, t *tally, more func() bool) {
		for more() {
			i := next.Add(1) - 1
			if i >= int64(len(run.hooks)) {
				end.end("ran out of prepared payments (raise Callbacks)")
				return
			}
			start := time.Now()
			failure := c.callback(ctx, g, run.hooks[i])
			t.lat = append(t.lat, time.Since(start))
			if failure != "" {
				t.fail(failure)
				continue
			}
			t.ops++
			t.durable++
		}
	})
	ph := t.phase("callbacks: POST /v1/internal/payments/callback, signed SUCCESS → PNR", elapsed)
	end.apply(&ph)
	run.sent = min(int(next.Load()), len(run.hooks))
	run.setBased = env.opts.Payments.SetBasedSuccesses() - setBased
	return ph, nil
}

// drainCallbacks sends, unmeasured, the prepared payments the callback
// phase did not reach, so every prepared payment ends SUCCESS, then counts
// what the payments left in PostgreSQL, for the duplicates to be held to.
func drainCallbacks(ctx context.Context, env *runEnv) error {
	run := env.callbacks
	c := newClient(env)
	defer c.close()
	rest := run.hooks[run.sent:]
	var drainNext atomic.Int64
	var failed atomic.Int64
	var wg sync.WaitGroup
	for g := range env.opts.Concurrency {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := drainNext.Add(1) - 1
				if i >= int64(len(rest)) {
					return
				}
				if c.callback(ctx, g, rest[i]) != "" {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	run.drained = len(rest)
	if n := failed.Load(); n > 0 {
		return fmt.Errorf("%d of the %d callbacks sent after the phase failed", n, len(rest))
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	before, err := paymentFootprint(ctx, env)
	if err != nil {
		return err
	}
	env.footprintBeforeDuplicates = before
	return nil
}

// duplicatePhase sends the events the callback phase delivered again, as a
// gateway retrying does (same event id and body, signed afresh): each must
// be acknowledged (200) and change nothing. The checks after the run
// count events, bookings, refunds and notifications to show nothing
// changed.
func duplicatePhase(ctx context.Context, env *runEnv) (Phase, error) {
	hooks := env.callbacks.hooks
	c := newClient(env)
	defer c.close()
	var next atomic.Int64
	t, elapsed := closedLoop(ctx, env.opts.Concurrency, env.opts.Duration, func(g int, t *tally, more func() bool) {
		for more() {
			i := (next.Add(1) - 1) % int64(len(hooks))
			start := time.Now()
			failure := c.callback(ctx, g, hooks[i])
			t.lat = append(t.lat, time.Since(start))
			if failure != "" {
				t.fail(failure)
				continue
			}
			t.ops++
		}
	})
	return t.phase("duplicates: the same SUCCESS events again (acknowledged, no-op)", elapsed), nil
}

// callback posts one webhook signed now over bench client g's connection,
// reads the whole answer and returns "" for 200 or a failure named by
// status and reason.
func (c *client) callback(ctx context.Context, g int, h webhook) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/internal/payments/callback", bytes.NewReader(h.body))
	if err != nil {
		return "callback: request"
	}
	now := time.Now()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(pspapi.HeaderGateway, h.gateway)
	req.Header.Set(pspapi.HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(pspapi.HeaderSignature, pspapi.Sign(h.secret, now, h.body))
	var a answer
	// An unreadable error answer still has its status.
	status, err := c.do(g, req, &a)
	switch {
	case status == 0:
		return "callback: transport"
	case status != http.StatusOK:
		return "callback: " + strconv.Itoa(status) + " " + a.Reason
	case err != nil:
		return "callback: " + err.Error()
	}
	return ""
}

// footprint counts what the payments of the callback phase left in
// PostgreSQL: a duplicate callback must not add to any of it.
type footprint struct {
	events, webhooks, bookings, refunds, notifications int64
}

func paymentFootprint(ctx context.Context, env *runEnv) (footprint, error) {
	ids := make([]uuid.UUID, len(env.callbacks.hooks))
	for i, h := range env.callbacks.hooks {
		ids[i] = h.payment
	}
	var f footprint
	err := env.opts.Pool.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM payment_events WHERE payment_id = ANY($1)),
		       (SELECT count(*) FROM webhook_events WHERE payment_id = ANY($1)),
		       (SELECT count(*) FROM bookings b JOIN payments p ON p.hold_id = b.hold_id WHERE p.id = ANY($1)),
		       (SELECT count(*) FROM refunds WHERE payment_id = ANY($1)),
		       (SELECT count(*) FROM notifications n JOIN payments p ON n.user_id = p.user_id WHERE p.id = ANY($1))`,
		ids).Scan(&f.events, &f.webhooks, &f.bookings, &f.refunds, &f.notifications)
	if err != nil {
		return f, fmt.Errorf("count payment effects: %w", err)
	}
	return f, nil
}

// PayCheck is what the bench verified about the money after the payment
// phases.
type PayCheck struct {
	// Payments checked: the wallet phase's and every prepared callback
	// payment (the measured ones and those sent after the phase).
	Wallet, Callbacks int
	// LedgerBroken are the wallets whose ledger disagrees with its balance
	// (payment.CheckLedger, over every wallet of the database).
	LedgerBroken []int64
	// Violations say what else is wrong, at most a few per kind.
	Violations []string
}

// OK reports whether nothing was wrong.
func (c PayCheck) OK() bool { return len(c.LedgerBroken) == 0 && len(c.Violations) == 0 }

// checkPayments verifies, after the payment phases: every wallet payment
// and every callback payment is SUCCESS, its hold CONFIRMED with exactly
// one CONFIRMED booking with a PNR, and no refund; a wallet payment has
// exactly one DEBIT of its amount, a callback payment none and exactly one
// recorded webhook event; the duplicates changed nothing; and every
// wallet's ledger adds up.
func checkPayments(ctx context.Context, env *runEnv, rep *Report) (PayCheck, error) {
	var c PayCheck
	problems := map[string]int{}
	violate := func(kind, format string, args ...any) {
		problems[kind]++
		if problems[kind] <= 3 {
			c.Violations = append(c.Violations, fmt.Sprintf(format, args...))
		}
	}
	check := func(ids []uuid.UUID, wallet bool) error {
		rows, err := env.opts.Pool.Query(ctx, `
			SELECT p.id, p.state, p.amount_paise, h.state,
			       (SELECT count(*) FROM bookings b WHERE b.hold_id = p.hold_id),
			       (SELECT count(*) FROM bookings b WHERE b.hold_id = p.hold_id AND b.status = 'CONFIRMED' AND b.pnr <> ''),
			       (SELECT count(*) FROM wallet_entries w WHERE w.kind = 'DEBIT' AND w.ref = p.id::text),
			       (SELECT coalesce(sum(amount_paise), 0) FROM wallet_entries w WHERE w.kind = 'DEBIT' AND w.ref = p.id::text),
			       (SELECT count(*) FROM refunds r WHERE r.payment_id = p.id),
			       (SELECT count(*) FROM webhook_events e WHERE e.payment_id = p.id)
			FROM payments p JOIN holds h ON h.id = p.hold_id WHERE p.id = ANY($1)`, ids)
		if err != nil {
			return err
		}
		defer rows.Close()
		seen := 0
		for rows.Next() {
			var id uuid.UUID
			var state, hstate string
			var amount, nbook, ncnf, ndebit, debited, nref, nhooks int64
			if err := rows.Scan(&id, &state, &amount, &hstate, &nbook, &ncnf, &ndebit, &debited, &nref, &nhooks); err != nil {
				return err
			}
			seen++
			if state != payment.Success {
				violate("state", "payment %s is %s, want SUCCESS", id, state)
			}
			if hstate != booking.HoldConfirmed || nbook != 1 || ncnf != 1 {
				violate("booking", "payment %s: hold %s with %d bookings (%d CONFIRMED with a PNR), want CONFIRMED with exactly one", id, hstate, nbook, ncnf)
			}
			if nref != 0 {
				violate("refund", "payment %s has %d refunds, want none", id, nref)
			}
			switch {
			case wallet && (ndebit != 1 || debited != -amount):
				violate("debit", "wallet payment %s: %d debits of %d paise in all, want one of %d", id, ndebit, debited, -amount)
			case !wallet && ndebit != 0:
				violate("debit", "callback payment %s has %d wallet debits, want none", id, ndebit)
			case !wallet && nhooks != 1:
				violate("webhook", "callback payment %s has %d recorded webhook events, want 1", id, nhooks)
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if seen != len(ids) {
			violate("missing", "%d of %d payments not found", len(ids)-seen, len(ids))
		}
		return nil
	}
	c.Wallet = len(env.walletPayments)
	if int64(c.Wallet) != rep.Wallet.Durable {
		violate("count", "wallet phase: %d payments recorded, %d confirmations counted", c.Wallet, rep.Wallet.Durable)
	}
	if err := check(env.walletPayments, true); err != nil {
		return c, fmt.Errorf("check wallet payments: %w", err)
	}
	if env.callbacks != nil {
		ids := make([]uuid.UUID, len(env.callbacks.hooks))
		for i, h := range env.callbacks.hooks {
			ids[i] = h.payment
		}
		c.Callbacks = len(ids)
		if err := check(ids, false); err != nil {
			return c, fmt.Errorf("check callback payments: %w", err)
		}
		if rep.Duplicates.Ops > 0 {
			after, err := paymentFootprint(ctx, env)
			if err != nil {
				return c, err
			}
			if before := env.footprintBeforeDuplicates; after != before {
				violate("duplicates", "the duplicate callbacks changed the payments' effects: before %+v, after %+v", before, after)
			}
		}
	}
	for kind, n := range problems {
		if n > 3 {
			c.Violations = append(c.Violations, fmt.Sprintf("... and %d more of kind %q", n-3, kind))
		}
	}
	slices.Sort(c.Violations)
	broken, err := payment.CheckLedger(ctx, env.opts.Pool)
	if err != nil {
		return c, err
	}
	c.LedgerBroken = broken
	return c, nil
}
