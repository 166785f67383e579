package views

import "testing"

// LinePoints draws in the box from its top down, in short numbers; a
// line of zeros is two points.
func TestLinePoints(t *testing.T) {
	for _, c := range []struct {
		series []int64
		top    int64
		want   string
	}{
		{[]int64{0, 5, 10}, 10, "0,99 240,50 480,1"},
		{[]int64{0, 1, 2}, 3, "0,99 240,66.3 480,33.7"},
		{[]int64{0, 0, 0, 0}, 7, "0,99 480,99"},
		{nil, 5, ""},
	} {
		if got := LinePoints(c.series, c.top, 480, 100); got != c.want {
			t.Errorf("LinePoints(%v, %d) = %q, want %q", c.series, c.top, got, c.want)
		}
	}
}

// SpanPoints leaves room for values still to come: a rehearsal's line
// stops part way along its chart, and a line of zeros stops there too;
// a step without a value has no point.
func TestSpanPoints(t *testing.T) {
	for _, c := range []struct {
		series []int64
		slots  int
		want   string
	}{
		{[]int64{0, 5, 10}, 5, "0,99 120,50 240,1"},
		{[]int64{0, 0, 0}, 5, "0,99 240,99"},
		{[]int64{10}, 5, "0,1 16,1"}, // a first value alone: a dash
		// No value (a step without events) has no point: the line joins
		// its neighbours instead of dropping to 0.
		{[]int64{10, -1, 10}, 5, "0,1 240,1"},
		{[]int64{-1, -1}, 5, ""},
		// One value alone is a short dash, or it would not show.
		{[]int64{-1, 10, -1}, 5, "112,1 128,1"},
	} {
		if got := SpanPoints(c.series, 10, c.slots, 480, 100); got != c.want {
			t.Errorf("SpanPoints(%v, 10, %d) = %q, want %q", c.series, c.slots, got, c.want)
		}
	}
}
