package app

import (
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"tatkal/booking/secrets"
)

// EnvMetricsToken guards the metrics listener (/metrics and the heap
// profile) when it is reachable from other machines.
const EnvMetricsToken = "TATKAL_METRICS_TOKEN"

// CheckMetrics refuses a metrics listener other machines can reach
// without a token: /metrics shows the funnel and pending levers, and the
// heap profile holds whatever the process holds. On loopback (the default)
// or "off" no token is needed; a token, when set, must be a usable secret.
func (c Config) CheckMetrics() error {
	if c.MetricsToken != "" {
		return secrets.Check(EnvMetricsToken, c.MetricsToken)
	}
	if c.MetricsAddr == "off" || loopback(c.MetricsAddr) {
		return nil
	}
	return fmt.Errorf("TATKAL_METRICS_ADDR %q is reachable from other machines, and /metrics and /debug/pprof/heap would answer anyone: "+
		"keep it on loopback (127.0.0.1:9090), set it to \"off\", or set %s so that every request must carry Authorization: Bearer <token>; %s",
		c.MetricsAddr, EnvMetricsToken, secrets.Hint)
}

// loopback reports whether addr (host:port, as listenURL takes it) listens
// on this machine only. An empty host, 0.0.0.0 or a name other than
// localhost is not.
func loopback(addr string) bool {
	addr = strings.TrimPrefix(strings.TrimPrefix(addr, "http://"), "https://")
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// metricsAuth lets through only requests carrying the token (none set:
// everyone, the listener being on loopback).
func metricsAuth(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="tatkal metrics"`)
			http.Error(w, "Send Authorization: Bearer <"+EnvMetricsToken+">.", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
