package prssim_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"tatkal/booking/lab/testenv"
	"tatkal/booking/prs"
	"tatkal/booking/sim/prssim"
)

const (
	apiKey     = "test-api-key"
	adminToken = "test-admin-token"
	day1       = "2026-03-10"
	day2       = "2026-03-11"
)

// stack is one test's core: a fresh database, a server on it, a client.
type stack struct {
	env    *testenv.Env
	srv    *prssim.Server
	http   *httptest.Server
	client *prs.Client
}

func newStack(t *testing.T) *stack {
	t.Helper()
	return newStackOn(t, testenv.New(t))
}

func newStackOn(t *testing.T, env *testenv.Env) *stack {
	t.Helper()
	st := &stack{env: env}
	st.start(t, "")
	return st
}

// start (re)starts the server on the stack's database, as a restart of
// `tatkal prs` would.
func (st *stack) start(t *testing.T, schema string) {
	t.Helper()
	ctx := context.Background()
	srv, err := prssim.NewServer(ctx, prssim.ServerConfig{
		Pool: st.env.Pool, Schema: schema, APIKey: apiKey, AdminToken: adminToken,
		Log: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})), Seed: 42,
	})
	if err != nil {
		t.Fatalf("NewServer: %v", err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	st.srv, st.http = srv, hs
	st.client = prs.NewClient(hs.URL, apiKey, &http.Client{Timeout: 20 * time.Second})
}

// raw makes a request without the client, returning status and body.
func (st *stack) raw(t *testing.T, method, path, token string, body any) (int, []byte) {
	t.Helper()
	status, data, err := st.rawE(method, path, token, body)
	if err != nil {
		t.Fatal(err)
	}
	return status, data
}

// rawE is raw for goroutines other than the test's.
func (st *stack) rawE(method, path, token string, body any) (int, []byte, error) {
	r, err := testenv.Do(testenv.Request{Method: method, URL: st.http.URL + path, Token: token, Body: body})
	return r.Status, r.Raw, err
}

func (st *stack) setFaults(t *testing.T, f prs.Faults) {
	t.Helper()
	if status, body := st.raw(t, http.MethodPut, "/admin/faults", adminToken, f); status != http.StatusOK {
		t.Fatalf("set faults %+v: %d %s", f, status, body)
	}
}

// berth is a coach/berth pair for building bookings.
type berth struct {
	coach string
	no    int
}

// confirmed builds a valid confirmed booking on day1 of train 12951 for
// legs from..to-1, one passenger per berth.
func confirmed(pnr string, from, to int, berths ...berth) prs.Booking {
	b := prs.Booking{
		PNR: pnr, Train: "12951", JourneyDate: day1, Class: "3A", Quota: "TQ", From: "NDLS", To: "MMCT",
		FromSeq: from, ToSeq: to, Status: prs.StatusConfirmed, FarePaise: 245000,
	}
	for i, br := range berths {
		b.Passengers = append(b.Passengers, prs.Passenger{
			Seq: i + 1, Name: "Passenger " + string(rune('A'+i)), Age: 30 + i, Gender: "F",
			Coach: br.coach, BerthNo: br.no, BerthType: "LB",
		})
	}
	return b
}

func waitlisted(pnr string, wl int) prs.Booking {
	b := confirmed(pnr, 0, 4, berth{"B1", 1})
	b.Status, b.WaitlistNo = prs.StatusWaitlisted, wl
	b.Passengers[0].Coach, b.Passengers[0].BerthNo, b.Passengers[0].BerthType = "", 0, ""
	return b
}

func mustSync(t *testing.T, c *prs.Client, b prs.Booking) prs.Ack {
	t.Helper()
	ack, err := c.Sync(context.Background(), b)
	if err != nil {
		t.Fatalf("sync %s: %v", b.PNR, err)
	}
	return ack
}

func wantRejected(t *testing.T, err error, reason string) {
	t.Helper()
	var rej *prs.RejectedError
	if !errors.As(err, &rej) {
		t.Fatalf("want a RejectedError (%s), got %T %v", reason, err, err)
	}
	if rej.Reason != reason {
		t.Fatalf("rejection reason %q, want %q (%v)", rej.Reason, reason, err)
	}
	if prs.IsRetryable(err) {
		t.Fatalf("a rejection must not be retryable: %v", err)
	}
}

func wantRetryable(t *testing.T, err error, status int) {
	t.Helper()
	if err == nil || !prs.IsRetryable(err) {
		t.Fatalf("want a retryable error, got %T %v", err, err)
	}
	var u *prs.UnavailableError
	errors.As(err, &u)
	if u.Status != status {
		t.Fatalf("retryable error status %d, want %d: %v", u.Status, status, err)
	}
	var rej *prs.RejectedError
	if errors.As(err, &rej) {
		t.Fatalf("a retryable error must not be a rejection: %v", err)
	}
}

func wantNotFound(t *testing.T, err error) {
	t.Helper()
	var pe *prs.ProtocolError
	if !errors.Is(err, prs.ErrNotFound) || !errors.As(err, &pe) || pe.Status != http.StatusNotFound {
		t.Fatalf("want ErrNotFound as a ProtocolError 404, got %T %v", err, err)
	}
	if prs.IsRetryable(err) {
		t.Fatalf("not found must not be retryable: %v", err)
	}
}

func decodeJSON[T any](t *testing.T, data []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
	return v
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return string(data)
}
