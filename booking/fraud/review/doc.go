// Package review is the analysts' side of fraud clusters: a queue by score,
// claims so that two analysts never work one cluster (released, or handed
// to another analyst), and decisions with reason codes, every step audited.
//
// # The case
//
// A cluster is a case decided member by member: a decision names the
// members it acts on (fraud_decision_members; none named: all, which
// closes the case), a member may get more than one outcome (a
// cancellation and a ban), each once, and the analyst closes the case once
// every member has one, so a relative linked by one booking can be cleared
// while the ring is banned. Each decision carries a label for the next
// clustering's weights: CLEAR, UNSURE (WATCH) or CONFIRMED. WATCH puts its
// members on a live watch-list (fraud_watch, WatchFor): until it lapses
// their booking challenges are harder (admission reads it with
// users.risk_score); they are told nothing and have nothing to appeal. It is apart from package fraud because it
// speaks the booking error vocabulary, while the booking service must be able
// to import fraud to record signals.
//
// # Decisions and their enforcement
//
// Cancelling tickets or banning accounts takes two analysts. A decision waits
// DefaultEnforceDelay (30 minutes; a bulk one from its second approval), then
// the periodic fraud_enforce River batch acts on the members: it cancels their
// bookings of the window through booking's cancellation (Tatkal refund rules,
// berths back, the core told; refused once charted, not waiting for the core),
// bans (holds refused; sign-in still works, to appeal) or raises challenges
// (users.risk_score: admission adds FlaggedExtraBits). Each act is recorded
// with the decision, so a stopped batch resumed acts once.
//
// # Appeals
//
// POST and GET /v1/fraud/appeals; open appeals are on the console's fraud
// page, each linked to its case and claimed by one analyst at a time (never
// one who took part in the decision), the member's statement shown with ID
// numbers masked (MaskIDs). The member is told of a ban and of their
// appeal's answer (booking.NotifyT), as of a cancelled ticket. Upholding restores the account and refunds an upheld cancellation's
// full fare once; one analyst may uphold against a one-analyst decision, two
// against a two-analyst one, never an analyst of the decision.
package review
