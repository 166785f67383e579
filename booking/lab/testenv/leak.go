package testenv

import "go.uber.org/goleak"

// LeakOptions are what goleak.VerifyTestMain may find still running after
// a package's tests: only the idle keep-alive connections of HTTP clients,
// which belong to their transport and close on their own. Every goroutine
// of ours is owned and awaited (booking/app).
func LeakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
	}
}
