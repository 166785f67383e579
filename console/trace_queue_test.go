package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"tatkal/booking"
	"tatkal/booking/admission"
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/teststack"
)

// TestTraceShowsQueueRefusals: a refusal in the waiting room (here an
// early poll) shows in the traveller's trace with its reason.
func TestTraceShowsQueueRefusals(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{})
	ctx := context.Background()
	open := -time.Minute
	if _, err := seed.Demo(ctx, s.Pool, seed.DemoOptions{OpensIn: &open}); err != nil {
		t.Fatal(err)
	}
	date := time.Now().In(booking.IST).AddDate(0, 0, 9)
	date = time.Date(date.Year(), date.Month(), date.Day(), 0, 0, 0, 0, booking.IST)
	if _, err := seed.Shard(ctx, s.Pool, seed.ShardSpec{Train: "12951", Date: date, Class: "3A", Berths: 8,
		OpensAt: time.Now().Add(time.Minute), Mode: "queue"}); err != nil {
		t.Fatal(err)
	}
	uid := s.Users(t, "trq", 1)[0]
	c := admission.Caller{UserID: uid, Verified: true, CreatedAt: time.Now().AddDate(0, -1, 0), SessionToken: "st_trace_queue",
		DeviceToken: s.Admission.DeviceKeys().BindDevice(uid, "trace-device", time.Now().Add(time.Hour))}
	v, err := s.Admission.Enter(ctx, c, admission.Intent{TrainNo: "12951", JourneyDate: date, Class: "3A"})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := s.Admission.Status(ctx, c, v.Ticket); err != nil {
			t.Fatal(err)
		}
	}
	b := newBrowser(t, s.Server.URL)
	b.login("ops1")
	_, body, _ := b.get("/console/trace?login=trq00001")
	for _, want := range []string{"refused in the queue: " + admission.RefusedEarlyPoll, "before the time given"} {
		if !strings.Contains(body, want) {
			t.Fatalf("trace lacks %q:\n%.3000s", want, body)
		}
	}
}
