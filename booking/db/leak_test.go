package db

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine a test starts (pools and their health checks) is stopped
// by the end of the package's tests. testenv.LeakOptions, inlined: testenv
// imports this package.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"))
}
