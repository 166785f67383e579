package pspsim

import (
	"errors"
	"fmt"
	"net/http"
	"slices"

	"tatkal/booking/payment/pspapi"
	"tatkal/booking/sim/simhttp"
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
			s.writeError(w, r, err)
		}
	}
}

// writeError answers err as JSON: an apiError as it says, a bad body as
// INVALID_REQUEST, anything else as an internal error (see
// simhttp.Dialect.Fail).
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apiError
	if errors.Is(err, errClosing) {
		ae = &apiError{status: http.StatusServiceUnavailable, code: pspapi.CodeUnavailable, msg: "the gateway is shutting down; retry later"}
	}
	if ae == nil && !errors.As(err, &ae) {
		s.dialect.Fail(w, r, err)
		return
	}
	if ae.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="psp"`)
	}
	simhttp.Error(w, ae.status, pspapi.ErrorBody{Error: ae.msg, Code: ae.code})
}

// maxBody bounds a request body.
const maxBody = 64 << 10

// requireAPIKey admits calls to /gw/{gw}/v1 that carry that gateway's key.
func (s *Server) requireAPIKey(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gw, ok := s.gateways[chiParam(r, "gw")]
		if !ok {
			s.writeError(w, r, notFound("unknown gateway %q", chiParam(r, "gw")))
			return
		}
		if !slices.ContainsFunc(gw.APIKeys, func(k string) bool { return simhttp.Bearer(r, []byte(k)) }) {
			s.writeError(w, r, &apiError{status: http.StatusUnauthorized, code: pspapi.CodeUnauthorized,
				msg: "send Authorization: Bearer <api key> of gateway " + gw.ID})
			return
		}
		next.ServeHTTP(w, r)
	})
}
