package testenv

import (
	"fmt"
	"testing"
	"time"
)

// Eventually calls cond until it returns nil and fails t when within
// passes first, naming what it waited for and cond's last error (what it
// saw instead). It polls quickly at first (5 ms), then less often (50 ms
// at most), so a condition met soon costs no fixed wait and a slow one no
// busy loop. cond runs on the test's goroutine and may itself fail t.
func Eventually(t testing.TB, within time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	pause := 5 * time.Millisecond
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, within, err)
		}
		time.Sleep(pause)
		pause = min(2*pause, 50*time.Millisecond)
	}
}

// Want is nil when ok and otherwise says what was seen: Eventually's
// condition in one line, as in
//
//	return testenv.Want(state == "CONFIRMED", "state %s", state)
func Want(ok bool, format string, args ...any) error {
	if ok {
		return nil
	}
	return fmt.Errorf(format, args...)
}
