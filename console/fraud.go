package console

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5"

	"tatkal/booking"
	"tatkal/booking/fraud"
	"tatkal/booking/fraud/review"
	"tatkal/booking/india"
	"tatkal/views"
)

// fraudRoutes mounts the analysts' pages (roles fraud and admin).
func (c *Console) fraudRoutes(r chi.Router) {
	r.Group(func(r chi.Router) {
		r.Use(c.roles(Fraud, Admin))
		r.Get("/fraud", c.fraudPage)
		r.Get("/fraud/clusters/{id}", c.fraudCluster)
		r.Get("/fraud/clusters/{id}/evidence.xlsx", c.fraudExport)
		r.Post("/fraud/cluster-now", c.fraudClusterNow)
		r.Post("/fraud/clusters/{id}/claim", c.fraudClaim)
		r.Post("/fraud/clusters/{id}/release", c.fraudRelease)
		r.Post("/fraud/clusters/{id}/handover", c.fraudHandOver)
		r.Post("/fraud/clusters/{id}/decide", c.fraudDecide)
		r.Post("/fraud/clusters/{id}/close", c.fraudClose)
		r.Post("/fraud/decisions/{id}/approve", c.fraudApprove)
		r.Get("/fraud/appeals/{id}", c.fraudAppealPage)
		r.Post("/fraud/appeals/{id}/claim", c.fraudAppealClaim)
		r.Post("/fraud/appeals/{id}", c.fraudAppeal)
	})
}

func (c *Console) review() *review.Service {
	s := review.New(c.pool)
	if c.cfg.Payments != nil {
		s.Refunds = c.cfg.Payments // an upheld appeal against a cancellation refunds the fare
	}
	return s
}

func pathID(r *http.Request) (int64, bool) {
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	return id, err == nil && id > 0
}

// fraudPage is the queue by score, decisions awaiting approval, open
// appeals and the metrics.
func (c *Console) fraudPage(w http.ResponseWriter, r *http.Request) {
	u, _ := userFrom(r.Context())
	ctx := r.Context()
	p := views.FraudPage{}
	var err error
	if p.Windows, err = c.clusterableWindows(ctx); err != nil {
		c.serverError(w, r, err)
		return
	}
	q, err := c.review().Queue(ctx, 200)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	logins, err := c.consoleLogins(ctx)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	for _, it := range q {
		row := views.FraudQueueRow{ID: fmt.Sprint(it.ClusterID), Window: ist(it.Window), Score: fmt.Sprintf("%.2f", it.Score),
			Members: fmt.Sprint(it.Members), Mine: it.ClaimedBy == u.ID}
		if it.ClaimedBy != 0 {
			row.ClaimedBy, row.ClaimedUntil = logins[it.ClaimedBy], ist(it.ClaimedUntil)
		}
		p.Clusters = append(p.Clusters, row)
	}
	rows, err := c.pool.Query(ctx, `SELECT d.id, d.cluster_id, d.outcome, d.reason_code, u.login, d.decided_at
		FROM fraud_decisions d JOIN console_users u ON u.id = d.analyst_id
		WHERE d.needs_approval AND d.approved_at IS NULL ORDER BY d.decided_at LIMIT 200`)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	p.Approvals, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (views.FraudApprovalRow, error) {
		var a views.FraudApprovalRow
		var id, cl int64
		var at time.Time
		err := r.Scan(&id, &cl, &a.Outcome, &a.Reason, &a.Analyst, &at)
		a.DecisionID, a.ClusterID, a.DecidedAt = fmt.Sprint(id), fmt.Sprint(cl), ist(at)
		return a, err
	})
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	appeals, err := c.review().Appeals(ctx)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	for _, a := range appeals {
		p.Appeals = append(p.Appeals, appealRow(a, u.ID, logins))
	}
	if p.Metrics, err = c.fraudMetrics(ctx); err != nil {
		c.serverError(w, r, err)
		return
	}
	c.render(w, r, "Fraud", views.ConsoleFraud(p, u.CSRF))
}

// appealRow is an appeal as an analyst (viewer) reads it: the member's
// statement with ID numbers masked, the case it is about, who works it.
func appealRow(a review.Appeal, viewer int64, logins map[int64]string) views.FraudAppealRow {
	row := views.FraudAppealRow{ID: fmt.Sprint(a.ID), Login: a.Login, DecisionID: fmt.Sprint(a.DecisionID), ClusterID: fmt.Sprint(a.ClusterID),
		Outcome: a.Outcome, Statement: review.MaskIDs(a.Statement), Filed: ist(a.CreatedAt), TwoPerson: a.TwoPerson, TookPart: a.TookPart(viewer),
		Mine: a.ClaimedBy == viewer && a.ClaimedBy != 0}
	if a.ClaimedBy != 0 {
		row.ClaimedBy, row.ClaimedUntil = logins[a.ClaimedBy], ist(a.ClaimedUntil)
	}
	if a.ProposedBy != 0 {
		row.ProposedBy, row.ProposedAt = logins[a.ProposedBy], ist(*a.ProposedAt)
	}
	switch {
	case a.TwoPerson && a.ProposedBy == 0:
		row.Uphold = "Propose upholding (a second analyst approves)"
	case a.TwoPerson && a.ProposedBy == viewer:
		row.Uphold = "" // a second analyst approves
	case a.TwoPerson:
		row.Uphold = "Approve upholding (restore)"
	default:
		row.Uphold = "Uphold (restore)"
	}
	return row
}

func (c *Console) consoleLogins(ctx context.Context) (map[int64]string, error) {
	rows, err := c.pool.Query(ctx, `SELECT id, login FROM console_users`)
	if err != nil {
		return nil, fmt.Errorf("console logins: %w", err)
	}
	out := map[int64]string{}
	var id int64
	var login string
	_, err = pgx.ForEachRow(rows, []any{&id, &login}, func() error { out[id] = login; return nil })
	return out, err
}

// fraudMetrics: clusters per window, decisions by outcome, the median time
// from a cluster's creation to its decision, and the false-positive proxy
// of seeds/000 6.6: the success rate (holds that became bookings) of
// accounts a year old or more, before and after the first enforcement.
func (c *Console) fraudMetrics(ctx context.Context) (views.FraudMetrics, error) {
	var m views.FraudMetrics
	rows, err := c.pool.Query(ctx, `SELECT window_opens_at, signals, clusters, flagged FROM fraud_runs ORDER BY window_opens_at DESC LIMIT 30`)
	if err != nil {
		return m, fmt.Errorf("fraud runs: %w", err)
	}
	var win time.Time
	var sig, cl, fl int
	if _, err := pgx.ForEachRow(rows, []any{&win, &sig, &cl, &fl}, func() error {
		m.Windows = append(m.Windows, views.FraudWindowRow{Window: ist(win), Signals: fmt.Sprint(sig), Clusters: fmt.Sprint(cl), Flagged: fmt.Sprint(fl)})
		return nil
	}); err != nil {
		return m, fmt.Errorf("fraud runs: %w", err)
	}
	rows, err = c.pool.Query(ctx, `SELECT outcome, count(*) FROM fraud_decisions GROUP BY 1 ORDER BY 1`)
	if err != nil {
		return m, fmt.Errorf("fraud outcomes: %w", err)
	}
	var label string
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&label, &n}, func() error {
		m.Outcomes = append(m.Outcomes, views.FraudCountRow{Label: label, Count: fmt.Sprint(n)})
		return nil
	}); err != nil {
		return m, fmt.Errorf("fraud outcomes: %w", err)
	}
	var median *float64
	var first *time.Time
	var before, after *float64
	err = c.pool.QueryRow(ctx, `
		WITH first AS (SELECT min(enforced_at) AS at FROM fraud_decisions)
		SELECT (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM d.decided_at - c.created_at))
		        FROM fraud_decisions d JOIN fraud_clusters c ON c.id = d.cluster_id),
		       (SELECT at FROM first),
		       (SELECT avg((booking_id IS NOT NULL)::int) FROM fraud_signals, first
		        WHERE account_age_days >= 365 AND (first.at IS NULL OR held_at < first.at)),
		       (SELECT avg((booking_id IS NOT NULL)::int) FROM fraud_signals, first
		        WHERE account_age_days >= 365 AND held_at >= first.at)`).Scan(&median, &first, &before, &after)
	if err != nil {
		return m, fmt.Errorf("fraud metrics: %w", err)
	}
	pct := func(v *float64) string {
		if v == nil {
			return "no data"
		}
		return fmt.Sprintf("%.1f %%", *v*100)
	}
	var decided, cleared, answered, upheld int
	if err := c.pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM fraud_decisions), (SELECT count(*) FROM fraud_decisions WHERE outcome = 'CLEAR'),
		(SELECT count(*) FROM fraud_appeals WHERE status <> 'OPEN'), (SELECT count(*) FROM fraud_appeals WHERE status = 'UPHELD')`).
		Scan(&decided, &cleared, &answered, &upheld); err != nil {
		return m, fmt.Errorf("fraud false positives: %w", err)
	}
	ratio := func(n, of int, what string) string {
		if of == 0 {
			return "no " + what + " yet"
		}
		return fmt.Sprintf("%d of %d (%.1f %%)", n, of, 100*float64(n)/float64(of))
	}
	m.ClearedFalse, m.AppealsUpheld = ratio(cleared, decided, "decisions"), ratio(upheld, answered, "answered appeals")
	m.MedianToDecision, m.TenuredBefore, m.TenuredAfter, m.FirstEnforcementAt = "no decisions", pct(before), pct(after), "none yet"
	if median != nil {
		m.MedianToDecision = (time.Duration(*median) * time.Second).String()
	}
	if first != nil {
		m.FirstEnforcementAt = ist(*first)
	}
	return m, nil
}

// clusterInfo is what the cluster page and the export share.
type clusterInfo struct {
	id       int64
	window   time.Time
	score    float64
	status   string
	evidence fraud.ClusterEvidence
	holder   int64
	until    time.Time
	members  []views.FraudMemberRow
	ids      []int64
	logins   map[int64]string
	bookings []views.FraudBookingRow
	shared   []sharedThing
}

func (c *Console) loadCluster(ctx context.Context, id int64) (*clusterInfo, error) {
	ci := &clusterInfo{id: id, logins: map[int64]string{}}
	var raw []byte
	var score float32
	var holder *int64
	var until *time.Time
	err := c.pool.QueryRow(ctx, `SELECT window_opens_at, score, status, evidence, claimed_by, claimed_until FROM fraud_clusters WHERE id = $1`, id).
		Scan(&ci.window, &score, &ci.status, &raw, &holder, &until)
	if err != nil {
		return nil, err
	}
	ci.score = float64(score)
	if holder != nil && until.After(time.Now()) {
		ci.holder, ci.until = *holder, *until
	}
	if err := json.Unmarshal(raw, &ci.evidence); err != nil {
		return nil, fmt.Errorf("cluster %d evidence: %w", id, err)
	}
	rows, err := c.pool.Query(ctx, `SELECT u.id, u.login, floor(extract(epoch FROM now() - u.created_at) / 86400)::int, u.id_verification_status,
		(SELECT count(DISTINCT device_id) FROM fraud_signals f WHERE f.user_id = u.id AND f.window_opens_at = $2 AND f.device_id <> ''),
		(SELECT count(*) FROM fraud_signals f WHERE f.user_id = u.id AND f.window_opens_at = $2),
		(SELECT count(*) FROM bookings b JOIN inventory_shards s ON s.id = b.shard_id WHERE b.user_id = u.id AND s.window_opens_at = $2),
		(SELECT coalesce(string_agg(d.outcome || CASE WHEN d.needs_approval AND d.approved_at IS NULL THEN ' (awaits approval)'
		                                            WHEN d.enforced_at IS NOT NULL THEN ' (enforced)' ELSE '' END, ', ' ORDER BY d.id), '')
		 FROM fraud_decision_members dm JOIN fraud_decisions d ON d.id = dm.decision_id WHERE dm.cluster_id = $1 AND dm.user_id = u.id)
		FROM fraud_cluster_members m JOIN users u ON u.id = m.user_id WHERE m.cluster_id = $1 ORDER BY u.id`, id, ci.window)
	if err != nil {
		return nil, fmt.Errorf("cluster %d members: %w", id, err)
	}
	var uid int64
	var login, verified, decided string
	var age, devs, holds, books int
	if _, err := pgx.ForEachRow(rows, []any{&uid, &login, &age, &verified, &devs, &holds, &books, &decided}, func() error {
		ci.ids = append(ci.ids, uid)
		ci.logins[uid] = login
		ci.members = append(ci.members, views.FraudMemberRow{UserID: fmt.Sprint(uid), Login: login, Age: fmt.Sprint(age), Verified: verified,
			Devices: fmt.Sprint(devs), Holds: fmt.Sprint(holds), Bookings: fmt.Sprint(books), Decided: decided})
		return nil
	}); err != nil {
		return nil, fmt.Errorf("cluster %d members: %w", id, err)
	}
	if ci.shared, err = c.sharedThings(ctx, ci.ids, ci.window); err != nil {
		return nil, fmt.Errorf("cluster %d: %w", id, err)
	}
	rows, err = c.pool.Query(ctx, `SELECT b.pnr, u.login, s.train_number || ' ' || s.class || ' ' || s.journey_date::text, b.status, b.fare_paise, b.booked_at
		FROM bookings b JOIN users u ON u.id = b.user_id JOIN inventory_shards s ON s.id = b.shard_id
		WHERE b.user_id = ANY($1) AND s.window_opens_at = $2 ORDER BY b.id LIMIT 1000`, ci.ids, ci.window)
	if err != nil {
		return nil, fmt.Errorf("cluster %d bookings: %w", id, err)
	}
	var pnr, journey, status string
	var fare int64
	var at time.Time
	if _, err := pgx.ForEachRow(rows, []any{&pnr, &login, &journey, &status, &fare, &at}, func() error {
		ci.bookings = append(ci.bookings, views.FraudBookingRow{PNR: pnr, Login: login, Journey: journey, Status: status, Fare: india.Decimal(fare), BookedAt: ist(at)})
		return nil
	}); err != nil {
		return nil, fmt.Errorf("cluster %d bookings: %w", id, err)
	}
	return ci, nil
}

func (ci *clusterInfo) name(id int64) string {
	if l, ok := ci.logins[id]; ok {
		return l
	}
	return fmt.Sprintf("#%d", id)
}

func (ci *clusterInfo) evidenceRows() []views.FraudEvidenceRow {
	var out []views.FraudEvidenceRow
	for _, e := range ci.evidence.Edges {
		for _, ev := range e.Evidence {
			out = append(out, views.FraudEvidenceRow{A: ci.name(e.A), B: ci.name(e.B), Kind: ev.Kind, Weight: fmt.Sprintf("%.2f", ev.Weight),
				Detail: fmt.Sprintf("%d shared, up to %d accounts on one", ev.Shared, ev.Group)})
		}
	}
	return out
}

// graph lays the members on a circle and draws each evidence edge, its
// width by weight: enough to see a ring's shape at a glance.
func (ci *clusterInfo) graph() views.FraudGraph {
	const w, h = 640, 420
	g := views.FraudGraph{Width: w, Height: h}
	pos := map[int64][2]int{}
	n := len(ci.ids)
	for i, id := range ci.ids {
		a := 2 * math.Pi * float64(i) / float64(max(n, 1))
		x, y := w/2+int(170*math.Cos(a)), h/2-10+int(160*math.Sin(a))
		pos[id] = [2]int{x, y}
		g.Nodes = append(g.Nodes, views.FraudNode{X: x, Y: y, Label: ci.name(id), Title: fmt.Sprintf("account %s (#%d)", ci.name(id), id)})
	}
	for _, e := range ci.evidence.Edges {
		pa, oka := pos[e.A]
		pb, okb := pos[e.B]
		if !oka || !okb {
			continue
		}
		var kinds []string
		for _, ev := range e.Evidence {
			kinds = append(kinds, ev.Kind)
		}
		g.Edges = append(g.Edges, views.FraudEdge{X1: pa[0], Y1: pa[1], X2: pb[0], Y2: pb[1], Width: fmt.Sprintf("%.1f", 1+3*min(e.Weight, 2)),
			Title: fmt.Sprintf("%s – %s: %.2f (%s)", ci.name(e.A), ci.name(e.B), e.Weight, strings.Join(kinds, ", "))})
	}
	return g
}

func (c *Console) fraudCluster(w http.ResponseWriter, r *http.Request) {
	c.renderCluster(w, r, "", "", http.StatusOK)
}

func (c *Console) renderCluster(w http.ResponseWriter, r *http.Request, notice, errMsg string, status int) {
	u, _ := userFrom(r.Context())
	ctx := r.Context()
	id, ok := pathID(r)
	if !ok {
		http.NotFound(w, r)
		return
	}
	ci, err := c.loadCluster(ctx, id)
	if err == pgx.ErrNoRows {
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
	p, err := c.clusterPage(ctx, u.ID, ci, logins)
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	p.Notice, p.Error = notice, errMsg
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	c.render(w, r, "Cluster "+p.ID, views.ConsoleFraudCluster(p, u.CSRF))
}

// clusterPage is the case as viewer reads it: its evidence, what its
// members share, each decision with its members and label, and history.
func (c *Console) clusterPage(ctx context.Context, viewer int64, ci *clusterInfo, logins map[int64]string) (views.FraudClusterPage, error) {
	id := ci.id
	p := views.FraudClusterPage{ID: fmt.Sprint(id), Window: ist(ci.window), Score: fmt.Sprintf("%.2f", ci.score),
		Status: ci.status, Why: strings.Join(ci.evidence.Why, "; "), Open: ci.status == "OPEN", ClaimedByMe: ci.holder == viewer && ci.holder != 0,
		Graph: ci.graph(), Members: ci.members, Bookings: ci.bookings, Evidence: ci.evidenceRows(), Shared: ci.sharedRows(),
		Outcomes: []string{review.Clear, review.Watch, review.ExtraChallenge, review.CancelBookings, review.Ban},
		Reasons:  []string{"FALSE_POSITIVE", "FAMILY_OR_OFFICE", "SHARED_DEVICES", "SHARED_INSTRUMENTS", "PASSENGER_RESALE", "AUTOMATION", "AGENT_VIA_PERSONAL", "OTHER"}}
	if ci.holder != 0 {
		p.ClaimedBy, p.ClaimedUntil = logins[ci.holder], ist(ci.until)
	}
	rows, err := c.pool.Query(ctx, `SELECT id, login FROM console_users WHERE role IN ('fraud', 'admin') AND NOT disabled AND id <> $1 ORDER BY login`, viewer)
	if err != nil {
		return p, fmt.Errorf("analysts: %w", err)
	}
	if p.Analysts, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (views.FraudAnalyst, error) {
		var a views.FraudAnalyst
		var aid int64
		err := r.Scan(&aid, &a.Login)
		a.ID = fmt.Sprint(aid)
		return a, err
	}); err != nil {
		return p, fmt.Errorf("analysts: %w", err)
	}
	rows, err = c.pool.Query(ctx, `SELECT d.id, d.outcome, d.reason_code, d.label, d.note, d.analyst_id, d.decided_at, d.needs_approval, d.approved_by,
			d.approved_at, d.enforced_at, coalesce((SELECT array_agg(user_id ORDER BY user_id) FROM fraud_decision_members m WHERE m.decision_id = d.id), '{}')
		FROM fraud_decisions d WHERE d.cluster_id = $1 ORDER BY d.id`, id)
	if err != nil {
		return p, fmt.Errorf("decisions of cluster %d: %w", id, err)
	}
	var subjects []string
	p.Decisions, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (views.FraudDecisionView, error) {
		var d views.FraudDecisionView
		var did, analyst int64
		var approver *int64
		var decided time.Time
		var approved, enforced *time.Time
		var members []int64
		if err := r.Scan(&did, &d.Outcome, &d.Reason, &d.Label, &d.Note, &analyst, &decided, &d.NeedsApproval, &approver, &approved, &enforced,
			&members); err != nil {
			return d, err
		}
		d.ID, d.Analyst, d.DecidedAt, d.Approved = fmt.Sprint(did), logins[analyst], ist(decided), approved != nil
		if approver != nil {
			d.ApprovedBy = logins[*approver]
		}
		if enforced != nil {
			d.EnforcedAt = ist(*enforced)
		}
		names := make([]string, len(members))
		for i, m := range members {
			names[i] = ci.name(m)
		}
		d.Members = strings.Join(names, ", ")
		d.CanApprove = d.NeedsApproval && !d.Approved && analyst != viewer
		subjects = append(subjects, decisionSubject(did))
		return d, nil
	})
	if err != nil {
		return p, fmt.Errorf("decisions of cluster %d: %w", id, err)
	}
	for i := range p.Decisions {
		d := &p.Decisions[i]
		if d.EnforcedAt == "" {
			continue
		}
		// What it cancelled, as the members were told: tickets, and holds
		// ended before they became tickets (booking.Holds.EndHoldTx).
		did, _ := strconv.ParseInt(d.ID, 10, 64)
		if err := c.pool.QueryRow(ctx, `SELECT
			(SELECT count(*) FROM fraud_enforcements f JOIN bookings b ON b.hold_id = f.hold_id
			 WHERE f.decision_id = $1 AND f.action = 'CANCEL' AND b.cancel_reason LIKE $2 || '%'),
			(SELECT count(*) FROM fraud_enforcements f JOIN holds h ON h.id = f.hold_id
			 WHERE f.decision_id = $1 AND f.action = 'CANCEL' AND h.state = 'CANCELLED' AND h.state_reason = $2)`,
			did, booking.ReviewCancelReason(did)).Scan(&d.TicketsCancelled, &d.HoldsEnded); err != nil {
			return p, fmt.Errorf("decision %d enforced: %w", did, err)
		}
	}
	rows, err = c.pool.Query(ctx, `SELECT at, actor, action, detail::text FROM audit_log
		WHERE subject = $1 OR subject = ANY($2) ORDER BY id LIMIT 200`, fmt.Sprintf("cluster:%d", id), subjects)
	if err != nil {
		return p, fmt.Errorf("history of cluster %d: %w", id, err)
	}
	var at time.Time
	var actor, action, detail string
	if _, err := pgx.ForEachRow(rows, []any{&at, &actor, &action, &detail}, func() error {
		p.History = append(p.History, views.FraudHistoryRow{At: ist(at), Actor: actor, Action: action, Detail: detail})
		return nil
	}); err != nil {
		return p, fmt.Errorf("history of cluster %d: %w", id, err)
	}
	return p, nil
}

func decisionSubject(id int64) string {
	if id == 0 {
		return ""
	}
	return fmt.Sprintf("decision:%d", id)
}

// answer renders a review error on the cluster page (a conflict, a bad
// reason) or fails the request on anything else.
func (c *Console) fraudAnswer(w http.ResponseWriter, r *http.Request, err error, notice string) {
	if err != nil && booking.ErrorCode(err) == booking.EINTERNAL {
		c.serverError(w, r, err)
		return
	}
	if err != nil {
		c.renderCluster(w, r, "", booking.ErrorMessage(err), http.StatusConflict)
		return
	}
	c.redirectNotice(w, r, "/console/fraud/clusters/"+chi.URLParam(r, "id"), notice)
}

func (c *Console) fraudClaim(w http.ResponseWriter, r *http.Request) {
	u, _ := userFrom(r.Context())
	id, ok := pathID(r)
	if !ok {
		http.NotFound(w, r)
		return
	}
	until, err := c.review().Claim(r.Context(), u.ID, id, 0)
	c.fraudAnswer(w, r, err, "Cluster claimed until "+ist(until)+".")
}

func (c *Console) fraudDecide(w http.ResponseWriter, r *http.Request) {
	u, _ := userFrom(r.Context())
	id, ok := pathID(r)
	if !ok {
		http.NotFound(w, r)
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	var members []int64
	for _, v := range r.PostForm["member"] {
		m, err := strconv.ParseInt(v, 10, 64)
		if err != nil || m <= 0 {
			c.renderCluster(w, r, "", fmt.Sprintf("%q is not an account.", v), http.StatusBadRequest)
			return
		}
		members = append(members, m)
	}
	d, err := c.review().Decide(r.Context(), u.ID, id, review.Decision{Outcome: r.PostFormValue("outcome"), Reason: r.PostFormValue("reason"),
		Note: r.PostFormValue("note"), Members: members})
	notice := "Decided; it is enforced in a later batch."
	if d.NeedsApproval {
		notice = "Decided; a second analyst must approve it before it is enforced."
	}
	if len(members) > 0 {
		notice += " The case stays open until you close it."
	}
	c.fraudAnswer(w, r, err, notice)
}

func (c *Console) fraudRelease(w http.ResponseWriter, r *http.Request) {
	u, _ := userFrom(r.Context())
	id, ok := pathID(r)
	if !ok {
		http.NotFound(w, r)
		return
	}
	c.fraudAnswer(w, r, c.review().Release(r.Context(), u.ID, id), "Claim released; another analyst may take the case.")
}

func (c *Console) fraudHandOver(w http.ResponseWriter, r *http.Request) {
	u, _ := userFrom(r.Context())
	id, ok := pathID(r)
	if !ok {
		http.NotFound(w, r)
		return
	}
	to, err := strconv.ParseInt(r.PostFormValue("to"), 10, 64)
	if err != nil || to <= 0 {
		c.renderCluster(w, r, "", "Choose the analyst to hand the case to.", http.StatusBadRequest)
		return
	}
	until, err := c.review().HandOver(r.Context(), u.ID, id, to)
	c.fraudAnswer(w, r, err, "Case handed over; their claim runs until "+ist(until)+".")
}

func (c *Console) fraudClose(w http.ResponseWriter, r *http.Request) {
	u, _ := userFrom(r.Context())
	id, ok := pathID(r)
	if !ok {
		http.NotFound(w, r)
		return
	}
	c.fraudAnswer(w, r, c.review().Close(r.Context(), u.ID, id), "Case closed.")
}

func (c *Console) fraudApprove(w http.ResponseWriter, r *http.Request) {
	u, _ := userFrom(r.Context())
	id, ok := pathID(r)
	if !ok {
		http.NotFound(w, r)
		return
	}
	var cluster int64
	if err := c.pool.QueryRow(r.Context(), `SELECT cluster_id FROM fraud_decisions WHERE id = $1`, id).Scan(&cluster); err != nil {
		http.NotFound(w, r)
		return
	}
	err := c.review().Approve(r.Context(), u.ID, id)
	if err != nil && booking.ErrorCode(err) != booking.EINTERNAL {
		c.redirectNotice(w, r, fmt.Sprintf("/console/fraud/clusters/%d", cluster), booking.ErrorMessage(err))
		return
	}
	if err != nil {
		c.serverError(w, r, err)
		return
	}
	c.redirectNotice(w, r, fmt.Sprintf("/console/fraud/clusters/%d", cluster), "Approved; it is enforced in the next batch after the delay.")
}

func (c *Console) fraudAppeal(w http.ResponseWriter, r *http.Request) {
	u, _ := userFrom(r.Context())
	id, ok := pathID(r)
	if !ok {
		http.NotFound(w, r)
		return
	}
	uphold := r.PostFormValue("verdict") == "uphold"
	if v := r.PostFormValue("verdict"); v != "uphold" && v != "reject" {
		c.redirectNotice(w, r, "/console/fraud", "Choose uphold or reject.")
		return
	}
	ans, err := c.review().AnswerAppeal(r.Context(), u.ID, id, uphold, r.PostFormValue("note"))
	if err != nil && booking.ErrorCode(err) == booking.EINTERNAL {
		c.serverError(w, r, err)
		return
	}
	var msg string
	switch {
	case err != nil:
		msg = booking.ErrorMessage(err)
	case ans.Verdict == review.Proposed:
		msg = fmt.Sprintf("Upholding appeal %d proposed; a second analyst must approve it before anything is lifted.", id)
	case ans.Verdict == review.Upheld && ans.RefundedPaise > 0:
		msg = fmt.Sprintf("Appeal %d upheld; ₹%s refunded in full.", id, india.Decimal(ans.RefundedPaise))
	case ans.Verdict == review.Upheld:
		msg = fmt.Sprintf("Appeal %d upheld.", id)
	default:
		msg = fmt.Sprintf("Appeal %d rejected.", id)
	}
	c.redirectNotice(w, r, "/console/fraud", msg)
}
