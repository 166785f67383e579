package rehearse

import (
	"context"
	"strings"
	"testing"
	"time"

	"tatkal/booking"
	"tatkal/booking/lab/teststack"
	"tatkal/booking/payment"
	"tatkal/booking/sim/pspsim"
)

// TestUnresolvedPaymentsTellTheirStory: a payment still open when the
// drain ends is reported with its state, method and every event with its
// time from the opening, so a failed drain says why.
func TestUnresolvedPaymentsTellTheirStory(t *testing.T) {
	t.Parallel()
	routes := pspsim.DefaultRoutes()
	for i := range routes {
		r := &routes[i]
		r.LatencyP50Ms, r.LatencyP99Ms, r.TimeoutRate, r.AutoApproveMs, r.AbandonRate, r.CapacityTPS = 5, 20, 0, -1, 0, 0
	}
	s := teststack.New(t, teststack.Options{Routes: routes})
	shard, date := s.DemoShard(t, 4, 0)
	user := s.Users(t, "story", 1)[0]
	ctx := context.Background()
	opens := time.Now()
	h, err := s.Service.Hold(ctx, teststack.Caller(user), booking.HoldRequest{UserID: user, IdempotencyKey: "story-hold-1",
		Train: "12951", Date: date, Class: "3A", From: "MMCT", To: "NDLS",
		Passengers: []booking.Passenger{{Name: "Meera Pillai", Age: 35, Gender: "F", IDType: "PAN", IDRef: "ABCDE1234F"}}})
	if err != nil || h.Status != "HELD" {
		t.Fatalf("hold: %+v %v", h, err)
	}
	v, err := s.Payments.Initiate(ctx, teststack.Caller(user), payment.InitiateRequest{HoldID: h.HoldID, Method: payment.UPI,
		VPA: "meera@okbank", IdempotencyKey: "story-pay-1"})
	if err != nil || v.State != payment.AwaitingUser {
		t.Fatalf("pay: %+v %v; want %s (the customer never answers)", v, err, payment.AwaitingUser)
	}
	mr := &modeRun{t: &target{pool: s.Pool}, shardID: shard, opens: opens}
	got, err := mr.unresolvedStories(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("%d stories, want 1: %q", len(got), got)
	}
	for _, want := range []string{"UPI AWAITING_USER since +", "→INITIATED (initiated)", "INITIATED→AWAITING_USER (create answer)"} {
		if !strings.Contains(got[0], want) {
			t.Errorf("story %q lacks %q", got[0], want)
		}
	}
}
