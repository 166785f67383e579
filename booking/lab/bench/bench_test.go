package bench_test

import (
	"context"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"tatkal/booking/fraud"
	"tatkal/booking/lab/bench"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
)

// TestBenchSmoke runs every phase briefly against a private database: each
// figure must come out positive, every shard's invariants must hold, and
// every payment must have ended in exactly one booking with its money
// accounted for.
func TestBenchSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL and Redis")
	}
	st := teststack.New(t, teststack.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opts := bench.DefaultOptions()
	opts.Duration, opts.Concurrency, opts.Berths = 300*time.Millisecond, 8, 64
	opts.Pool, opts.Redis, opts.Service, opts.Payments, opts.Gateways, opts.Admission = st.Pool, st.Redis, st.Service, st.Payments, st.Gateways, st.Admission
	opts.NewPayments = st.App.NewPayments
	opts.SessionKey = []byte(strings.Repeat("b", 32)) // BaseURL empty: the bench serves the API itself
	rep, err := bench.Run(ctx, opts)
	if err != nil {
		t.Fatalf("bench: %v", err)
	}
	out := rep.String()
	t.Log("\n" + out)

	positive := map[string]float64{
		"raw A ops/s":            rep.RawLua.Rate(),
		"raw A pipelined ops/s":  rep.RawLuaPipelined.Rate(),
		"raw B rows/s":           rep.RawPG.Rate(),
		"cycle holds/s":          rep.Cycle.DurableRate(),
		"service decisions/s":    rep.Service.Rate(),
		"service durable/s":      rep.Service.DurableRate(),
		"HTTP decisions/s":       rep.HTTP.Rate(),
		"HTTP durable/s":         rep.HTTP.DurableRate(),
		"rush decisions/s":       rep.Rush.Rate(),
		"rush durable/s":         rep.Rush.FillRate(),
		"wallet confirmations/s": rep.Wallet.DurableRate(),
		"callbacks/s":            rep.Callbacks.DurableRate(),
		"duplicate callbacks/s":  rep.Duplicates.Rate(),
	}
	for name, v := range positive {
		if !(v > 0) {
			t.Errorf("%s = %v, want > 0", name, v)
		}
	}
	for _, p := range []bench.Phase{rep.Cycle, rep.Service, rep.HTTP, rep.Rush, rep.Wallet, rep.Callbacks, rep.Duplicates} {
		if p.P50 <= 0 || p.P99 < p.P50 {
			t.Errorf("%s: p50 %v p99 %v", p.Name, p.P50, p.P99)
		}
	}
	w := rep.Wallet
	if w.HoldP50 <= 0 || w.PayP50 <= 0 || w.HoldP99 < w.HoldP50 || w.PayP99 < w.PayP50 || w.P50 < w.PayP50 {
		t.Errorf("wallet steps: hold p50 %v p99 %v, pay p50 %v p99 %v, whole p50 %v", w.HoldP50, w.HoldP99, w.PayP50, w.PayP99, w.P50)
	}
	// Every payment phase ran its course: no sell-out, enough users and
	// prepared payments, every operation answered as it should.
	for _, p := range []bench.Phase{rep.Wallet, rep.Callbacks, rep.Duplicates} {
		if len(p.Errors) > 0 || p.SoldOut > 0 || p.EndedEarly != "" {
			t.Errorf("%s: %d ops, %d sold out, ended early %q, errors %v", p.Name, p.Ops, p.SoldOut, p.EndedEarly, p.Errors)
		}
	}
	if rep.Wallet.Durable != rep.Wallet.Ops || rep.Callbacks.Durable != rep.Callbacks.Ops || rep.Duplicates.Durable != 0 {
		t.Errorf("confirmations: wallet %d of %d, callbacks %d of %d, duplicates %d (want 0)", rep.Wallet.Durable, rep.Wallet.Ops,
			rep.Callbacks.Durable, rep.Callbacks.Ops, rep.Duplicates.Durable)
	}
	// The confirmation groups are read before anything is sent after a
	// phase: they hold exactly its confirmations; a hold phase's batches
	// hold exactly its durable holds.
	grouped := func(name string, durable int64, g bench.Batches) {
		if g.Rows != durable || g.Transactions < 1 || g.Transactions > g.Rows || g.P50 < 1 || g.P50 > g.Max || int64(g.Max) > g.Rows {
			t.Errorf("%s: %d durable, grouped %+v", name, durable, g)
		}
	}
	for _, p := range []bench.Phase{rep.Service, rep.HTTP} {
		grouped(p.Name+" holds", p.Durable, p.Holds)
	}
	for _, p := range []bench.Phase{rep.Wallet, rep.Callbacks} {
		grouped(p.Name+" confirmations", p.Durable, p.Confirmations)
	}
	if len(rep.CallbackPrepFailures) > 0 || rep.CallbacksPrepared == 0 ||
		int64(rep.CallbacksPrepared) != rep.Callbacks.Durable+int64(rep.CallbacksDrained) {
		t.Errorf("callbacks: %d prepared (failures %v), %d in the phase, %d after it", rep.CallbacksPrepared, rep.CallbackPrepFailures,
			rep.Callbacks.Durable, rep.CallbacksDrained)
	}
	pc := rep.PayCheck
	if pc == nil || !pc.OK() || int64(pc.Wallet) != rep.Wallet.Durable || pc.Callbacks != rep.CallbacksPrepared {
		t.Errorf("payments check: %+v", pc)
	}
	// Independently of the bench's own check: every payment it made is
	// SUCCESS with exactly one booking with a PNR, and every prepared
	// payment got exactly one webhook event recorded, duplicates or not.
	var payments, confirmed, hooks, refunds int64
	if err := st.Pool.QueryRow(ctx, `
		SELECT count(*), count(*) FILTER (WHERE p.state = 'SUCCESS' AND (SELECT count(*) FROM bookings b
		         WHERE b.hold_id = p.hold_id AND b.status = 'CONFIRMED' AND b.pnr <> '') = 1),
		       (SELECT count(*) FROM webhook_events), (SELECT count(*) FROM refunds)
		FROM payments p JOIN holds h ON h.id = p.hold_id WHERE h.shard_id = ANY($1)`,
		[]int64{rep.WalletShardID, rep.CallbackShardID}).Scan(&payments, &confirmed, &hooks, &refunds); err != nil {
		t.Fatal(err)
	}
	if want := rep.Wallet.Durable + int64(rep.CallbacksPrepared); payments != want || confirmed != want || hooks != int64(rep.CallbacksPrepared) || refunds != 0 {
		t.Errorf("database: %d payments, %d SUCCESS with one booking, %d webhook events, %d refunds; want %d, %d, %d, 0",
			payments, confirmed, hooks, refunds, want, want, rep.CallbacksPrepared)
	}
	// Nothing but the rush may answer SOLD_OUT, and nothing may fail.
	for _, p := range []bench.Phase{rep.Cycle, rep.Service, rep.HTTP} {
		if len(p.Errors) > 0 || p.SoldOut > 0 || p.Durable != p.Ops {
			t.Errorf("%s: %d decisions, %d durable, %d sold out, errors %v", p.Name, p.Ops, p.Durable, p.SoldOut, p.Errors)
		}
	}
	if !rep.OK() {
		t.Errorf("invariants after the bench: %d checks", len(rep.Checks))
		for _, c := range rep.Checks {
			t.Errorf("%s", c.String())
		}
	}
	checkNewFigures(t, rep, out)
	for _, want := range []string{"raw A", "raw B", "service", "HTTP", "cycle", "rush", "OK (Redis and PostgreSQL agree", "GOMAXPROCS",
		"wallet  hold → pay WALLET → PNR", "callbacks  signed SUCCESS webhook → PNR", "callbacks  duplicate events", "payments: OK",
		"confirmation groups (bookings per PostgreSQL transaction", "goals (issue 38)", "wallet / callback confirmations a second: ",
		"service durable holds, 8 clients / 32 clients: ", "service  durable holds, 32 clients", "PostgreSQL statements"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

// TestBenchSpreadsShardsOverClusterMasters runs the hold phases and the
// spread phase on the single node and on the Redis Cluster: on the cluster
// the spread shards must land on more than one master and every master's
// decisions must add up to the phase's, and every shard's invariants must
// hold either way.
func TestBenchSpreadsShardsOverClusterMasters(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL and Redis")
	}
	testenv.EachRedis(t, func(t *testing.T, redisURL string) {
		st := teststack.New(t, teststack.Options{RedisURL: redisURL})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		opts := bench.DefaultOptions()
		opts.Duration, opts.Concurrency, opts.Berths, opts.SpreadShards = 200*time.Millisecond, 12, 32, 12
		opts.Pool, opts.Redis, opts.Service, opts.Admission = st.Pool, st.Redis, st.Service, st.Admission
		opts.SessionKey = []byte(strings.Repeat("b", 32))
		rep, err := bench.Run(ctx, opts)
		if err != nil {
			t.Fatalf("bench: %v", err)
		}
		out := rep.String()
		t.Log("\n" + out)
		if rep.Spread.Durable == 0 || len(rep.Spread.Errors) > 0 || rep.Spread.SoldOut > 0 {
			t.Errorf("spread: %d decisions, %d held, %d sold out, errors %v", rep.Spread.Ops, rep.Spread.Durable, rep.Spread.SoldOut, rep.Spread.Errors)
		}
		var shards int
		var ops int64
		for _, m := range rep.Masters {
			shards, ops = shards+m.Shards, ops+m.Ops
		}
		if shards != 12 || ops != rep.Spread.Ops {
			t.Errorf("masters %+v: %d shards and %d decisions, want 12 and %d", rep.Masters, shards, ops, rep.Spread.Ops)
		}
		_, cluster := st.Redis.(*redis.ClusterClient)
		if cluster && len(rep.Masters) < 2 {
			t.Errorf("on a cluster of three masters the 12 shards all landed on %+v", rep.Masters)
		}
		if !cluster && len(rep.Masters) != 1 {
			t.Errorf("one node, masters %+v", rep.Masters)
		}
		if !rep.OK() || len(rep.Checks) != 2+12 {
			t.Errorf("invariants after the bench: %d checks of %d shards", len(rep.Checks), rep.ShardsMade)
			for _, c := range rep.Checks {
				t.Errorf("%s", c.String())
			}
		}
		if !strings.Contains(out, "spread  hold + cancel over 12 shards") || !strings.Contains(out, "master ") {
			t.Errorf("report lacks the spread phase")
		}
	})
}

// TestSignalsABSwitchesRecording runs the recording A/B briefly: both halves
// must hold, and the switch must reach the server's recorder: some of the
// phase's holds have their fraud signals recorded and some do not.
func TestSignalsABSwitchesRecording(t *testing.T) {
	if testing.Short() {
		t.Skip("needs PostgreSQL and Redis")
	}
	off := new(atomic.Bool)
	st := teststack.New(t, teststack.Options{SignalsOff: off})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opts := bench.DefaultOptions()
	opts.Duration, opts.Concurrency, opts.Berths, opts.FreshUsers = 200*time.Millisecond, 8, 64, 8_000
	opts.SignalsAB, opts.SignalsOff = 4*time.Second, off
	opts.Pool, opts.Redis, opts.Service, opts.Admission = st.Pool, st.Redis, st.Service, st.Admission
	opts.SessionKey = []byte(strings.Repeat("b", 32))
	rep, err := bench.Run(ctx, opts)
	if err != nil {
		t.Fatalf("bench: %v", err)
	}
	out := rep.String()
	t.Log("\n" + out)
	ab := rep.SignalsAB
	if len(ab.On) != 2 || len(ab.Off) != 2 || len(ab.Errors) > 0 {
		t.Fatalf("slices on %v off %v, errors %v; want 2 and 2", ab.On, ab.Off, ab.Errors)
	}
	for _, r := range append(ab.On, ab.Off...) {
		if !(r > 0) {
			t.Errorf("a slice held nothing: on %v off %v", ab.On, ab.Off)
		}
	}
	if off.Load() {
		t.Error("the switch was left off after the run")
	}
	if _, err := fraud.Drain(ctx, st.Pool); err != nil {
		t.Fatal(err)
	}
	var with, without int
	if err := st.Pool.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE EXISTS (SELECT 1 FROM fraud_signals s WHERE s.hold_id = h.id)),
		       count(*) FILTER (WHERE NOT EXISTS (SELECT 1 FROM fraud_signals s WHERE s.hold_id = h.id))
		FROM holds h WHERE h.idempotency_key LIKE 'bench-%-a-%'`).Scan(&with, &without); err != nil {
		t.Fatal(err)
	}
	if with == 0 || without == 0 {
		t.Errorf("A/B holds: %d with signals, %d without; want some of each", with, without)
	}
	if !rep.OK() || !strings.Contains(out, "with / without:") {
		t.Errorf("invariants or report: ok %v", rep.OK())
	}
}

// TestSignalsABInterval: the pair ratios' geometric mean and its interval,
// exact when every pair agrees and widening as they disagree.
func TestSignalsABInterval(t *testing.T) {
	same := bench.SignalsAB{On: []float64{110, 220, 330}, Off: []float64{100, 200, 300}}
	if mid, lo, hi := same.PairInterval(); math.Abs(mid-1.1) > 1e-9 || math.Abs(lo-1.1) > 1e-9 || math.Abs(hi-1.1) > 1e-9 {
		t.Errorf("agreeing pairs: %v %v %v, want 1.1 three times", mid, lo, hi)
	}
	noisy := bench.SignalsAB{On: []float64{50, 200, 100, 100}, Off: []float64{100, 100, 100, 100}}
	mid, lo, hi := noisy.PairInterval()
	if !(lo < mid && mid < hi) || math.Abs(mid-1) > 1e-9 {
		t.Errorf("noisy pairs: %v %v %v, want a geometric mean of 1 inside a wider interval", mid, lo, hi)
	}
	if r := same.Ratio(); math.Abs(r-1.1) > 1e-9 {
		t.Errorf("ratio of the means %v, want 1.1", r)
	}
}

// checkNewFigures checks what the run's report adds up to where it can: the
// wide phase's holds, the servers' CPU (Redis and PostgreSQL run on this
// machine in tests, so both are read from /proc) within the machine's, the
// goals' ratios from the phases' own figures, and the statements, read or
// skipped with a reason.
func checkNewFigures(t *testing.T, rep bench.Report, out string) {
	t.Helper()
	w := rep.Wide
	if rep.WideConcurrency != 4*rep.Concurrency || w.Durable == 0 || w.Durable != w.Ops || len(w.Errors) > 0 || w.Holds.Rows != w.Durable {
		t.Errorf("wide phase (%d clients): %d decisions, %d durable, errors %v, batches %+v", rep.WideConcurrency, w.Ops, w.Durable, w.Errors, w.Holds)
	}
	for _, p := range []bench.Phase{rep.Service, rep.Wide, rep.Wallet, rep.Callbacks} {
		c := p.CPU
		if c.Redis < 0 || c.PG < 0 || c.Machine < 0 {
			t.Errorf("%s: CPU redis %v pg %v machine %v, want all read", p.Name, c.Redis, c.PG, c.Machine)
			continue
		}
		// Sampled a moment apart, so a little slack.
		if sum := c.Process + c.Redis + c.PG; sum > c.Machine+0.25 {
			t.Errorf("%s: tatkal %.2f + redis %.2f + pg %.2f = %.2f cores, more than the machine's %.2f", p.Name, c.Process, c.Redis, c.PG, sum, c.Machine)
		}
		want := c.PG * p.Elapsed.Seconds() * 1000 / float64(p.Units())
		if got := p.PerUnit(c.PG); math.Abs(got-want) > 1e-9 {
			t.Errorf("%s: pg per unit %v, want %v", p.Name, got, want)
		}
	}
	g := rep.Goals()
	if want := rep.Wallet.DurableRate() / rep.Callbacks.DurableRate(); math.Abs(g.WalletOverCallbacks-want) > 1e-9 {
		t.Errorf("wallet/callbacks %v, want %v", g.WalletOverCallbacks, want)
	}
	if want := rep.Service.DurableRate() / rep.Wide.DurableRate(); math.Abs(g.ServiceOverWide-want) > 1e-9 {
		t.Errorf("service/wide %v, want %v", g.ServiceOverWide, want)
	}
	pgUnit := func(p bench.Phase) float64 { return p.PerUnit(p.CPU.PG) }
	if want := pgUnit(rep.Wallet) / (pgUnit(rep.Service) + pgUnit(rep.Callbacks)); math.Abs(g.PGPerWallet-want) > 1e-9 {
		t.Errorf("pg per wallet %v, want %v", g.PGPerWallet, want)
	}
	if rep.StatementsWhy != "" {
		if !strings.Contains(out, "PostgreSQL statements: not read ("+rep.StatementsWhy) || g.StatementsPerWallet != -1 {
			t.Errorf("statements skipped (%s) but the report says otherwise", rep.StatementsWhy)
		}
		return
	}
	for _, p := range []bench.Phase{rep.Service, rep.Wallet, rep.Callbacks} {
		checkStatements(t, p.Name, p.Statements)
	}
}

// checkStatements: a phase's top-level statements are within its totals.
func checkStatements(t *testing.T, name string, st bench.Statements) {
	t.Helper()
	var calls int64
	var ms float64
	for _, s := range st.Top {
		if s.TopLevel {
			calls, ms = calls+s.Calls, ms+s.ExecMS+s.PlanMS
		}
	}
	if st.Calls <= 0 || calls > st.Calls || ms > st.MS()+1e-6 || len(st.Top) == 0 {
		t.Errorf("%s statements: %d calls %.3f ms in all, the top ones %d calls %.3f ms", name, st.Calls, st.MS(), calls, ms)
	}
}

// TestReportGoalsAddUp: the goals' ratios and the per-unit figures from a
// report of known figures, as printed.
func TestReportGoalsAddUp(t *testing.T) {
	phase := func(units int64, pg float64, calls int64, ms float64) bench.Phase {
		return bench.Phase{Ops: units, Durable: units, Elapsed: time.Second, CPU: bench.CPUUse{Process: 0.1, Redis: 0.1, PG: pg, Machine: 1},
			Statements: bench.Statements{Calls: calls, ExecMS: ms, Top: []bench.Statement{{Query: "SELECT 1", TopLevel: true, Calls: calls, ExecMS: ms}}}}
	}
	rep := bench.Report{NumCPU: 2, Concurrency: 64, WideConcurrency: 256, Payments: true,
		Service: phase(1000, 0.3, 500, 300), Wide: phase(2000, 0.5, 1000, 600), Wallet: phase(100, 0.12, 1000, 150),
		Callbacks: phase(500, 0.25, 250, 250)}
	rep.Service.P99 = 15 * time.Millisecond
	g := rep.Goals()
	// Per unit: service 0.3 ms, callbacks 0.5 ms, wallet 1.2 ms of PostgreSQL CPU.
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"wallet/callbacks", g.WalletOverCallbacks, 0.2}, {"pg per wallet", g.PGPerWallet, 1.2 / 0.8},
		{"statement time per wallet", g.StatementsPerWallet, 1.5 / (0.3 + 0.5)}, {"calls per wallet", g.CallsPerWallet, 10 / (0.5 + 0.5)},
		{"service/wide", g.ServiceOverWide, 0.5}} {
		if math.Abs(c.got-c.want) > 1e-9 {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	out := rep.String()
	for _, want := range []string{"wallet / callback confirmations a second: 0.20 (aim >= 0.7, NOT met)",
		"(service durable hold + callback confirmation): 1.50 (aim <= 1.2, NOT met)", "in statements sent: 10.00",
		"64 clients / 256 clients: 0.50 (aim >= 0.8, NOT met); p99 at 64 clients 15.00ms (aim <= 20ms, met)"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	// The wallet's statements: 10 calls a confirmation, all of its time.
	if !strings.Contains(out, "100.0%     10.00") {
		t.Errorf("wallet statements not per confirmation:\n%s", out)
	}
}
