package main

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"tatkal/booking/lab/testenv"
)

// runAsTatkalEnv makes this test binary run as tatkal itself (main, with
// its arguments), so a test can run the real commands as an operator
// would, each a process of its own (main_operator_test.go).
const runAsTatkalEnv = "TATKAL_TEST_RUN_MAIN"

// Every goroutine a test starts is stopped by the end of the package's tests.
func TestMain(m *testing.M) {
	if os.Getenv(runAsTatkalEnv) == "1" {
		main()
		return
	}
	goleak.VerifyTestMain(m, testenv.LeakOptions()...)
}
