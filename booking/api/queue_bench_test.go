package api_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"tatkal/booking"
	"tatkal/booking/admission"
	"tatkal/booking/inventory"
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/teststack"
)

// BenchmarkEarlyPollHTTP: status polls that come before poll_after_ms,
// through HTTP on loopback: the cached answer, no Redis call. What one
// costs sizes the per-address limit on unauthenticated requests
// (admission.DefaultLimitIP); client and server share the two cores, so
// 2 × ns/op is an upper bound on one request's CPU.
func BenchmarkEarlyPollHTTP(b *testing.B) {
	srv, c, ticket, _ := benchQueue(b)
	b.ReportAllocs()
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if code, body, _ := c.call(srv, "GET", "/v1/queue/status?ticket="+ticket, nil, ""); code != 200 {
				b.Errorf("early poll: %d %v", code, body)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "polls/s")
}

// BenchmarkUnauthenticatedHTTP: an unauthenticated request (the fairness
// page) through the per-address limiter: one Redis round trip more. Past
// 2,000 a second from this one address some are answered 503 at once.
func BenchmarkUnauthenticatedHTTP(b *testing.B) {
	srv, _, _, shardID := benchQueue(b)
	anon := &traveller{http: &http.Client{Transport: sharedTransport}}
	path := fmt.Sprintf("/v1/windows/%d/fairness", shardID)
	b.ReportAllocs()
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			// 503: over the limit, answered at once; also a cost measured.
			if code, body, _ := anon.call(srv, "GET", path, nil, ""); code != 200 && code != http.StatusServiceUnavailable {
				b.Errorf("fairness: %d %v", code, body)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "requests/s")
}

// benchQueue is a stack with a sold-out queue-mode shard and one traveller
// in its queue who has just polled and been told SOLD_OUT (next poll due in
// 30 s, so the whole benchmark polls early).
func benchQueue(b *testing.B) (string, *traveller, string, int64) {
	ctx := context.Background()
	s := teststack.New(b, teststack.Options{})
	open := -time.Minute
	if _, err := seed.Demo(ctx, s.Pool, seed.DemoOptions{OpensIn: &open}); err != nil {
		b.Fatal(err)
	}
	date := time.Now().In(booking.IST).AddDate(0, 0, 9)
	date = time.Date(date.Year(), date.Month(), date.Day(), 0, 0, 0, 0, booking.IST)
	wl := 0
	shardID, err := seed.Shard(ctx, s.Pool, seed.ShardSpec{Train: "12951", Date: date, Class: "3A", Berths: 1,
		OpensAt: time.Now().Add(-time.Minute), Mode: "queue", WaitlistCap: &wl})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Service.Rebuild(ctx, shardID); err != nil {
		b.Fatal(err)
	}
	shard, err := s.Service.Catalog().ByID(ctx, shardID)
	if err != nil {
		b.Fatal(err)
	}
	uid := s.Users(b, "bep", 1)[0]
	c := &traveller{uid: uid, http: &http.Client{Transport: sharedTransport}, token: s.Token(uid)}
	code, body, _ := c.call(s.Server.URL, "POST", "/v1/devices/bind", nil, `{"device_token":"bench-early-poll-device"}`)
	if c.device, _ = body["device_binding"].(string); code != 200 {
		b.Fatalf("bind: %d %v", code, body)
	}
	code, body, _ = c.call(s.Server.URL, "POST", "/v1/queue/enter", nil,
		fmt.Sprintf(`{"intent":{"train_no":"12951","journey_date":"%s","class":"3A"}}`, date.Format(time.DateOnly)))
	ticket, _ := body["queue_ticket"].(string)
	if code != 200 || ticket == "" {
		b.Fatalf("enter: %d %v", code, body)
	}
	if res, err := s.Store.Hold(ctx, inventory.HoldRequest{ShardID: shardID, HoldID: uuid.NewString(), UserID: 999999, IdemKey: "bench-sellout",
		From: 0, To: shard.Legs, ExpiresAt: time.Now().Add(3 * time.Minute), DailyCap: 2, Prefs: []byte("-"), IDOK: true, IdemTTL: time.Hour, MaxPassengers: 4}); err != nil || res.Outcome != inventory.Held {
		b.Fatalf("sell the berth: %+v %v", res, err)
	}
	if err := s.Admission.NewController(admission.ControllerConfig{}).Step(ctx); err != nil {
		b.Fatal(err)
	}
	if code, body, _ := c.call(s.Server.URL, "GET", "/v1/queue/status?ticket="+ticket, nil, ""); code != 200 || body["status"] != admission.SoldOut {
		b.Fatalf("first poll: %d %v", code, body)
	}
	return s.Server.URL, c, ticket, shardID
}
