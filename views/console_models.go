package views

import "fmt"

// ConsoleNav is the frame of every console page: who is signed in and
// what they may open.
type ConsoleNav struct {
	Login  string
	Role   string
	CSRF   string
	Active string
	Items  []NavItem
	// Notice is the session's flash message: set by the server before a
	// redirect, shown once, never taken from the URL.
	Notice string
}

// NavItem is one navigation link.
type NavItem struct {
	Href, Label, Key string
}

// ConsoleLoginPage is the sign-in form. Notice is one of the server's
// fixed texts (signed out, session expired), chosen by a flag.
type ConsoleLoginPage struct {
	Next   string
	Error  string
	Notice string
	CSRF   string
	Login  string
	// Challenge, when set, is the proof of work that opens the account's
	// sign-in lock: the page's script solves it (Bits zero bits) into the
	// form; without script the page says to wait RetrySecs.
	Challenge string
	Bits      int
	RetrySecs int
}

// ConsoleMessagePage is a page with a title and a message (refusals,
// and the finance and fraud placeholders).
type ConsoleMessagePage struct {
	Title   string
	Message string
	Items   []string
	TestID  string
}

// FunnelView is one snapshot of the live funnel; the page renders it and
// the websocket sends it as JSON once a second.
type FunnelView struct {
	At            string        `json:"at"`
	WindowSeconds int           `json:"window_seconds"`
	Shards        []FunnelShard `json:"shards"`
	Routes        []RouteHealth `json:"routes"`
	Levers        []string      `json:"levers"`
	Idle          []string      `json:"idle"` // shards not loaded in Redis and with no events: listed, not charted
	Errors        []string      `json:"errors,omitempty"`
	Charts        FunnelCharts  `json:"charts"`
}

// FunnelCharts is the rush over time: one chart per stage, one line per
// shard. The quiet shards are drawn as one line, their sum, unless the
// operator expands them, so a busy shard stands out.
type FunnelCharts struct {
	From    string       `json:"from"` // the first bucket's start, IST
	To      string       `json:"to"`   // the last bucket's end
	Minutes int          `json:"minutes"`
	StepS   int          `json:"step_s"`
	Charts  []Chart      `json:"charts"` // counts: one line per busy shard, one for the quiet ones
	Shards  []ChartShard `json:"shards"` // their legend, in line order
	Quiet   int          `json:"quiet"`  // how many shards are quiet
	// Latency is p95 per timed stage, over every shard.
	Latency []Chart `json:"latency"`
	// Routes is one chart per payment route: its calls by outcome.
	Routes []Chart `json:"routes"`
}

// ChartShard is one shard's line in every chart. ID -1 is the quiet shards' sum.
type ChartShard struct {
	ID     int64  `json:"id"`
	Label  string `json:"label"`
	Class  string `json:"class"` // its colour: c0…c7 in console.css
	Quiet  bool   `json:"quiet"`
	Events int64  `json:"events"` // charted events over the span
}

// FunnelShard is the funnel of one shard, or of all (ID 0).
type FunnelShard struct {
	ID          int64         `json:"id"`
	Label       string        `json:"label"`
	Stages      []FunnelStage `json:"stages"`
	Total       int           `json:"total_berths"`
	SeatsLeft   int           `json:"seats_left"`
	Held        int           `json:"held"`
	Confirmed   int           `json:"confirmed"`
	Ready       bool          `json:"ready"`
	Epoch       int64         `json:"epoch"`
	InvariantOK bool          `json:"invariant_ok"`
	Violations  []string      `json:"violations"`
	Checked     bool          `json:"checked"`
	Paused      bool          `json:"admission_paused"`
	Rate        string        `json:"admission_rate"`
	// Throttle is the shard_throttle in force: "off", or the hold calls
	// and payment starts a second let through to the core.
	Throttle string `json:"shard_throttle"`
	Waiting  int64  `json:"queue_waiting"`
	Admitted int64  `json:"queue_admitted"`
	Quiet    bool   `json:"quiet"` // few or no events lately: shown collapsed to one line
}

// FunnelStage is one stage's figures.
type FunnelStage struct {
	Stage   string  `json:"stage"`
	Label   string  `json:"label"`
	LastSec int64   `json:"last_sec"`
	Total   int64   `json:"total"`
	Series  []int64 `json:"series"`
	ConvPct float64 `json:"conv_pct"` // of the stage it follows, -1 if none
	ConvOf  string  `json:"conv_of"`
	P95ms   int64   `json:"p95_ms"` // -1: no samples
}

// RouteHealth is one payment route's health.
type RouteHealth struct {
	Route       string  `json:"route"`
	Weight      int     `json:"weight"`
	Enabled     bool    `json:"enabled"`
	Calls       int     `json:"calls"`
	ErrorPct    float64 `json:"error_pct"`
	P95ms       int64   `json:"p95_ms"`
	BreakerOpen bool    `json:"breaker_open"`
}

// SparkPoints renders a series as SVG polyline points in a w×h box.
func SparkPoints(series []int64, w, h int) string {
	var top int64
	for _, v := range series {
		top = max(top, v)
	}
	return LinePoints(series, top, w, h)
}

// BarPct is a stage's bar length (0-100) against the largest total.
func BarPct(stages []FunnelStage, s FunnelStage) string {
	var top int64 = 1
	for _, x := range stages {
		top = max(top, x.Total)
	}
	return fmt.Sprintf("%.1f", float64(s.Total)*100/float64(top))
}

// Pct formats a percentage, or a dash.
func Pct(p float64) string {
	if p < 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f%%", p)
}

// Ms formats milliseconds, or a dash.
func Ms(ms int64) string {
	if ms < 0 {
		return "–"
	}
	return fmt.Sprintf("%d ms", ms)
}

// LeversPage shows the levers in force, a change form with its preview,
// and the changes waiting for approval.
type LeversPage struct {
	Defs       []LeverDef
	InForce    []LeverValue
	Changes    []LeverChange
	Form       LeverForm
	Preview    *LeverPreview
	Error      string
	CanApprove bool
	Me         string
	// Suggestions pre-fill the form from route health and queue depth.
	Suggestions []LeverSuggestion
}

// LeverDef describes a lever for the form.
type LeverDef struct {
	Name, Title, Help, Scopes string
}

// LeverValue is one lever in force.
type LeverValue struct {
	Name, Scope, Value, UpdatedBy, UpdatedAt string
}

// LeverForm is the change form's fields.
type LeverForm struct {
	Name, Scope, Value, Reason, Confirm, RevertAfter string
}

// LeverPreview is what a change would do.
type LeverPreview struct {
	Old, New, Effect, ConfirmWord, Why string
	Dangerous                          bool
}

// LeverChange is a proposed change.
type LeverChange struct {
	ID                                           int64
	Name, Scope, Old, New, Reason, State         string
	ProposedBy, ProposedAt, ApprovedBy, RevertAt string
	Dangerous                                    bool
}

// ShardsPage lists the shards with their seat figures.
type ShardsPage struct {
	Rows      []ShardRow
	Error     string
	SendLease string // how long a chart's send from the console is taken to be in hand
}

// ShardRow is one shard.
type ShardRow struct {
	ID                                     int64
	Label, Window, Mode                    string
	Total, SeatsLeft, LiveHolds, Confirmed int
	Waitlist, WaitlistCap                  int
	Epoch                                  int64
	Ready, InvariantOK                     bool
	Violations                             []string
	RebuildFailed                          string // the last rebuild's failure, when it failed
	ConfirmWord                            string
	Chart                                  string // the chart in one line (chartWords)
	ChartRetry                             bool   // its delivery to the core FAILED, or an operator's send was cut off: ops may send it once more
	ChartPrepare                           bool   // its preparation FAILED: ops may prepare it once more
}

// PaymentsPage lists payments stuck unresolved and payments in review.
type PaymentsPage struct {
	MinAge  string
	Rows    []PaymentRow
	Reviews []ReviewRow
	// CanResolve: the viewer may propose and approve on reviews (finance, admin).
	CanResolve bool
	Me         string // the viewer's login: nobody approves their own proposal
	Error      string
}

// ReviewRow is one open payment review (payment_reviews): money the
// gateway contradicted itself or us about.
type ReviewRow struct {
	ID, PaymentID, Kind, Detail, Login, Purpose, Method, State, Amount, PNR, Age string
	// WalletFallback: a refused refund the wallet can take instead.
	WalletFallback bool
	// Proposal waiting for a second person ("" when none).
	Proposal, ProposedBy, ProposalNote string
}

// PaymentRow is one stuck payment.
type PaymentRow struct {
	ID, HoldID, Method, Gateway, State, Amount, Age, Deadline, Login string
	Inquiries                                                        int
	Overdue                                                          bool
}

// LookupPage finds holds and bookings by hold id, PNR or login.
type LookupPage struct {
	Query string
	Rows  []LookupRow
	Error string
}

// LookupRow is one hold with its booking, if any.
type LookupRow struct {
	HoldID, Login, Shard, Kind, State, Reason, Created, Expires, PNR, BookingStatus, Fare string
	// Chart is the shard's chart in words: "open", "charted 12:30 IST,
	// at the core CC00000001", "FAILED: reason".
	Chart string
}

// TracePage answers "why did this person not get a ticket".
type TracePage struct {
	Login   string
	UserID  int64
	Found   bool
	Outcome string
	Events  []TraceEvent
	Error   string
}

// TraceEvent is one timestamped fact about the person's attempt.
type TraceEvent struct {
	At     string
	Kind   string // queue, admission, hold, payment, refund, notification, booking
	Ref    string
	What   string
	Detail string
}

// AuditPage lists the audit log, newest first, a page at a time.
type AuditPage struct {
	Rows       []AuditRow
	Action     string // filter: action prefix
	Actor      string // filter: exact actor
	OlderHref  string // next page back, filters kept; empty on the last page
	NewestHref string // back to the first page; empty on it
	Error      string
}

// AuditRow is one audit record.
type AuditRow struct {
	ID                                 int64
	At, Actor, Action, Subject, Detail string
}

// TokensPage lists personal API tokens and creates them.
type TokensPage struct {
	Users  []TokenUser
	Tokens []TokenRow
	Form   TokenForm
	Error  string
	// NewToken is the token just created, shown on this page only.
	NewToken    string
	NewTokenID  int64
	NewTokenFor string
}

// TokenUser is a console user a token can be made for.
type TokenUser struct {
	Login, Role string
}

// TokenForm is the create form's fields. Nonce is the form's one-time
// value: the same form sent twice (a reload) makes one token.
type TokenForm struct {
	User, Label, Days, Nonce string
}

// TokenRow is one token (never its value).
type TokenRow struct {
	ID                                  int64
	Login, Role, Label, Hint, CreatedBy string
	Created, Expires, LastUsed, State   string
	Revoked, RevokedBy                  string
}
