package httpx

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// X-Forwarded-For counts only from a configured proxy, and only as far as
// trusted proxies vouch: a client cannot choose its address by sending the
// header itself, directly or through the balancer.
func TestClientIPTrustsOnlyConfiguredProxies(t *testing.T) {
	t.Parallel()
	trusted, err := ParseProxies(" 10.0.0.0/8, 192.0.2.5 ")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseProxies("10.0.0.0/33"); err == nil {
		t.Fatal("a bad CIDR was accepted")
	}
	for _, tc := range []struct {
		name, peer string
		xff        []string
		trusted    bool
		want       string
	}{
		{"no proxies configured: the header is ignored", "198.51.100.1:5000", []string{"203.0.113.9"}, false, "198.51.100.1"},
		{"untrusted peer: the header is ignored", "198.51.100.1:5000", []string{"203.0.113.9"}, true, "198.51.100.1"},
		{"trusted balancer: its client", "10.1.2.3:5000", []string{"203.0.113.9"}, true, "203.0.113.9"},
		{"a client's own claim left of the balancer's is ignored", "10.1.2.3:5000", []string{"1.1.1.1, 203.0.113.9"}, true, "203.0.113.9"},
		{"two trusted hops, split headers", "192.0.2.5:443", []string{"1.1.1.1, 203.0.113.9", "10.9.9.9"}, true, "203.0.113.9"},
		{"only trusted hops: the leftmost", "10.1.2.3:5000", []string{"10.2.2.2"}, true, "10.2.2.2"},
		{"garbage from the client side stops at the last good hop", "10.1.2.3:5000", []string{"<script>, 10.2.2.2"}, true, "10.2.2.2"},
		{"trusted balancer, no header", "10.1.2.3:5000", nil, true, "10.1.2.3"},
		{"IPv4-mapped IPv6 peer", "[::ffff:10.1.2.3]:5000", []string{"203.0.113.9"}, true, "203.0.113.9"},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.RemoteAddr = tc.peer
		for _, h := range tc.xff {
			r.Header.Add("X-Forwarded-For", h)
		}
		var got string
		var list = trusted
		if !tc.trusted {
			list = nil
		}
		ClientIPs(list)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = ClientIP(r) })).ServeHTTP(httptest.NewRecorder(), r)
		if got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
