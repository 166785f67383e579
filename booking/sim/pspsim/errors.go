package pspsim

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"tatkal/booking/payment/pspapi"
)

// apiError is an answer the caller is meant to see: status, stable code,
// message.
type apiError struct {
	status int
	code   string
	msg    string
}

func (e *apiError) Error() string { return e.code + ": " + e.msg }

func invalid(format string, args ...any) error {
	return &apiError{status: http.StatusBadRequest, code: pspapi.CodeInvalid, msg: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) error {
	return &apiError{status: http.StatusNotFound, code: pspapi.CodeNotFound, msg: fmt.Sprintf(format, args...)}
}

func conflict(code, format string, args ...any) error {
	return &apiError{status: http.StatusConflict, code: code, msg: fmt.Sprintf(format, args...)}
}

func unprocessable(code, format string, args ...any) error {
	return &apiError{status: http.StatusUnprocessableEntity, code: code, msg: fmt.Sprintf(format, args...)}
}

func unavailable(gw, method string) error {
	return &apiError{status: http.StatusServiceUnavailable, code: pspapi.CodeUnavailable,
		msg: fmt.Sprintf("%s is unavailable for %s; retry later", gw, method)}
}

// api adapts a handler that returns an error to http.HandlerFunc.
func (s *Server) api(h func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			writeError(w, r, s.log, err)
		}
	}
}

// writeError answers err as JSON. Anything that is not an apiError is
// logged and shown as an internal error; a caller that went away gets
// nothing.
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	var ae *apiError
	if errors.Is(err, errClosing) {
		ae = &apiError{status: http.StatusServiceUnavailable, code: pspapi.CodeUnavailable, msg: "the gateway is shutting down; retry later"}
	}
	if ae == nil && !errors.As(err, &ae) {
		if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
			return
		}
		log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		ae = &apiError{status: http.StatusInternalServerError, code: pspapi.CodeInternal, msg: "internal error"}
	}
	switch ae.status {
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", "1")
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="psp"`)
	}
	writeJSON(w, ae.status, pspapi.ErrorBody{Error: ae.msg, Code: ae.code})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v) //nolint:errcheck // the client may be gone
}

const maxBody = 64 << 10

// decodeJSON reads exactly one JSON object with no unknown fields into v.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return invalid("request body is not the expected JSON object: %v", err)
	}
	if dec.More() {
		return invalid("request body has data after the JSON object")
	}
	return nil
}

// bearer reports whether r carries "Authorization: Bearer want".
func bearer(r *http.Request, want string) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// requireAPIKey admits calls to /gw/{gw}/v1 that carry that gateway's key.
func (s *Server) requireAPIKey(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gw, ok := s.gateways[chiParam(r, "gw")]
		if !ok {
			writeError(w, r, s.log, notFound("unknown gateway %q", chiParam(r, "gw")))
			return
		}
		if !slices.ContainsFunc(gw.APIKeys, func(k string) bool { return bearer(r, k) }) {
			writeError(w, r, s.log, &apiError{status: http.StatusUnauthorized, code: pspapi.CodeUnauthorized,
				msg: "send Authorization: Bearer <api key> of gateway " + gw.ID})
			return
		}
		next.ServeHTTP(w, r)
	})
}
