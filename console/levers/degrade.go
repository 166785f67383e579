package levers

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"tatkal/booking/admission"
)

// The degradation ladder's levers (the seed design's "capacity and
// degradation"), beside the NON_ESSENTIAL kill switch: staler
// availability, slower waiting-room polling, and the single-step booking
// form for hot trains. None needs a second admin: each sheds load and
// takes nothing from anyone.
const (
	PollSlowdown          = "poll_slowdown"          // scope global|shard:N; value off or a multiplier 2-10 of poll_after_ms
	AvailabilityStaleness = "availability_staleness" // scope global; value milliseconds an availability answer is served from the cache
	LightForm             = "light_form"             // scope global|shard:N; value on|off
)

// Bounds of the degradation levers.
const (
	PollSlowdownMax = 10
	StalenessMin    = 250   // ms: below this the cache saves little
	StalenessMax    = 10000 // ms: older bands mislead more than they help
	// StalenessDefault is the availability cache's age when no lever is set.
	StalenessDefault = time.Second
)

func normalizeDegrade(p Proposal) (string, error) {
	switch p.Name {
	case AvailabilityStaleness:
		if p.Scope != "global" {
			return "", invalid("Availability staleness is set for all shards: scope global.")
		}
		n, err := strconv.ParseInt(strings.TrimSpace(p.Value), 10, 64)
		if err != nil || n < StalenessMin || n > StalenessMax {
			return "", invalid("Availability staleness is %d to %d milliseconds.", StalenessMin, StalenessMax)
		}
		return strconv.FormatInt(n, 10), nil
	case PollSlowdown:
		return wordOrCount(p.Value, "off", 2, PollSlowdownMax,
			fmt.Sprintf("Poll slowdown is off or a multiplier from 2 to %d.", PollSlowdownMax))
	case LightForm:
		return onOff(p.Value)
	}
	return "", invalid("No lever %q.", p.Name)
}

func degradeEffect(name, scope, old, v string) string {
	switch name {
	case AvailabilityStaleness:
		return fmt.Sprintf("Availability answers are served from each process's cache for up to %s ms (was %s).", v, display(old))
	case PollSlowdown:
		if v == "off" {
			return fmt.Sprintf("Waiters on %s poll at the pace the waiting room computes (was %s).", scope, display(old))
		}
		return fmt.Sprintf("Waiters on %s are told to poll %s times less often (poll_after_ms times %s, at most %s).", scope, v, v, admission.PollSlowdownCeiling)
	case LightForm:
		if v == "on" {
			return fmt.Sprintf("The booking page of %s becomes the single-step form: passengers and payment method on one page.", scope)
		}
		return fmt.Sprintf("The booking page of %s goes back to the full form, unless a global light_form is on.", scope)
	}
	return ""
}

// PollSlowdown is the multiplier of the waiting room's poll_after_ms for
// the shard: its own, else the global one; 1 when neither is set.
func (r *Reader) PollSlowdown(shardID int64) int {
	n, ok := r.shardInt(PollSlowdown, shardID, "off")
	if !ok || n < 1 {
		return 1
	}
	return n
}

// AvailabilityStaleness is how long an availability answer may be served
// from the cache; ok is false when no lever sets it.
func (r *Reader) AvailabilityStaleness() (time.Duration, bool) {
	v, ok := r.get(AvailabilityStaleness, "global")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, false
	}
	return time.Duration(n) * time.Millisecond, true
}

// LightForm reports whether the shard's booking page is the single-step
// form: on for the shard or for all.
func (r *Reader) LightForm(shardID int64) bool {
	return r.on(LightForm, "global") || r.on(LightForm, "shard:"+strconv.FormatInt(shardID, 10))
}
