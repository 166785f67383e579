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
// Accounts are linked by weighted edges (DefaultConfig): a shared device,
// UPI address, card, bank account or phone, passenger ID, name and age, a
// name as it sounds (NameKey) at ages one apart, a refused attempt at
// another account's passenger, consecutive logins; and weak kinds (a shared
// /24 early in the window, holds within 5 ms, the same solve time) that
// never link on their own. A key weighs less the more accounts share it. The
// edge query pairs the anchor kinds only and looks the weak ones up for
// those candidate pairs (TestAnchoredEdgesMatchAllPairs). A key shared by
// many accounts links them as a star, not all pairs. Weak bridges are
// pruned (an account held by one booking is cut off), the connected accounts
// form clusters, and each member is scored on its own (score.go): what it
// shares, counted once per key; whether it books its own saved passengers
// or strangers; a household (a home /24, one surname, its own passengers or
// a rare surname) has its scores quartered. A cluster is flagged when a
// member is; members just below are near misses (NearMisses). A CLEAR
// leaves an allow-list entry per member (fraud_allow, AllowFor): their links
// among themselves are not held against them again until it expires. The
// decisions' labels scale each kind's weight (learn.go): the smoothed share
// of the decided clusters carrying it that were confirmed, over 0.5,
// between 0.5 and 1.5, once five are decided (Result.Labels says by how much).
//
// TestAdversarialQuality holds the detector to ring recall ≥ 0.9 and
// innocents flagged ≤ 1 % on AdversarialPopulation (README: five seeds,
// 0.921 and 0.23 %). The honest limits: a ring booking one customer family
// of a rare surname from one address block passes as a household; a family
// with no master list sharing a device and a payer looks like a ring of
// two; own travel is read from the master list, which a population that
// never saves passengers does not show.
//
// The population comes from tatkal seed abuse: through the HTTP API of a
// running stack (booking/lab/rehearse: every signal the one the live path
// recorded, within the live limits) or, with --direct, straight into the
// database (Generate) for large populations and the clustering's own tests.
// The analysts' queue, decisions and their enforcement are package review.
package fraud
