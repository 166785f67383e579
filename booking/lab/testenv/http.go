package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
)

// Request is one call over HTTP as the tests make them: a JSON body or a
// form, a bearer token, a few headers.
type Request struct {
	Method, URL string
	Token       string            // sent as Authorization: Bearer
	Header      map[string]string // more headers; an empty value removes the header
	// Body is nil for none; a string or []byte is sent as it is (an empty
	// string is no body); url.Values as a form; anything else as JSON. A
	// request with a body says Content-Type: application/json (a form:
	// application/x-www-form-urlencoded).
	Body   any
	Client *http.Client    // nil: http.DefaultClient
	Ctx    context.Context // nil: none
}

// Reply is an answer read in full.
type Reply struct {
	Status int
	Header http.Header
	Raw    []byte
	// JSON is the body decoded as an object (nil when it is not one).
	JSON map[string]any
}

// Decode decodes the body into v.
func (r Reply) Decode(v any) error {
	if err := json.Unmarshal(r.Raw, v); err != nil {
		return fmt.Errorf("decode %T from %d %.200s: %w", v, r.Status, r.Raw, err)
	}
	return nil
}

// Do makes the request and reads the answer; it never needs a test, so
// goroutines other than the test's may call it.
func Do(q Request) (Reply, error) {
	var rd io.Reader
	contentType := "application/json"
	switch b := q.Body.(type) {
	case nil:
	case url.Values:
		rd, contentType = strings.NewReader(b.Encode()), "application/x-www-form-urlencoded"
	case string:
		if b != "" {
			rd = bytes.NewReader([]byte(b))
		}
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return Reply{}, fmt.Errorf("encode %T: %w", b, err)
		}
		rd = bytes.NewReader(raw)
	}
	ctx := q.Ctx
	if ctx == nil {
		ctx = context.Background()
	}
	req, err := http.NewRequestWithContext(ctx, q.Method, q.URL, rd)
	if err != nil {
		return Reply{}, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", contentType)
	}
	if q.Token != "" {
		req.Header.Set("Authorization", "Bearer "+q.Token)
	}
	for k, v := range q.Header {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	c := q.Client
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return Reply{}, fmt.Errorf("%s %s: %w", q.Method, q.URL, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return Reply{}, fmt.Errorf("read %s %s: %w", q.Method, q.URL, err)
	}
	r := Reply{Status: resp.StatusCode, Header: resp.Header, Raw: raw}
	json.Unmarshal(raw, &r.JSON) //nolint:errcheck // not every answer is an object
	return r, nil
}

// Call is Do for the test's own goroutine: a request that cannot be made
// or answered fails the test.
func Call(t testing.TB, q Request) Reply {
	t.Helper()
	r, err := Do(q)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// FormClient is an HTTP client as a browser without JavaScript is, for
// tests of pages, forms and redirects: it keeps cookies, and it returns a
// redirect instead of following it, so the test can look at it.
func FormClient() *http.Client {
	jar, _ := cookiejar.New(nil) // never fails: no options
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
