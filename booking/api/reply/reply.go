// Package reply writes every JSON answer of /v1, the passenger API and
// /v1/admin alike: one problem document format (RFC 9457 with our stable
// code and reason), one status per code, and one high-demand answer.
package reply

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"tatkal/booking"
	"tatkal/booking/payment"
)

// Problem is an RFC 9457 problem document: Code is booking's error class,
// Reason refines it (for example "LIVE_HOLD_EXISTS").
type Problem struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Code     string `json:"code"`
	Reason   string `json:"reason,omitempty"`
	Detail   string `json:"detail"`
	Instance string `json:"instance,omitempty"`
}

// Status is the HTTP status of an error code.
func Status(code booking.Code) int {
	switch code {
	case booking.EINVALID:
		return http.StatusBadRequest
	case booking.EUNAUTH:
		return http.StatusUnauthorized
	case booking.EFORBIDDEN:
		return http.StatusForbidden
	case booking.ENOTFOUND:
		return http.StatusNotFound
	case booking.ECONFLICT:
		return http.StatusConflict
	case booking.ELIMIT:
		return http.StatusTooManyRequests
	case booking.EUNAVAIL, booking.EOVERLOADED:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// HighDemandRetryAfter is the Retry-After, in seconds, of every
// high-demand answer: overload, rate limits and suspected bots get the
// same one, so nobody can tell them apart from outside.
const HighDemandRetryAfter = 2

// highDemandBody is the high-demand answer, encoded once: the shed path
// writes it without any work.
var highDemandBody = encode(problemOf(booking.HighDemand()))

// ReasonUnsupportedMedia refuses a body of a type the API does not take
// (multipart: httpx.Bodies); answered 415, so a client knows to change
// the request, not its content.
const ReasonUnsupportedMedia = "UNSUPPORTED_MEDIA_TYPE"

func problemOf(err error) Problem {
	code := booking.ErrorCode(err)
	status := Status(code)
	switch booking.ErrorReason(err) {
	case payment.ReasonKeyReused:
		// An idempotency key sent again with another request (as Stripe answers it).
		status = http.StatusUnprocessableEntity
	case ReasonUnsupportedMedia:
		status = http.StatusUnsupportedMediaType
	}
	return Problem{
		Type:   "https://tatkal.example/problems/" + string(code),
		Title:  http.StatusText(status),
		Status: status,
		Code:   string(code),
		Reason: booking.ErrorReason(err),
		Detail: booking.ErrorMessage(err),
	}
}

func encode(p Problem) []byte {
	var b bytes.Buffer
	json.NewEncoder(&b).Encode(p) //nolint:errcheck // a Problem always encodes
	return b.Bytes()
}

// Error answers err as a problem document; internal errors are logged
// (with the request) and shown only as "Internal error.". A 503 carries
// Retry-After (1 s, or the error's own wait rounded up, unless the caller
// set one); the high-demand answer is
// always the same bytes with the same headers.
func Error(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	if booking.IsHighDemand(err) {
		h.Set("Retry-After", strconv.Itoa(HighDemandRetryAfter))
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write(highDemandBody) //nolint:errcheck
		return
	}
	p := problemOf(err)
	if log == nil {
		log = slog.Default()
	}
	switch {
	case p.Code == string(booking.EINTERNAL):
		log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	case booking.Unreachable(err):
		// Answered 503 to retry; the outage itself is worth a line.
		log.Warn("request failed: a store is unreachable", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	if p.Status == http.StatusServiceUnavailable && h.Get("Retry-After") == "" {
		secs := 1
		if d := booking.RetryAfterOf(err); d > time.Second {
			secs = int((d + time.Second - 1) / time.Second) // the next slot, rounded up
		}
		h.Set("Retry-After", strconv.Itoa(secs))
	}
	w.WriteHeader(p.Status)
	w.Write(encode(p)) //nolint:errcheck
}

// JSON answers v as JSON with status.
func JSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v) //nolint:errcheck
}
