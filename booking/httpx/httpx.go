// Package httpx holds what every HTTP server of tatkal shares: timeouts,
// the security headers of every page and the refusal of text no handler
// can store (NUL bytes, invalid UTF-8), applied once around the router.
package httpx

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"
)

// Timeouts of every server: a client that sends its request or reads its
// answer slower than this is cut off, so slow bodies cannot hold
// connections open. A websocket clears them after the upgrade and keeps
// its own ping deadline.
const (
	ReadHeaderTimeout = 5 * time.Second
	ReadTimeout       = 30 * time.Second
	WriteTimeout      = 60 * time.Second
	IdleTimeout       = 2 * time.Minute
)

// NewServer is an http.Server for h with every timeout set.
func NewServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: ReadHeaderTimeout, ReadTimeout: ReadTimeout,
		WriteTimeout: WriteTimeout, IdleTimeout: IdleTimeout, MaxHeaderBytes: 64 << 10}
}

// ClearDeadlines lifts the server's read and write deadlines from one
// long-lived connection (a websocket), which then needs its own.
func ClearDeadlines(w http.ResponseWriter) {
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Time{})  //nolint:errcheck // unsupported only for HTTP/2 pushes and recorders
	rc.SetWriteDeadline(time.Time{}) //nolint:errcheck
}

// StrictCSP lets a page load scripts, styles, images and connections from
// its own origin only, with no inline script, no framing and no foreign
// form targets.
const StrictCSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// InlineStyleCSP is StrictCSP but for inline styles, which third-party
// single-page UIs (River's, under /console/river/) inject at run time.
const InlineStyleCSP = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; " +
	"object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'"

// Headers sets the security headers on every answer: no framing, no
// content sniffing, no referrer (return URLs carry payment ids), the
// strict CSP (or csp[prefix] for a path under one of its prefixes, for
// third-party pages such as River's UI), and HSTS when browsers reach us
// over https.
func Headers(https bool, csp map[string]string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h := w.Header()
			h.Set("X-Frame-Options", "DENY")
			h.Set("X-Content-Type-Options", "nosniff")
			h.Set("Referrer-Policy", "no-referrer")
			policy := StrictCSP
			for prefix, p := range csp {
				if strings.HasPrefix(r.URL.Path, prefix) {
					policy = p
				}
			}
			h.Set("Content-Security-Policy", policy)
			if https {
				h.Set("Strict-Transport-Security", "max-age=63072000; includeSubDomains")
			}
			next.ServeHTTP(w, r)
		})
	}
}

// MaxTextBody bounds every request body but an upload's (Bodies), and so
// the body ValidText reads to check; a larger body is refused with 413
// (every handler's own limit is lower).
const MaxTextBody = 1 << 20

// ValidText refuses, before any handler runs, a request whose path, query
// string, headers, form or JSON body holds a NUL byte or invalid UTF-8: PostgreSQL
// stores neither, so such input would otherwise fail deep inside a
// handler as a 500, possibly after a partial write. reject answers (400,
// in the caller's error format) with a message naming the part. Binary
// bodies are the handler's to check; multipart ones reach only uploads
// (Bodies), whose fields CleanForm checks.
func ValidText(reject func(w http.ResponseWriter, r *http.Request, status int, msg string)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !cleanText(r.URL.Path) || !cleanText(r.URL.RawPath) {
				reject(w, r, http.StatusBadRequest, "The path holds a NUL byte or invalid UTF-8.")
				return
			}
			if !cleanQuery(r.URL.RawQuery) {
				reject(w, r, http.StatusBadRequest, "The query string holds a NUL byte or invalid UTF-8.")
				return
			}
			for name, vs := range r.Header { // Go refuses NUL in headers itself; bytes above 0x7f it lets through
				for _, v := range vs {
					if !cleanText(v) {
						reject(w, r, http.StatusBadRequest, "Header "+name+" holds invalid UTF-8.")
						return
					}
				}
			}
			if r.Body != nil && r.Body != http.NoBody && textBody(r.Header.Get("Content-Type")) {
				body, err := io.ReadAll(io.LimitReader(r.Body, MaxTextBody+1))
				r.Body.Close()
				var tooLarge *http.MaxBytesError // Bodies' bound
				switch {
				case errors.As(err, &tooLarge) || len(body) > MaxTextBody:
					reject(w, r, http.StatusRequestEntityTooLarge, "The request body is too large.")
					return
				case err != nil:
					reject(w, r, http.StatusBadRequest, "The request body could not be read.")
					return
				case !cleanBody(r.Header.Get("Content-Type"), body):
					reject(w, r, http.StatusBadRequest, "The request body holds a NUL byte or invalid UTF-8.")
					return
				}
				r.Body = io.NopCloser(bytes.NewReader(body))
			}
			next.ServeHTTP(w, r)
		})
	}
}

// cleanText reports whether s is valid UTF-8 without NUL.
func cleanText(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// cleanQuery checks every decoded key and value of a query string or a
// form body (%00 decodes to NUL, %FF to invalid UTF-8). A string that does
// not parse is left to the handler, which sees the same parse error.
func cleanQuery(raw string) bool {
	if raw == "" {
		return true
	}
	vals, _ := url.ParseQuery(raw) // keeps what parses
	for k, vs := range vals {
		if !cleanText(k) {
			return false
		}
		for _, v := range vs {
			if !cleanText(v) {
				return false
			}
		}
	}
	return true
}

// textBody reports whether a body of this content type is text we check.
func textBody(contentType string) bool {
	mt, _, _ := mime.ParseMediaType(contentType)
	return !strings.HasPrefix(mt, "multipart/") && mt != "application/octet-stream" && !strings.HasPrefix(mt, "image/")
}

// cleanBody checks a text body: valid UTF-8 with no NUL, and for a form
// its decoded fields, for anything else (JSON) no \u0000 escape, which a
// JSON decoder turns into NUL.
func cleanBody(contentType string, b []byte) bool {
	if !utf8.Valid(b) || bytes.IndexByte(b, 0) >= 0 {
		return false
	}
	if mt, _, _ := mime.ParseMediaType(contentType); mt == "application/x-www-form-urlencoded" {
		return cleanQuery(string(b))
	}
	return !hasJSONNul(b)
}

// hasJSONNul finds a \u0000 escape, skipping escaped backslashes (so the
// text \\u0000, a backslash and "u0000", is not one).
func hasJSONNul(b []byte) bool {
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		if i+5 < len(b) && b[i+1] == 'u' && string(b[i+2:i+6]) == "0000" {
			return true
		}
		i++ // the escaped character
	}
	return false
}

// AppOptions configure App.
type AppOptions struct {
	// HTTPS: browsers reach the app over https (TATKAL_PUBLIC_URL), so
	// HSTS is sent.
	HTTPS bool
	// CSP overrides the strict policy under path prefixes.
	CSP map[string]string
	// APIReject answers a refused /v1 request in the API's error format;
	// other paths get plain text.
	APIReject func(w http.ResponseWriter, r *http.Request, status int, msg string)
	// TrustedProxies may set X-Forwarded-For (TATKAL_TRUSTED_PROXIES);
	// see ClientIPs.
	TrustedProxies []netip.Prefix
	// Uploads are the paths whose POST takes a multipart body (see
	// Bodies); their handlers bound and parse it with ParseUpload.
	Uploads []string
}

// App wraps the app's router in what every request passes through, in
// this order: the security headers (so even a refusal carries them), the
// bound on bodies, cross-origin protection for unsafe methods, then the
// text check.
func App(h http.Handler, o AppOptions) http.Handler {
	reject := func(w http.ResponseWriter, r *http.Request, status int, msg string) {
		if o.APIReject != nil && strings.HasPrefix(r.URL.Path, "/v1/") {
			o.APIReject(w, r, status, msg)
			return
		}
		http.Error(w, msg, status)
	}
	h = ValidText(reject)(h)
	h = ClientIPs(o.TrustedProxies)(h)
	h = http.NewCrossOriginProtection().Handler(h)
	h = Bodies(o.Uploads, reject)(h)
	return Headers(o.HTTPS, o.CSP)(h)
}
