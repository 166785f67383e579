package prssim_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"tatkal/booking/prs"
)

// chartOf builds the chart of train 12951 3A TQ on day1 with the given
// confirmed bookings and cancelled PNRs.
func chartOf(ref string, cancelled []string, bs ...prs.Booking) prs.Chart {
	c := prs.Chart{Ref: ref, Train: "12951", JourneyDate: day1, Class: "3A", Quota: "TQ",
		PreparedAt: time.Date(2026, 3, 10, 7, 30, 0, 0, time.UTC), Cancelled: cancelled}
	for _, b := range bs {
		c.Confirmed = append(c.Confirmed, prs.ChartEntry{PNR: b.PNR, FromSeq: b.FromSeq, ToSeq: b.ToSeq, Passengers: b.Passengers})
	}
	return c
}

// A chart is stored once: sent four times at once it is created once and
// every sender gets the same acknowledgement; the waitlisted PNR it
// cancels is cancelled at the core; another chart under the same key is a
// conflict; and it reads back as sent.
func TestChartStoredOnceAndSettlesTheWaitlist(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStack(t)
	a := confirmed("1000000001", 0, 4, berth{"B1", 1}, berth{"B1", 2})
	wl := waitlisted("1000000002", 1)
	mustSync(t, st.client, a)
	mustSync(t, st.client, wl)
	chart := chartOf("CH1-test", []string{wl.PNR}, a)

	acks := make([]prs.ChartAck, 4)
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() { acks[i], errs[i] = st.client.SendChart(ctx, chart) })
	}
	wg.Wait()
	for i := range 4 {
		if errs[i] != nil {
			t.Fatalf("send %d: %v", i, errs[i])
		}
		if acks[i] != acks[0] {
			t.Fatalf("ack %d %+v differs from %+v", i, acks[i], acks[0])
		}
	}
	if acks[0].Passengers != 2 || acks[0].Cancelled != 1 || acks[0].CoreChartID == "" {
		t.Fatalf("ack %+v, want 2 passengers, 1 cancelled and a core chart id", acks[0])
	}
	var charts int
	if err := st.env.Pool.QueryRow(ctx, `SELECT count(*) FROM prs.charts`).Scan(&charts); err != nil || charts != 1 {
		t.Fatalf("%d charts stored (%v), want 1", charts, err)
	}
	got, err := st.client.Get(ctx, wl.PNR)
	if err != nil || got.State != prs.StateCancelled {
		t.Fatalf("the waitlisted PNR at the core after charting: %+v %v, want CANCELLED", got, err)
	}
	back, ack, err := st.client.GetChart(ctx, "12951", time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC), "3A", "TQ")
	if err != nil || ack != acks[0] || back.Digest() != chart.Digest() {
		t.Fatalf("chart read back: %+v %+v %v", back, ack, err)
	}
	other := chartOf("CH1-other", nil, a)
	_, err = st.client.SendChart(ctx, other)
	var pe *prs.ProtocolError
	if !errors.As(err, &pe) || pe.Status != http.StatusConflict {
		t.Fatalf("another chart under the same key: %v, want 409", err)
	}
}

// A chart whose confirmed entries the core does not hold as sent (an
// unknown PNR, other berths) is refused as CHART_MISMATCH and stores
// nothing; a chart nobody sent is not found.
func TestChartMismatchIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := newStack(t)
	a := confirmed("1000000011", 0, 4, berth{"B1", 1})
	mustSync(t, st.client, a)
	moved := a
	moved.Passengers = []prs.Passenger{a.Passengers[0]}
	moved.Passengers[0].BerthNo = 7
	unknown := confirmed("1000000012", 0, 4, berth{"B1", 3})
	for _, c := range []prs.Chart{chartOf("CH2-a", nil, moved), chartOf("CH2-b", nil, a, unknown)} {
		_, err := st.client.SendChart(ctx, c)
		wantRejected(t, err, prs.ReasonChartMismatch)
	}
	_, _, err := st.client.GetChart(ctx, "12951", time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC), "3A", "TQ")
	wantNotFound(t, err)
	// Malformed: a berth twice.
	bad := chartOf("CH2-c", nil, confirmed("1000000013", 0, 4, berth{"B1", 1}, berth{"B1", 1}))
	status, _ := st.raw(t, http.MethodPut, prs.ChartPath("12951", day1, "3A", "TQ"), apiKey, bad)
	if status != http.StatusBadRequest {
		t.Fatalf("a chart seating two passengers on one berth: %d, want 400", status)
	}
}
