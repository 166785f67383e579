// Package admission is the fair waiting room: one queue per intent (a Tatkal
// shard) in Redis, a randomised order inside the opening window with a seed
// committed before it and revealed after it, signed single-use admission
// tokens, the single-leader controller that admits per shard at an adaptive
// rate, identity verification by one-time code, device bindings, pacing, rate
// limits and the booking-time challenge.
//
// Signature checks (admission tokens, device bindings, challenges) live in the
// subpackage token, which imports nothing of tatkal, so the hold path can use
// them.
//
// # Fair by construction
//
// For shards in queue mode, passengers enter a queue per intent (POST
// /v1/queue/enter, GET /v1/queue/status) from 15 minutes before the window.
// Everyone who enters before opening + 10 s (randomise_until) gets a place
// from a keyed hash of (ticket, window seed), so arrival time inside that
// window does not matter; later entrants queue behind in arrival order. The
// seed's SHA-256 is published before the window (GET
// /v1/windows/{id}/fairness) and the seed after it; tatkal verify-window
// recomputes the order from the cohort and says whether the admission log
// matches it.
//
// # The controller
//
// One controller leads across processes (a Redis lease with a fencing number
// the admit script checks) and admits per shard at an adaptive rate, paused or
// fixed by console levers (admission_paused, admission_rate).
//
//   - An admission is a promise kept. An offer can be picked up for 60 s from
//     when it is made (fetching the token claims it); the permit then lives
//     120 s, and until then its place is kept: every tick counts the
//     outstanding offers before reading the places left (berths, then TQWL)
//     and admits at most places - outstanding + a no-show allowance (the
//     lapsed share of recent offers times the places, at most 10). Lapsed
//     offers give their places back.
//   - Parties, not berths. The HOLD script writes the berth-legs each admitted
//     hold took into its token's used-mark; once ten admitted parties have
//     held, the places left are offered at the berth-legs a party took on
//     average (offerCount.demand); until then at most ten offers are out at
//     once. One offer a berth would over-admit parties of 1-4 on mixed
//     segments, and the admitted would race for the seats, which the faster
//     poller wins.
//   - Held is not sold. While every place is held by travellers still paying,
//     the queue waits (a failed payment's berths go to the next in the queue),
//     tells as many waiters as the held berth-legs could serve that seats may
//     come back and everyone behind them sold out, and is released as sold out
//     only when no place is left and nothing is held.
//   - Sold out on fragments. With parties on mixed segments a few berths stay
//     free on legs no waiting party fits. When the latest ten holds of
//     admitted travellers within a minute came back SOLD_OUT (at least nine in
//     ten of those that found an answer), the queue answers SOLD_OUT to
//     everyone still waiting and admits nobody more; it reopens when a party's
//     worth of berth-legs comes back. A waiter told sold out has left: its
//     place is released, and an offer reaching it lapses at once.
//   - The rate halves on slow holds or refusals and slows on failing payments,
//     at most once per five-second signal span, then doubles back to the last
//     rate that ran well: cutting every second on the same evidence took it to
//     its floor in one short fault. Holds the API sheds at its door count as
//     refusals.
//
// Admission tokens are HMAC-signed (key rotation), bound to session, device
// and shard, checked by signature on the hold path and used at most once
// inside the hold's atomic step.
//
// # Penalise the client that breaks pacing, never its neighbours
//
// poll_after_ms is half the expected wait at the cursor's measured speed, 1 s
// near the front (so an obedient client learns of its admission within about a
// second), at most 15 s; its jitter only makes polls earlier. A poll before
// that time gets the previous answer from process memory (no Redis).
// Signed-in, device-bound queue calls are limited per account and device (5 a
// second), never per address, because most travellers in India share a carrier
// NAT. Only unauthenticated requests (login, prepare, availability, the
// fairness page) are limited per source address, at DefaultLimitIP a second: a
// NAT of 10,000 travellers each making one every 10 s sends 1,000. Each
// refusal (rate limit, early poll, sold out, lapsed offer) is noted in a
// capped Redis list per traveller (50, 48 h) that the console's user trace
// shows. Every rejection of a suspected bot looks exactly like a capacity
// rejection.
//
// # Identity and the challenge
//
// OTP verification into the notifications outbox, device binding, accounts per
// device and per payment instrument, agents barred for 30 minutes. The
// booking-time proof of work is 14 bits for an attested client
// (TATKAL_CHALLENGE_BITS) and 6 more for an unattested one; a flagged account
// pays FlaggedExtraBits more. X-Client-Attestation lowers it only when it is
// the signed attestation POST /v1/devices/bind issued for that account and
// device, for platform evidence Config.VerifyPlatform accepted; none is
// configured yet, so no client is attested.
//
// Every hold carries the check, on direct shards as on queue shards
// (CheckHold, run inside booking.Service.Hold once the request is valid):
// the solved challenge, or the code sent by SMS in its place
// (RequestChallengeOTPFor), for a passenger whose browser cannot run it.
// One booking session per account: asking for either makes the asking
// session the account's booking session (bookingsession.go), and a hold
// from another session of the account is refused with SESSION_SUPERSEDED.
// The newest wins, so a passenger whose phone dies at 10:00 goes on from
// another device at once. An account opened by sign-up (booking/signup) is
// verified by the identity service, not by a phone code (KYC_REQUIRED).
//
// # After a Redis wipe or failover
//
// A queue's keys can be lost as seat state can. After the window is sealed,
// PostgreSQL holds what the answers rest on, and the queue is rebuilt from it
// rather than restarted:
//
//   - Detected: the queue's meta records the node that wrote it (queue_lost in
//     lua/common.lua); a queue whose window PostgreSQL has sealed is lost when
//     its meta is not sealed or was written on another node, or when it has
//     fewer admitted than admission_log (read once per shard per leadership).
//   - Fail closed: while lost, STATUS and ENTER answer 503 QUEUE_RECOVERING
//     with Retry-After and ADMIT refuses, so nothing is offered from 0 and
//     nothing is drawn again.
//   - Rebuilt by the leader (Controller.rebuild): the cohort from
//     admission_entrants with its scores, the admitted prefix in
//     admission_log's order (checked to be the prefix of the rebuilt order,
//     else the queue stays closed), the cursor after the last admitted, the
//     batches from the log's issue times and fences; staged in side keys and
//     swapped in by one REBUILD call only while the queue is still lost. A
//     fence counter lost with Redis restarts above the log's highest fence.
//   - Not in PostgreSQL: late entrants not yet admitted. Those the lost queue
//     still holds keep their order behind everyone; after a wipe they are told
//     NOT_IN_QUEUE and join again, behind. Admissions Redis made but had not
//     logged are made again to the same entrants (same token id, so still
//     single use).
//
// Before the seal the cohort lives in Redis alone, and PostgreSQL keeps a
// witness of it (admission_windows.cohort_seen, cohort_mark): the leader
// records how many entrants it saw and the queue's mark. A queue found with
// another mark or fewer entrants is never sealed from what is left, which
// would put everyone who joined in time behind whoever joined again first. The
// leader clears it and reopens the draw for 30 s (randomise_until moves on;
// the meta says reopened): everyone is told to join again and gets the place
// the seed gives them. ADMIT refuses to seal a queue that is not the one the
// witness recorded, and a reopening whose PostgreSQL step failed is finished
// by the next tick. A reopening is published: the fairness answer gives
// draws_reopened and draw_reopened_at, and the console says it in words.
//
// # Fairness after every window
//
// ENTER notes each entrant's arrival; the seal stores it in
// admission_entrants.entered_at and inserts a window_fairness job (10 minutes
// later, once offers, holds and payments have played out) that computes
// success by client type (agent; aggressive = refused for early or too-fast
// polls on this window; ordinary), by account-age band and by arrival second,
// Spearman's rho between arrival and place inside the randomised window, and
// the verify-window result, published in GET /v1/windows/{id}/fairness and on
// the console's Window fairness page. Beside each group's rate, ByChance says
// how likely a rate at least that far above the others' would be by luck alone
// (the hypergeometric tail: bookings falling on entrants blind to the group),
// so a window of a few hundred bookings is not read as unfair for a swing its
// size makes common.
package admission
