package httpx

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// ParseProxies reads TATKAL_TRUSTED_PROXIES: a comma-separated list of
// CIDRs (or single addresses) of the load balancers in front of the app.
// Empty trusts no one.
func ParseProxies(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			a, aerr := netip.ParseAddr(f)
			if aerr != nil {
				return nil, fmt.Errorf("trusted proxy %q: want a CIDR like 10.0.0.0/8 or an address", f)
			}
			p = netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

type clientIPKey struct{}

// ClientIPs resolves each request's client address once, for ClientIP:
// the connection's peer, unless the peer is a trusted proxy, in which case
// X-Forwarded-For is read from the right, past every trusted proxy, to the
// first address no trusted proxy vouches for. Entries left of that are the
// client's own claims and are ignored.
func ClientIPs(trusted []netip.Prefix) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ip := resolveClientIP(r, trusted)
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), clientIPKey{}, ip)))
		})
	}
}

// ClientIP is the address a request comes from: the one every per-address
// limit, log and audit record uses (login guard, waiting room, rate
// limits). Outside ClientIPs it is the connection's peer.
func ClientIP(r *http.Request) string {
	if ip, ok := r.Context().Value(clientIPKey{}).(string); ok {
		return ip
	}
	return peer(r)
}

func peer(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func resolveClientIP(r *http.Request, trusted []netip.Prefix) string {
	ip := peer(r)
	if len(trusted) == 0 {
		return ip
	}
	isTrusted := func(s string) bool {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return false
		}
		a = a.Unmap()
		for _, p := range trusted {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	if !isTrusted(ip) {
		return ip
	}
	var hops []string
	for _, h := range r.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(h, ",")...)
	}
	for i := len(hops) - 1; i >= 0; i-- {
		hop := strings.TrimSpace(hops[i])
		a, err := netip.ParseAddr(hop)
		if err != nil {
			return ip // garbage from the client side: stop at the last known hop
		}
		ip = a.Unmap().String()
		if !isTrusted(ip) {
			return ip
		}
	}
	return ip
}
