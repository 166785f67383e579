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
	for _, want := range []string{"raw A", "raw B", "service", "HTTP", "cycle", "rush", "OK (Redis and PostgreSQL agree", "GOMAXPROCS",
		"wallet  hold → pay WALLET → PNR", "callbacks  signed SUCCESS webhook → PNR", "callbacks  duplicate events", "payments: OK",
		"confirmation groups (bookings per PostgreSQL transaction"} {
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
