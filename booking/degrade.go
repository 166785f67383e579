package booking

import "time"

// The degradation ladder and rules as data, as the booking paths see
// them: the operator's levers (console/levers) read through Levers.

// ReasonSwitchedOff is a non-essential feature the NON_ESSENTIAL kill
// switch turned off for the peak.
const ReasonSwitchedOff = "SWITCHED_OFF"

// SwitchedOffRetry is the Retry-After of a switched-off feature: a peak
// lasts minutes, so there is no point in coming back sooner.
const SwitchedOffRetry = 5 * time.Minute

// SwitchedOff is the answer of a non-essential feature (what, e.g. "The
// e-ticket PDF") while the NON_ESSENTIAL kill switch is on: a 503 that
// says so plainly and when to come back.
func SwitchedOff(what string) error {
	e := Errorf(EUNAVAIL, ReasonSwitchedOff, "%s is temporarily switched off during peak booking, to keep booking fast for everyone. Please try again later.", what)
	e.RetryAfter = SwitchedOffRetry
	return e
}

// Rules returns the rules in force: those the process was configured
// with, under the operators' changes (the rule lever), fresh within a
// second on every process.
func (s *Service) Rules() Rules {
	if s.levers == nil {
		return s.rules
	}
	return s.levers.Rules(s.rules)
}

// NonEssentialEnabled reports whether non-essential features (suggested
// alternatives, e-ticket PDFs, chart details, booking history) may run.
func (s *Service) NonEssentialEnabled() bool {
	return s.levers == nil || s.levers.NonEssentialEnabled()
}

// LightForm reports whether the shard's booking page is the single-step
// form (the light_form lever).
func (s *Service) LightForm(shardID int64) bool {
	return s.levers != nil && s.levers.LightForm(shardID)
}

// availTTL is how long an availability answer is served from the cache:
// the availability_staleness lever, else the default second.
func (s *Service) availTTL() time.Duration {
	if s.levers != nil {
		if d, ok := s.levers.AvailabilityStaleness(); ok {
			return min(d, availCacheMaxAge)
		}
	}
	return s.avail.ttl
}
