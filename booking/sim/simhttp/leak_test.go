package simhttp_test

import (
	"testing"

	"go.uber.org/goleak"

	"tatkal/booking/lab/testenv"
)

// Every goroutine a test starts is stopped by the end of the package's tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m, testenv.LeakOptions()...) }
