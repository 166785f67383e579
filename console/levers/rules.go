package levers

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"tatkal/booking"
	"tatkal/booking/fraud"
)

// Rules as data: the Tatkal rules (booking.Rules) and the fraud
// thresholds (fraud.Config) an operator may change without a release,
// each a scope of the "rule" lever, through the same guarded flow as every
// lever (typed confirmation, audit, a second admin when a change loosens a
// limit). A rule with no row, or set back to "" by a revert, is the one
// the process was configured with.
const Rule = "rule"

// RuleDef is one rule an operator may set: its bounds in its unit, and
// which way loosens it (a loosening needs a second admin).
type RuleDef struct {
	Scope, Unit string
	Min, Max    float64
	Decimal     bool // a number with up to two decimals, else a whole number
	// Looser reports whether new loosens the limit against old.
	LooserUp bool // a higher value loosens (caps, windows); else a lower one does (the agent bar)
	// Default is the value of booking.DefaultRules (or fraud.DefaultConfig),
	// against which a change of a rule with no row is judged.
	Default func() float64
	apply   func(r *booking.Rules, c *fraud.Config, v float64)
	// Why says what the rule governs, for the effect and the console.
	Why string
}

// RuleDefs lists the rules, in the order the console shows them.
var RuleDefs = []RuleDef{
	{Scope: "daily_cap", Unit: "tickets", Min: 1, Max: 12, LooserUp: true, Why: "Tatkal tickets per account per opening day",
		Default: func() float64 { return float64(booking.DefaultRules().DailyCap) },
		apply:   func(r *booking.Rules, _ *fraud.Config, v float64) { r.DailyCap = int(v) }},
	{Scope: "person_daily_cap", Unit: "tickets", Min: 1, Max: 12, LooserUp: true, Why: "Tatkal tickets per person (all their verified accounts) per opening day",
		Default: func() float64 { return float64(booking.DefaultRules().PersonDailyCap) },
		apply:   func(r *booking.Rules, _ *fraud.Config, v float64) { r.PersonDailyCap = int(v) }},
	{Scope: "agent_bar", Unit: "minutes", Min: 0, Max: 120, Why: "minutes after opening before agents may book",
		Default: func() float64 { return booking.DefaultRules().AgentBar.Minutes() },
		apply:   func(r *booking.Rules, _ *fraud.Config, v float64) { r.AgentBar = time.Duration(v) * time.Minute }},
	{Scope: "max_passengers", Unit: "passengers", Min: 1, Max: 6, LooserUp: true, Why: "passengers on one ticket",
		Default: func() float64 { return float64(booking.DefaultRules().MaxPassengers) },
		apply:   func(r *booking.Rules, _ *fraud.Config, v float64) { r.MaxPassengers = int(v) }},
	{Scope: "hold_window", Unit: "seconds", Min: HoldWindowMin, Max: HoldWindowMax, LooserUp: true, Why: "seconds seats stay held from the hold, before any payment starts",
		Default: func() float64 { return booking.DefaultRules().HoldWindow.Seconds() },
		apply:   func(r *booking.Rules, _ *fraud.Config, v float64) { r.HoldWindow = time.Duration(v) * time.Second }},
	{Scope: "passenger_accounts", Unit: "accounts", Min: 1, Max: 10, LooserUp: true, Why: "accounts one passenger may be booked by per opening day",
		Default: func() float64 { return float64(booking.DefaultRules().PassengerAccounts) },
		apply:   func(r *booking.Rules, _ *fraud.Config, v float64) { r.PassengerAccounts = int(v) }},
	{Scope: "min_account_age", Unit: "hours", Min: 0, Max: 720, Why: "hours an account must have existed before it may book Tatkal (0: none; verification is always required)",
		Default: func() float64 { return booking.DefaultRules().MinAccountAge.Hours() },
		apply:   func(r *booking.Rules, _ *fraud.Config, v float64) { r.MinAccountAge = time.Duration(v) * time.Hour }},
	{Scope: "fraud_edge_threshold", Unit: "weight", Min: 0.3, Max: 0.95, Decimal: true, LooserUp: true, Why: "link weight below which two accounts are not linked",
		Default: func() float64 { return fraud.DefaultConfig().EdgeThreshold },
		apply:   func(_ *booking.Rules, c *fraud.Config, v float64) { c.EdgeThreshold = v }},
	{Scope: "fraud_min_members", Unit: "accounts", Min: 2, Max: 50, LooserUp: true, Why: "accounts a cluster needs to be flagged",
		Default: func() float64 { return float64(fraud.DefaultConfig().MinMembers) },
		apply:   func(_ *booking.Rules, c *fraud.Config, v float64) { c.MinMembers = int(v) }},
	{Scope: "fraud_min_score", Unit: "weight", Min: 0.5, Max: 20, Decimal: true, LooserUp: true, Why: "summed link weight a cluster needs to be flagged",
		Default: func() float64 { return fraud.DefaultConfig().MinScore },
		apply:   func(_ *booking.Rules, c *fraud.Config, v float64) { c.MinScore = v }},
}

// RuleOf returns the definition of a rule scope.
func RuleOf(scope string) (RuleDef, bool) {
	for _, d := range RuleDefs {
		if d.Scope == scope {
			return d, true
		}
	}
	return RuleDef{}, false
}

func ruleScopes() string {
	s := make([]string, len(RuleDefs))
	for i, d := range RuleDefs {
		s[i] = d.Scope
	}
	return strings.Join(s, ", ")
}

// parse reads a stored or proposed value of the rule.
func (d RuleDef) parse(v string) (float64, error) {
	v = strings.TrimSpace(v)
	f, err := strconv.ParseFloat(v, 64)
	bad := err != nil || math.IsNaN(f) || f < d.Min || f > d.Max
	if !bad && !d.Decimal && f != float64(int64(f)) {
		bad = true
	}
	if !bad && d.Decimal && math.Abs(f*100-math.Round(f*100)) > 1e-9 {
		bad = true
	}
	if bad {
		kind := "a whole number"
		if d.Decimal {
			kind = "a number with at most two decimals"
		}
		return 0, invalid("Rule %s is %s of %s from %s to %s.", d.Scope, kind, d.Unit, d.format(d.Min), d.format(d.Max))
	}
	return f, nil
}

func (d RuleDef) format(f float64) string {
	if d.Decimal {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return strconv.FormatInt(int64(f), 10)
}

func normalizeRule(p Proposal) (string, error) {
	d, ok := RuleOf(p.Scope)
	if !ok {
		return "", invalid("Rules are %s.", ruleScopes())
	}
	f, err := d.parse(p.Value)
	if err != nil {
		return "", err
	}
	return d.format(f), nil
}

// ruleLoosens says whether setting the rule from old ("" being its
// default) to v loosens it, which takes a second admin.
func ruleLoosens(scope, old, v string) (bool, string) {
	d, ok := RuleOf(scope)
	if !ok {
		return false, ""
	}
	o := d.Default()
	if f, err := d.parse(old); err == nil {
		o = f
	}
	n, err := d.parse(v)
	if err != nil {
		return false, ""
	}
	if (d.LooserUp && n > o) || (!d.LooserUp && n < o) {
		return true, fmt.Sprintf("it loosens the %s rule (%s to %s %s)", d.Scope, d.format(o), d.format(n), d.Unit)
	}
	return false, ""
}

func ruleEffect(scope, old, v string) string {
	d, _ := RuleOf(scope)
	return fmt.Sprintf("The rule %s (%s) becomes %s %s on every process within a second, for holds and queue entries from then on (was %s).",
		scope, d.Why, v, d.Unit, display(old))
}

// Rules returns base with the rules operators set in force over it.
func (r *Reader) Rules(base booking.Rules) booking.Rules {
	vals := r.snapshot()
	for _, d := range RuleDefs {
		if strings.HasPrefix(d.Scope, "fraud_") {
			continue
		}
		if v, ok := vals[Rule+"|"+d.Scope]; ok && v != "" {
			if f, err := d.parse(v); err == nil {
				d.apply(&base, nil, f)
			}
		}
	}
	return base
}

// FraudConfig returns base with the fraud thresholds operators set in
// force over it.
func (r *Reader) FraudConfig(base fraud.Config) fraud.Config {
	vals := r.snapshot()
	for _, d := range RuleDefs {
		if !strings.HasPrefix(d.Scope, "fraud_") {
			continue
		}
		if v, ok := vals[Rule+"|"+d.Scope]; ok && v != "" {
			if f, err := d.parse(v); err == nil {
				d.apply(nil, &base, f)
			}
		}
	}
	return base
}
