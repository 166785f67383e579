// Package bench measures the hold path on one hot shard, and the payment path
// (wallet confirmations, gateway callbacks), against the raw ceilings of Redis
// and PostgreSQL on the same machine, in the same run: a figure is only
// meaningful beside what the hardware gave a minimal program a moment earlier.
//
// # Phases
//
// tatkal bench runs the app on a fresh database and Redis prefix, then, each
// for --duration with --concurrency clients on one hot shard:
//
//   - raw A: a hold-style Lua script straight on Redis (also pipelined); raw
//     B: PostgreSQL group commit of hold-like rows. These are the ceilings
//     every other figure is set beside.
//   - service and HTTP durable holds (every answer counted is a committed
//     row), the rush over HTTP until and after sell-out, the hold + cancel
//     cycle; the wide phase: service holds again with four times the
//     clients (--wide-concurrency), the rate the service phase's is set
//     beside, since a durable hold's wait is the group commit's flush;
//   - wallet hold → pay → PNR, signed gateway callbacks → PNR (how many were
//     taken set-based, and the confirmation groups' sizes), and duplicate
//     callbacks, which must write nothing.
//
// Each phase reports its rate, p50/p99, the CPU of this process, Redis,
// PostgreSQL and the rest of the machine, in cores and in ms of one core per
// unit, and WAL per unit; the invariant check and the payment check run
// after. --cpuprofile-dir writes a CPU profile per phase.
//
// # Where the server's CPU goes
//
// Redis's and PostgreSQL's CPU are their own processes' counters from /proc
// (Redis found by INFO server's process_id, PostgreSQL by the postmaster of
// the bench's backend, all its children counted): on a machine shared with
// other work the machine's busy time less this process says nothing about
// PostgreSQL, while a process's own CPU time barely moves. When the server
// loads pg_stat_statements (shared_preload_libraries; the bench creates the
// extension in its database if it may), each phase also reports its
// statements per unit (calls, plans, execution and planning time, shared
// blocks) and the wallet phase its statements one by one, per confirmation;
// without it the report says why and goes on. The goals of issue 38 are
// printed as ratios within the run: wallet over callback confirmations,
// PostgreSQL CPU per wallet confirmation over a durable hold's plus a
// callback confirmation's, and service holds over the wide phase's.
//
// The HTTP phases' clients keep one connection each and speak HTTP/1.1 on it
// with net/http's own request writer and response reader, as a load generator
// does: net/http's Transport took half the clients' CPU, which on one box is
// taken from the server that real phones would not share.
//
// # Recording's cost
//
// --no-signals runs with fraud recording off (fraud.Recorder.BenchDiscard;
// bench only, no variable or serve flag reaches it). Separate runs could not
// separate recording's cost from the host's swings, so --signals-ab D switches
// the recorder inside one process: service holds for D, recording on and off
// in alternate one-second slices in ABBA order (so a steady drift weighs on
// both halves alike), the first 100 ms of each slice not counted; it prints
// each slice, the ratio of the halves' means and the geometric mean of the
// neighbouring pairs' ratios with its 95 % interval.
//
// --redis-cluster runs the bench on a Redis Cluster and adds a spread phase:
// the hold-and-cancel cycle over several shards at once (--spread-shards),
// each shard's master found from its hash tag's slot, with each master's share
// of the decisions.
//
// The current figures, beside their ceilings, are in the README's Benchmarks
// table; SCALING.md works from them.
package bench
