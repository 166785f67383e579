package httpx

import (
	"net/url"
	"path"
	"strings"
)

// MaxRedirectLen bounds a redirect target taken from a request: our own
// paths with their queries are far shorter, and a longer value is an
// attack or a mistake, never a page to go back to.
const MaxRedirectLen = 2048

// LocalPath returns next, re-serialised as a path and query, when it names
// a page of this site under the path prefix under (and under none of the
// prefixes in except); ok is false otherwise and the caller uses its own
// default. Every redirect whose target comes from a request (a "next" or
// "back" field, a query parameter) goes through here.
//
// Browsers are lenient where a prefix test is not: they strip tabs and
// newlines anywhere in a URL ("/\t/evil" is "//evil"), treat "\" as "/",
// and a proxy or the next hop may decode %2F. So the value must be
// printable ASCII, with neither control bytes nor backslashes raw or
// percent-encoded, must parse as a path without scheme or host, and its
// decoded path must neither start with "//" nor leave under once cleaned.
// The fragment is dropped.
func LocalPath(next, under string, except ...string) (string, bool) {
	if next == "" || len(next) > MaxRedirectLen || !strings.HasPrefix(next, "/") {
		return "", false
	}
	for i := 0; i < len(next); i++ {
		if c := next[i]; c <= ' ' || c >= 0x7f || c == '\\' {
			return "", false
		}
	}
	// Decoded once, as a server or proxy behind us might: what it yields
	// must be as clean as the raw value.
	dec, err := url.PathUnescape(next)
	if err != nil {
		return "", false
	}
	for i := 0; i < len(dec); i++ {
		if c := dec[i]; c < ' ' || c == 0x7f || c == '\\' {
			return "", false
		}
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return "", false
	}
	if !strings.HasPrefix(u.Path, "/") || strings.HasPrefix(u.Path, "//") || strings.HasPrefix(dec, "//") {
		return "", false
	}
	// "/console/../x" stays on the site but leaves the console: compare
	// the cleaned path (with a trailing slash, so "/console" is inside
	// "/console/" and "/consolex" is not).
	clean := path.Clean(u.Path)
	if clean != "/" {
		clean += "/"
	}
	if !strings.HasPrefix(clean, under) {
		return "", false
	}
	for _, x := range except {
		if strings.HasPrefix(clean, x) {
			return "", false
		}
	}
	out := u.EscapedPath()
	if u.RawQuery != "" {
		out += "?" + u.RawQuery
	}
	return out, true
}
