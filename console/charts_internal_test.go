package console

import (
	"testing"

	"tatkal/views"
)

// The Lab draws with the funnel's chart: a rehearsal in both modes, direct
// done (seconds 0-4) and queue still running (seconds 0-2). Each chart
// tops at its peak over both modes; the queue's line stops part way along
// the direct one's axis; the queue's depth has the queue's line only. A
// run of one mode charts that mode alone.
func TestLabChartsUseTheSharedChart(t *testing.T) {
	var pts []views.LabPoint
	for s, n := range []int64{0, 4, 8, 2, 0} {
		pts = append(pts, views.LabPoint{Mode: "direct", T: s, Backend: n})
	}
	for s, n := range []int64{1, 2, 2} {
		pts = append(pts, views.LabPoint{Mode: "queue", T: s, Backend: n, QueueDepth: 10 * n})
	}
	charts := labCharts(pts)
	if len(charts) != 7 || charts[0].Key != "lab-backend" || charts[3].Key != "lab-depth" || charts[6].Key != "lab-admitted" {
		t.Fatalf("charts %+v", charts)
	}
	backend := charts[0]
	if backend.Peak != "8/s" || backend.Start != "0 s" || backend.End != "4 s" || !backend.Legend || len(backend.Lines) != 2 {
		t.Fatalf("backend chart %+v", backend)
	}
	direct, queue := backend.Lines[0], backend.Lines[1]
	if direct.ID != "direct" || direct.N != 5 || direct.Points != "0,99 120,50 240,1 360,74.5 480,99" || direct.Class != "c1" {
		t.Fatalf("direct line %+v", direct)
	}
	// Three seconds of five: the line ends at x 240, its top at 2 of 8.
	if queue.ID != "queue" || queue.N != 3 || queue.Points != "0,86.8 120,74.5 240,74.5" || queue.Class != "c0" {
		t.Fatalf("queue line %+v", queue)
	}
	if d := charts[3]; d.Peak != "20 waiting" || len(d.Lines) != 1 || d.Lines[0].ID != "queue" {
		t.Fatalf("depth chart %+v", d)
	}
	// A direct-only run: no queue line, no queue depth or admissions chart.
	charts = labCharts(pts[:5])
	if len(charts) != 5 || len(charts[0].Lines) != 1 || charts[0].Lines[0].ID != "direct" {
		t.Fatalf("direct-only run: %+v", charts)
	}
	// Before the first second: every chart, every mode, no points yet.
	if charts = labCharts(nil); len(charts) != 7 || len(charts[0].Lines) != 2 || charts[0].Lines[0].N != 0 {
		t.Fatalf("a run with no seconds yet: %+v", charts)
	}
}

// The backend chart draws the backend's capacity as a line of its own,
// second by second (a quarter while the core is slowed), and tops at it
// when the load stays under it; the other charts draw no capacity.
func TestLabChartDrawsCapacity(t *testing.T) {
	var pts []views.LabPoint
	for s, n := range []int64{0, 4, 8, 2, 0} {
		c := 12.0
		if s >= 2 {
			c = 3
		}
		pts = append(pts, views.LabPoint{Mode: "direct", T: s, Backend: n, Capacity: c}, views.LabPoint{Mode: "queue", T: s, Backend: 1, Capacity: c})
	}
	charts := labCharts(pts)
	backend := charts[0]
	if backend.Peak != "12/s" || len(backend.Lines) != 3 {
		t.Fatalf("backend chart %+v", backend)
	}
	// 12 at the top, then 3 of 12 from the third second.
	if c := backend.Lines[2]; c.ID != "capacity" || c.Class != "cap" || c.Label != "backend capacity" || c.N != 5 ||
		c.Points != "0,1 120,1 240,74.5 360,74.5 480,74.5" {
		t.Fatalf("capacity line %+v", c)
	}
	for _, c := range charts[1:] {
		for _, l := range c.Lines {
			if l.ID == "capacity" {
				t.Errorf("chart %s draws the capacity", c.Key)
			}
		}
	}
}

// A p95 chart's peak reads as a person would say it, and a p95 in the
// histogram's open-ended last bucket is "over" its last bound.
func TestLatencyWords(t *testing.T) {
	for ms, want := range map[int64]string{0: "0 ms", 50: "50 ms", 1000: "1 s", 2000: "2 s", 10000: "10 s", slowest + 1: "over 10 s"} {
		if got := latencyWords(ms); got != want {
			t.Errorf("latencyWords(%d) = %q, want %q", ms, got, want)
		}
	}
}
