package bench

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"tatkal/booking/inventory"
)

// Report is a run's figures, each with the raw ceiling measured in the
// same run beside it.
type Report struct {
	// The machine.
	NumCPU, GOMAXPROCS int
	GoVersion          string
	LoadAvg            float64 // one-minute load average when the run began, -1 unknown
	// The settings.
	Duration      time.Duration
	Concurrency   int
	Berths        int
	PipelineBatch int
	Writers       int // the raw PostgreSQL ceiling's
	// The server's group-commit writers of holds and of payment
	// confirmations (0: unknown, a server not started by the bench).
	CommitWriters, ConfirmWriters int
	HoldWindow                    time.Duration
	NoSignals                     bool // the server recorded no fraud signals (--no-signals)
	BaseURL                       string
	OwnServer                     bool // the bench served the API itself (BaseURL was empty)
	// The hot shard, the rush shard and the users made for them.
	ShardID     int64
	Shard       string
	RushShardID int64
	Users       int
	// The phases, in the order they ran.
	RawLua, RawLuaPipelined, RawPG Phase
	Cycle, Service, HTTP, Rush     Phase
	// Wide is the service phase with WideConcurrency clients (none when
	// WideConcurrency is 0).
	Wide            Phase
	WideConcurrency int
	// StatementsWhy says why no phase has its statements (no
	// pg_stat_statements); "" when they were read.
	StatementsWhy string
	// The payment phases, run when the bench had a payment service
	// (Payments), each on a shard of its own without a waitlist.
	Payments                       bool
	WalletShardID, CallbackShardID int64
	WalletBerths, CallbackBerths   int
	Wallet, Callbacks, Duplicates  Phase
	CallbacksPrepared              int           // payments made AWAITING_USER for the callback phase
	CallbackPrep                   time.Duration // how long making them took (not measured as a phase)
	CallbacksDrained               int           // prepared payments the phase did not reach, sent after it
	CallbacksSetBased              int64         // of the phase's, taken set-based by the server's confirmation groups
	CallbackPrepFailures           map[string]int64
	// The spread phase (run when SpreadShards > 0): the cycle over many
	// shards, and how the shards and their decisions fell on the masters.
	Spread       Phase
	SpreadShards int
	Masters      []MasterShare
	Redis        string // where the run's Redis was: one server or a cluster
	// ShardsMade is how many shards the run made, each checked at the end.
	ShardsMade int
	// Checks are the invariant checks of every shard after the run; none
	// when the run stopped before them.
	Checks []inventory.Report
	// PayCheck is the money check after the payment phases (nil when they
	// did not run).
	PayCheck *PayCheck
	// SignalsAB is the recording cost measured within the run (--signals-ab),
	// which then runs only the raw ceilings beside it.
	SignalsAB SignalsAB
}

// OK reports whether every shard was checked, the payments too when they
// ran, and nothing was broken.
func (r Report) OK() bool {
	for _, c := range r.Checks {
		if !c.OK() {
			return false
		}
	}
	if r.Payments && (r.PayCheck == nil || !r.PayCheck.OK()) {
		return false
	}
	return r.ShardsMade > 0 && len(r.Checks) == r.ShardsMade
}

type row struct {
	figure  string
	value   string
	ceiling string
	ratio   string
	p50     string
	p99     string
}

func rate(v float64, unit string) string {
	return thousands(int64(v+0.5)) + " " + unit
}

func thousands(n int64) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func ratio(v, ceiling float64) string {
	if ceiling <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f", v/ceiling)
}

func ms(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
}

func cores(c float64) string {
	if c < 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", c)
}

// String prints the figures as a table, then the CPU each phase used, the
// errors, the invariant check, and how to read it all.
func (r Report) String() string {
	var b strings.Builder
	where := r.BaseURL + " (the server of this process)"
	if r.OwnServer {
		where = r.BaseURL + " (served by the bench)"
	}
	fmt.Fprintf(&b, "tatkal bench: one hot shard at a time: %s (id %d, %d berths; rush shard %d), %s users\n",
		r.Shard, r.ShardID, r.Berths, r.RushShardID, thousands(int64(r.Users)))
	fmt.Fprintf(&b, "machine: %d CPUs, GOMAXPROCS %d, %s, load average %s at the start; clients, server, Redis and PostgreSQL all share it\n",
		r.NumCPU, r.GOMAXPROCS, r.GoVersion, cores(r.LoadAvg))
	fmt.Fprintf(&b, "settings: %s per phase, %d concurrent clients, pipeline batch %d, %d group-commit writers in raw B, hold window %s;\n",
		r.Duration, r.Concurrency, r.PipelineBatch, r.Writers, r.HoldWindow)
	fmt.Fprintf(&b, "  the server: %d hold writers (TATKAL_COMMIT_WRITERS), %d confirmation writers (TATKAL_CONFIRM_WRITERS)\n",
		r.CommitWriters, r.ConfirmWriters)
	fmt.Fprintf(&b, "HTTP: %s\n", where)
	if r.NoSignals {
		fmt.Fprintf(&b, "fraud signals: NOT recorded (--no-signals: the hold path without them, for comparison only)\n")
	}
	fmt.Fprintln(&b)
	if r.SignalsAB.Ran() {
		r.writeSignalsAB(&b)
		return b.String()
	}

	a, b2 := r.RawLua.Rate(), r.RawPG.Rate()
	rows := []row{
		{"raw A  Lua hold-style script, 1 call per trip", rate(a, "ops/s"), "", "", ms(r.RawLua.P50), ms(r.RawLua.P99)},
		{fmt.Sprintf("raw A  same, pipelined x%d (latency per batch)", r.PipelineBatch), rate(r.RawLuaPipelined.Rate(), "ops/s"),
			"", "", ms(r.RawLuaPipelined.P50), ms(r.RawLuaPipelined.P99)},
		{"raw B  PG group commit of hold-like rows", rate(b2, "rows/s"), "", "", ms(r.RawPG.P50), ms(r.RawPG.P99)},
		{"service  hold decisions", rate(r.Service.Rate(), "/s"), "A " + rate(a, "/s"), ratio(r.Service.Rate(), a),
			ms(r.Service.P50), ms(r.Service.P99)},
		{"service  durable holds", rate(r.Service.DurableRate(), "/s"), "B " + rate(b2, "/s"), ratio(r.Service.DurableRate(), b2), "", ""},
		{"HTTP  hold decisions", rate(r.HTTP.Rate(), "/s"), "A " + rate(a, "/s"), ratio(r.HTTP.Rate(), a), ms(r.HTTP.P50), ms(r.HTTP.P99)},
		{"HTTP  durable holds", rate(r.HTTP.DurableRate(), "/s"), "B " + rate(b2, "/s"), ratio(r.HTTP.DurableRate(), b2), "", ""},
		{"cycle  hold + cancel, holds", rate(r.Cycle.DurableRate(), "/s"), "B " + rate(b2, "/s"), ratio(r.Cycle.DurableRate(), b2),
			ms(r.Cycle.P50), ms(r.Cycle.P99)},
		{"cycle  the cancel after each hold", "", "", "", ms(r.Cycle.CancelP50), ms(r.Cycle.CancelP99)},
		{"rush  HTTP decisions, all answers", rate(r.Rush.Rate(), "/s"), "A " + rate(a, "/s"), ratio(r.Rush.Rate(), a), ms(r.Rush.P50), ms(r.Rush.P99)},
		{fmt.Sprintf("rush  durable holds until sold out (%d)", r.Rush.Durable), rate(r.Rush.FillRate(), "/s"), "B " + rate(b2, "/s"),
			ratio(r.Rush.FillRate(), b2), "", ""},
		{"rush  decisions once sold out (SOLD_OUT)", rate(r.Rush.AfterFillRate(), "/s"), "A " + rate(a, "/s"),
			ratio(r.Rush.AfterFillRate(), a), "", ""},
	}
	if r.WideConcurrency > 0 {
		rows = append(rows[:6], append([]row{{fmt.Sprintf("service  durable holds, %d clients", r.WideConcurrency), rate(r.Wide.DurableRate(), "/s"),
			"B " + rate(b2, "/s"), ratio(r.Wide.DurableRate(), b2), ms(r.Wide.P50), ms(r.Wide.P99)}}, rows[6:]...)...)
	}
	if !r.Rush.SoldOutReached {
		rows[len(rows)-1].value, rows[len(rows)-1].ratio = "not sold out in the phase", "-"
	}
	if r.Payments {
		wr, cr, dr := r.Wallet.DurableRate(), r.Callbacks.DurableRate(), r.Duplicates.Rate()
		rows = append(rows,
			row{"wallet  hold → pay WALLET → PNR, confirmations", rate(wr, "/s"), "B " + rate(b2, "/s"), ratio(wr, b2), ms(r.Wallet.P50), ms(r.Wallet.P99)},
			row{"wallet  the hold step (Service.Hold)", "", "", "", ms(r.Wallet.HoldP50), ms(r.Wallet.HoldP99)},
			row{"wallet  the pay step (Initiate WALLET)", "", "", "", ms(r.Wallet.PayP50), ms(r.Wallet.PayP99)},
			row{"callbacks  signed SUCCESS webhook → PNR", rate(cr, "/s"), "B " + rate(b2, "/s"), ratio(cr, b2), ms(r.Callbacks.P50), ms(r.Callbacks.P99)},
			row{"callbacks  duplicate events (no-op)", rate(dr, "/s"), "B " + rate(b2, "/s"), ratio(dr, b2), ms(r.Duplicates.P50), ms(r.Duplicates.P99)},
		)
	} else {
		rows = append(rows, row{"wallet, callbacks  not measured (no payment service)", "", "", "", "", ""})
	}
	if r.SpreadShards > 0 {
		rows = append(rows,
			row{fmt.Sprintf("spread  hold + cancel over %d shards, holds", r.SpreadShards), rate(r.Spread.DurableRate(), "/s"),
				"B " + rate(b2, "/s"), ratio(r.Spread.DurableRate(), b2), ms(r.Spread.P50), ms(r.Spread.P99)},
			row{"spread  the cancel after each hold", "", "", "", ms(r.Spread.CancelP50), ms(r.Spread.CancelP99)})
	}
	head := row{"figure", "value", "ceiling", "ratio", "p50", "p99"}
	w := [6]int{}
	for _, x := range append([]row{head}, rows...) {
		for i, s := range []string{x.figure, x.value, x.ceiling, x.ratio, x.p50, x.p99} {
			w[i] = max(w[i], len(s))
		}
	}
	line := func(x row) {
		fmt.Fprintf(&b, "%-*s  %*s  %-*s  %*s  %*s  %*s\n", w[0], x.figure, w[1], x.value, w[2], x.ceiling, w[3], x.ratio,
			w[4], x.p50, w[5], x.p99)
	}
	line(head)
	for _, x := range rows {
		line(x)
	}

	httpRatio := r.HTTP.Rate() / max(a, 1)
	verdict := "met"
	if httpRatio < 0.5 {
		verdict = "NOT met"
	}
	fmt.Fprintf(&b, "\naim: HTTP hold decisions at about half of raw A: %.3f of it, %s\n", httpRatio, verdict)
	if r.Payments {
		fmt.Fprintf(&b, "duplicates: %.1fx the rate of first deliveries, p50 %s against %s\n",
			r.Duplicates.Rate()/max(r.Callbacks.Rate(), 1e-9), ms(r.Duplicates.P50), ms(r.Callbacks.P50))
		for _, p := range []struct {
			name string
			ph   Phase
		}{{"wallet", r.Wallet}, {"callbacks", r.Callbacks}} {
			if p.ph.EndedEarly != "" {
				fmt.Fprintf(&b, "NOTE: the %s phase ended early, after %s of %s: %s; its rate is over that span\n",
					p.name, p.ph.EndedAt.Round(time.Millisecond), r.Duration, p.ph.EndedEarly)
			}
		}
	}

	fmt.Fprintf(&b, "\nCPU per phase, in cores of %d, and in ms of one core per unit (a durable hold, a confirmation, else an\n", r.NumCPU)
	fmt.Fprintln(&b, "operation): redis and pg are those servers' own processes (/proc; pg counts every database of its server,")
	fmt.Fprintln(&b, "n/a when it runs elsewhere); rest = machine - tatkal - redis - pg: anything else running on the machine;")
	fmt.Fprintln(&b, "script time and WAL count every client of that Redis and that PostgreSQL server:")
	fmt.Fprintf(&b, "  %-16s %8s %7s %7s %7s %7s %8s  %7s %7s %7s  %14s %12s\n", "phase", "elapsed", "tatkal", "redis", "pg", "rest", "machine",
		"ms/unit", "redis", "pg", "redis µs/script", "WAL bytes/op")
	for _, p := range r.named(true) {
		perScript, walPerOp := "n/a", "n/a"
		if us := p.ph.CPU.MicrosPerScript(); us >= 0 {
			perScript = fmt.Sprintf("%.1f", us)
		}
		if p.ph.CPU.WALBytes >= 0 && p.ph.Units() > 0 {
			walPerOp = thousands(p.ph.CPU.WALBytes / p.ph.Units())
		}
		rest := -1.0
		if p.ph.CPU.PG >= 0 {
			rest = max(p.ph.CPU.Other()-p.ph.CPU.PG, 0)
		}
		fmt.Fprintf(&b, "  %-16s %8s %7s %7s %7s %7s %8s  %7s %7s %7s  %14s %12s\n", p.name, p.ph.Elapsed.Round(time.Millisecond), cores(p.ph.CPU.Process),
			cores(p.ph.CPU.Redis), cores(p.ph.CPU.PG), cores(rest), cores(p.ph.CPU.Machine),
			perUnit(p.ph.PerUnit(p.ph.CPU.Process)), perUnit(p.ph.PerUnit(p.ph.CPU.Redis)), perUnit(p.ph.PerUnit(p.ph.CPU.PG)), perScript, walPerOp)
	}
	r.writeGoals(&b)
	r.writeStatements(&b)

	fmt.Fprintf(&b, "\ncounts: service %d decisions (%d durable), HTTP %d (%d durable), cycle %d (%d HELD, %.0f%% of client time in the hold, the rest cancelling),\n",
		r.Service.Ops, r.Service.Durable, r.HTTP.Ops, r.HTTP.Durable, r.Cycle.Ops, r.Cycle.Durable, 100*r.Cycle.HoldShare)
	fmt.Fprintf(&b, "        rush %d (%d durable, %d SOLD_OUT, sold out after %s)\n", r.Rush.Ops, r.Rush.Durable, r.Rush.SoldOut, soldOutAfter(r.Rush))
	if r.Payments {
		fmt.Fprintf(&b, "        wallet %d confirmations with a PNR (shard %d, %d berths, %d SOLD_OUT)\n",
			r.Wallet.Durable, r.WalletShardID, r.WalletBerths, r.Wallet.SoldOut)
		fmt.Fprintf(&b, "        callbacks: %d payments prepared AWAITING_USER in %s (shard %d, %d berths), %d confirmed in the phase (%d of them set-based), %d sent after it;\n",
			r.CallbacksPrepared, r.CallbackPrep.Round(time.Millisecond), r.CallbackShardID, r.CallbackBerths, r.Callbacks.Durable, r.CallbacksSetBased, r.CallbacksDrained)
		fmt.Fprintf(&b, "        duplicates %d acknowledged\n", r.Duplicates.Ops)
	}
	if r.SpreadShards > 0 {
		fmt.Fprintf(&b, "        spread %d decisions (%d HELD) over %d shards on Redis %s:\n", r.Spread.Ops, r.Spread.Durable, r.SpreadShards, r.Redis)
		for _, m := range r.Masters {
			fmt.Fprintf(&b, "          master %-22s %3d shards  %s decisions (%.0f%%)\n", m.Addr, m.Shards, thousands(m.Ops),
				100*float64(m.Ops)/float64(max(r.Spread.Ops, 1)))
		}
	}
	fmt.Fprintf(&b, "group commit (holds per PostgreSQL transaction, %d writers):\n", r.CommitWriters)
	for _, p := range []struct {
		name string
		ph   Phase
	}{{"cycle", r.Cycle}, {"service", r.Service}, {"wide", r.Wide}, {"HTTP", r.HTTP}, {"rush", r.Rush}, {"wallet", r.Wallet}, {"spread", r.Spread}} {
		if (p.name == "wallet" && !r.Payments) || (p.name == "spread" && r.SpreadShards == 0) || (p.name == "wide" && r.WideConcurrency == 0) {
			continue
		}
		h := p.ph.Holds
		fmt.Fprintf(&b, "  %-8s %s holds in %s transactions: mean %.1f, p50 %d, max %d; %s commits/s\n", p.name,
			thousands(h.Rows), thousands(h.Transactions), h.Mean(), h.P50, h.Max,
			thousands(int64(perSecond(h.Transactions, p.ph.Elapsed)+0.5)))
	}
	if r.Payments {
		fmt.Fprintf(&b, "confirmation groups (bookings per PostgreSQL transaction, %d writers):\n", r.ConfirmWriters)
		for _, p := range []struct {
			name string
			ph   Phase
		}{{"wallet", r.Wallet}, {"callbacks", r.Callbacks}} {
			g := p.ph.Confirmations
			fmt.Fprintf(&b, "  %-9s %s bookings in %s transactions: mean %.1f, p50 %d, max %d\n", p.name,
				thousands(g.Rows), thousands(g.Transactions), g.Mean(), g.P50, g.Max)
		}
	}
	errs := false
	for _, n := range r.named(false) {
		p := n.ph
		if len(p.Errors) == 0 {
			continue
		}
		if !errs {
			fmt.Fprintln(&b, "errors (not counted as decisions):")
			errs = true
		}
		keys := make([]string, 0, len(p.Errors))
		for k := range p.Errors {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "  %s: %s x%d\n", p.Name, k, p.Errors[k])
		}
	}
	if len(r.CallbackPrepFailures) > 0 {
		if !errs {
			fmt.Fprintln(&b, "errors (not counted as decisions):")
			errs = true
		}
		keys := make([]string, 0, len(r.CallbackPrepFailures))
		for k := range r.CallbackPrepFailures {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "  callbacks, preparing: %s x%d\n", k, r.CallbackPrepFailures[k])
		}
	}
	if !errs {
		fmt.Fprintln(&b, "errors: none")
	}

	fmt.Fprintln(&b)
	if len(r.Checks) == 0 {
		fmt.Fprintln(&b, "invariants: NOT CHECKED (the run stopped early)")
	}
	for _, c := range r.Checks {
		if c.OK() {
			fmt.Fprintf(&b, "invariants: shard %d OK (Redis and PostgreSQL agree after the run)\n", c.ShardID)
			continue
		}
		fmt.Fprintf(&b, "invariants: shard %d has %d VIOLATION(S): this run corrupted seat state\n", c.ShardID, len(c.Violations))
		fmt.Fprint(&b, c.String())
	}
	if pc := r.PayCheck; pc != nil {
		if pc.OK() {
			fmt.Fprintf(&b, "payments: OK: %d wallet and %d callback payments each SUCCESS, their hold CONFIRMED with exactly one booking with a PNR,\n", pc.Wallet, pc.Callbacks)
			fmt.Fprintln(&b, "  no refund, one wallet debit each (wallet) or one recorded webhook event each (callbacks); the duplicates changed")
			fmt.Fprintln(&b, "  nothing; every wallet ledger adds up (payment.CheckLedger)")
		} else {
			fmt.Fprintf(&b, "payments: %d VIOLATION(S) over %d wallet and %d callback payments:\n", len(pc.Violations)+len(pc.LedgerBroken), pc.Wallet, pc.Callbacks)
			for _, v := range pc.Violations {
				fmt.Fprintf(&b, "  %s\n", v)
			}
			if len(pc.LedgerBroken) > 0 {
				fmt.Fprintf(&b, "  wallet ledgers that do not add up (payment.CheckLedger): users %v\n", pc.LedgerBroken)
			}
		}
	}

	fmt.Fprintf(&b, `
how to read it:
  raw A and raw B are what a minimal program gets from Redis and PostgreSQL on this machine, now,
  and every other figure is set beside them. raw A's script only checks a counter, decrements it
  and records a hash field; the real HOLD script also checks per-user limits, records an
  idempotency key and finds berths free on every leg of the journey among %[1]d. raw B is one INSERT ... unnest
  statement per batch: no shard lock, epoch join, daily-cap subquery or River expiry jobs.
  service and HTTP: each client holds seats on a random journey for a fresh user (one live hold per
  account) and never cancels. The hot shard's waitlist cap is %[2]s so it never sells out: once no
  berth is free for a journey the answer is WAITLIST_OFFERED, the same script and the same
  group-committed write as HELD. So every decision there is a durable hold, answered only after its
  row is committed: decisions/s = durable holds/s, the figure that matters. p50/p99 are per hold.
  cycle (run first, on the fresh hot shard): one user per client holds (Service.Hold) and cancels
  (Service.Cancel) at once, so berths recycle and every answer is HELD; the cancel is a PostgreSQL
  transaction of its own, so this shows what recycling costs, not hold capacity.
  rush: fresh users ask for the whole route on a shard with the real waitlist cap (shard %[3]d), as at
  10:00: it fills (HELD, then the Tatkal waitlist, both durable) and then answers SOLD_OUT, which
  writes nothing to PostgreSQL; rush decisions/s is mostly SOLD_OUT answers.
`, r.Berths, thousands(hotWaitlist), r.RushShardID)
	if r.Payments {
		fmt.Fprint(&b, `  wallet: each client takes a fresh user with money in the wallet, holds one seat on a random journey
  (Service.Hold) and pays with the wallet (payment.Service.Initiate, WALLET): debit, payment row and
  confirmation (booking, PNR, passengers, e-ticket, River sync jobs) in one transaction, shared with
  other confirmations as a group, then Redis
  marks the seats sold. A confirmation counts when Initiate answers SUCCESS; p50/p99 are of the
  whole hold → PNR sequence, and of each step. Its shard has a berth per user and no waitlist.
  callbacks: before the phase, payments are made through the real path: a fresh user holds a seat,
  then a payment.Service wired to a gateway simulator of the bench's (pspsim over loopback HTTP, in a
  scratch schema, its customer never answering) initiates a UPI payment, created at the gateway:
  AWAITING_USER with a real psp_ref. The phase POSTs each payment's SUCCESS webhook once, signed with
  the gateway's secret, to /v1/internal/payments/callback over HTTP: the server verifies the
  signature, dedups by event id, applies SUCCESS and confirms the hold (a PNR) in one transaction.
  duplicates: the same events again (same id and body, signed afresh, as a gateway retries): each is
  verified, found already seen and acknowledged; nothing changes.
  raw B is the ceiling beside them: a confirmation writes about forty index entries (booking,
  passengers, e-ticket rows, payment, events, jobs) in a group's transaction, where raw B writes one
  narrow row with one INSERT, so a ratio far below 1 is expected. "confirmation groups" says how many
  shared a transaction (TATKAL_CONFIRM_WRITERS).
`)
	}
	return b.String()
}

type namedPhase struct {
	name string
	ph   Phase
}

// named lists the phases that ran, short names for the CPU table when
// short is set, full names otherwise.
func (r Report) named(short bool) []namedPhase {
	out := []namedPhase{{"raw A", r.RawLua}, {"raw A pipelined", r.RawLuaPipelined}, {"raw B", r.RawPG}, {"cycle", r.Cycle},
		{"service", r.Service}}
	if r.WideConcurrency > 0 {
		out = append(out, namedPhase{fmt.Sprintf("service x%d", r.WideConcurrency), r.Wide})
	}
	out = append(out, namedPhase{"HTTP", r.HTTP}, namedPhase{"rush", r.Rush})
	if r.Payments {
		out = append(out, namedPhase{"wallet", r.Wallet}, namedPhase{"callbacks", r.Callbacks}, namedPhase{"duplicates", r.Duplicates})
	}
	if r.SpreadShards > 0 {
		out = append(out, namedPhase{"spread", r.Spread})
	}
	if !short {
		for i := range out {
			out[i].name = out[i].ph.Name
		}
	}
	return out
}

func soldOutAfter(p Phase) string {
	if !p.SoldOutReached {
		return "never (not within the phase)"
	}
	return p.FillTime.Round(time.Millisecond).String()
}

// writeSignalsAB is the report of a --signals-ab run: the ceilings, the
// A/B, and the checks.
func (r Report) writeSignalsAB(b *strings.Builder) {
	ab := r.SignalsAB
	fmt.Fprintf(b, "raw A  Lua hold-style script        %s\n", rate(r.RawLua.Rate(), "ops/s"))
	fmt.Fprintf(b, "raw B  PG group commit of hold-like rows  %s\n", rate(r.RawPG.Rate(), "rows/s"))
	fmt.Fprint(b, ab.report(r.RawPG.Rate()))
	fmt.Fprintf(b, "  p50 %s, p99 %s over both halves; CPU: tatkal %s, redis %s, rest %s cores of %d\n", ms(ab.P50), ms(ab.P99),
		cores(ab.CPU.Process), cores(ab.CPU.Redis), cores(ab.CPU.Other()), r.NumCPU)
	for k, v := range ab.Errors {
		fmt.Fprintf(b, "  error: %s x%d\n", k, v)
	}
	for _, c := range r.Checks {
		if c.OK() {
			fmt.Fprintf(b, "invariants: shard %d OK\n", c.ShardID)
		} else {
			fmt.Fprintf(b, "invariants: shard %d has %d VIOLATION(S)\n%s", c.ShardID, len(c.Violations), c.String())
		}
	}
}
