package console

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"tatkal/booking"
	"tatkal/booking/audit"
	"tatkal/booking/db"
	"tatkal/booking/fraud"
	"tatkal/views"
)

// clusterableWindows are the openings of the last two days that have
// opened, newest first: what "cluster this window now" offers.
func (c *Console) clusterableWindows(ctx context.Context) ([]views.FraudWindowChoice, error) {
	rows, err := c.pool.Query(ctx, `SELECT DISTINCT window_opens_at FROM inventory_shards
		WHERE window_opens_at <= now() AND window_opens_at > now() - interval '2 days' ORDER BY 1 DESC LIMIT 20`)
	if err != nil {
		return nil, fmt.Errorf("clusterable windows: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (views.FraudWindowChoice, error) {
		var t time.Time
		err := r.Scan(&t)
		return views.FraudWindowChoice{Value: t.UTC().Format(time.RFC3339Nano), Label: ist(t)}, err
	})
}

// fraudClusterNow queues a clustering run of one window that has opened,
// at once, as the analyst's act (audited with their login, in the same
// transaction as the job): the scheduled passes come minutes after the
// opening and once it closes, and an analyst watching a rush need not wait.
func (c *Console) fraudClusterNow(w http.ResponseWriter, r *http.Request) {
	u, _ := userFrom(r.Context())
	ctx := r.Context()
	if c.cfg.River == nil {
		c.redirectNotice(w, r, "/console/fraud", "Clustering cannot be queued from this process (no job queue).")
		return
	}
	win, err := time.Parse(time.RFC3339Nano, r.PostFormValue("window"))
	if err != nil {
		c.redirectNotice(w, r, "/console/fraud", "Choose a window to cluster.")
		return
	}
	var queued bool
	err = db.Transact(ctx, c.pool, func(tx pgx.Tx) error {
		var known bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM inventory_shards WHERE window_opens_at = $1 AND window_opens_at <= now())`, win).
			Scan(&known); err != nil {
			return fmt.Errorf("window %s: %w", win, err)
		}
		if !known {
			return booking.Errorf(booking.EINVALID, "NO_WINDOW", "No window opened at %s.", ist(win))
		}
		res, err := c.cfg.River.InsertTx(ctx, tx, fraud.ClusterWindowArgs{WindowOpensAt: win}, nil)
		if err != nil {
			return fmt.Errorf("queue clustering of %s: %w", win, err)
		}
		queued = !res.UniqueSkippedAsDuplicate
		return audit.Write(ctx, tx, u.Login, "fraud.cluster_now", "window:"+win.UTC().Format(time.RFC3339Nano),
			map[string]any{"job": res.Job.ID, "already_queued": !queued})
	})
	switch {
	case err != nil && booking.ErrorCode(err) != booking.EINTERNAL:
		c.redirectNotice(w, r, "/console/fraud", booking.ErrorMessage(err))
	case err != nil:
		c.serverError(w, r, err)
	case queued:
		c.redirectNotice(w, r, "/console/fraud", "Clustering of the "+ist(win)+" window queued; its clusters appear here within a minute.")
	default:
		c.redirectNotice(w, r, "/console/fraud", "Clustering of the "+ist(win)+" window is already queued or running.")
	}
}

// fraudAppealPage is one appeal, its statement masked, beside the case it
// is about: what the members share, who got which decision.
func (c *Console) fraudAppealPage(w http.ResponseWriter, r *http.Request) {
	u, _ := userFrom(r.Context())
	ctx := r.Context()
	id, ok := pathID(r)
	if !ok {
		http.NotFound(w, r)
		return
	}
	a, err := c.review().Appeal(ctx, id)
	if booking.ErrorCode(err) == booking.ENOTFOUND {
		http.NotFound(w, r)
		return
	}
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	logins, err := c.consoleLogins(ctx)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	ci, err := c.loadCluster(ctx, a.ClusterID)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	cp, err := c.clusterPage(ctx, u.ID, ci, logins)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	p := views.FraudAppealPage{Appeal: appealRow(a, u.ID, logins), Open: a.Status == "OPEN", Status: a.Status, Note: a.Note, Cluster: cp}
	c.render(w, r, "Appeal "+p.Appeal.ID, views.ConsoleFraudAppeal(p, u.CSRF))
}

func (c *Console) fraudAppealClaim(w http.ResponseWriter, r *http.Request) {
	u, _ := userFrom(r.Context())
	id, ok := pathID(r)
	if !ok {
		http.NotFound(w, r)
		return
	}
	until, err := c.review().ClaimAppeal(r.Context(), u.ID, id)
	back := fmt.Sprintf("/console/fraud/appeals/%d", id)
	switch {
	case err != nil && booking.ErrorCode(err) != booking.EINTERNAL:
		c.redirectNotice(w, r, back, booking.ErrorMessage(err))
	case err != nil:
		c.serverError(w, r, err)
	default:
		c.redirectNotice(w, r, back, "Appeal claimed until "+ist(until)+".")
	}
}
