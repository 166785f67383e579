package views

import (
	"math"
	"slices"
	"strconv"
)

// Chart is a small line chart drawn on the server as SVG, the one chart
// of the console: the live funnel's rush and the Lab's rehearsals both
// draw with it. Each chart has its own scale, from 0 to Peak; the lines
// come as polyline points in a ChartW×ChartH box, so a live page moves a
// line by setting one attribute.
type Chart struct {
	Key   string `json:"key"` // data-chart; test ids chart-KEY and peak-KEY
	Title string `json:"title"`
	Peak  string `json:"peak"` // the top of the y axis in words: "10/s", "5 waiting", "200 ms"
	// Note is what the lines do not show, beside the title ("breaker opened 2×").
	Note  string `json:"note,omitempty"`
	Lines []Line `json:"lines"`
	// What the lines are, for a screen reader ("one line per shard").
	Describe string `json:"-"`
	// The x axis' two ends ("−10 min" and "now", "0 s" and "30 s").
	Start, End string `json:"-"`
	// Legend names the lines under the chart; off where one legend serves many charts.
	Legend bool `json:"-"`
}

// Line is one series of a Chart. Only ID and Points travel on the
// funnel's websocket: the rest is drawn once, with the page.
type Line struct {
	ID     string `json:"id"` // data-line: a shard's id, a mode, an outcome
	Points string `json:"points"`
	Label  string `json:"-"` // its name, shown when the pointer rests on it
	Class  string `json:"-"` // its colour: c0…c7, or sum for the quiet shards (console.css)
	Quiet  bool   `json:"-"` // a quiet shard's own line: hidden until the operator expands them
	N      int    `json:"-"` // how many values it draws (data-points)
}

// The charts' SVG box: 4 units per bucket of the funnel's 121-bucket span.
const ChartW, ChartH = 480, 100

// NewLine draws series as a line of a Chart whose y axis tops at top and
// whose x axis has slots values, the first at the left edge: a series
// shorter than slots (a rehearsal still running) stops part way.
func NewLine(id, label, class string, series []int64, top int64, slots int) Line {
	return Line{ID: id, Label: label, Class: class, N: len(series), Points: SpanPoints(series, top, slots, ChartW, ChartH)}
}

// LineClass is the colour class of the i-th line: console.css defines eight.
func LineClass(i int) string { return "c" + strconv.Itoa(i%8) }

// quietAttr is a line's data-quiet.
func quietAttr(q bool) string {
	if q {
		return "1"
	}
	return "0"
}

// LinePoints renders a series as SVG polyline points in a w×h box, its
// values spread over the whole width.
func LinePoints(series []int64, top int64, w, h int) string {
	return SpanPoints(series, top, len(series), w, h)
}

// SpanPoints renders a series as SVG polyline points in a w×h box whose
// top is top (at least 1) and whose width holds slots values. A series
// of zeros is two points: charts with many quiet shards stay small on
// the websocket. A negative value is no value (a p95 of a step without
// events): it gets no point, and the line joins its neighbours rather
// than dropping to a zero that would read as "fast".
func SpanPoints(series []int64, top int64, slots, w, h int) string {
	if len(series) == 0 {
		return ""
	}
	top = max(top, 1)
	step := float64(w) / float64(max(slots-1, 1))
	y := func(v int64) float64 { return float64(h) - float64(v)*float64(h-2)/float64(top) - 1 }
	if slices.Max(series) == 0 && slices.Min(series) == 0 && len(series) > 1 {
		step *= float64(len(series) - 1)
		series = []int64{0, 0}
	}
	// Tenths, without trailing zeros: the websocket carries every line every second.
	num := func(b []byte, f float64) []byte { return strconv.AppendFloat(b, math.Round(f*10)/10, 'f', -1, 64) }
	var b []byte
	points, lone := 0, 0
	for i, v := range series {
		if v < 0 {
			continue
		}
		if len(b) > 0 {
			b = append(b, ' ')
		}
		b = append(num(b, float64(i)*step), ',')
		b = num(b, y(v))
		points, lone = points+1, i
	}
	if points == 1 {
		// One point alone draws nothing: a short dash at its value, wide
		// enough to see at a glance (a thirtieth of the chart).
		d := float64(w) / 60
		x := min(max(float64(lone)*step, d), float64(w)-d)
		b = append(num(append(num(nil, x-d), ','), y(series[lone])), ' ')
		b = num(append(num(b, x+d), ','), y(series[lone]))
	}
	return string(b)
}

// RouteOutcomeLabels name a route chart's lines, in funnel.RouteOutcomes'
// order: answered, refused, no answer.
var RouteOutcomeLabels = []string{"answered", "refused (4xx)", "no answer (timeout, 5xx, 429)"}

// RouteOutcomeClass colours a route chart's i-th line: green, amber, red.
func RouteOutcomeClass(i int) string { return [...]string{"c2", "c4", "c1"}[i%3] }
