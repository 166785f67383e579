package views

// FraudPage is the analysts' queue: flagged clusters by score, open
// appeals, decisions awaiting a second analyst, and the metrics.
type FraudPage struct {
	Error, Notice string
	// Windows are the recent openings an analyst may cluster now (the
	// scheduled passes come minutes after the opening and once closed).
	Windows   []FraudWindowChoice
	Clusters  []FraudQueueRow
	Approvals []FraudApprovalRow
	Appeals   []FraudAppealRow
	Metrics   FraudMetrics
}

type FraudQueueRow struct {
	ID, Window, Score, Members, ClaimedBy, ClaimedUntil string
	Mine                                                bool
}

type FraudApprovalRow struct {
	DecisionID, ClusterID, Outcome, Reason, Analyst, DecidedAt string
}

type FraudWindowChoice struct{ Value, Label string }

type FraudAppealRow struct {
	// Statement is the member's words with ID numbers masked.
	ID, Login, DecisionID, Outcome, Statement, Filed string
	// ClusterID is the case the decision was made in; ClaimedBy who works
	// the appeal ("" nobody), Mine whether the viewer does.
	ClusterID, ClaimedBy, ClaimedUntil string
	Mine                               bool
	// TwoPerson: the decision took two analysts, so upholding takes two.
	TwoPerson bool
	// ProposedBy, ProposedAt: who proposed upholding it, and when ("" if nobody).
	ProposedBy, ProposedAt string
	// TookPart: the viewer decided or approved the decision, so answers
	// nothing; Uphold is the uphold button's words, "" for none.
	TookPart bool
	Uphold   string
}

type FraudMetrics struct {
	Windows            []FraudWindowRow
	Outcomes           []FraudCountRow
	MedianToDecision   string
	TenuredBefore      string // success rate of long-tenured accounts before the first enforcement
	TenuredAfter       string
	FirstEnforcementAt string
	// Labelled false positives: clusters cleared as FALSE_POSITIVE or
	// FAMILY_OR_OFFICE of all decided, and appeals upheld of all answered.
	ClearedFalse  string
	AppealsUpheld string
}

type FraudWindowRow struct{ Window, Signals, Clusters, Flagged string }

type FraudCountRow struct{ Label, Count string }

// FraudClusterPage is one cluster: its graph, members, bookings, evidence
// and history, and the decision forms.
type FraudClusterPage struct {
	Error, Notice                  string
	ID, Window, Score, Status, Why string
	ClaimedBy, ClaimedUntil        string
	ClaimedByMe, Open              bool
	Graph                          FraudGraph
	Members                        []FraudMemberRow
	Bookings                       []FraudBookingRow
	Evidence                       []FraudEvidenceRow
	// Shared is what the members share, masked, with how many share it.
	Shared            []FraudSharedRow
	History           []FraudHistoryRow
	Decisions         []FraudDecisionView
	Outcomes, Reasons []string
	// Analysts the viewer may hand a claim to.
	Analysts []FraudAnalyst
}

type FraudAnalyst struct{ ID, Login string }

// FraudSharedRow is one thing several members share: its kind (device,
// UPI address, card, bank account, network, passenger), what it is,
// masked, how many of the case's accounts share it, and which.
type FraudSharedRow struct{ Kind, What, Accounts, Members string }

// FraudAppealPage is one appeal beside the case's evidence.
type FraudAppealPage struct {
	Error, Notice string
	Appeal        FraudAppealRow
	Open          bool
	Note          string // the answer, once answered
	Status        string
	Cluster       FraudClusterPage
}

type FraudGraph struct {
	Width, Height int
	Nodes         []FraudNode
	Edges         []FraudEdge
}

type FraudNode struct {
	X, Y  int
	Label string
	Title string
}

type FraudEdge struct {
	X1, Y1, X2, Y2 int
	Width          string
	Title          string
}

type FraudMemberRow struct {
	UserID, Login, Age, Verified, Devices, Holds, Bookings string
	// Decided: the decisions on this member so far, in words.
	Decided string
}

type FraudBookingRow struct{ PNR, Login, Journey, Status, Fare, BookedAt string }

type FraudEvidenceRow struct{ A, B, Kind, Weight, Detail string }

type FraudHistoryRow struct{ At, Actor, Action, Detail string }

type FraudDecisionView struct {
	ID, Outcome, Reason, Note, Analyst, DecidedAt string
	// Label is what it says of its members (CLEAR, UNSURE, CONFIRMED);
	// Members the accounts it acts on.
	Label, Members          string
	NeedsApproval, Approved bool
	ApprovedBy, EnforcedAt  string
	CanApprove              bool
	// What enforcement cancelled: tickets, and holds that had not become
	// tickets (their payments, if they still go through, are refunded).
	TicketsCancelled, HoldsEnded int
}
