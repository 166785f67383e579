package booking

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/redis/go-redis/v9"
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
	// RetryAfter, on a 503, is when a retry may succeed (the next slot of a
	// throttle); zero leaves the writer's default.
	RetryAfter time.Duration
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

// ReasonThrottled is a call an operator's shard_throttle turned away before
// it reached the booking core.
const ReasonThrottled = "THROTTLED"

// Throttled is the refusal of a call over a shard's throttle: shed at the
// door like HIGH_DEMAND (EOVERLOADED, 503), but it names its reason, as it
// says nothing about the caller, and tells when the next slot comes.
func Throttled(message string, wait time.Duration) error {
	e := Errorf(EOVERLOADED, ReasonThrottled, "%s", message)
	e.RetryAfter = wait
	return e
}

// IsThrottled reports whether err is a throttle's refusal.
func IsThrottled(err error) bool { return ErrorReason(err) == ReasonThrottled }

// RetryAfterOf is the wait err asks for, if it names one.
func RetryAfterOf(err error) time.Duration {
	if e := asError(err); e != nil {
		return e.RetryAfter
	}
	return 0
}

// ErrorCode returns the code of the first *Error in err's chain,
// EUNAVAIL for a store that could not be reached (Unreachable), or
// EINTERNAL for anything else (nil gives "").
func ErrorCode(err error) Code {
	if err == nil {
		return ""
	}
	if e := asError(err); e != nil {
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage returns the human message of err, hiding internal details.
func ErrorMessage(err error) string {
	if e := asError(err); e != nil {
		return e.Message
	}
	return "Internal error."
}

// ErrorReason returns the refined reason of err, if any.
func ErrorReason(err error) string {
	if e := asError(err); e != nil {
		return e.Reason
	}
	return ""
}

// errUnreachable is how a failure to reach PostgreSQL or Redis is shown:
// a 503 with Retry-After, as the outage is brief (a restart, a failover)
// and a retry with the same Idempotency-Key is safe.
var errUnreachable = Errorf(EUNAVAIL, "UNREACHABLE", "The service is briefly unreachable; please retry in a moment.")

// asError is the first *Error in err's chain, errUnreachable for a store
// that could not be reached, or nil.
func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if Unreachable(err) {
		return errUnreachable
	}
	return nil
}

// Unreachable reports whether err says that PostgreSQL or Redis could not
// be reached or went away mid-request (refused, reset, shutting down,
// starting up, a cluster failing over), rather than that the request was
// wrong: such a request is retried, not reported as our fault.
func Unreachable(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Class 08 is connection exceptions; 57P01-03 are the server shutting
		// down or not yet accepting connections; 53300 is every connection
		// slot taken (a burst of clients, or a restart's reconnections).
		switch pgErr.Code {
		case "57P01", "57P02", "57P03", "53300":
			return true
		}
		return strings.HasPrefix(pgErr.Code, "08")
	}
	var connectErr *pgconn.ConnectError
	var opErr *net.OpError
	if errors.As(err, &connectErr) || errors.As(err, &opErr) || errors.Is(err, pgconn.ErrConnClosed) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	var redisErr redis.Error
	if errors.As(err, &redisErr) {
		// A cluster without a master for the slot, or a node still loading.
		msg := redisErr.Error()
		for _, p := range []string{"CLUSTERDOWN", "TRYAGAIN", "LOADING", "MASTERDOWN"} {
			if strings.HasPrefix(msg, p) {
				return true
			}
		}
	}
	return false
}

// ReasonKeyReused refuses an idempotency key sent again with a different
// request (a hold's or a payment's), answered 422 as Stripe does; nothing
// is changed.
const ReasonKeyReused = "IDEMPOTENCY_KEY_REUSED"
