package console_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"tatkal/booking"
	"tatkal/booking/lab/teststack"
	"tatkal/booking/prs"
)

// A chart's delivery FAILED (the core down at its job's last attempt)
// while a booking on it still waited for its own sync; the core, back,
// rejects that booking, which is cancelled and refunded. Ops send the
// chart again from the console: it reaches the core without the rejected
// booking, seating the passenger who travels. The retry used to resend the
// frozen chart, which the core refused (CHART_MISMATCH) however often ops
// clicked: only SQL could clear it.
func TestChartRetryDeliversWithoutABookingTheCoreRejected(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := setup(t, teststack.Options{})
	shardID, date := s.DemoShard(t, 2, 0)
	users := s.Users(t, "crj", 2)
	book := func(i int) uuid.UUID {
		h, err := s.Service.Hold(ctx, teststack.Caller(users[i]), booking.HoldRequest{UserID: users[i], IdempotencyKey: fmt.Sprintf("crj-hold-%d", i),
			Train: "12951", Date: date, Class: "3A", From: "MMCT", To: "NDLS", Passengers: []booking.Passenger{{Name: fmt.Sprintf("Passenger %c", 'A'+i),
				Age: 41, Gender: "F", IDType: "PAN", IDRef: "ABCDE1234F"}}})
		if err != nil || h.Status != "HELD" {
			t.Fatalf("hold %d: %+v %v", i, h, err)
		}
		_, err = s.Service.Confirm(ctx, h.HoldID)
		teststack.Must(t, err, "confirm %d", i)
		return h.HoldID
	}
	seated, rejected := book(0), book(1)
	s.Recorded(t, seated) // at the core; the other's sync job is held back
	_, err := s.Service.Chart(ctx, shardID)
	teststack.Must(t, err, "chart")

	s.SetCoreFaults(t, prs.Faults{Outage: true})
	if err := s.Service.ChartJob(ctx, shardID, true, booking.ChartMaxAttempts, booking.ChartMaxAttempts); err == nil {
		t.Fatal("the send job's last attempt succeeded against a core that is down")
	}
	// The core is back and refuses the booking whose sync job runs now.
	s.SetCoreFaults(t, prs.Faults{RejectRate: 1})
	var bookingID int64
	var pnr string
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT id, pnr FROM bookings WHERE hold_id = $1`, rejected).Scan(&bookingID, &pnr), "booking")
	teststack.Must(t, s.Service.SyncToCore(ctx, bookingID), "the held-back sync")
	s.SetCoreFaults(t, prs.Faults{})
	var status string
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT status FROM bookings WHERE id = $1`, bookingID).Scan(&status), "status")
	if status != booking.BookingCancelled {
		t.Fatalf("the booking the core rejected is %s, want CANCELLED", status)
	}

	ops := newBrowser(t, s.Server.URL)
	ops.login("ops1")
	ops.get("/console/shards")
	code, page, h := ops.post("/console/shards/"+itoa(shardID)+"/chart/retry", nil)
	if code != http.StatusSeeOther {
		t.Fatalf("send again from the console: %d, want it delivered\n%.3000s", code, page)
	}
	if _, page, _ := ops.get(h.Get("Location")); !strings.Contains(page, "is at the reservation core now") {
		t.Fatalf("the result is not shown:\n%.3000s", page)
	}
	var core string
	var charts, seatedAtCore int
	var listed string
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT (SELECT chart_core_state FROM inventory_shards WHERE id = $1),
		(SELECT count(*) FROM prs.charts), (SELECT coalesce(max(passengers), 0) FROM prs.charts),
		(SELECT coalesce(string_agg(e->>'pnr', ','), '') FROM prs.charts, jsonb_array_elements(body->'confirmed') e)`, shardID).
		Scan(&core, &charts, &seatedAtCore, &listed), "chart at the core")
	if core != "SENT" || charts != 1 || seatedAtCore != 1 || strings.Contains(listed, pnr) {
		t.Fatalf("after the retry: %s; %d charts at the core seating %d (%s); want SENT, one chart seating 1, without %s",
			core, charts, seatedAtCore, listed, pnr)
	}
	var audited int
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE action = 'chart.retry_send' AND actor = 'ops1' AND subject = $1`,
		itoa(shardID)).Scan(&audited), "audit")
	if audited != 1 {
		t.Fatalf("%d audited retries, want 1", audited)
	}
	s.CheckInvariants(t, shardID)
}
