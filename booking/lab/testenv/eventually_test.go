package testenv_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"tatkal/booking/lab/testenv"
)

// fatalT records a Fatalf and ends its goroutine, as testing.T does.
type fatalT struct {
	testing.TB
	msg string
}

func (f *fatalT) Helper() {}

func (f *fatalT) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls Eventually on a goroutine of its own, as a test would be.
func run(within time.Duration, cond func() error) (failure string, took time.Duration) {
	f := &fatalT{}
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		testenv.Eventually(f, within, "the flag set", cond)
	}()
	<-done
	return f.msg, time.Since(start)
}

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	t.Parallel()
	calls := 0
	failure, took := run(time.Minute, func() error {
		calls++
		return testenv.Want(calls == 3, "call %d", calls)
	})
	if failure != "" || calls != 3 {
		t.Fatalf("failed %q after %d calls, want success on the third", failure, calls)
	}
	// The first polls come quickly: no fixed wait of its own.
	if took > time.Second {
		t.Errorf("three polls took %v", took)
	}
}

func TestEventuallyFailsWithWhatItSaw(t *testing.T) {
	t.Parallel()
	calls := 0
	failure, took := run(100*time.Millisecond, func() error {
		calls++
		return testenv.Want(false, "still %d", calls)
	})
	if !strings.HasPrefix(failure, "the flag set: not within 100ms: still ") || calls < 3 {
		t.Fatalf("failure %q after %d calls", failure, calls)
	}
	if took < 100*time.Millisecond {
		t.Errorf("gave up after %v, before its deadline", took)
	}
}
