// Package fraud records the signals of every hold and booking and clusters the
// accounts behind them after each window; the analysts' decisions on those
// clusters are its subpackage review.
//
// # Signals on the live path
//
// Each hold's signals (account, device, IP and /24, attestation, challenge
// solve time, ms from opening, passengers keyed-hashed) are validated and
// hashed in Go and queued in fraud_signal_inbox as one row in the hold's own
// group commit (no round trip of its own, no raw ID number or instrument in
// it); a bad signal is logged and dropped, never the hold. Confirmation adds
// the booking and the instrument: the UPI address, or the card fingerprint or
// net-banking account reference the gateway reports (like a card network's
// Payment Account Reference, stable across payments and gateways; kept in
// payments.instrument_ref), keyed-hashed again. Drain (a River periodic job
// every second, and the first step of every clustering run) writes the queued
// batches into fraud_signals in id order under an advisory lock, so a hold's
// batch always lands before its confirmation's. TATKAL_FRAUD_KEY keys the
// hashes. Recorder.BenchDiscard turns recording off for tatkal bench only.
//
// The live limits across accounts are the booking group commit's (package
// booking). An attempt the passenger limit refuses is not lost: it rides the
// batch's inbox row and the drain writes it to fraud_refused_attempts, not as
// a signal.
//
// # Clustering
//
// A window is clustered while it is still open, 10 and 30 minutes after its
// opening (Service.EarlyPasses, TATKAL_FRAUD_EARLY_PASSES), and again once
// every shard of it has closed: each time only if signals came since its
// last run (DueWindows, run by the fraud_schedule job every minute). The
// early passes let a decision be enforced long before the chart, after
// which a cancellation frees nothing; a rerun keeps the clusters an analyst
// decided or claimed.
//
// Accounts are linked by weighted edges (DefaultConfig): a
// shared device, instrument, passenger ID (or name and age), a refused attempt
// at another account's passenger, consecutive logins; and weak kinds (a shared
// /24 early in the window, holds within 5 ms, the same solve time). The weak
// kinds together weigh less than the edge threshold, so an edge always carries
// an anchor kind: the edge query pairs the anchor kinds only and looks the
// weak ones up for those candidate pairs, with exactly the edges, weights and
// evidence of pairing everything (TestAnchoredEdgesMatchAllPairs). A key
// shared by many accounts links them as a star, not all pairs. Connected
// accounts form clusters; a cluster is flagged from MinMembers (4) and
// MinScore, except a household: one whose passengers mostly share one surname
// (KinShare 0.6) books for relatives, and its "why" says so. Families of 2-3
// accounts are below the size a cluster needs.
//
// TestClusteringQuality holds the thresholds to ring recall ≥ 0.95 and
// innocents flagged ≤ 1 % over five seeds of Generate's population, within the
// live limits and without them; TestFamiliesScoreLow that joint families reach
// a ring's size and score and are spared only by the kinship rule. The honest
// limits: the rule is calibrated on our own generator; a ring booking
// customers of one surname would pass as a household, and a household booking
// mostly in-laws of several surnames would be flagged (an analyst clears it,
// labelled).
//
// The population comes from tatkal seed abuse: through the HTTP API of a
// running stack (booking/lab/rehearse: every signal the one the live path
// recorded, within the live limits) or, with --direct, straight into the
// database (Generate) for large populations and the clustering's own tests.
// The analysts' queue, decisions and their enforcement are package review.
package fraud
