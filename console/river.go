package console

import (
	"context"
	"net/http"

	"riverqueue.com/riverui"
)

// river serves River's job UI under /console/river (admin only: the route
// list says so). The handler is built on first use.
func (c *Console) river(w http.ResponseWriter, r *http.Request) {
	c.riverOnce.Do(func() {
		if c.cfg.River == nil {
			c.riverErr = errNoRiver
			return
		}
		h, err := riverui.NewHandler(&riverui.HandlerOpts{
			Endpoints: riverui.NewEndpoints(c.cfg.River, nil),
			Logger:    c.log,
			Prefix:    "/console/river",
		})
		if err != nil {
			c.riverErr = err
			return
		}
		// Its background services live as long as the console's context.
		ctx := c.cfg.Context
		if ctx == nil {
			ctx = context.Background()
		}
		if err := h.Start(ctx); err != nil {
			c.riverErr = err
			return
		}
		c.riverUI = h
	})
	if c.riverErr != nil {
		c.log.Error("river ui", "err", c.riverErr)
		http.Error(w, "River's UI is unavailable: "+c.riverErr.Error(), http.StatusServiceUnavailable)
		return
	}
	c.riverUI.ServeHTTP(w, r)
}

type consoleError string

func (e consoleError) Error() string { return string(e) }

const errNoRiver = consoleError("no River client configured")
