package console

import "testing"

// TestShardLeverFollowsTheReader: the funnel shows the per-shard lever
// the booking path obeys: the shard's own value, else the global one; a
// shard set to "off" (or "adaptive") has nothing of its own.
func TestShardLeverFollowsTheReader(t *testing.T) {
	inForce := []string{"shard_throttle shard:7 = 11", "shard_throttle global = 900", "shard_throttle shard:8 = off",
		"admission_rate shard:8 = adaptive", "admission_rate global = 40"}
	for _, tc := range []struct {
		name  string
		id    int64
		unset string
		want  string
	}{
		{"shard_throttle", 7, "off", "11"},  // its own
		{"shard_throttle", 9, "off", "900"}, // none of its own: the global one
		{"shard_throttle", 8, "off", "900"}, // off of its own: the global one
		{"admission_rate", 8, "adaptive", "40"},
		{"admission_rate", 7, "adaptive", "40"},
		{"admission_paused", 7, "off", "off"}, // nothing set at all
	} {
		if got := shardLever(inForce, tc.name, tc.id, tc.unset); got != tc.want {
			t.Errorf("%s on shard %d: %q, want %q", tc.name, tc.id, got, tc.want)
		}
	}
	if got := throttleText("11"); got != "11 holds + 11 payments /s" {
		t.Errorf("throttle text %q", got)
	}
}
