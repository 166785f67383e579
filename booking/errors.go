package booking

import (
	"errors"
	"fmt"
)

// Code is a stable, machine-readable error class shared by the API, the
// console and the CLI. API clients branch on it; people read Message.
type Code string

const (
	EINVALID    Code = "invalid"      // the request is malformed or breaks a rule
	EUNAUTH     Code = "unauthorized" // no valid session
	EFORBIDDEN  Code = "forbidden"    // valid session, not allowed
	ENOTFOUND   Code = "not_found"    // no such thing (or not yours)
	ECONFLICT   Code = "conflict"     // the state forbids it now
	ELIMIT      Code = "limit"        // a per-user limit is reached
	EUNAVAIL    Code = "unavailable"  // try again shortly; nothing changed
	EOVERLOADED Code = "overloaded"   // shed at the door; try again later
	EINTERNAL   Code = "internal"     // our fault; details only in the log
)

// Error is a failure a person may see. Reason refines Code for clients that
// want more precision (for example "LIVE_HOLD_EXISTS" under ELIMIT).
type Error struct {
	Code    Code
	Reason  string
	Message string
}

func (e *Error) Error() string {
	if e.Reason != "" {
		return fmt.Sprintf("%s (%s): %s", e.Code, e.Reason, e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Errorf builds an *Error.
func Errorf(code Code, reason, format string, args ...any) *Error {
	return &Error{Code: code, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// HighDemand is the refusal given alike to overload, rate limits and
// suspected bots, so an automated client learns nothing from it. Every
// server writes it as the same bytes (booking/api/reply).
func HighDemand() error {
	return Errorf(EOVERLOADED, "HIGH_DEMAND", "Very high demand right now. Nothing was lost; please retry in a few seconds.")
}

// IsHighDemand reports whether err is the high-demand refusal.
func IsHighDemand(err error) bool { return ErrorReason(err) == "HIGH_DEMAND" }

// ErrorCode returns the code of the first *Error in err's chain, or
// EINTERNAL for anything else (nil gives "").
func ErrorCode(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage returns the human message of err, hiding internal details.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "Internal error."
}

// ErrorReason returns the refined reason of err, if any.
func ErrorReason(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

// ReasonKeyReused refuses an idempotency key sent again with a different
// request (a hold's or a payment's), answered 422 as Stripe does; nothing
// is changed.
const ReasonKeyReused = "IDEMPOTENCY_KEY_REUSED"
