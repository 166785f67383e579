package prs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// ReasonChartMismatch: the chart names a confirmed PNR the core does not
// hold with those berths (never synced, cancelled, or seated elsewhere).
// The chart is then not stored; someone must look.
const ReasonChartMismatch = "CHART_MISMATCH"

// MaxChartEntries bounds a chart: a train's class and quota on a day is at
// most a few thousand PNRs.
const MaxChartEntries = 10_000

// Chart is a shard's prepared chart as sent to the core:
//
//	PUT /v1/charts/{train}/{date}/{class}/{quota}
//
// 201 first time, 200 with the same ChartAck on a replay, 409 for a
// different chart of the same train, date, class and quota, 422 REJECTED
// CHART_MISMATCH when a confirmed entry disagrees with the core's own
// bookings (nothing stored then), 400 malformed. The core cancels the
// Cancelled PNRs it holds, so the chart alone settles the waitlist there.
type Chart struct {
	Ref         string       `json:"ref"` // our reference of the chart
	Train       string       `json:"train"`
	JourneyDate string       `json:"journey_date"`
	Class       string       `json:"class"`
	Quota       string       `json:"quota"`
	PreparedAt  time.Time    `json:"prepared_at"`
	Confirmed   []ChartEntry `json:"confirmed"` // every PNR holding berths, in PNR order
	Cancelled   []string     `json:"cancelled"` // waitlisted PNRs cancelled at charting, in order
}

// ChartEntry is one confirmed PNR on the chart with its final berths.
type ChartEntry struct {
	PNR        string      `json:"pnr"`
	FromSeq    int         `json:"from_seq"`
	ToSeq      int         `json:"to_seq"`
	Passengers []Passenger `json:"passengers"`
}

// ChartAck is the core's acknowledgement of a chart; a replay gets the same.
type ChartAck struct {
	Ref         string    `json:"ref"`
	CoreChartID string    `json:"core_chart_id"`
	Passengers  int       `json:"passengers"` // seated on the chart
	Cancelled   int       `json:"cancelled"`
	AcceptedAt  time.Time `json:"accepted_at"`
}

// Validate says what is malformed in a chart, or nil.
func (c *Chart) Validate() error {
	switch {
	case c.Ref == "" || len(c.Ref) > 64:
		return fmt.Errorf("ref must be 1 to 64 characters (got %d)", len(c.Ref))
	case !codeRE.MatchString(c.Train):
		return fmt.Errorf("train %q is not a train number", c.Train)
	case !codeRE.MatchString(c.Class):
		return fmt.Errorf("class %q is not a class code", c.Class)
	case !codeRE.MatchString(c.Quota):
		return fmt.Errorf("quota %q is not a quota code", c.Quota)
	case c.PreparedAt.IsZero():
		return errors.New("prepared_at is missing")
	case len(c.Confirmed)+len(c.Cancelled) > MaxChartEntries:
		return fmt.Errorf("%d entries; a chart carries at most %d", len(c.Confirmed)+len(c.Cancelled), MaxChartEntries)
	}
	if _, err := time.Parse(DateLayout, c.JourneyDate); err != nil {
		return fmt.Errorf("journey_date %q is not YYYY-MM-DD", c.JourneyDate)
	}
	seen := make(map[string]bool, len(c.Confirmed)+len(c.Cancelled))
	for i, e := range c.Confirmed {
		if seen[e.PNR] {
			return fmt.Errorf("confirmed entry %d: PNR %q twice on the chart", i+1, e.PNR)
		}
		seen[e.PNR] = true
		// An entry is a confirmed booking of this chart's train: the
		// booking rules say what that is.
		b := Booking{PNR: e.PNR, Train: c.Train, JourneyDate: c.JourneyDate, Class: c.Class, Quota: c.Quota,
			From: "A", To: "B", FromSeq: e.FromSeq, ToSeq: e.ToSeq, Status: StatusConfirmed, Passengers: e.Passengers}
		if err := b.Validate(); err != nil {
			return fmt.Errorf("confirmed entry %d: %w", i+1, err)
		}
	}
	for i, pnr := range c.Cancelled {
		if !ValidPNR(pnr) {
			return fmt.Errorf("cancelled entry %d: %q is not a 10-digit PNR", i+1, pnr)
		}
		if seen[pnr] {
			return fmt.Errorf("cancelled entry %d: PNR %s is on the chart twice", i+1, pnr)
		}
		seen[pnr] = true
	}
	return nil
}

// Request is the chart in a canonical form (entries and passengers
// sorted, times in UTC), so equal charts compare equal.
func (c Chart) Request() Chart {
	c.PreparedAt = c.PreparedAt.UTC().Truncate(time.Microsecond)
	c.Confirmed = slices.Clone(c.Confirmed)
	for i := range c.Confirmed {
		c.Confirmed[i].Passengers = slices.Clone(c.Confirmed[i].Passengers)
		slices.SortFunc(c.Confirmed[i].Passengers, func(x, y Passenger) int { return x.Seq - y.Seq })
	}
	slices.SortFunc(c.Confirmed, func(x, y ChartEntry) int { return strings.Compare(x.PNR, y.PNR) })
	c.Cancelled = slices.Clone(c.Cancelled)
	slices.Sort(c.Cancelled)
	if c.Confirmed == nil {
		c.Confirmed = []ChartEntry{}
	}
	if c.Cancelled == nil {
		c.Cancelled = []string{}
	}
	return c
}

// Digest fingerprints the chart so a replay can be told from another chart.
func (c Chart) Digest() string {
	body, err := json.Marshal(c.Request())
	if err != nil {
		panic(fmt.Sprintf("prs: marshal chart: %v", err))
	}
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

// ChartPath is the chart's resource path.
func ChartPath(train, date, class, quota string) string {
	return "/v1/charts/" + url.PathEscape(train) + "/" + url.PathEscape(date) + "/" + url.PathEscape(class) + "/" + url.PathEscape(quota)
}

// SendChart sends a prepared chart to the core. Sending it again returns
// the same ChartAck. A *RejectedError (CHART_MISMATCH) means the core's
// bookings disagree with the chart.
func (c *Client) SendChart(ctx context.Context, ch Chart) (ChartAck, error) {
	op := "chart " + ch.Ref
	req := ch.Request()
	if err := req.Validate(); err != nil {
		return ChartAck{}, &ProtocolError{Op: op, Code: CodeBadRequest, Message: err.Error()}
	}
	var ack ChartAck
	if err := c.call(ctx, op, http.MethodPut, ChartPath(req.Train, req.JourneyDate, req.Class, req.Quota), req, &ack, maxAnswer); err != nil {
		return ChartAck{}, err
	}
	if ack.Ref != ch.Ref || ack.CoreChartID == "" {
		return ChartAck{}, &ProtocolError{Op: op, Status: http.StatusOK, Code: "BAD_ANSWER",
			Message: fmt.Sprintf("acknowledgement for chart %q with core id %q", ack.Ref, ack.CoreChartID)}
	}
	return ack, nil
}

// GetChart reads the chart the core stored for a train, date, class and
// quota; ErrNotFound when none.
func (c *Client) GetChart(ctx context.Context, train string, date time.Time, class, quota string) (Chart, ChartAck, error) {
	var out struct {
		Chart Chart    `json:"chart"`
		Ack   ChartAck `json:"ack"`
	}
	path := ChartPath(train, date.Format(DateLayout), class, quota)
	if err := c.call(ctx, "get chart "+path, http.MethodGet, path, nil, &out, maxExport); err != nil {
		return Chart{}, ChartAck{}, err
	}
	return out.Chart, out.Ack, nil
}
