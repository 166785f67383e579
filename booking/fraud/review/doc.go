// Package review is the analysts' side of fraud clusters: a queue by score,
// claims so that two analysts never work one cluster, and decisions with
// reason codes, every step audited. It is apart from package fraud because it
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
// page. Upholding restores the account and refunds an upheld cancellation's
// full fare once; one analyst may uphold against a one-analyst decision, two
// against a two-analyst one, never an analyst of the decision.
package review
