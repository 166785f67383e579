package console

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"tatkal/booking"
	"tatkal/booking/inventory"
	"tatkal/console/levers"
	"tatkal/views"
)

// shardsPage lists every shard: seats from Redis, holds and bookings from
// PostgreSQL, and the invariant check.
func (c *Console) shardsPage(w http.ResponseWriter, r *http.Request) {
	c.renderShards(w, r, views.ShardsPage{}, http.StatusOK)
}

func (c *Console) renderShards(w http.ResponseWriter, r *http.Request, p views.ShardsPage, status int) {
	ctx := r.Context()
	rows, err := c.pool.Query(ctx, `SELECT s.id, s.train_number || ' ' || s.class || ' ' || s.journey_date::text || ' ' || s.quota,
		s.window_opens_at, s.window_closes_at, s.mode, s.total_berths, s.waitlist_cap, s.epoch,
		(SELECT count(*) FROM holds h WHERE h.shard_id = s.id AND h.state = 'HELD' AND h.kind = 'SEAT')::int,
		(SELECT count(*) FROM bookings b WHERE b.shard_id = s.id AND b.status = 'CONFIRMED')::int,
		(SELECT count(*) FROM bookings b WHERE b.shard_id = s.id AND b.status = 'WAITLISTED')::int,
		s.rebuild_failed_at, coalesce(s.rebuild_error, ''),
		s.chart_state, s.charted_at, s.chart_core_state, s.chart_core_ref, s.chart_error,
		coalesce(s.chart_core_state = 'PENDING' AND s.chart_sending_since < now() - make_interval(secs => $1), false)
		FROM inventory_shards s ORDER BY s.id LIMIT 200`, booking.ChartSendLease.Seconds())
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	for rows.Next() {
		var s views.ShardRow
		var opens, closes = new(timeT), new(timeT)
		var failedAt *time.Time
		var failure, chart, core, coreRef, chartErr string
		var charted *time.Time
		var cutOff bool // an operator's send of the chart never finished
		if err := rows.Scan(&s.ID, &s.Label, &opens.t, &closes.t, &s.Mode, &s.Total, &s.WaitlistCap, &s.Epoch, &s.LiveHolds, &s.Confirmed, &s.Waitlist,
			&failedAt, &failure, &chart, &charted, &core, &coreRef, &chartErr, &cutOff); err != nil {
			rows.Close()
			c.serverError(w, r, err)
			return
		}
		s.Window = ist(opens.t) + " – " + ist(closes.t)
		if failedAt != nil {
			// The shard refuses holds until a rebuild loads (the sweeper retries).
			s.RebuildFailed = "rebuild failed at " + ist(*failedAt) + ": " + failure
		}
		s.ConfirmWord = fmt.Sprintf("rebuild %d", s.ID)
		s.Chart = chartWords(chart, charted, core, coreRef, chartErr)
		if chart == "CHARTED" && cutOff {
			s.Chart += " (a send from the console never finished)"
		}
		s.ChartRetry = chart == "CHARTED" && (core == "FAILED" || cutOff)
		s.ChartPrepare = chart == "FAILED"
		p.Rows = append(p.Rows, s)
	}
	rows.Close()
	p.SendLease = fmt.Sprintf("%d minutes", int(booking.ChartSendLease.Minutes()))
	for i := range p.Rows {
		s := &p.Rows[i]
		if snap, err := c.cfg.Store.Snapshot(ctx, s.ID); err == nil && snap.Ready {
			s.Ready, s.Epoch = true, snap.Epoch
			for j, m := range snap.Occupancy {
				if j < snap.Berths && m == 0 {
					s.SeatsLeft++
				}
			}
		}
		if s.Ready {
			rep, err := inventory.Check(ctx, c.pool, c.cfg.Store, s.ID, c.cfg.HoldWindow)
			if err == nil {
				s.InvariantOK, s.Violations = rep.OK(), rep.Violations
			}
		}
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	u, _ := userFrom(ctx)
	c.render(w, r, "Shards", views.ConsoleShards(p, u.CSRF))
}

// shardRebuild reloads a shard from PostgreSQL under a new epoch, after the
// operator typed "rebuild N". Audited.
func (c *Console) shardRebuild(w http.ResponseWriter, r *http.Request) {
	u, _ := userFrom(r.Context())
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	want := fmt.Sprintf("rebuild %d", id)
	if strings.TrimSpace(r.PostFormValue("confirm")) != want {
		c.renderShards(w, r, views.ShardsPage{Error: fmt.Sprintf("Type %q to confirm the rebuild of shard %d.", want, id)}, http.StatusUnprocessableEntity)
		return
	}
	epoch, err := c.cfg.Booking.Rebuild(r.Context(), id)
	if err != nil {
		levers.Audit(r.Context(), c.pool, u.Login, "shard.rebuild_failed", fmt.Sprint(id), map[string]any{"error": err.Error()}) //nolint:errcheck
		msg := userError(err)
		if booking.ErrorCode(err) == booking.EINTERNAL {
			c.log.Error("rebuild", "shard", id, "err", err)
			msg = "The rebuild failed: " + err.Error()
		}
		c.renderShards(w, r, views.ShardsPage{Error: msg}, http.StatusInternalServerError)
		return
	}
	if err := levers.Audit(r.Context(), c.pool, u.Login, "shard.rebuild", fmt.Sprint(id), map[string]any{"epoch": epoch}); err != nil {
		c.serverError(w, r, err)
		return
	}
	c.redirectNotice(w, r, "/console/shards", fmt.Sprintf("Shard %d rebuilt from PostgreSQL under epoch %d.", id, epoch))
}

// chartRetry sends a chart whose delivery to the reservation core FAILED,
// or whose last send from here never finished, once more
// (booking.Charts.RetryChartSend), for an operator, and shows what the
// core answered. Audited, success or not.
func (c *Console) chartRetry(w http.ResponseWriter, r *http.Request) {
	c.chartAction(w, r, "chart.retry_send", "The retry failed: ", func(ctx context.Context, id int64) (string, map[string]any, error) {
		ref, err := c.cfg.Booking.RetryChartSend(ctx, id)
		return fmt.Sprintf("The chart of shard %d is at the reservation core now (chart %s).", id, ref), map[string]any{"core_chart_id": ref}, err
	})
}

// chartPrepare prepares once more a chart whose preparation FAILED
// (booking.Charts.RetryChart), for an operator, and shows what it did.
// Audited, success or not.
func (c *Console) chartPrepare(w http.ResponseWriter, r *http.Request) {
	c.chartAction(w, r, "chart.retry_prepare", "The preparation failed again and nothing of it was kept: ",
		func(ctx context.Context, id int64) (string, map[string]any, error) {
			rep, err := c.cfg.Booking.RetryChart(ctx, id)
			return fmt.Sprintf("The chart of shard %d is prepared (%s): %d promoted from the waitlist, %d waitlisted cancelled and refunded; it is on its way to the reservation core.",
					id, rep.Chart.Ref, len(rep.Promoted), len(rep.Cancelled)),
				map[string]any{"chart_ref": rep.Chart.Ref, "promoted": len(rep.Promoted), "cancelled": rep.Cancelled}, err
		})
}

// chartAction runs an operator's action on a shard's chart, audits it as
// action (action+"_failed" when refused or failed, with the reason), and
// shows the result: the notice do returns, or the refusal on the shards
// page with a status that says why (failed prefixes an internal error).
func (c *Console) chartAction(w http.ResponseWriter, r *http.Request, action, failed string,
	do func(ctx context.Context, id int64) (notice string, detail map[string]any, err error)) {
	u, _ := userFrom(r.Context())
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	notice, detail, err := do(r.Context(), id)
	if err != nil {
		if aerr := levers.Audit(r.Context(), c.pool, u.Login, action+"_failed", fmt.Sprint(id),
			map[string]any{"reason": booking.ErrorReason(err), "error": err.Error()}); aerr != nil {
			c.serverError(w, r, aerr)
			return
		}
		status, msg := http.StatusConflict, userError(err)
		switch booking.ErrorCode(err) {
		case booking.EINTERNAL:
			c.log.Error(action, "shard", id, "err", err)
			status, msg = http.StatusInternalServerError, failed+err.Error()
		case booking.ENOTFOUND:
			status = http.StatusNotFound
		case booking.EUNAVAIL:
			status = http.StatusBadGateway
		}
		c.renderShards(w, r, views.ShardsPage{Error: msg}, status)
		return
	}
	if err := levers.Audit(r.Context(), c.pool, u.Login, action, fmt.Sprint(id), detail); err != nil {
		c.serverError(w, r, err)
		return
	}
	c.redirectNotice(w, r, "/console/shards", notice)
}
