package testenv

import (
	"sync"
	"time"
)

// Clock is a settable clock for code that takes a Now func (the login
// guard's backoff and reservations): the wall clock moved on by Advance.
type Clock struct {
	mu  sync.Mutex
	off time.Duration
}

// Now is the wall clock plus every Advance so far.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.off += d
	c.mu.Unlock()
}
