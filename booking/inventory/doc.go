// Package inventory is the Redis owner of Tatkal seat state. Each shard's keys
// share one hash tag and change only through the embedded Lua scripts, so
// every change is atomic and linearisable per shard. PostgreSQL remains the
// system of record: Rebuild reloads a shard from it under a new epoch, and a
// shard whose state is missing refuses holds (fail closed), as is one whose
// state is only partly there.
//
// Seats are one bitmap per leg (bit b set while berth b is free on that leg),
// so Redis finds a journey's free berths with one BITOP AND over its legs;
// static bitmaps of each berth type and a coach table (coaches are contiguous
// runs of berths) let HOLD apply the preferences and keep a group in one coach
// by looking at bytes, not berths. See lua/common.lua.
//
// # The scripts
//
// Each script is an embedded file under lua/ with a Go wrapper that checks its
// inputs before touching Redis; its contract is in its header comment.
//
//   - LOAD writes a shard from PostgreSQL under a new epoch and records the
//     node that loaded it (CLUSTER MYID, meta field node).
//   - HOLD decides one attempt: a prior answer for the idempotency key (with
//     the request's hash, so a key reused with another body is KEY_REUSED),
//     the per-account live-hold and daily limits, the admission token's single
//     use, berths free on every leg, and the hold's record.
//   - RELEASE gives berths back (cancellation, expiry, undo, enforcement,
//     payment failure); CONFIRM marks a hold sold; FORGET erases an
//     idempotency key only when its seat record is gone.
//   - PROMOTE applies a committed TQWL promotion, fenced by the old epoch and
//     checked whole before its first write.
//   - AVAIL, SNAPSHOT and READY read; THROTTLE paces a shard (GCRA on Redis's
//     clock, so every process and node agree); SOLDOUT feeds the sold-out
//     cache.
//
// # Failover
//
// Replication is asynchronous, so a promoted replica may miss the last holds.
// HOLD, PROMOTE and READY refuse a shard when a node other than the one that
// loaded it now answers for it (503 SHARD_REBUILDING), and the shard is
// rebuilt from PostgreSQL as after a wipe; the replica's copy is never ready.
//
// # The sold-out cache
//
// Once a shard's HOLD script has answered SOLD_OUT, each process answers later
// attempts on it from memory with no Redis call, the answer the script would
// give (SoldOutCache). One SOLDOUT call reads atomically the free berths of
// each journey, the waitlist places left and every user with state on the
// shard, stamped with a counter that HOLD, RELEASE, LOAD and PROMOTE move. A
// reading answers for at most DefaultSoldOutRecheck (50 ms) after the call
// that vouched for it was sent; then one caller re-checks (SOLDOUT answers
// SAME while the stamp stands) while the others wait, so a seat given back in
// one process is offered by every process within 50 ms, and at once by the
// process that gave it back. Every check of the request (authentication, key
// format, window, rules, the admission token's signature) runs first; token
// holders, retakes, users with state on the shard and a partly lost shard go
// to the script. The one difference from the script: the cache does not record
// its SOLD_OUT under the idempotency key, so a retry within 50 ms of a release
// reaching another process may be told SOLD_OUT where the script would replay
// a HELD given there (that hold stands and expires unpaid; no seat is taken
// twice and no money moves). SOLDOUT refuses a shard loaded on another node,
// as HOLD does, so the cache never answers for a promoted replica's copy.
package inventory
