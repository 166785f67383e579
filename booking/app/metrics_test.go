package app

import (
	"strings"
	"testing"
)

// The metrics listener may answer without a token only on this machine;
// elsewhere it needs a token, which must be a usable secret.
func TestCheckMetrics(t *testing.T) {
	t.Parallel()
	token := strings.Repeat("m", 32)
	for _, c := range []struct {
		addr, token string
		want        string // "" for accepted
	}{
		{"127.0.0.1:9090", "", ""},
		{"127.0.0.2:9090", "", ""},
		{"[::1]:9090", "", ""},
		{"localhost:9090", "", ""},
		{"http://127.0.0.1:9090", "", ""},
		{"off", "", ""},
		{":9090", "", "TATKAL_METRICS_TOKEN"},
		{"0.0.0.0:9090", "", "TATKAL_METRICS_TOKEN"},
		{"[::]:9090", "", "TATKAL_METRICS_TOKEN"},
		{"10.0.0.5:9090", "", "TATKAL_METRICS_TOKEN"},
		{"metrics.internal:9090", "", "TATKAL_METRICS_TOKEN"},
		{"9090", "", "TATKAL_METRICS_ADDR"},
		{"0.0.0.0:9090", token, ""},
		{"0.0.0.0:9090", "short", "guessable"},
		{"127.0.0.1:9090", "short", "guessable"},
	} {
		err := Config{MetricsAddr: c.addr, MetricsToken: c.token}.CheckMetrics()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s (token %q): %v, want it accepted", c.addr, c.token, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s (token %q): %v, want a refusal naming %s", c.addr, c.token, err, c.want)
		}
	}
}
