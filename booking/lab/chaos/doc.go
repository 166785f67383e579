// Package chaos runs a rush through several serve processes of one stack as a
// load balancer would (a request whose process is gone or answers 5xx goes to
// the next one with the same idempotency key), and judges the stack after
// faults by its invariants once it has drained: every HELD answer durable, no
// berth sold twice, every payment one ticket or a full refund, each PNR once
// in the reservation core, the wallets and the money balanced. The chaos tests
// and tatkal chaos share it.
//
// # The scenarios
//
// The stack runs as real processes: serve and worker processes of the test
// binary or of tatkal itself (teststack.StartProcess), on one database and
// Redis, with the gateways, the reservation core and the messaging gateway as
// our simulators. Travellers rush one shard through the serve processes, half
// paying by wallet and half by UPI through gateways that decline some payments
// and lose or repeat some callbacks. A quarter into the rush, the fault:
//
//   - serve-kill: the first serve process stops inside a group commit (a pause
//     point between the batch's statements and COMMIT,
//     TATKAL_TEST_PAUSE=commit.before-commit@5) and is killed there with
//     SIGKILL; its requests go to the next process with the same key, and no
//     HELD answer is lost or doubled.
//   - worker-kill: SIGKILL of a worker while jobs run; River rescues its
//     running jobs on the other (after jobs.DefaultRescueStuckJobsAfter), so
//     every payment still ends and every ticket still reaches the core.
//   - redis-wipe: the shard's seat state deleted; 503 SHARD_REBUILDING until
//     it is rebuilt from PostgreSQL, never a wrong answer.
//   - postgres-restart: the run on a private PostgreSQL (localsrv), stopped
//     with a fast shutdown and started again PostgresDown later. While it is
//     down every hold and payment answers 503 with Retry-After (NOT_SAVED,
//     UNREACHABLE, SESSIONS_UNCHECKED: booking.Unreachable makes an
//     unreachable store "unavailable", never 500); afterwards they succeed
//     with no manual step. A hold whose commit outcome was lost with the
//     server is settled as soon as it answers again (package booking).
//   - redis-failover: the run on a private Redis Cluster of three masters with
//     a replica each; the master owning the shard's slot is killed with
//     SIGKILL and its replica takes over (told to with CLUSTER FAILOVER
//     TAKEOVER if it has not within 5 s). The promoted copy may miss the last
//     holds, so it is refused until rebuilt (package inventory), and redisx
//     follows the new slot map.
//
// After the stack drains by itself (Drain), Check judges it; every scenario
// also fails on any 5xx other than 503 with Retry-After, and on a process it
// was not aimed at that did not outlive the fault. The gateway simulators keep
// their state in the same PostgreSQL, so a payment's creation can be lost with
// it: the chaos tests' workers fail such a payment after 15 s
// (TATKAL_TEST_NOT_CREATED_AFTER) instead of the product's two minutes.
//
// tatkal chaos (Command) runs one fault a run from the command line, with the
// same client, drain and invariants, on a scratch database and Redis prefix
// (removed after), its serve and worker processes being its own binary (their
// logs in a temporary file it names); it prints the answers during and after
// the fault and a PASS or FAIL line per invariant, and exits 1 on any
// violation. Its processes run the real commands' defaults (sweeper every 30
// s, a payment the gateway never recorded failed after 2 minutes), so its
// drain (--drain) is longer than the tests'.
//
//	go test -race -count=1 -run TestSeveralProcesses -v ./booking/lab/chaos/
//	tatkal chaos --fault postgres-restart --users 100 --serves 2
package chaos
