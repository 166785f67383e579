// Package booking is the Tatkal domain: shards, holds, bookings, the rules and
// fares, and the service that holds, confirms, cancels and expires seats.
// Redis (booking/inventory) owns live seat state; PostgreSQL is the record;
// River carries every deferred effect.
//
// # Who owns what
//
// PostgreSQL is the system of record (holds, bookings, berths, money, audit).
// Redis owns the live seat state of each shard (train|date|class|quota): its
// Lua scripts decide holds atomically, so a shard is linearisable. Redis keeps
// nothing on disk; a shard whose state is missing refuses holds (fail closed,
// 503 SHARD_REBUILDING, retryable) until it is rebuilt from PostgreSQL under a
// new epoch. Rebuild and writers are ordered by an advisory lock, and a writer
// holding an older epoch cannot commit. A TQWL promotion (committed in
// PostgreSQL under a bumped epoch) changes only what it must in Redis: the
// PROMOTE script drops the cancelled bookings' records, sells the promoted
// ones on their berths and moves the shard to the new epoch, fenced by the old
// one and checked whole before its first write; if Redis moved or disagrees,
// the shard is rebuilt instead.
//
// # Segment-aware seats
//
// A hold takes, per passenger, a berth free on every leg of the journey, so
// fragmented legs never oversell (one berth free A-B and another B-C is not a
// berth A-C). Seniors get lower berths by preference and a group stays in one
// coach where possible. Counts exist only as BITCOUNTs of the per-leg bitmaps
// (availability, tatkal check). Confirmed berths are also protected by a
// PostgreSQL exclusion constraint (no two passengers on one berth over
// overlapping legs).
//
// # Durable before answered
//
// A HELD answer is given only once the hold row is committed. Holds.Hold
// checks the request (key, journey, window, admission token by signature,
// passengers), paces it (Throttle), runs the HOLD script and hands the row to
// the group committer (committer.go): many holds share one transaction, which
// the committer flushes as soon as work is queued (no timer). A batch is four
// round trips (db.BatchTx: BEGIN rides the shards' locks and the limits'
// reads, COMMIT rides the passenger keys and the fraud inbox row), with one
// River expiry job per second of expiry (ExpireHoldGroupArgs; a hold whose
// window was extended gets an ExpireHoldArgs job of its own at its new end).
// If the write fails, the Lua hold is undone and the client is told to retry.
//
// How a batch whose COMMIT reported an error ended is asked of the server, not
// read from its rows (Committer.committed): the transaction's id rides the
// BEGIN (pg_current_xact_id), and the answer counts only once pg_xact_status
// says committed or aborted. A transaction still open and idle (a COMMIT lost
// on a half-open connection) is ended with pg_terminate_backend, matched by
// process and transaction id, and the passenger is told NOT_SAVED. A
// transaction still in progress leaves the hold in doubt: the service keeps
// asking in the background (0.5 s doubling to 5 s, until the hold would have
// lapsed) and undoes a hold that did not commit, while Redis keeps its seats,
// as a row that did commit must not lose them.
//
// # Idempotent holds, bound to the request
//
// A hold's Idempotency-Key replays its first answer; the same key with another
// journey or other passengers is 422 IDEMPOTENCY_KEY_REUSED with nothing
// changed. The HOLD script keeps the request's hash with the key's answer, and
// the hold row keeps it too, so the refusal holds after Redis has forgotten
// the key. A replay whose first attempt is still committing waits for it (up
// to 3 s, then 503 IN_PROGRESS). A Redis hold with no row 30 s after it was
// made (lostAfter, far above any commit) has lost its process: the sweeper
// rebuilds its shard from PostgreSQL, which frees the seats and the key at
// once, and the rebuild's new epoch refuses any such commit still in flight;
// the FORGET script erases a key only when its seat record is gone.
//
// # Limits across accounts
//
// Besides the script's per-account limits (one live hold, the daily cap), the
// group commit enforces what spans accounts: one passenger (keyed ID number,
// or normalised name and age) on the Tatkal holds of at most two accounts an
// opening day (refused as the uniform HIGH_DEMAND answer), a person's daily
// cap across the verified accounts of one phone (users.phone_hash, answered as
// DAILY_CAP) and the monthly cap (12 tickets an account, 24 verified). They
// hold between writers and processes: each batch takes advisory locks on its
// passengers' keys and verified phones on their days, in one order, held to
// COMMIT, before it reads; inside a batch the person's cap counts the batch's
// own rows in order. An attempt the passenger limit refuses rides the same
// fraud inbox row as the batch's signals (package fraud).
//
// # Throttle
//
// The shard_throttle lever (console) paces what reaches the booking core: at
// most that many hold calls a second per shard, and as many payment
// initiations (a budget of their own). The excess is refused before any seat
// work or money movement: 503 THROTTLED with Retry-After, counted as shed
// origin traffic, not as hold attempts, so the adaptive admission rate still
// reads the core's own latency. The limiter is GCRA in Redis (inventory's
// throttle script, one key per shard and kind under the shard's hash tag), so
// a second admits at most rate + 1 across all processes. Unset, it costs
// nothing; if Redis cannot be asked the call is refused as a hold is
// (SEATS_UNREACHABLE). A throttled hold spends no admission token.
//
// The same door refuses every hold and payment start of a frozen shard (the
// shard_frozen lever, which the invariant watch in console/alarms pulls when
// the shard's Redis and PostgreSQL disagree in a way that could sell a berth
// twice): 503 SHARD_FROZEN, nothing changed, until a person thaws it.
// Payments already made still end in a ticket or a refund.
//
// # Confirmation, core sync, cancellation
//
// ConfirmManyTx confirms a group of holds in the caller's transaction (package
// payment's confirmation groups): the holds read under lock in id order, one
// batch with the shards' locks and the holds' change, one INSERT ... unnest of
// every booking with its passengers (a PNR already taken is given another),
// one statement for every e-ticket, one fraud inbox row, and one
// core_sync_group and seat_sync_group job for the group (a lone confirmation
// keeps core_sync and seat_sync). ConfirmTx is the same code with one hold.
// AfterConfirm then updates Redis (the seat sync job covers a lost update).
//
// Confirmed bookings are sent to the reservation core (idempotent by PNR,
// retried for hours); the passenger sees CONFIRMING until it acknowledges. A
// group job syncs each item and gives each failure a job of its own kind, so a
// group never repeats what succeeded. A rejection by the core cancels the
// booking, frees the seats, refunds in full and tells the passenger; a berth
// the core still holds for a booking we cancelled is withdrawn there and the
// new booking sent again. A sync marks the booking synced only if it is still
// what was sent, so a booking promoted from the waitlist during its first sync
// is sent again as confirmed. Workers of an older release do not know the
// group kinds: a rolling deploy starts the workers first.
//
// CancelBooking is the one rule of the API and the site: no cancellation while
// the ticket is CONFIRMING (409 CONFIRMING) nor once its chart is being or has
// been prepared (409 CHARTED); the refund follows the Tatkal rules, which the
// cancel preview shows. Fraud enforcement cancels through it too.
//
// # Tatkal rules are data
//
// Fares (basic + reservation + superfast + Tatkal charge clamped per class +
// GST) are in fare_rules; limits (4 passengers, one live hold and 2 Tatkal
// tickets a day per account, agents barred for 30 minutes, verified accounts
// only, one validated photo ID per booking) are Rules. Every deferred effect
// is a River job inserted with the state change that causes it: hold expiry,
// seat sync, core sync, a lever's revert, the periodic sweeper (overdue holds,
// Redis records that disagree with PostgreSQL, shards lost or behind
// PostgreSQL's epoch).
//
// Catalog and window reads that every poll needs are cached; a lapsed entry is
// reread by one caller at a time while the others are answered with it, and a
// missing one is read once for all concurrent callers (Flight), so a slow pool
// never makes every poll queue for a connection. Reads inside a transaction
// use that transaction (Lifecycle.shardOn).
package booking
