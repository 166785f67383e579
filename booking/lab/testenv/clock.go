package testenv

import (
	"sync"
	"time"
)

// Clock is a settable clock for code that takes a Now func (the login
// guard's backoff and reservations, the waiting room): the wall clock moved
// on by Advance or Set; the zero Clock follows the wall clock.
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

// Set makes Now return about t from now on (time keeps running).
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.off = time.Until(t)
	c.mu.Unlock()
}
