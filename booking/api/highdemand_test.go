package api_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"tatkal/booking/admission/token"
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/teststack"
)

// Every way a request is turned away for "high demand" (the hold shed at
// the door, a forged admission token in the hold script's path, a wrong
// booking challenge, the waiting room's full gate) answers the same bytes
// with the same headers, so a bot cannot tell its rejection from overload.
func TestHighDemandIsOneAnswer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// The first hold to arrive stops at "hold.begin" until released, taking
	// the only in-flight slot: the next hold is shed, not hoped to be.
	entered, release := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	s := teststack.New(t, teststack.Options{MaxHoldsInFlight: 1, Pause: func(ctx context.Context, point string) {
		if point == "hold.begin" && first.CompareAndSwap(false, true) {
			close(entered)
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
	}})
	_, date := s.DemoShard(t, 20, 0)
	qdate := date.AddDate(0, 0, 1)
	qshard, err := seed.Shard(ctx, s.Pool, seed.ShardSpec{Train: "12951", Date: qdate, Class: "3A", Berths: 20,
		OpensAt: time.Now().Add(-time.Minute), Mode: "queue"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Service.Rebuild(ctx, qshard); err != nil {
		t.Fatal(err)
	}
	uids := s.Users(t, "hd", 2)
	answers := map[string]reply{}

	// 1. Shed at the door of the hold endpoint.
	blocked := make(chan reply, 1)
	go func() { blocked <- newClient(s, uids[1]).hold(t, "hd-blocked-1", holdBody(date, "MMCT", "NDLS", 1)) }()
	<-entered
	answers["shed"] = newClient(s, uids[0]).hold(t, "hd-shed-0001", holdBody(date, "MMCT", "NDLS", 1))
	close(release)
	if r := <-blocked; r.status != http.StatusCreated {
		t.Fatalf("the blocked hold: %d %s", r.status, r.raw)
	}

	// 2 and 3. A queue-mode hold: a wrong challenge answer (admission), and a
	// right one with a forged admission token (the booking service).
	c := newClient(s, uids[0])
	bind := c.do(t, "POST", "/v1/devices/bind", nil, `{"device_token":"phone-hd-0001-abcdef"}`)
	binding, _ := bind.body["device_binding"].(string)
	if bind.status != 200 || binding == "" {
		t.Fatalf("bind: %d %s", bind.status, bind.raw)
	}
	att := s.Admission.AttestationKeys().Attest(uids[0], token.DeviceID("phone-hd-0001-abcdef"), time.Now().Add(time.Hour))
	plain := holdBody(qdate, "MMCT", "NDLS", 1)
	solved := func(key string, wrong bool) string {
		ch := c.do(t, "POST", "/v1/challenge", map[string]string{"X-Client-Attestation": att, "X-Device-Token": binding}, fmt.Sprintf(`{"attempt":%q}`, key))
		tok, _ := ch.body["challenge"].(string)
		bits, _ := ch.body["difficulty_bits"].(float64)
		if ch.status != 200 || tok == "" {
			t.Fatalf("challenge: %d %s", ch.status, ch.raw)
		}
		nonce := token.Solve(tok, int(bits))
		if wrong {
			nonce += "x"
		}
		return strings.TrimSuffix(plain, "}") + fmt.Sprintf(`,"challenge":{"type":"POW_SHA256","token":%q,"nonce":%q}}`, tok, nonce)
	}
	h := map[string]string{"X-Device-Token": binding, "X-Client-Attestation": att, "X-Admission-Token": "forged-admission-token"}
	h["Idempotency-Key"] = "hd-challenge-1"
	answers["wrong challenge"] = c.do(t, "POST", "/v1/bookings/hold", h, solved("hd-challenge-1", true))
	h["Idempotency-Key"] = "hd-forged-0001"
	answers["forged admission token"] = c.do(t, "POST", "/v1/bookings/hold", h, solved("hd-forged-0001", false))

	// 4. The waiting room's gate full: every slot taken here.
	var releases []func()
	for {
		rel, ok := s.Admission.Acquire()
		if !ok {
			break
		}
		releases = append(releases, rel)
	}
	answers["queue gate"] = c.do(t, "GET", "/v1/queue/status?ticket=whatever", map[string]string{"X-Device-Token": binding}, "")
	for _, rel := range releases {
		rel()
	}

	want := answers["shed"]
	if want.status != http.StatusServiceUnavailable || want.body["reason"] != "HIGH_DEMAND" || want.header.Get("Retry-After") == "" ||
		want.header.Get("Cache-Control") != "no-store" || want.header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("shed answer: %d %v %s", want.status, want.header, want.raw)
	}
	for path, got := range answers {
		if got.status != want.status || got.raw != want.raw {
			t.Errorf("%s: %d %q, want the shed answer %d %q", path, got.status, got.raw, want.status, want.raw)
		}
		if g, w := headerLines(got.header), headerLines(want.header); !slices.Equal(g, w) {
			t.Errorf("%s headers:\n%s\nwant the shed answer's:\n%s", path, strings.Join(g, "\n"), strings.Join(w, "\n"))
		}
	}
	// Nothing was held on the queue shard by the refused attempts.
	var n int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM holds WHERE shard_id = $1`, qshard).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d holds on the queue shard (%v)", n, err)
	}
}

// headerLines lists a response's headers but Date, sorted, one per line.
func headerLines(h http.Header) []string {
	var out []string
	for k, vs := range h {
		if k != "Date" {
			out = append(out, k+": "+strings.Join(vs, ", "))
		}
	}
	slices.Sort(out)
	return out
}
