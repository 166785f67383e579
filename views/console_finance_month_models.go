package views

import "net/url"

// FinancePreviewPage is an upload's totals before it is committed: the
// clerk confirms or cancels. Identical: the bytes are a version already
// (Same), and nothing was kept.
type FinancePreviewPage struct {
	ID                    string
	Source, Gateway, Date string
	Name, SHA             string
	Bytes                 int64
	Totals                []TotalRow
	Identical             bool
	Same                  *FinanceFile
	Current               *FinanceFile
	CurrentTotals         []TotalRow
	CSRF                  string
}

// TotalRow is one kind of line in a file's totals (Kind "ALL" the sum).
type TotalRow struct {
	Kind                  string
	Count                 int
	Amount, Fee, Tax, Net string
}

// FinanceDiffPage is two versions of a day's file compared line by line.
type FinanceDiffPage struct {
	Old, New                FinanceFile
	OldTotals, NewTotals    []TotalRow
	Added, Removed, Changed int
	Lines                   []DiffRow
	More                    int // lines not listed
	Error                   string
}

// DiffRow is a line added, removed or changed, with both sides' amounts.
type DiffRow struct {
	Change, Kind, Ref    string
	OldLine, NewLine     string
	OldAmount, NewAmount string
	OldNet, NewNet       string
	OldRaw, NewRaw       string
}

// FinanceMonthPage is a month's period view and ageing report.
type FinanceMonthPage struct {
	Month, Label       string // "2026-11", "November 2026"
	Prev, Next         string // neighbouring months, "" past the current one
	From, To, AsOf     string
	Over               bool
	ByKind, ByOwner    []PeriodRowView
	Total              PeriodRowView
	TiesOut            bool
	Buckets            []string
	Ageing             []AgeingRowView
	AgeTotal           AgeingRowView
	SignedBy, SignedAt string
	Drift              bool
	CanSign            bool
	Workbook           string
	Error              string
	CSRF               string
	// Gateway narrows the figures to one gateway's exceptions ("" all);
	// Gateways are those to choose from.
	Gateway  string
	Gateways []string
}

// MonthLink is the month page of month with the page's gateway filter.
func (p FinanceMonthPage) MonthLink(month string) string {
	v := url.Values{"month": {month}}
	if p.Gateway != "" {
		v.Set("gateway", p.Gateway)
	}
	return "/console/finance/month?" + v.Encode()
}

// FlowView is a count and its amount.
type FlowView struct {
	Count  int
	Amount string
}

// PeriodRowView is a kind's or an owner's month.
type PeriodRowView struct {
	Key                                           string
	Opening, Found, Resolved, WrittenOff, Closing FlowView
	Link                                          string
}

// AgeingRowView is a kind's unresolved exceptions at the month's end by age.
type AgeingRowView struct {
	Kind    string
	Buckets []FlowView
	Total   FlowView
}
