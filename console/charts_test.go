package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"tatkal/booking"
	"tatkal/booking/admission"
	"tatkal/booking/funnel"
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
	"tatkal/views"
)

// TestFunnelChartsAddUpAcrossProcesses: two app processes count into one
// shard; the third's console charts their sum from Redis, draws that
// shard as its own line and the idle shards as one summed line. The two
// processes' hold latencies make one p95 (from their summed histograms,
// not either's own p95) and their calls to a payment route add up.
func TestFunnelChartsAddUpAcrossProcesses(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{})
	other := teststack.Start(t, s.Env, teststack.Options{})
	viewer := teststack.Start(t, s.Env, teststack.Options{})
	busy, _ := s.DemoShard(t, 6, 0)
	var idle int64 // one of the demo's shards
	if err := s.Pool.QueryRow(context.Background(), `SELECT min(id) FROM inventory_shards WHERE id <> $1`, busy).Scan(&idle); err != nil {
		t.Fatal(err)
	}
	// One second's events, half in each process: one 5-second bucket.
	s.Funnel.Add(busy, funnel.Held, 30)
	other.Funnel.Add(busy, funnel.Held, 20)
	other.Funnel.Add(busy, funnel.PayFailed, 3)
	s.Funnel.Add(busy, funnel.PayUnknown, 2)
	s.Funnel.Add(idle, funnel.Held, 1) // under 5% of the busy shard's: quiet
	// Hold latencies, the same step: this process's own p95 is 2 s, the
	// other's 50 ms; the 190th of their 200 together is at 50 ms.
	for i := 0; i < 100; i++ {
		if i < 90 {
			s.Funnel.Observe(funnel.HoldAttempt, time.Millisecond)
		} else {
			s.Funnel.Observe(funnel.HoldAttempt, 2*time.Second)
		}
		other.Funnel.Observe(funnel.HoldAttempt, 50*time.Millisecond)
	}
	// One route's calls: 5 answered in the step (1/s), 1 with no answer; its breaker opened once.
	hs, err := s.Payments.Healths(context.Background())
	if err != nil || len(hs) == 0 {
		t.Fatalf("routes: %v %v", hs, err)
	}
	route := hs[0].Gateway + "/" + hs[0].Method
	for i := 0; i < 3; i++ {
		s.Funnel.RouteEvent(route, funnel.RouteAnswered)
	}
	other.Funnel.RouteEvent(route, funnel.RouteAnswered)
	other.Funnel.RouteEvent(route, funnel.RouteAnswered)
	other.Funnel.RouteEvent(route, funnel.RouteNoAnswer)
	other.Funnel.RouteEvent(route, funnel.RouteBreakerOpened)
	routeKey := "route-" + strings.ReplaceAll(route, "/", "-")
	chart := func(cs []views.Chart, key string) views.Chart {
		for _, c := range cs {
			if c.Key == key {
				return c
			}
		}
		return views.Chart{}
	}

	b := newBrowser(t, viewer.Server.URL)
	b.login("ops1")
	find := func(c views.FunnelCharts, id int64) views.ChartShard {
		for _, cs := range c.Shards {
			if cs.ID == id {
				return cs
			}
		}
		t.Fatalf("shard %d not charted: %+v", id, c.Shards)
		return views.ChartShard{}
	}
	var snap views.FunnelView
	// The chart shows complete 5 s buckets only.
	testenv.Eventually(t, 20*time.Second, "both processes' events in the charts", func() error {
		code, body, _ := b.get("/console/funnel.json")
		if code != http.StatusOK {
			t.Fatalf("funnel.json: %d %s", code, body)
		}
		snap = views.FunnelView{}
		if err := json.Unmarshal([]byte(body), &snap); err != nil {
			t.Fatal(err)
		}
		p95, rt := chart(snap.Charts.Latency, "p95-"+funnel.HoldAttempt), chart(snap.Charts.Routes, routeKey)
		return testenv.Want(find(snap.Charts, busy).Events == 55 && find(snap.Charts, idle).Events == 1 && p95.Peak == "50 ms" && rt.Peak == "1/s" && rt.Note == "breaker opened 1×",
			"busy %+v, idle %+v, hold p95 peak %q (want 50 ms), %s peak %q (want 1/s) note %q",
			find(snap.Charts, busy), find(snap.Charts, idle), p95.Peak, route, rt.Peak, rt.Note)
	})
	c := snap.Charts
	if bs, is := find(c, busy), find(c, idle); bs.Quiet || !is.Quiet || c.Shards[0].ID != busy {
		t.Fatalf("busy shard %+v first and apart, idle shard %+v quiet; got order %+v", bs, is, c.Shards)
	}
	if c.Quiet != len(c.Shards)-1 {
		t.Fatalf("%d quiet shards of %d, want all but the busy one", c.Quiet, len(c.Shards))
	}
	peaks := map[string]string{}
	lines := map[string]map[string]string{}
	for _, ch := range c.Charts {
		peaks[ch.Key] = ch.Peak
		lines[ch.Key] = map[string]string{}
		for _, l := range ch.Lines {
			lines[ch.Key][l.ID] = l.Points
		}
	}
	// 50 held in one 5-second bucket is 10 a second; failed and unknown share a chart.
	if peaks["held"] != "10/s" || peaks["payfail"] != "1/s" || peaks["confirmed"] != "0/s" {
		t.Fatalf("peaks %v, want held 10/s, payfail 1/s, confirmed 0/s", peaks)
	}
	flat := views.LinePoints(make([]int64, 121), 0, views.ChartW, views.ChartH)
	if p := lines["held"][fmt.Sprint(busy)]; !topped(p) {
		t.Fatalf("the busy shard's held line never reaches the top: %s", p)
	}
	if p := lines["held"]["-1"]; p == flat || topped(p) {
		t.Fatalf("the quiet shards' sum should show their one event, low: %s", p)
	}
	if p := lines["confirmed"][fmt.Sprint(busy)]; p != flat {
		t.Fatalf("nothing confirmed, yet the line is %s", p)
	}
	// The route's answered line tops its chart, its unanswered one is low,
	// and nothing was refused; the payment stage, never timed, is charted
	// with no point at all (not a line at 0, which would read as fast).
	rl := map[string]string{}
	for _, l := range chart(c.Routes, routeKey).Lines {
		rl[l.ID] = l.Points
	}
	if !topped(rl[funnel.RouteAnswered]) || rl[funnel.RouteNoAnswer] == flat || topped(rl[funnel.RouteNoAnswer]) || rl[funnel.RouteRefused] != flat {
		t.Fatalf("route lines %v: want answered at the top, no answer low, refused flat", rl)
	}
	if pc := chart(c.Latency, "p95-"+funnel.PayInitiated); pc.Peak != "0 ms" || len(pc.Lines) != 1 || pc.Lines[0].Points != "" {
		t.Fatalf("payment p95 chart %+v, want charted with no points", pc)
	}
	// The page draws the same, server-side.
	_, body, _ := b.get("/console/funnel")
	for _, want := range []string{`data-testid="chart-held"`, `data-testid="peak-held">10/s<`, `data-testid="expand-quiet"`,
		`data-testid="peak-p95-hold_attempt">50 ms<`, `data-testid="peak-` + routeKey + `">1/s<`, `data-testid="note-` + routeKey + `">breaker opened 1×<`} {
		if !strings.Contains(body, want) {
			t.Fatalf("page lacks %s", want)
		}
	}
}

// topped says whether a line reaches the top of its box (y = 1).
func topped(points string) bool {
	for _, p := range strings.Fields(points) {
		if strings.HasSuffix(p, ",1") {
			return true
		}
	}
	return false
}

// TestQueueDepthChart: five travellers enter a waiting room that is not
// admitting yet, through two app processes. The depth chart walks the
// live depth back by the arrivals counted: 0 before, 5 after.
func TestQueueDepthChart(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{})
	other := teststack.Start(t, s.Env, teststack.Options{})
	ctx := context.Background()
	open := -time.Minute
	if _, err := seed.Demo(ctx, s.Pool, seed.DemoOptions{OpensIn: &open}); err != nil {
		t.Fatal(err)
	}
	date := time.Now().In(booking.IST).AddDate(0, 0, 9)
	date = time.Date(date.Year(), date.Month(), date.Day(), 0, 0, 0, 0, booking.IST)
	shard, err := seed.Shard(ctx, s.Pool, seed.ShardSpec{Train: "12951", Date: date, Class: "3A", Berths: 8,
		OpensAt: time.Now().Add(10 * time.Minute), Mode: "queue"})
	if err != nil {
		t.Fatal(err)
	}
	for i, uid := range s.Users(t, "qd", 5) {
		st := s
		if i%2 == 1 {
			st = other
		}
		c := admission.Caller{UserID: uid, Verified: true, CreatedAt: time.Now().AddDate(0, -1, 0), SessionToken: fmt.Sprintf("st_depth_%d", i),
			DeviceToken: st.Admission.DeviceKeys().BindDevice(uid, "depth-device", time.Now().Add(time.Hour))}
		if _, err := st.Admission.Enter(ctx, c, admission.Intent{TrainNo: "12951", JourneyDate: date, Class: "3A"}); err != nil {
			t.Fatalf("enter %d: %v", i, err)
		}
	}
	b := newBrowser(t, s.Server.URL)
	b.login("ops1")
	// Until the arrivals' bucket is complete: the live depth (the peak)
	// shows at once, the other process's arrivals when its funnel flushes.
	testenv.Eventually(t, 20*time.Second, "the queue's depth line rising from 0 to its top", func() error {
		_, body, _ := b.get("/console/funnel.json")
		var snap views.FunnelView
		if err := json.Unmarshal([]byte(body), &snap); err != nil {
			t.Fatal(err)
		}
		var depth views.Chart
		for _, ch := range snap.Charts.Charts {
			if ch.Key == "depth" {
				depth = ch
			}
		}
		var pts []string
		for _, l := range depth.Lines {
			if l.ID == fmt.Sprint(shard) {
				pts = strings.Fields(l.Points)
			}
		}
		if len(pts) == 0 {
			return fmt.Errorf("no depth line for shard %d: %+v", shard, depth.Lines)
		}
		return testenv.Want(depth.Peak == "5 waiting" && len(pts) == 121 && strings.HasSuffix(pts[0], ",99") && strings.HasSuffix(pts[120], ",1"),
			"depth chart peak %q, first %s, last %s of %d", depth.Peak, pts[0], pts[len(pts)-1], len(pts))
	})
}
