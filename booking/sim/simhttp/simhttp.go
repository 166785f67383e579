// Package simhttp is the HTTP the simulators share (booking/sim/pspsim,
// prssim and msgsim): one bounded JSON object in, JSON answers out, bearer
// tokens, the liveness probe, waits that end when the caller leaves, and
// the settings of the admin API.
//
// What goes on the wire stays each simulated party's own: a simulator
// hands simhttp its party's error bodies (pspapi.ErrorBody, prs.ErrorBody,
// notify.ErrorBody) and its words for them in a Dialect, so the product's
// adapters keep talking to the protocol they were written for.
package simhttp

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

// JSON answers v as JSON with status.
func JSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v) //nolint:errcheck // the client may be gone
}

// Error answers an error body with status. A 503 says Retry-After: 1, so
// a caller told the party is down or busy knows it may come back.
func Error(w http.ResponseWriter, status int, body any) {
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	JSON(w, status, body)
}

// BadRequest is an error the caller made: a body that is not one JSON
// object of the expected shape and size, or a setting that does not
// validate. Its message is for the caller.
type BadRequest struct{ Err error }

func (e *BadRequest) Error() string { return e.Err.Error() }
func (e *BadRequest) Unwrap() error { return e.Err }

// Decode reads exactly one JSON object of at most limit bytes, with no
// unknown fields and nothing after it, into v. Every failure is a
// *BadRequest; an oversized body also makes the server close the
// connection rather than read the rest.
func Decode(w http.ResponseWriter, r *http.Request, v any, limit int64) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &BadRequest{fmt.Errorf("malformed JSON body: %w", err)}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return &BadRequest{errors.New("malformed JSON body: data after the object")}
	}
	return nil
}

// Bearer reports whether r carries "Authorization: Bearer want", compared
// in constant time. An empty want matches nothing.
func Bearer(r *http.Request, want []byte) bool {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && len(want) > 0 && subtle.ConstantTimeCompare([]byte(got), want) == 1
}

// RequireBearer admits requests carrying token; an empty token admits
// nobody. Others are answered 401 with WWW-Authenticate naming realm and
// the party's refusal body.
func RequireBearer(realm string, token []byte, refusal any) func(http.Handler) http.Handler {
	challenge := `Bearer realm="` + realm + `"`
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !Bearer(r, token) {
				w.Header().Set("WWW-Authenticate", challenge)
				Error(w, http.StatusUnauthorized, refusal)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// Health is GET /healthz: liveness only, untouched by faults, so a
// supervisor can tell a simulated outage from a dead process.
func Health(w http.ResponseWriter, _ *http.Request) {
	JSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// Sleep waits d or until ctx ends, reporting whether the full wait passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Dialect is how one simulated party words the errors it did not choose
// itself: a bad request, given its message, and an internal error.
type Dialect struct {
	Log        *slog.Logger
	BadRequest func(msg string) any
	Internal   any
}

// Fail answers err: a *BadRequest in its chain is 400 in the party's
// words, with the BadRequest's own message; anything else is logged and
// answered 500, the detail staying in the log. A caller that left gets
// nothing, since nobody would read it.
func (d Dialect) Fail(w http.ResponseWriter, r *http.Request, err error) {
	if br := (*BadRequest)(nil); errors.As(err, &br) {
		Error(w, http.StatusBadRequest, d.BadRequest(br.Error()))
		return
	}
	Internal(w, r, d.Log, err, d.Internal)
}

// Internal answers an error the caller did not cause: logged, then 500
// with body. Nothing is logged or answered for a caller that left.
func Internal(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error, body any) {
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return
	}
	log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	Error(w, http.StatusInternalServerError, body)
}

// Validator is a setting that says what is wrong with it, or nil.
type Validator interface{ Validate() error }

// Setting is one knob of a simulator's admin API, such as its faults: GET
// answers it; PUT replaces it whole with one JSON object that passes
// Validate and answers what was stored. A body that does not decode or
// validate is a *BadRequest and changes nothing.
type Setting[T Validator] struct {
	Name  string // for messages and the log: "faults", "settlement faults"
	Limit int64  // the PUT body's bound in bytes
	Log   *slog.Logger
	Load  func(r *http.Request) (T, error)
	Save  func(r *http.Request, v T) error
	// Fail answers an error from the body, Validate, Load or Save.
	Fail func(w http.ResponseWriter, r *http.Request, err error)
}

// Get is the GET handler.
func (s Setting[T]) Get(w http.ResponseWriter, r *http.Request) {
	v, err := s.Load(r)
	if err != nil {
		s.Fail(w, r, err)
		return
	}
	JSON(w, http.StatusOK, v)
}

// Put is the PUT handler.
func (s Setting[T]) Put(w http.ResponseWriter, r *http.Request) {
	var v T
	if err := Decode(w, r, &v, s.Limit); err != nil {
		s.Fail(w, r, err)
		return
	}
	if err := v.Validate(); err != nil {
		s.Fail(w, r, &BadRequest{fmt.Errorf("invalid %s: %w", s.Name, err)})
		return
	}
	if err := s.Save(r, v); err != nil {
		s.Fail(w, r, err)
		return
	}
	s.Log.WarnContext(r.Context(), s.Name+" set", "setting", v)
	JSON(w, http.StatusOK, v)
}
