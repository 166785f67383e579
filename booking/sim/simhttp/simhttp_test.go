package simhttp_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"tatkal/booking/sim/simhttp"
)

type body struct {
	Code, Message string
}

var dialect = simhttp.Dialect{
	BadRequest: func(msg string) any { return body{"BAD", msg} },
	Internal:   body{"INTERNAL", "internal error"},
}

func request(method, payload string) *http.Request {
	r := httptest.NewRequest(method, "/x", strings.NewReader(payload))
	r.Header.Set("Authorization", "Bearer right")
	return r
}

// Decode takes one JSON object within the bound and nothing else; every
// refusal is a BadRequest the party words for the caller.
func TestDecode(t *testing.T) {
	t.Parallel()
	for payload, want := range map[string]string{
		`{"rate":0.5}`:          "",
		` {"rate":0.5} ` + "\n": "",
		``:                      "EOF",
		`{"rate":`:              "unexpected EOF",
		`{"rate":0.5,"rat":1}`:  `unknown field "rat"`,
		`{"rate":0.5}{}`:        "data after the object",
		`{"rate":0.5}]`:         "data after the object",
		`{"rate":"` + strings.Repeat("9", 100) + `"}`: "too large",
	} {
		var k knob
		err := simhttp.Decode(httptest.NewRecorder(), request("PUT", payload), &k, 64)
		var br *simhttp.BadRequest
		switch {
		case want == "" && (err != nil || k.Rate != 0.5):
			t.Errorf("%.20q: %v %+v", payload, err, k)
		case want != "" && (!errors.As(err, &br) || !strings.Contains(err.Error(), want)):
			t.Errorf("%.20q: %v, want a BadRequest saying %q", payload, err, want)
		}
	}
}

// An empty token admits nobody; a refusal names the realm.
func TestRequireBearer(t *testing.T) {
	t.Parallel()
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	for _, c := range []struct {
		token, header string
		want          int
	}{
		{"right", "Bearer right", 204},
		{"right", "Bearer wrong", 401},
		{"right", "Bearer righ", 401},
		{"right", "bearer right", 401},
		{"right", "right", 401},
		{"right", "", 401},
		{"", "Bearer ", 401},
		{"", "", 401},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		if c.header != "" {
			r.Header.Set("Authorization", c.header)
		}
		w := httptest.NewRecorder()
		simhttp.RequireBearer("sim", []byte(c.token), body{"NO", "no"})(ok).ServeHTTP(w, r)
		if w.Code != c.want {
			t.Errorf("token %q, header %q: %d, want %d", c.token, c.header, w.Code, c.want)
		}
		if c.want == 401 && (w.Header().Get("WWW-Authenticate") != `Bearer realm="sim"` || w.Body.String() != `{"Code":"NO","Message":"no"}`+"\n") {
			t.Errorf("refusal %v %q", w.Header(), w.Body)
		}
	}
}

// Only a 503 tells the caller when to retry.
func TestErrorRetryAfter(t *testing.T) {
	t.Parallel()
	for status, want := range map[int]string{503: "1", 500: "", 400: "", 409: ""} {
		w := httptest.NewRecorder()
		simhttp.Error(w, status, body{"X", "x"})
		if w.Code != status || w.Header().Get("Retry-After") != want || w.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%d: %d %v", status, w.Code, w.Header())
		}
	}
}

// A bad request is answered in the party's words, with its own message
// (not what callers wrapped it in); an internal error is
// logged and hidden; nothing is answered to a caller that left.
func TestDialectFail(t *testing.T) {
	t.Parallel()
	var log strings.Builder
	d := dialect
	d.Log = slog.New(slog.NewTextHandler(&log, nil))

	w := httptest.NewRecorder()
	d.Fail(w, request("GET", ""), fmt.Errorf("read: %w", &simhttp.BadRequest{Err: errors.New("pnr is required")}))
	if w.Code != 400 || w.Body.String() != `{"Code":"BAD","Message":"pnr is required"}`+"\n" {
		t.Errorf("bad request: %d %s", w.Code, w.Body)
	}

	w = httptest.NewRecorder()
	d.Fail(w, request("GET", ""), errors.New("pq: secret detail"))
	if w.Code != 500 || strings.Contains(w.Body.String(), "secret") || !strings.Contains(log.String(), "secret detail") {
		t.Errorf("internal: %d %s; log %s", w.Code, w.Body, log.String())
	}

	log.Reset()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w = httptest.NewRecorder()
	d.Fail(w, request("GET", "").WithContext(ctx), fmt.Errorf("query: %w", context.Canceled))
	if w.Body.Len() != 0 || log.Len() != 0 {
		t.Errorf("caller gone: answered %q, logged %q", w.Body, log.String())
	}
}

type knob struct {
	Rate float64 `json:"rate"`
}

func (k knob) Validate() error {
	if k.Rate < 0 || k.Rate > 1 {
		return errors.New("rate must be in [0,1]")
	}
	return nil
}

// A setting is replaced whole by a body that decodes and validates, and
// answered as stored; anything else changes nothing.
func TestSetting(t *testing.T) {
	t.Parallel()
	d := dialect
	d.Log = slog.New(slog.DiscardHandler)
	stored := knob{Rate: 0.1}
	var saveErr error
	s := simhttp.Setting[knob]{
		Name: "knob", Limit: 1 << 10, Log: d.Log, Fail: d.Fail,
		Load: func(*http.Request) (knob, error) { return stored, nil },
		Save: func(_ *http.Request, k knob) error {
			if saveErr != nil {
				return saveErr
			}
			stored = k
			return nil
		},
	}
	put := func(payload string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		s.Put(w, request("PUT", payload))
		return w
	}
	for payload, want := range map[string]string{
		`{"rate":2}`:         `{"Code":"BAD","Message":"invalid knob: rate must be in [0,1]"}`,
		`{"rate":0.5,"x":1}`: `unknown field`,
		`{"rate":0.5}{}`:     `data after the object`,
		`[]`:                 `cannot unmarshal array`,
	} {
		if w := put(payload); w.Code != 400 || !strings.Contains(w.Body.String(), want) {
			t.Errorf("%s: %d %s, want 400 saying %s", payload, w.Code, w.Body, want)
		}
	}
	saveErr = errors.New("disk full")
	if w := put(`{"rate":0.5}`); w.Code != 500 || stored.Rate != 0.1 {
		t.Errorf("failed save: %d %s, stored %+v", w.Code, w.Body, stored)
	}
	saveErr = nil
	if w := put(`{"rate":0.5}`); w.Code != 200 || w.Body.String() != `{"rate":0.5}`+"\n" || stored.Rate != 0.5 {
		t.Errorf("good put: %d %s, stored %+v", w.Code, w.Body, stored)
	}
	w := httptest.NewRecorder()
	s.Get(w, request("GET", ""))
	if w.Code != 200 || w.Body.String() != `{"rate":0.5}`+"\n" {
		t.Errorf("get: %d %s", w.Code, w.Body)
	}
}
