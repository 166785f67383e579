package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"tatkal/booking"
	"tatkal/booking/lab/teststack"
)

// A paid ticket the reservation core has not recorded yet (CONFIRMING) is
// not offered for cancellation and a forged cancel is refused; once
// confirmed it is; once the chart is prepared the page says the berths are
// final and offers no cancellation.
func TestBookingPageCancelAndChartState(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{})
	shardID, date := s.DemoShard(t, 4, 0)
	users := s.Users(t, "lc", 1)
	h, err := s.Service.Hold(ctx, teststack.Caller(users[0]), booking.HoldRequest{UserID: users[0], IdempotencyKey: "lc-hold-1", Train: "12951",
		Date: date, Class: "3A", From: "MMCT", To: "NDLS", Passengers: []booking.Passenger{{Name: "Meera Pillai", Age: 41, Gender: "F",
			IDType: "PAN", IDRef: "ABCDE1234F"}}})
	if err != nil || h.Status != "HELD" {
		t.Fatalf("hold: %+v %v", h, err)
	}
	_, err = s.Service.Confirm(ctx, h.HoldID) // no workers: the core sync waits
	teststack.Must(t, err, "confirm")
	me := newBrowser(t, s)
	me.signIn("lc00001", "pw-lc")
	path := "/bookings/" + h.HoldID.String()
	if _, _, page := me.get(path); !strings.Contains(page, `data-state="CONFIRMING"`) || strings.Contains(page, `data-testid="cancel-link"`) {
		t.Fatalf("a CONFIRMING ticket's page offers cancellation or is not CONFIRMING:\n%.3000s", page)
	}
	status, _, page := me.post(path, path+"/cancel", url.Values{"what": {"booking"}, "expect_refund_paise": {"0"}})
	if status != http.StatusConflict || !strings.Contains(page, "CONFIRMING") {
		t.Fatalf("cancel while CONFIRMING: %d\n%.2000s", status, page)
	}
	var bookingID int64
	var st string
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT id, status FROM bookings WHERE hold_id = $1`, h.HoldID).Scan(&bookingID, &st), "booking")
	if st != booking.BookingConfirmed {
		t.Fatalf("booking %s after a refused cancel, want CONFIRMED", st)
	}
	teststack.Must(t, s.Service.SyncToCore(ctx, bookingID), "sync")
	if _, _, page := me.get(path); !strings.Contains(page, `data-state="CONFIRMED"`) || !strings.Contains(page, `data-testid="cancel-link"`) {
		t.Fatalf("a CONFIRMED ticket's page offers no cancellation:\n%.3000s", page)
	}
	_, err = s.Service.Chart(ctx, shardID)
	teststack.Must(t, err, "chart")
	teststack.Must(t, s.Service.SendChart(ctx, shardID), "send chart")
	_, _, page = me.get(path)
	if !strings.Contains(page, `data-testid="chart"`) || !strings.Contains(page, "Your berths are final.") || strings.Contains(page, `data-testid="cancel-link"`) {
		t.Fatalf("a charted ticket's page lacks the chart or offers cancellation:\n%.3000s", page)
	}
	if _, _, ticket := me.get(path + "/ticket"); !strings.Contains(ticket, "Your berths are final.") {
		t.Fatalf("the e-ticket lacks the chart:\n%.3000s", ticket)
	}
}
