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
