package console_test

import (
	"context"
	"fmt"
	"html"
	"strings"
	"testing"
	"time"

	"tatkal/booking"
	"tatkal/booking/admission"
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
)

// TestTraceShowsHoldRefusalsAndAdmissions: a traveller refused at the
// hold (no admission yet) and then admitted from the queue sees both in
// the trace, in order, and a traveller refused at a sold-out shard is
// told so in the outcome.
func TestTraceShowsHoldRefusalsAndAdmissions(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{})
	ctx := context.Background()
	open := -time.Minute
	if _, err := seed.Demo(ctx, s.Pool, seed.DemoOptions{OpensIn: &open}); err != nil {
		t.Fatal(err)
	}
	date := time.Now().In(booking.IST).AddDate(0, 0, 9)
	date = time.Date(date.Year(), date.Month(), date.Day(), 0, 0, 0, 0, booking.IST)
	shardID, err := seed.Shard(ctx, s.Pool, seed.ShardSpec{Train: "12951", Date: date, Class: "3A", Berths: 8,
		OpensAt: time.Now().Add(-time.Minute), Mode: "queue"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Service.Rebuild(ctx, shardID); err != nil {
		t.Fatal(err)
	}
	uid := s.Users(t, "trh", 1)[0]
	req := booking.HoldRequest{UserID: uid, IdempotencyKey: "trace-hold-1", Train: "12951", Date: date, Class: "3A", From: "MMCT", To: "NDLS",
		Passengers: []booking.Passenger{{Name: "Asha Rao", Age: 30, Gender: "F", IDType: "PAN", IDRef: "ABCDE1234F"}}}
	if _, err := s.Service.Hold(ctx, teststack.Caller(uid), req); booking.ErrorReason(err) != "ADMISSION_REQUIRED" {
		t.Fatalf("hold before admission: %v, want ADMISSION_REQUIRED", err)
	}
	c := admission.Caller{UserID: uid, Verified: true, CreatedAt: time.Now().AddDate(0, -1, 0), SessionToken: "st_trace_hold",
		DeviceToken: s.Admission.DeviceKeys().BindDevice(uid, "trace-hold-device", time.Now().Add(time.Hour))}
	if _, err := s.Admission.Enter(ctx, c, admission.Intent{TrainNo: "12951", JourneyDate: date, Class: "3A"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Admission.NewController(admission.ControllerConfig{}).Step(ctx); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, s.Server.URL)
	b.login("ops1")
	var body string
	testenv.Eventually(t, 5*time.Second, "refusal and admission in the trace", func() error {
		_, raw, _ := b.get("/console/trace?login=trh00001")
		body = html.UnescapeString(raw)
		for _, want := range []string{"hold refused: ADMISSION_REQUIRED", "goes through the waiting room", "admitted from the queue at place 1"} {
			if !strings.Contains(body, want) {
				return fmt.Errorf("trace lacks %q", want)
			}
		}
		return nil
	})
	if r, a := strings.Index(body, "hold refused: ADMISSION_REQUIRED"), strings.Index(body, "admitted from the queue"); r > a {
		t.Fatalf("the refusal came first but is listed after the admission:\n%.4000s", body)
	}
	if !strings.Contains(body, "1 hold attempt(s) refused, the last one ADMISSION_REQUIRED") {
		t.Fatalf("outcome does not name the refusal:\n%.4000s", body)
	}

	// A sold-out answer is a refusal too.
	soldID, soldDate := s.DemoShard(t, 1, 0)
	us := s.Users(t, "trs", 2)
	uid2 := us[1]
	first := booking.HoldRequest{UserID: us[0], IdempotencyKey: "trace-first-1", Train: "12951", Date: soldDate, Class: "3A", From: "MMCT", To: "NDLS",
		Passengers: []booking.Passenger{{Name: "Uma Rao", Age: 40, Gender: "F", IDType: "PAN", IDRef: "ABCDE1234F"}}}
	if res, err := s.Service.Hold(ctx, teststack.Caller(us[0]), first); err != nil || res.Status != "HELD" {
		t.Fatalf("the one berth: %+v %v", res, err)
	}
	req2 := booking.HoldRequest{UserID: uid2, IdempotencyKey: "trace-sold-1", Train: "12951", Date: soldDate, Class: "3A", From: "MMCT", To: "NDLS",
		Passengers: []booking.Passenger{{Name: "Ravi Rao", Age: 40, Gender: "M", IDType: "PAN", IDRef: "ABCDE1234F"}}}
	if res, err := s.Service.Hold(ctx, teststack.Caller(uid2), req2); err != nil || res.Status != "SOLD_OUT" {
		t.Fatalf("hold on an empty shard %d: %+v %v", soldID, res, err)
	}
	testenv.Eventually(t, 5*time.Second, "sold out in the trace", func() error {
		_, raw, _ := b.get("/console/trace?login=trs00002")
		if !strings.Contains(html.UnescapeString(raw), "hold refused: SOLD_OUT") {
			return fmt.Errorf("no SOLD_OUT")
		}
		return nil
	})
}
