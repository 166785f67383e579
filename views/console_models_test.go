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
