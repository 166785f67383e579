package console

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"tatkal/booking"
	"tatkal/booking/payment"
	"tatkal/console/alarms"
	"tatkal/views"
)

// newAlarms builds the invariant watch over the console's own pieces: its
// lever service pulls the freeze, and the same seat check, queue depth and
// route health the live funnel shows are what the watch judges.
func (c *Console) newAlarms() *alarms.Service {
	cfg := alarms.Config{Pool: c.pool, Store: c.cfg.Store, Levers: c.levers, HoldWindow: c.cfg.HoldWindow,
		Thresholds: c.cfg.Alarms, QueueDepth: c.cfg.QueueDepth, Log: c.log}
	if c.cfg.Payments != nil {
		cfg.Routes = func(ctx context.Context) ([]payment.Health, error) { return c.cfg.Payments.Healths(ctx) }
	}
	return alarms.New(cfg)
}

// alarmsPage lists the alarms, unacknowledged first.
func (c *Console) alarmsPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	u, _ := userFrom(ctx)
	unacked, acked, err := c.alarms.List(ctx, 200)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	f, err := alarms.ReadFigures(ctx, c.pool)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	p := views.AlarmsPage{Now: ist(time.Now()), Every: "periodically"}
	for _, e := range c.cfg.Schedule {
		if e.Kind == (alarms.WatchArgs{}).Kind() {
			p.Every = e.When.String()
		}
	}
	if f.LastWatch != nil {
		p.LastWatch = ist(*f.LastWatch)
	}
	th := c.alarms.Thresholds()
	p.Thresholds = []string{
		fmt.Sprintf("%s: an UNKNOWN payment older than %s (TATKAL_ALARM_UNKNOWN_AFTER); now %d UNKNOWN, the oldest %s old",
			alarms.KindUnknown, th.UnknownAfter, f.UnknownPayments, f.UnknownOldest.Round(time.Second)),
		fmt.Sprintf("%s: a refund pending longer than %s (TATKAL_ALARM_REFUND_AFTER) or %d pending (TATKAL_ALARM_REFUND_BACKLOG); now %d pending, the oldest %s old",
			alarms.KindRefunds, th.RefundAfter, th.RefundBacklog, f.PendingRefunds, f.RefundOldest.Round(time.Second)),
		fmt.Sprintf("%s: more than %d travellers waiting for one shard (TATKAL_ALARM_QUEUE_DEPTH)", alarms.KindQueue, th.QueueDepth),
		fmt.Sprintf("%s: a payment route's breaker open, or %.0f%% of its calls failing over at least %d in the last minute (TATKAL_ALARM_ROUTE_ERROR_PCT, TATKAL_ALARM_ROUTE_MIN_CALLS)",
			alarms.KindRoute, th.RouteErrorPct, th.RouteMinCalls),
	}
	row := func(a alarms.Alarm) views.AlarmRow {
		v := views.AlarmRow{ID: a.ID, Kind: a.Kind, Scope: a.Scope, Detail: a.Detail, RaisedAt: ist(a.RaisedAt), SeenAt: ist(a.SeenAt), AckBy: a.AckBy}
		if a.ResolvedAt != nil {
			v.ResolvedAt = ist(*a.ResolvedAt)
		}
		if a.AckAt != nil {
			v.AckAt = ist(*a.AckAt)
		}
		if a.LeverChangeID != nil {
			v.Frozen = fmt.Sprintf("by the system (lever change %d)", *a.LeverChangeID)
		}
		return v
	}
	for _, a := range unacked {
		p.Unacked = append(p.Unacked, row(a))
	}
	for _, a := range acked {
		p.Acked = append(p.Acked, row(a))
	}
	c.render(w, r, "Alarms", views.ConsoleAlarms(p, u.CSRF))
}

// alarmAcknowledge records that the signed-in person has seen an alarm
// (audited by the alarms service, with the note).
func (c *Console) alarmAcknowledge(w http.ResponseWriter, r *http.Request) {
	u, _ := userFrom(r.Context())
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	notice := fmt.Sprintf("Alarm %d acknowledged.", id)
	if err := c.alarms.Acknowledge(r.Context(), id, alarms.Person{ID: u.ID, Login: u.Login}, r.PostFormValue("note")); err != nil {
		if booking.ErrorCode(err) == booking.EINTERNAL {
			c.serverError(w, r, err)
			return
		}
		notice = userError(err)
	}
	c.redirectNotice(w, r, "/console/alarms", notice)
}
