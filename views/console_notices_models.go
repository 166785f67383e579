package views

import "net/url"

// LeverSuggestion is a lever change the console suggests from what it
// sees (route health, queue depth). It only pre-fills the lever form: a
// person previews it, types the confirmation and, where the lever's rules
// say so, a second admin approves.
type LeverSuggestion struct {
	Name        string `json:"name"`
	Scope       string `json:"scope"`
	Value       string `json:"value"`
	Reason      string `json:"reason"`
	RevertAfter string `json:"revert_after,omitempty"`
	Why         string `json:"why"`
}

// URL opens the lever form pre-filled with the suggestion.
func (s LeverSuggestion) URL() string {
	q := url.Values{"name": {s.Name}, "scope": {s.Scope}, "value": {s.Value}, "reason": {s.Reason}}
	if s.RevertAfter != "" {
		q.Set("revert_after", s.RevertAfter)
	}
	return "/console/levers?" + q.Encode()
}

// BannersPage is the status banners' form and list.
type BannersPage struct {
	Form    BannerForm
	Banners []BannerRow
	Error   string
	Me      string
}

// BannerForm is the new banner form as typed (times in IST).
type BannerForm struct {
	Text, Severity, Scope, Starts, Ends string
}

// BannerRow is one banner in the list.
type BannerRow struct {
	ID                                               int64
	Text, Severity, Scope, State                     string
	Starts, Ends, CreatedBy, ApprovedBy, WithdrawnBy string
	CanApprove, CanWithdraw                          bool
}

// WindowReviewsPage lists the post-window reviews, newest first.
type WindowReviewsPage struct {
	Rows []WindowReviewRow
}

// WindowReviewRow is one review in the list.
type WindowReviewRow struct {
	ShardID                    int64
	Label, ClosesAt, WrittenAt string
	Sold                       string // "6 of 8 berths (75%)"
	Incidents                  int
}

// WindowReviewPage is one window's review, its figures in words.
type WindowReviewPage struct {
	ShardID                       int64
	Label, Opens, Closes, Written string
	Funnel                        []KV // stage, figure
	Fairness                      []KV
	Money                         []KV
	Incidents                     []string
	Levers                        []KV // "#id name scope old → new (state)", "by, when, why"
}
