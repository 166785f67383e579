package rehearse_test

import (
	"testing"

	"tatkal/booking/lab/teststack"
)

// Every goroutine a test starts is stopped by the end of the package's
// tests. The binary also runs as a worker process of a benchmark's stack
// (teststack.StartProcess).
func TestMain(m *testing.M) { teststack.Main(m) }
