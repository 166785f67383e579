package api

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"

	"tatkal/booking"
)

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
