// Package payment is the payment orchestrator: it takes money for holds
// through the wallet or a gateway, drives each payment to a definite end (a
// ticket or a refund), and treats every external answer as possibly slow,
// duplicated, delayed or lost. A timeout is UNKNOWN, never FAILED.
//
// # Paying
//
// POST /v1/payments/initiate (WALLET, UPI, CARD, NB) is idempotent by key, the
// key bound to its request (the same key with another request is 422
// IDEMPOTENCY_KEY_REUSED); a second payment while one is open is refused with
// an explanation. The wallet is an internal ledger (append-only entries,
// balance never negative; CheckLedger proves it) that debits and confirms the
// booking in one transaction. Money enters it only as a top-up (a gateway
// payment, credited when the gateway confirms the capture to a status inquiry)
// or a refund. Other methods go to a gateway route chosen by configured weight
// and live health (success rate and p95 over the last minute, shared through
// Redis; a circuit breaker per route).
//
// Seats are held longer for slower methods (counted from the hold: wallet 3
// min, UPI 5, card and net banking 6) and extended once by 75 s when the bank
// acknowledges; a definitive failure releases them at once.
//
// # States and answers
//
// INITIATED → AWAITING_USER → PENDING_AT_BANK → SUCCESS | FAILED, plus UNKNOWN
// for a timeout: only a definitive answer makes FAILED. Every transition is a
// row in payment_events with its cause. Money moves, and a ticket is issued,
// only on the gateway's own word: a signed callback or its answer to our own
// status inquiry.
//
//   - Callbacks (POST /v1/internal/payments/callback, HandleWebhook) are
//     HMAC-SHA256 signed over timestamp and body, refused outside a 5-minute
//     replay window, deduplicated by event id (a process cache, then the
//     unique constraint), and checked under the payment's lock against its
//     gateway (UNKNOWN_PAYMENT: a gateway's secret signs nothing about another
//     gateway's payments), its reference (REF_MISMATCH) and the amount. A
//     refused callback changes nothing and records no event.
//   - A River inquiry job asks the gateway with backoff until the payment is
//     resolved, and once more after a success a callback brought. A create
//     whose answer was lost (UNKNOWN) is asked about 2 s later, so the
//     passenger reaches the bank's page in seconds. Once recorded, a create
//     goes to the gateway even if the passenger's connection drops first
//     (context.WithoutCancel); a payment the gateway never recorded is failed
//     after DefaultNotCreatedAfter.
//   - When the gateway contradicts itself or us (FAILED after a success,
//     another amount or currency captured, a refund refused), the payment goes
//     to payment_reviews: a captured wrong amount is refunded at once, a
//     refused refund stops (FAILED). A person proposes crediting it to the
//     wallet or closing the alarm, a second person approves after the gateway
//     is asked again, and above the approval limit only a finance lead
//     (console_users.finance_lead) may approve (ApproveReview).
//   - A success after the hold lapsed retakes the same journey at the original
//     fare if seats are free within 30 minutes, else is refunded in full
//     (LATE_SUCCESS_NO_SEAT); a second charge on one hold is refunded
//     (DUPLICATE_CHARGE).
//
// The in-process simulators (tatkal dev, rehearsals, tests) have a database
// pool of their own, so the outside world never answers late because our own
// workers hold every connection (which had timed creates out and opened every
// route's breaker).
//
// # Confirmation groups
//
// Every applyAnd (callbacks, inquiry and create answers) and the wallet path
// of Initiate run their body in a confirmation group (group.go): concurrent
// bodies share one transaction and one COMMIT, sorted by the row each locks
// first, each in its own savepoint (named apart from the one that exists, and
// riding the body's first batch), so a failing body rolls back only itself and
// gets its own error. A serialization failure or deadlock reruns the body
// alone under db.Transact's retries; a failed COMMIT is every caller's error,
// never a success. After-commit work runs in each caller once its group
// committed. At most maxGroup (32) bodies a group, as more than 64 writing
// subtransactions overflow PostgreSQL's subxid cache.
//
// Before the bodies run, the group takes the common case of all of them at
// once (common.go): a success for a payment still open, at our amount and
// currency, for a hold that is HELD with no other capture. One statement locks
// those payments and their holds, one batch records their webhook events,
// instruments, changes and events. Anything else runs its own body, which
// writes its answer with the same set-based statements on one row, so the two
// paths cannot drift. The bodies book their holds' confirmations and the group
// confirms all of them with booking.ConfirmManyTx. A body that locks a hold
// the group is confirming, or one whose joint confirmation failed in the last
// minute, runs alone after the group; a joint confirmation that fails rolls
// the group back and every body runs alone.
//
// TATKAL_CONFIRM_WRITERS (default 2, 0 turns grouping off) is how many groups
// are written at once; a waiting caller takes a writer slot and writes what is
// queued, with no timer. Why grouped and why few writers: most of a group's
// PostgreSQL work is a statement per kind for the whole group, so its cost is
// per group, not per confirmation; set-based groups halved PostgreSQL's CPU
// per callback confirmation, and two writers make groups of about 17 where
// eight made groups of about 5, confirming more callbacks on the same cores.
package payment
