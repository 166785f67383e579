package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"tatkal/booking/app"
)

// serve and worker refuse a metrics address other machines reach unless
// a metrics token is set, naming both variables, before connecting to
// anything; with a token, or on loopback, they go on to the database.
func TestMetricsOffLoopbackNeedsAToken(t *testing.T) {
	for k, v := range map[string]string{
		"TATKAL_WEBHOOK_SECRETS": "swiftpay=" + strings.Repeat("a", 64) + ",bharatpg=" + strings.Repeat("b", 64),
		"TATKAL_PSP_API_KEYS":    "swiftpay=" + strings.Repeat("c", 64) + ",bharatpg=" + strings.Repeat("d", 64),
		"TATKAL_PRS_KEY":         strings.Repeat("e", 64),
		"TATKAL_SESSION_KEY":     strings.Repeat("f", 64),
		"TATKAL_FRAUD_KEY":       strings.Repeat("9", 64),
		"TATKAL_MSG_KEY":         strings.Repeat("8", 64),
		"TATKAL_ID_KEYS":         "k1=" + strings.Repeat("7", 64),
		"DATABASE_URL":           "postgres://127.0.0.1:1/none?connect_timeout=1", // reached only past the checks
	} {
		t.Setenv(k, v)
	}
	for _, c := range []struct {
		cmd, addr, token string
		want             []string
	}{
		{"serve", "0.0.0.0:9090", "", []string{"TATKAL_METRICS_ADDR", "TATKAL_METRICS_TOKEN", "openssl rand -hex 32"}},
		{"serve", ":9090", "", []string{"TATKAL_METRICS_ADDR", "TATKAL_METRICS_TOKEN"}},
		{"worker", "0.0.0.0:9090", "", []string{"TATKAL_METRICS_ADDR", "TATKAL_METRICS_TOKEN"}},
		{"serve", "0.0.0.0:9090", "short", []string{"TATKAL_METRICS_TOKEN", "guessable"}},
		{"serve", "0.0.0.0:9090", strings.Repeat("t", 32), []string{"PostgreSQL"}},
		{"serve", "127.0.0.1:9090", "", []string{"PostgreSQL"}},
		{"worker", "127.0.0.1:9090", "", []string{"PostgreSQL"}},
	} {
		t.Setenv("TATKAL_METRICS_ADDR", c.addr)
		t.Setenv("TATKAL_METRICS_TOKEN", c.token)
		var out, errOut bytes.Buffer
		code := run(context.Background(), []string{c.cmd}, &out, &errOut)
		msg := errOut.String()
		for _, w := range c.want {
			if code == 0 || !strings.Contains(msg, w) {
				t.Errorf("%s with metrics on %s, token %q: exit %d, %q; want it to say %q", c.cmd, c.addr, c.token, code, msg, w)
			}
		}
		if c.want[0] != "PostgreSQL" && strings.Contains(msg, "PostgreSQL") {
			t.Errorf("%s with metrics on %s: got past the check: %q", c.cmd, c.addr, msg)
		}
	}
}

// With a token set, every request to the metrics listener needs it:
// /metrics and the heap profile answer 401 without it or with another.
// tatkal dev, or anything else built by app.New, refuses an address other
// machines reach without one.
func TestMetricsToken(t *testing.T) {
	t.Parallel()
	cfg, _ := testConfig(t)
	cfg.MetricsAddr = "0.0.0.0:0"
	if a, err := app.New(context.Background(), cfg, app.Options{Serve: true}); err == nil || !strings.Contains(err.Error(), "TATKAL_METRICS_TOKEN") {
		if err == nil {
			a.Close()
		}
		t.Errorf("a process with metrics on 0.0.0.0 and no token: %v, want a refusal naming TATKAL_METRICS_TOKEN", err)
	}
	token := strings.Repeat("t", 40)
	cfg.MetricsAddr, cfg.MetricsToken = "127.0.0.1:0", token
	m := startApp(t, cfg, app.Options{Serve: true})
	base := strings.TrimSuffix(m.MetricsURL(), "/metrics")
	get := func(path, auth string) (int, string) {
		req, _ := http.NewRequest("GET", base+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, path := range []string{"/metrics", "/debug/pprof/heap"} {
		for _, auth := range []string{"", "Bearer " + strings.Repeat("x", 40), "Bearer " + token[:39], token, "Basic " + token} {
			if code, body := get(path, auth); code != http.StatusUnauthorized || strings.Contains(body, "tatkal_") {
				t.Errorf("%s with Authorization %q: %d, want 401: %.200q", path, auth, code, body)
			}
		}
		if code, body := get(path, "Bearer "+token); code != http.StatusOK || (path == "/metrics" && !strings.Contains(body, "tatkal_")) {
			t.Errorf("%s with the token: %d: %.200q", path, code, body)
		}
	}
}
