package views

import (
	"net/url"
	"strconv"

	"tatkal/booking/india"
)

// INR formats paise as Indian rupees with Indian digit grouping and two
// decimals (₹1,23,456.78), as a finance clerk reads amounts.
func INR(paise int64) string { return india.Rupees(paise) }

// FinanceRunsPage lists the newest run of each gateway and day.
type FinanceRunsPage struct {
	From, To, Gateway string
	Gateways          []string
	RunScopes         []string // what the run form reconciles: the gateways, the wallet, the core and the bank
	Runs              []FinanceRunRow
	Ageing            []AgeRow
	Error             string
	Today             string
	Overdue           *OverdueSummary // the unresolved exceptions past their SLA; nil if none
	Messages          []FinanceMessage
	Unread            int   // of all this user's messages, not only those shown
	NewestMessage     int64 // marking read stops at it: one arriving since stays unread
}

// OverdueSummary heads the finance home: how many exceptions are past their
// SLA, the amount at stake, the oldest, and the filtered list.
type OverdueSummary struct {
	Count                                                 int
	Amount, Link                                          string
	OldestID, OldestKind, OldestRef, OldestAge, OldestDue string
}

// FinanceMessage is one console message to the signed-in user.
type FinanceMessage struct {
	At, Body, Link string
	Unread         bool
}

// FinanceRunRow is one run in the list and the head of the run page.
type FinanceRunRow struct {
	ID                                            int64
	Date, Gateway, RunBy, FinishedAt, AsOf        string
	Runs                                          int
	OurItems, Lines, Matched, Exceptions          int
	New, Cleared, Unresolved                      int
	MatchRate                                     string
	MatchedAmt, UnmatchedAmt, Fees, Tax, Net, Pay string
	UnresolvedAmount                              string
}

// AgeRow is one ageing bucket: the funnel's money panel and the finance home.
type AgeRow struct {
	Bucket, Amount string
	Count          int
	Escalated      int
}

// FinanceRunPage is one run: its figures, files, history and exceptions by kind.
type FinanceRunPage struct {
	Run     FinanceRunRow
	Files   []FinanceFile
	History []FinanceRunRow
	ByKind  []KindCount
	CSRF    string
}

// KindCount is how many unresolved exceptions of a kind a day has.
type KindCount struct {
	Kind, Owner, Path, Amount string
	Count                     int
	Link                      string
}

// Resolution is a code an exception may be closed with.
type Resolution struct{ Code, Meaning string }

// FinanceFile is an ingested file with its lineage.
type FinanceFile struct {
	ID                                       int64
	Source, Gateway, Format, Date, Name, SHA string
	Rows                                     int
	Bytes                                    int64
	IngestedAt, IngestedBy                   string
	SupersededBy                             string // "" while current
	SupersededAt                             string
	Replayed                                 bool
	// Origin is FETCHED or UPLOAD; AcceptedBy the second person who
	// accepted an upload; CanAccept: the viewer may accept it (finance,
	// not its uploader).
	Origin, AcceptedBy string
	CanAccept          bool
	// Earlier: an upload's bytes were an earlier version sent again;
	// Current is the day's current file, which stays current.
	Earlier bool
	Current string
}

// FinanceExceptionsPage lists exceptions with filters and paging.
type FinanceExceptionsPage struct {
	Filter      ExceptionFilter
	Kinds       []string
	Owners      []string
	Buckets     []string
	States      []string
	Gateways    []string
	Rows        []ExceptionRow
	Total       int
	TotalAmount string
	From, To    int // 1-based rows shown
	Prev, Next  string
	Error       string
	Worklist
}

// ExceptionFilter is the filter form's values, as typed.
type ExceptionFilter struct {
	Kind, Age, Owner, Assignee, State, Gateway, Date, Min, Max string
	Overdue                                                    string // "1": only those past their SLA
	Offset                                                     int
	// Sort is the column the list is sorted by (recon.SortKeys, "-" reverses);
	// Mine "1" narrows it to the signed-in person's queue.
	Sort, Mine string
}

// Query is the filter as a query string, at offset.
func (f ExceptionFilter) Query(offset int) string {
	v := url.Values{}
	for k, s := range map[string]string{"kind": f.Kind, "age": f.Age, "owner": f.Owner, "assignee": f.Assignee, "state": f.State,
		"gateway": f.Gateway, "date": f.Date, "min": f.Min, "max": f.Max, "overdue": f.Overdue, "sort": f.Sort, "mine": f.Mine} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if offset > 0 {
		v.Set("offset", strconv.Itoa(offset))
	}
	return v.Encode()
}

// ExceptionRow is one exception in a list.
type ExceptionRow struct {
	ID, Kind, Ref, Gateway, Date, Owner, Path, State, Assignee string
	Stake, Amount, Diff, Age, Bucket, Due, Resolution          string
	Overdue, Escalated, NeedsApproval                          bool
	// GatewayRef is the gateway's transaction id, PNR the ticket's; TxnAge
	// how long ago the money moved (Age: since the run found it).
	GatewayRef, PNR, TxnAt, TxnAge string
	WriteOffBy                     string // who proposed writing it off, while a second person has not decided
}

// FinanceExceptionPage is one exception with its legs, history and actions.
type FinanceExceptionPage struct {
	E          ExceptionRow
	Meaning    string
	PaymentID  string
	PNR        string
	PSPRef     string
	PayoutID   string
	WriteOffBy string
	ApprovedBy string
	ResolvedBy string
	Open       bool
	Legs       ExceptionLegs
	History    []ExceptionHistoryRow
	Evidence   string
	Me         string
	People     []string
	Codes      []Resolution
	Error      string
	CSRF       string
	Money      ExceptionMoney
	MyTeams    []string // a team member's teams (nil: finance or admin)
}

// ExceptionLegs are the records side by side.
type ExceptionLegs struct {
	Ours       []KV
	Settlement []LegLine
	Bank       []LegLine
	Core       []LegLine
}

// KV is one labelled value.
type KV struct{ K, V string }

// LegLine is an outside record with its raw line.
type LegLine struct {
	FileID, LineNo                  string
	Kind, Day, Ref                  string
	Amount, Fee, Tax, Net, PayoutID string
	Current                         bool
	Raw                             string
}

// ExceptionHistoryRow is one event of an exception.
type ExceptionHistoryRow struct {
	At, Actor, Action, From, To, Note string
}

// FinanceFilesPage is the upload form and the lineage of recent files.
type FinanceFilesPage struct {
	Source, Gateway, Date string
	Gateways              []string
	Files                 []FinanceFile
	Result                *FinanceFile
	Error                 string
	CSRF                  string
}

// FinanceBooksPage is a day's books, and optionally one term's payments.
type FinanceBooksPage struct {
	Date, Gateway string
	Gateways      []string
	Terms         []BookTerm
	Difference    string
	Balanced      bool
	Term          string
	Lines         []BookLineRow
	Prev, Next    string
	Error         string
	// TieOuts are the day's statements that must hold to the paisa: each
	// gateway's settlement statement and the wallets' roll-forward.
	TieOuts []TieOut
}

// TieOut is one statement of the books that ties out to the paisa.
type TieOut struct {
	ID, Title string
	Rows      []TieOutRow
	TiesOut   bool
}

// TieOutRow is one term: its amount, what it is checked against and the
// difference ("" when it is not checked), a link to what is behind it.
type TieOutRow struct {
	Op, Term, Amount, Against, Difference, Note, Link string
	Total, Off                                        bool // Off: the difference is not zero
}

// BookTerm is one term of the books.
type BookTerm struct {
	Term, Label, Amount, Link string
	Count                     int
}

// BookLineRow is one payment behind a term.
type BookLineRow struct {
	PaymentID, Login, Method, State, Amount, Part, At, PNR, Booking, Refunded, RefundState string
}

// AgeLink lists the unresolved exceptions of an age bucket.
func AgeLink(bucket string) string {
	return "/console/finance/exceptions?" + url.Values{"state": {"UNRESOLVED"}, "age": {bucket}}.Encode()
}
