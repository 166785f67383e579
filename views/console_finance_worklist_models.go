package views

// Worklist is what the exception list adds for working it: sortable
// columns, the clerk's own queue, bulk actions on selected rows with each
// row's outcome, and the export of the filtered list.
type Worklist struct {
	Me     string
	CSRF   string
	People []string     // who an exception can be assigned to
	Teams  []string     // the teams it can be handed to
	Codes  []Resolution // every resolution code (each row's kind decides whether it takes it)
	Export string       // the filtered list as CSV
	// ExportXLSX is the filtered list as a workbook.
	ExportXLSX string
	// MyTeams are a team member's teams, the only ones the list shows
	// (nil for finance and admin: every team).
	MyTeams  []string
	MyQueue  string // the signed-in person's unresolved exceptions
	Outcomes []BulkOutcome
	Done     int // rows a bulk action carried out
	Refused  int // rows it refused (each unchanged)
}

// BulkOutcome is what a bulk action did to one row.
type BulkOutcome struct {
	ID, Kind, Ref, Result string
	// GatewayRef is the gateway's transaction id, PNR the ticket's: what
	// the clerk knows the row by ("" for a bank or core line, or a row the
	// person may not see).
	GatewayRef, PNR string
	OK              bool
}

// SortLink is a column header's link: sorted by it (ascending), or
// reversed when it is the current sort.
func (f ExceptionFilter) SortLink(key string) string {
	g := f
	g.Offset = 0
	g.Sort = key
	if f.Sort == key {
		g.Sort = "-" + key
	}
	return "/console/finance/exceptions?" + g.Query(0)
}

// SortMark is ▲ or ▼ beside the column the list is sorted by.
func (f ExceptionFilter) SortMark(key string) string {
	switch f.Sort {
	case key:
		return " ▲"
	case "-" + key:
		return " ▼"
	}
	return ""
}

// ExceptionMoney is the actions on one exception's money and team: hand
// it to a team, ask the gateway now, refund now with a second person.
type ExceptionMoney struct {
	Teams      []string
	CanAsk     bool   // the path is INQUIRY or AUTO and it names a payment
	AskLabel   string // what asking does on its path
	CanRefund  bool
	RefundBy   string // who proposed the refund ("" none)
	RefundNote string
}
