package httpx_test

import (
	"net/url"
	"strings"
	"testing"

	"tatkal/booking/httpx"
)

// The known ways past a prefix test are refused; our own paths, with their
// queries, pass unchanged.
func TestLocalPath(t *testing.T) {
	t.Parallel()
	long := "/search?q=" + strings.Repeat("a", httpx.MaxRedirectLen)
	for _, tc := range []struct {
		next, under string
		except      []string
		want        string // "" means refused
	}{
		{next: "/bookings/7?notice=saved", under: "/", want: "/bookings/7?notice=saved"},
		{next: "/search?train=12951&date=2026-01-02", under: "/", want: "/search?train=12951&date=2026-01-02"},
		{next: "/", under: "/", want: "/"},
		{next: "/signin?next=%2F%2Fevil.example", under: "/", want: "/signin?next=%2F%2Fevil.example"}, // the next page checks its own
		{next: "/a%20b", under: "/", want: "/a%20b"},
		{next: "/bookings/7#top", under: "/", want: "/bookings/7"},
		{next: "/console/finance/runs/3", under: "/console/", want: "/console/finance/runs/3"},
		{next: "/console", under: "/console/", want: "/console"},

		{next: "", under: "/"},
		{next: "//evil.example", under: "/"},
		{next: "///evil.example", under: "/"},
		{next: `/\evil.example`, under: "/"},
		{next: `\\evil.example`, under: "/"},
		{next: `/x\..\evil`, under: "/"},
		{next: "/%09/evil.example/x", under: "/"},
		{next: "/%0a/evil.example", under: "/"},
		{next: "/%0d%0a/evil.example", under: "/"},
		{next: "/%00/evil.example", under: "/"},
		{next: "/%7f/evil.example", under: "/"},
		{next: "/\t/evil.example", under: "/"},
		{next: "/\n/evil.example", under: "/"},
		{next: "\t//evil.example", under: "/"},
		{next: " //evil.example", under: "/"},
		{next: "/ /evil.example", under: "/"},
		{next: "//%09evil.example", under: "/"},
		{next: "/%2F%2Fevil.example", under: "/"},
		{next: "/%2f/evil.example", under: "/"},
		{next: "/%5Cevil.example", under: "/"},
		{next: "/%5c%5cevil.example", under: "/"},
		{next: "/%E2%80%8B", under: "/", want: "/%E2%80%8B"}, // decoded text, not a control byte
		{next: "/\u3002evil", under: "/"},                    // raw non-ASCII: our own links are escaped
		{next: "/%zz", under: "/"},
		{next: "https://evil.example/", under: "/"},
		{next: "http:/evil.example", under: "/"},
		{next: "javascript:alert(1)", under: "/"},
		{next: "JavaScript:alert(1)", under: "/"},
		{next: "data:text/html,x", under: "/"},
		{next: "evil.example", under: "/"},
		{next: "?next=//evil", under: "/"},
		{next: long, under: "/"},
		{next: "/v1/bookings", under: "/", except: []string{"/v1/"}},
		{next: "/v1", under: "/", except: []string{"/v1/"}},
		{next: "/x/../v1/bookings", under: "/", except: []string{"/v1/"}},
		{next: "/search", under: "/", except: []string{"/v1/"}, want: "/search"},
		{next: "/", under: "/console/"},
		{next: "/consolex", under: "/console/"},
		{next: "/console/../search", under: "/console/"},
		{next: "/console/%2e%2e/search", under: "/console/"},
		{next: "//console/", under: "/console/"},
		{next: "/console/%09/x", under: "/console/"},
	} {
		got, ok := httpx.LocalPath(tc.next, tc.under, tc.except...)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("LocalPath(%q, %q, %q) = %q, %v; want %q", tc.next, tc.under, tc.except, got, ok, tc.want)
		}
	}
}

// Whatever LocalPath lets through, a browser sends to our own host, under
// the prefix. browserResolve does what browsers do before resolving a
// Location: strip tabs and newlines, read "\" as "/".
func FuzzLocalPath(f *testing.F) {
	for _, s := range []string{"/x", "//evil", "/\\evil", "/%09/evil", "\t//evil", "/%2F%2Fevil", "//%09evil", "/console/x", "/a?b#c"} {
		f.Add(s)
	}
	base, _ := url.Parse("https://tatkal.example/console/login")
	f.Fuzz(func(t *testing.T, next string) {
		got, ok := httpx.LocalPath(next, "/console/")
		if !ok {
			if got != "" {
				t.Fatalf("refused %q but returned %q", next, got)
			}
			return
		}
		for _, s := range []string{got, mustUnescape(t, got)} {
			s = strings.NewReplacer("\t", "", "\n", "", "\r", "", `\`, "/").Replace(s)
			ref, err := url.Parse(s)
			if err != nil {
				t.Fatalf("LocalPath(%q) = %q, which does not parse: %v", next, got, err)
			}
			u := base.ResolveReference(ref)
			if u.Host != base.Host || u.Scheme != base.Scheme || !strings.HasPrefix(u.Path+"/", "/console/") {
				t.Fatalf("LocalPath(%q) = %q, which a browser reads as %s", next, got, u)
			}
		}
	})
}

func mustUnescape(t *testing.T, s string) string {
	t.Helper()
	d, err := url.PathUnescape(s)
	if err != nil {
		t.Fatalf("LocalPath returned %q, which does not unescape: %v", s, err)
	}
	return d
}
