package api

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"

	"tatkal/booking"
	"tatkal/booking/payment"
)

// problem is an RFC 9457 problem document with our stable code.
type problem struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Code     string `json:"code"`
	Reason   string `json:"reason,omitempty"`
	Detail   string `json:"detail"`
	Instance string `json:"instance,omitempty"`
}

func httpStatus(code booking.Code) int {
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

func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	code := booking.ErrorCode(err)
	status := httpStatus(code)
	if booking.ErrorReason(err) == payment.ReasonKeyReused {
		// An idempotency key sent again with another request (as Stripe answers it).
		status = http.StatusUnprocessableEntity
	}
	if code == booking.EINTERNAL {
		log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	if status == http.StatusServiceUnavailable && w.Header().Get("Retry-After") == "" {
		w.Header().Set("Retry-After", "1")
	}
	p := problem{
		Type:   "https://tatkal.example/problems/" + string(code),
		Title:  http.StatusText(status),
		Status: status,
		Code:   string(code),
		Reason: booking.ErrorReason(err),
		Detail: booking.ErrorMessage(err),
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(p) //nolint:errcheck
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v) //nolint:errcheck
}

const maxBody = 16 << 10

// decode reads exactly one JSON object of at most 16 KiB with no unknown
// fields into v, or says precisely what is wrong with it.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return booking.Errorf(booking.EINVALID, "BAD_CONTENT_TYPE", "Send the body as Content-Type: application/json.")
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	var syntax *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	var tooBig *http.MaxBytesError
	switch {
	case err == nil:
	case errors.As(err, &tooBig):
		return booking.Errorf(booking.EINVALID, "BODY_TOO_LARGE", "The request body is larger than %d bytes.", maxBody)
	case errors.Is(err, io.EOF):
		return booking.Errorf(booking.EINVALID, "EMPTY_BODY", "The request body is empty; send a JSON object.")
	case errors.As(err, &syntax), errors.Is(err, io.ErrUnexpectedEOF):
		return booking.Errorf(booking.EINVALID, "MALFORMED_JSON", "The request body is not valid JSON.")
	case errors.As(err, &typeErr):
		return booking.Errorf(booking.EINVALID, "WRONG_TYPE", "Field %q must be a %s.", typeErr.Field, typeErr.Type.String())
	default:
		if msg := err.Error(); len(msg) > 20 && msg[:20] == "json: unknown field " {
			return booking.Errorf(booking.EINVALID, "UNKNOWN_FIELD", "Unknown field %s.", msg[20:])
		}
		return booking.Errorf(booking.EINVALID, "MALFORMED_JSON", "The request body could not be read: %v", err)
	}
	if dec.Decode(&struct{}{}) != io.EOF {
		return booking.Errorf(booking.EINVALID, "MALFORMED_JSON", "Send exactly one JSON object.")
	}
	return nil
}
