package console

import (
	"context"
	"net/http"
	"time"

	"github.com/a-h/templ"
	"github.com/coder/websocket"

	"tatkal/booking/api/reply"
	"tatkal/booking/httpx"
	"tatkal/views"
)

// funnelPage renders a snapshot; console.js then keeps it live.
func (c *Console) funnelPage(w http.ResponseWriter, r *http.Request) {
	snap, err := c.snapshot(r.Context())
	if err != nil {
		c.log.Warn("funnel snapshot", "err", err)
		snap.Errors = append(snap.Errors, "Figures could not be read: "+userError(err))
	}
	sugg, err := c.suggestions(r.Context())
	if err != nil {
		c.log.Warn("lever suggestions", "err", err)
	}
	c.render(w, r, "Live funnel", templ.Join(views.ConsoleSuggestions(sugg), views.ConsoleFunnel(snap), c.moneyPanel(r)))
}

// moneyPanel is the funnel's money panel: unresolved reconciliation
// exceptions by age and the amount at risk (a snapshot; they move slowly).
func (c *Console) moneyPanel(r *http.Request) templ.Component {
	if c.cfg.Recon == nil {
		return templ.NopComponent
	}
	ageing, err := c.cfg.Recon.Ageing(r.Context())
	if err != nil {
		c.log.Warn("money panel", "err", err)
		return views.ConsoleMessages("", "Reconciliation figures could not be read: "+userError(err))
	}
	rows, total := ageRows(ageing)
	u, _ := userFrom(r.Context())
	return views.ConsoleMoneyPanel(rows, views.INR(total), u.Role == Finance || u.Role == Admin)
}

// funnelJSON is the fallback the page polls when the websocket is down.
func (c *Console) funnelJSON(w http.ResponseWriter, r *http.Request) {
	snap, err := c.snapshot(r.Context())
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	reply.JSON(w, http.StatusOK, snap)
}

// funnelWS pushes the hub's snapshots, one JSON message per tick. A client
// too slow to take them is dropped by the hub and its socket closed.
// The websocket's own deadline, in place of the server's timeouts.
const pingEvery, pingWait = 30 * time.Second, 10 * time.Second

func (c *Console) funnelWS(w http.ResponseWriter, r *http.Request) {
	// The server's timeouts are for requests; a live socket has its ping deadline.
	httpx.ClearDeadlines(w)
	conn, err := websocket.Accept(w, r, nil) // same-origin only
	if err != nil {
		return
	}
	defer conn.CloseNow() //nolint:errcheck
	ctx := conn.CloseRead(r.Context())
	sub := c.hub.Subscribe()
	defer sub.Close()
	ping := time.NewTicker(pingEvery)
	defer ping.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ping.C: // a peer gone silent is dropped within pingEvery + pingWait
			pctx, cancel := context.WithTimeout(ctx, pingWait)
			err := conn.Ping(pctx)
			cancel()
			if err != nil {
				return
			}
		case <-sub.Done():
			conn.Close(websocket.StatusTryAgainLater, "too slow") //nolint:errcheck
			return
		case b := <-sub.C:
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err := conn.Write(wctx, websocket.MessageText, b)
			cancel()
			if err != nil {
				return
			}
		}
	}
}
