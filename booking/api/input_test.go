package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"tatkal/booking/lab/teststack"
)

// Malformed journeys are refused with a clear 400 before any lookup, and
// the answer never echoes a large input back.
func TestAvailabilityValidatesTheIntent(t *testing.T) {
	t.Parallel()
	s := teststack.New(t, teststack.Options{})
	_, date := s.DemoShard(t, 8, 0)
	c := &client{base: s.Server.URL, http: &http.Client{Timeout: 30 * time.Second}}
	d := date.Format(time.DateOnly)
	// Long, yet under the server's 64 KiB header limit (past it the server
	// answers 431 before any handler runs).
	big := strings.Repeat("9", 32<<10)
	for _, tc := range []struct{ query, reason string }{
		{"train=" + big + "&class=3A&date=" + d, "BAD_TRAIN_NO"},
		{"train=1295&class=3A&date=" + d, "BAD_TRAIN_NO"},
		{"train=12951&class=3X&date=" + d, "BAD_CLASS"},
		{"train=12951&class=3A&quota=ZZ&date=" + d, "BAD_QUOTA"},
		{"train=12951&class=3A&date=" + big, "BAD_DATE"},
		{"train=12951&class=3A&date=" + d + "&from=" + strings.Repeat("B", 5000), "BAD_STATION"},
		{"train=12951&class=3A&date=" + d + "&from=bvi", "BAD_STATION"},
	} {
		r := c.do(t, "GET", "/v1/availability?"+tc.query, nil, "")
		if r.status != http.StatusBadRequest || r.body["reason"] != tc.reason || len(r.raw) > 1000 {
			t.Errorf("%.60s: %d %.300s, want 400 %s", tc.query, r.status, r.raw, tc.reason)
		}
	}
	if r := c.do(t, "GET", "/v1/availability?train=12951&class=3A&date="+d, nil, ""); r.status != http.StatusOK {
		t.Fatalf("a good query: %d %s", r.status, r.raw)
	}
	if n := s.Service.Catalog().Cached(); n > 2 {
		t.Fatalf("%d catalog entries after one good and many bad queries", n)
	}
	tok := s.Token(s.Users(t, "in", 1)[0])
	authed := &client{base: s.Server.URL, token: tok, http: c.http}
	r := authed.do(t, "POST", "/v1/session/prepare", nil, fmt.Sprintf(`{"intent":{"train_no":"1234567","journey_date":%q,"class":"3A"}}`, d))
	if r.status != http.StatusBadRequest || r.body["reason"] != "BAD_TRAIN_NO" {
		t.Fatalf("prepare with a bad train: %d %s", r.status, r.raw)
	}
}
