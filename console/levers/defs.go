// Package levers holds the operator's control levers: their definitions
// and bounds, proposals with two-person approval for the dangerous ones,
// automatic revert, the audit trail, and the Reader every process uses to
// see the values in force (cached for at most half a second).
package levers

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"tatkal/booking"
	"tatkal/booking/db"
)

// Lever names.
const (
	KillSwitch      = "kill_switch"      // scope WAITLIST|CARD|NB|NON_ESSENTIAL; value on|off (on: the feature is off)
	HoldWindow      = "hold_window"      // scope a payment method; value seconds
	AdmissionPaused = "admission_paused" // scope global|shard:N; value on|off
	AdmissionRate   = "admission_rate"   // scope global|shard:N; value adaptive or admissions per second
	Route           = "route"            // scope gateway/METHOD; value "weight,on|off"
	WindowClosesAt  = "window_closes_at" // scope shard:N; value RFC 3339 time
	ShardMode       = "shard_mode"       // scope shard:N; value direct|queue (only before its window opens)
	ShardThrottle   = "shard_throttle"   // scope global|shard:N; value off or hold calls (and, apart, payment initiations) per second
	ShardFrozen     = "shard_frozen"     // scope shard:N; value on|off (on: no new holds, payment starts nor admissions)
)

// SeatAlarm is the alarm kind the invariant watch (console/alarms) raises
// for a shard whose seat invariants are broken, pulling its freeze; while
// one is open, thawing the shard takes a second admin.
const SeatAlarm = "seat_invariant"

// Bounds and ceilings.
const (
	HoldWindowMin    = 60
	HoldWindowMax    = 900
	AdmissionMax     = 20000
	AdmissionCeiling = 5000 // above this, a second admin approves
	RouteWeightMax   = 1000
	ThrottleMin      = 1
	ThrottleMax      = 20000
	ThrottleCeiling  = 5000 // above this, a second admin approves, as for admission
	// A window may close at most this long after it opened.
	WindowMaxLength = 12 * time.Hour
)

// Kill switch scopes.
var KillScopes = []string{"WAITLIST", "CARD", "NB", "NON_ESSENTIAL"}

// HoldWindowMethods are the methods whose hold window may be set.
var HoldWindowMethods = []string{"WALLET", "UPI", "CARD", "NB"}

// Def describes one lever.
type Def struct {
	Name  string
	Title string
	Help  string
	Min   *int64
	Max   *int64
	// Scopes says which scopes the lever takes, for the console's form.
	Scopes string
}

// Defs lists every lever, in the order the console shows them.
var Defs = []Def{
	{Name: KillSwitch, Title: "Kill switch", Help: "on turns the feature off everywhere within a second: WAITLIST (no TQWL offered), CARD and NB (payments refused), NON_ESSENTIAL."},
	{Name: HoldWindow, Title: "Hold window per payment method", Help: "seconds seats stay held once a payment by this method starts", Min: ptr(HoldWindowMin), Max: ptr(HoldWindowMax)},
	{Name: AdmissionPaused, Title: "Pause admission", Help: "on stops the waiting room admitting anyone to this shard (or all)"},
	{Name: AdmissionRate, Title: "Admission rate", Help: "admissions per second, or adaptive; above 5,000 needs a second admin", Min: ptr(0), Max: ptr(AdmissionMax)},
	{Name: Route, Title: "Payment route weight", Help: "weight 0-1000 and on/off; turning off the last route of a method needs a second admin", Min: ptr(0), Max: ptr(RouteWeightMax)},
	{Name: WindowClosesAt, Title: "Hold or extend a window", Help: "when the shard's Tatkal window closes; always needs a second admin"},
	{Name: ShardThrottle, Title: "Throttle holds and payments", Help: "off, or at most this many hold calls a second, and as many payment initiations, reach the booking core for the shard (global: for each shard without its own); the rest are told to retry in a second; above 5,000 needs a second admin", Min: ptr(ThrottleMin), Max: ptr(ThrottleMax)},
	{Name: ShardFrozen, Title: "Freeze a shard", Help: "on refuses the shard's new holds and payment starts, and admits no one to it, while its seats are put right; the invariant watch turns it on by itself when Redis and PostgreSQL disagree; turning it off while the shard's seat alarm is open needs a second admin", Scopes: "shard:N"},
	{Name: ShardMode, Title: "Waiting room or direct", Help: "queue sends the shard's passengers through the waiting room, direct lets them hold at once (load shedding applies); only before the window opens"},
	{Name: Rule, Title: "Tatkal rules and fraud thresholds", Help: "a rule's value in its unit (rules.go); one that loosens a limit needs a second admin", Scopes: ruleScopes()},
	{Name: AvailabilityStaleness, Title: "Availability staleness", Help: "milliseconds an availability answer is served from the cache (default 1000)", Min: ptr(StalenessMin), Max: ptr(StalenessMax), Scopes: "global"},
	{Name: PollSlowdown, Title: "Slow queue polling", Help: "off, or a multiplier 2-10 of poll_after_ms for those waiting", Min: ptr(2), Max: ptr(PollSlowdownMax), Scopes: "global, shard:N"},
	{Name: LightForm, Title: "Single-step booking form", Help: "on: the booking page asks passengers and payment method in one step", Scopes: "global, shard:N"},
}

func ptr(n int64) *int64 { return &n }

// wordOrCount normalises a rate lever's value: word (any case), or a whole
// number from lo to hi; anything else is refused with msg.
func wordOrCount(value, word string, lo, hi int64, msg string) (string, error) {
	v := strings.ToLower(strings.TrimSpace(value))
	if v == word {
		return v, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		return "", invalid("%s", msg)
	}
	return strconv.FormatInt(n, 10), nil
}

// DefOf returns the definition of name.
func DefOf(name string) (Def, bool) {
	for _, d := range Defs {
		if d.Name == name {
			return d, true
		}
	}
	return Def{}, false
}

// Proposal is a requested change.
type Proposal struct {
	Name        string
	Scope       string
	Value       string
	Reason      string
	Confirm     string        // must equal ConfirmWord(Name, Scope)
	RevertAfter time.Duration // 0: never
}

// ConfirmWord is what a person types to confirm a change.
func ConfirmWord(name, scope string) string { return name + " " + scope }

// Preview is what a change would do.
type Preview struct {
	Name, Scope   string
	Old, New      string
	Dangerous     bool
	Effect        string
	ConfirmWord   string
	RevertAfter   time.Duration
	DangerousWhy  string
	OldIsDefault  bool
	NeedsApproval bool
}

func invalid(format string, args ...any) error {
	return booking.Errorf(booking.EINVALID, "BAD_LEVER", format, args...)
}

func onOff(v string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "on", "true", "1", "yes":
		return "on", nil
	case "off", "false", "0", "no":
		return "off", nil
	}
	return "", invalid("Give on or off.")
}

// shardScope parses "shard:N" or, when global is allowed, "global".
func shardScope(scope string, global bool) (int64, error) {
	if global && scope == "global" {
		return 0, nil
	}
	n, err := strconv.ParseInt(strings.TrimPrefix(scope, "shard:"), 10, 64)
	if !strings.HasPrefix(scope, "shard:") || err != nil || n <= 0 {
		if global {
			return 0, invalid("Scope %q: give global or shard:N.", scope)
		}
		return 0, invalid("Scope %q: give shard:N.", scope)
	}
	return n, nil
}

// normalize checks a proposal's scope and value against the lever's bounds
// and returns the value in its stored form.
func normalize(ctx context.Context, q db.Querier, p Proposal) (string, error) {
	switch p.Name {
	case KillSwitch:
		if !contains(KillScopes, p.Scope) {
			return "", invalid("Kill switches are %s.", strings.Join(KillScopes, ", "))
		}
		return onOff(p.Value)
	case HoldWindow:
		if !contains(HoldWindowMethods, p.Scope) {
			return "", invalid("Hold windows are set per method: %s.", strings.Join(HoldWindowMethods, ", "))
		}
		n, err := strconv.ParseInt(strings.TrimSpace(p.Value), 10, 64)
		if err != nil || n < HoldWindowMin || n > HoldWindowMax {
			return "", invalid("A hold window is %d to %d seconds.", HoldWindowMin, HoldWindowMax)
		}
		return strconv.FormatInt(n, 10), nil
	case AdmissionPaused:
		if _, err := shardScopeExists(ctx, q, p.Scope, true); err != nil {
			return "", err
		}
		return onOff(p.Value)
	case AdmissionRate:
		if _, err := shardScopeExists(ctx, q, p.Scope, true); err != nil {
			return "", err
		}
		return wordOrCount(p.Value, "adaptive", 0, AdmissionMax, fmt.Sprintf("An admission rate is adaptive or 0 to %d per second.", AdmissionMax))
	case ShardThrottle:
		if _, err := shardScopeExists(ctx, q, p.Scope, true); err != nil {
			return "", err
		}
		return wordOrCount(p.Value, "off", ThrottleMin, ThrottleMax, fmt.Sprintf("A throttle is off or %d to %d calls per second.", ThrottleMin, ThrottleMax))
	case ShardFrozen:
		if _, err := shardScopeExists(ctx, q, p.Scope, false); err != nil {
			return "", err
		}
		return onOff(p.Value)
	case Route:
		gw, method, ok := strings.Cut(p.Scope, "/")
		if !ok {
			return "", invalid("A route is gateway/METHOD, for example swiftpay/CARD.")
		}
		var exists bool
		if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM payment_routes WHERE gateway = $1 AND method = $2)`, gw, method).Scan(&exists); err != nil {
			return "", fmt.Errorf("route exists: %w", err)
		}
		if !exists {
			return "", invalid("No payment route %s.", p.Scope)
		}
		w, en, err := parseRoute(p.Value)
		if err != nil {
			return "", err
		}
		return formatRoute(w, en), nil
	case WindowClosesAt:
		id, err := shardScope(p.Scope, false)
		if err != nil {
			return "", err
		}
		t, err := time.Parse(time.RFC3339, strings.TrimSpace(p.Value))
		if err != nil {
			return "", invalid("Give the closing time as 2006-01-02T15:04:05+05:30.")
		}
		var opens time.Time
		err = q.QueryRow(ctx, `SELECT window_opens_at FROM inventory_shards WHERE id = $1`, id).Scan(&opens)
		if err == pgx.ErrNoRows {
			return "", invalid("No shard %d.", id)
		}
		if err != nil {
			return "", fmt.Errorf("shard window: %w", err)
		}
		if t.Before(opens) || t.After(opens.Add(WindowMaxLength)) {
			return "", invalid("A window closes between its opening (%s) and 12 hours after it.", opens.In(booking.IST).Format("02 Jan 15:04 IST"))
		}
		return t.UTC().Format(time.RFC3339), nil
	case ShardMode:
		id, err := shardScope(p.Scope, false)
		if err != nil {
			return "", err
		}
		v := strings.ToLower(strings.TrimSpace(p.Value))
		if v != "direct" && v != "queue" {
			return "", invalid("A shard's mode is direct or queue.")
		}
		var opens time.Time
		err = q.QueryRow(ctx, `SELECT window_opens_at FROM inventory_shards WHERE id = $1`, id).Scan(&opens)
		if err == pgx.ErrNoRows {
			return "", invalid("No shard %d.", id)
		}
		if err != nil {
			return "", fmt.Errorf("shard window: %w", err)
		}
		if !time.Now().Before(opens) {
			return "", invalid("Shard %d's window opened at %s; its mode can only change before that.", id, opens.In(booking.IST).Format("02 Jan 15:04 IST"))
		}
		return v, nil
	case Rule:
		return normalizeRule(p)
	case PollSlowdown, LightForm:
		if _, err := shardScopeExists(ctx, q, p.Scope, true); err != nil {
			return "", err
		}
		return normalizeDegrade(p)
	case AvailabilityStaleness:
		return normalizeDegrade(p)
	}
	return "", invalid("No lever %q.", p.Name)
}

func shardScopeExists(ctx context.Context, q db.Querier, scope string, global bool) (int64, error) {
	id, err := shardScope(scope, global)
	if err != nil || id == 0 {
		return id, err
	}
	var ok bool
	if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM inventory_shards WHERE id = $1)`, id).Scan(&ok); err != nil {
		return 0, fmt.Errorf("shard exists: %w", err)
	}
	if !ok {
		return 0, invalid("No shard %d.", id)
	}
	return id, nil
}

func parseRoute(v string) (int, bool, error) {
	w, en, ok := strings.Cut(strings.TrimSpace(v), ",")
	n, err := strconv.Atoi(strings.TrimSpace(w))
	if !ok || err != nil || n < 0 || n > RouteWeightMax {
		return 0, false, invalid("A route is weight,on|off with weight 0 to %d, for example 60,on.", RouteWeightMax)
	}
	s, err := onOff(en)
	if err != nil {
		return 0, false, err
	}
	return n, s == "on", nil
}

func formatRoute(w int, enabled bool) string {
	if enabled {
		return strconv.Itoa(w) + ",on"
	}
	return strconv.Itoa(w) + ",off"
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// Defaults of levers with no row.
func defaultValue(name, scope string) string {
	switch name {
	case KillSwitch, AdmissionPaused, ShardThrottle, ShardFrozen, PollSlowdown, LightForm:
		return "off"
	case AdmissionRate:
		return "adaptive"
	case HoldWindow:
		return ""
	}
	return ""
}
