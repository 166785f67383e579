package api_test

import (
	"context"
	"strings"
	"testing"

	"tatkal/booking"
	"tatkal/booking/lab/teststack"
)

// A direct-mode shard (no waiting room) still needs a bound device: a hold
// without a binding, or with another account's, is refused saying how to
// bind, and takes nothing; once the app binds its device the same hold is
// taken. The service refuses a caller no edge vouched a device for.
func TestHoldNeedsABoundDeviceOnADirectShard(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{})
	shardID, date := s.DemoShard(t, 4, 0)
	users := s.Users(t, "devh", 2)
	c := newClient(s, users[0])
	c.device = "" // signed in, never bound
	other := s.DeviceBinding(users[1])

	for name, h := range map[string]map[string]string{
		"no binding":        {"Idempotency-Key": "dev-unbound-1"},
		"a made-up binding": {"Idempotency-Key": "dev-unbound-2", "X-Device-Token": "my-own-device-token-1234"},
		"another account's": {"Idempotency-Key": "dev-unbound-3", "X-Device-Token": other},
	} {
		r := c.do(t, "POST", "/v1/bookings/hold", h, holdBody(date, "MMCT", "NDLS", 1))
		if r.status != 403 || r.body["reason"] != "DEVICE_NOT_BOUND" || !strings.Contains(r.raw, "/v1/devices/bind") {
			t.Fatalf("hold with %s: %d %s, want 403 DEVICE_NOT_BOUND naming /v1/devices/bind", name, r.status, r.raw)
		}
	}
	var holds int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM holds`).Scan(&holds); err != nil {
		t.Fatal(err)
	}
	if holds != 0 {
		t.Fatalf("%d holds after refused unbound attempts, want 0", holds)
	}
	s.CheckInvariants(t, shardID)

	bind := c.do(t, "POST", "/v1/devices/bind", nil, `{"device_token":"phone-devh-0001-abcdef"}`)
	if bind.status != 200 {
		t.Fatalf("bind: %d %s", bind.status, bind.raw)
	}
	c.device = bind.body["device_binding"].(string)
	if r := c.hold(t, "dev-bound-1", holdBody(date, "MMCT", "NDLS", 1)); r.status != 201 || r.body["status"] != "HELD" {
		t.Fatalf("hold once bound: %d %s", r.status, r.raw)
	}

	caller := teststack.Caller(users[1])
	caller.Device = ""
	req := booking.HoldRequest{UserID: users[1], IdempotencyKey: "dev-direct-1", Train: "12951", Date: date, Class: "3A", From: "MMCT", To: "NDLS",
		Passengers: []booking.Passenger{{Name: "Ravi Rao", Age: 40, Gender: "M", IDType: "PAN", IDRef: "ABCDE1234F"}}}
	if _, err := s.Service.Hold(ctx, caller, req); booking.ErrorReason(err) != "DEVICE_NOT_BOUND" {
		t.Fatalf("service hold for a caller with no device: %v, want DEVICE_NOT_BOUND", err)
	}
}
