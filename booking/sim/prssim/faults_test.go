package prssim_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"tatkal/booking/prs"
	"tatkal/booking/sim/prssim"
)

func TestFailRateIsRetryableAndStoresNothing(t *testing.T) {
	t.Parallel()
	st := newStack(t)
	ctx := context.Background()
	st.setFaults(t, prs.Faults{FailRate: 1})
	b := confirmed("4200000001", 0, 2, berth{"B1", 1})
	_, err := st.client.Sync(ctx, b)
	wantRetryable(t, err, http.StatusServiceUnavailable)

	st.setFaults(t, prs.Faults{})
	_, err = st.client.Get(ctx, b.PNR)
	wantNotFound(t, err)

	// A partial rate, with the seeded dice, fails some calls and not others.
	st.setFaults(t, prs.Faults{FailRate: 0.5})
	failed := 0
	for range 40 {
		if _, err := st.client.Export(ctx, mustDate(t, day1)); err != nil {
			wantRetryable(t, err, http.StatusServiceUnavailable)
			failed++
		}
	}
	if failed < 5 || failed > 35 {
		t.Fatalf("fail_rate 0.5 failed %d of 40 calls", failed)
	}
}

func TestOutageIsRetryableButAdminWorks(t *testing.T) {
	t.Parallel()
	st := newStack(t)
	ctx := context.Background()
	st.setFaults(t, prs.Faults{Outage: true})
	_, err := st.client.Sync(ctx, confirmed("4200000011", 0, 2, berth{"B1", 1}))
	wantRetryable(t, err, http.StatusServiceUnavailable)
	_, err = st.client.Get(ctx, "4200000011")
	wantRetryable(t, err, http.StatusServiceUnavailable)
	err = st.client.Cancel(ctx, "4200000011")
	wantRetryable(t, err, http.StatusServiceUnavailable)

	status, body := st.raw(t, http.MethodGet, "/admin/faults", adminToken, nil)
	if f := decodeJSON[prs.Faults](t, body); status != http.StatusOK || !f.Outage {
		t.Fatalf("admin during outage: %d %s", status, body)
	}
	st.setFaults(t, prs.Faults{})
	mustSync(t, st.client, confirmed("4200000011", 0, 2, berth{"B1", 1}))
}

func TestRejectRateRefusesNewBookingsOnly(t *testing.T) {
	t.Parallel()
	st := newStack(t)
	ctx := context.Background()
	accepted := confirmed("4200000021", 0, 2, berth{"B1", 1})
	ack := mustSync(t, st.client, accepted)

	st.setFaults(t, prs.Faults{RejectRate: 1})
	_, err := st.client.Sync(ctx, confirmed("4200000022", 0, 2, berth{"B1", 2}))
	wantRejected(t, err, prs.ReasonCoreRejected)
	// An accepted PNR is never refused on replay.
	if again := mustSync(t, st.client, accepted); again != ack {
		t.Fatalf("replay under reject_rate: %+v, want %+v", again, ack)
	}

	st.setFaults(t, prs.Faults{})
	_, err = st.client.Get(ctx, "4200000022")
	wantNotFound(t, err)
}

func TestLatencyIsHonoured(t *testing.T) {
	t.Parallel()
	st := newStack(t)
	ctx := context.Background()
	st.setFaults(t, prs.Faults{LatencyMs: 200, JitterMs: 100})
	for range 3 {
		start := time.Now()
		if _, err := st.client.Export(ctx, mustDate(t, day1)); err != nil {
			t.Fatalf("export: %v", err)
		}
		if took := time.Since(start); took < 200*time.Millisecond || took > 2*time.Second {
			t.Fatalf("call took %v with latency 200ms + jitter 100ms", took)
		}
	}
	// Admin calls are not slowed down.
	st.setFaults(t, prs.Faults{LatencyMs: 2000})
	start := time.Now()
	st.raw(t, http.MethodGet, "/admin/faults", adminToken, nil)
	if took := time.Since(start); took > time.Second {
		t.Fatalf("admin call took %v under 2s latency", took)
	}
}

func TestTimeoutThenRetryIsIdempotent(t *testing.T) {
	t.Parallel()
	st := newStack(t)
	ctx := context.Background()
	impatient := prs.NewClient(st.http.URL, apiKey, &http.Client{Timeout: 300 * time.Millisecond})
	b := confirmed("4200000031", 0, 2, berth{"B1", 1})

	st.setFaults(t, prs.Faults{TimeoutRate: 1})
	start := time.Now()
	_, err := impatient.Sync(ctx, b)
	wantRetryable(t, err, 0)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("want a client timeout, got %v", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("the client timeout did not bound the call: %v", took)
	}

	// The core did the work it never answered for: the retry is a replay.
	st.setFaults(t, prs.Faults{})
	if got, err := st.client.Get(ctx, b.PNR); err != nil || got.State != prs.StatusConfirmed {
		t.Fatalf("the timed-out booking must be stored: %+v %v", got, err)
	}
	ack := mustSync(t, impatient, b)
	status, body := st.raw(t, http.MethodPut, "/v1/bookings/"+b.PNR, apiKey, b)
	if status != http.StatusOK || decodeJSON[prs.Ack](t, body) != ack {
		t.Fatalf("after the timeout: %d %s, want 200 with %+v", status, body, ack)
	}
}

func TestAdminValidationAndAuth(t *testing.T) {
	t.Parallel()
	st := newStack(t)
	for name, body := range map[string]string{
		"not json":         "{",
		"unknown field":    `{"fail_rate":0.1,"explode":true}`,
		"rate above one":   `{"fail_rate":1.5}`,
		"negative rate":    `{"reject_rate":-0.1}`,
		"timeout above 1":  `{"timeout_rate":2}`,
		"negative latency": `{"latency_ms":-1}`,
		"negative jitter":  `{"jitter_ms":-5}`,
		"huge latency":     `{"latency_ms":600000}`,
		"wrong type":       `{"outage":"yes"}`,
	} {
		status, data := st.raw(t, http.MethodPut, "/admin/faults", adminToken, body)
		if status != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", name, status, data)
		}
	}
	if status, body := st.raw(t, http.MethodGet, "/admin/faults", adminToken, nil); status != http.StatusOK || decodeJSON[prs.Faults](t, body) != (prs.Faults{}) {
		t.Fatalf("bad settings must change nothing: %d %s", status, body)
	}

	want := prs.Faults{LatencyMs: 5, JitterMs: 1, FailRate: 0.25, RejectRate: 0.5, TimeoutRate: 0.1}
	st.setFaults(t, want)
	if status, body := st.raw(t, http.MethodGet, "/admin/faults", adminToken, nil); status != http.StatusOK || decodeJSON[prs.Faults](t, body) != want {
		t.Fatalf("get faults: %d %s, want %+v", status, body, want)
	}

	for _, tok := range []string{"", "wrong", apiKey} {
		if status, _ := st.raw(t, http.MethodPut, "/admin/faults", tok, `{"outage":true}`); status != http.StatusUnauthorized {
			t.Errorf("token %q: PUT /admin/faults %d, want 401", tok, status)
		}
		if status, _ := st.raw(t, http.MethodGet, "/admin/faults", tok, nil); status != http.StatusUnauthorized {
			t.Errorf("token %q: GET /admin/faults %d, want 401", tok, status)
		}
	}
	if _, body := st.raw(t, http.MethodGet, "/admin/faults", adminToken, nil); decodeJSON[prs.Faults](t, body).Outage {
		t.Fatal("an unauthorised PUT changed the faults")
	}

	// Without an admin token the admin API admits nobody.
	ctx := context.Background()
	noAdmin, err := prssim.NewServer(ctx, prssim.ServerConfig{Pool: st.env.Pool, APIKey: apiKey})
	if err != nil {
		t.Fatalf("NewServer without admin token: %v", err)
	}
	hs := httptest.NewServer(noAdmin.Handler())
	defer hs.Close()
	req, _ := http.NewRequest(http.MethodGet, hs.URL+"/admin/faults", nil)
	req.Header.Set("Authorization", "Bearer ")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("admin API without a token configured: %d, want 401", resp.StatusCode)
	}
	if _, err := prssim.NewServer(ctx, prssim.ServerConfig{Pool: st.env.Pool}); err == nil {
		t.Fatal("NewServer without an API key must fail")
	}
}

func mustDate(t *testing.T, s string) time.Time {
	t.Helper()
	d, err := time.Parse(prs.DateLayout, s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
