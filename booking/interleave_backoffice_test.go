package booking_test

import (
	"context"
	"time"

	"tatkal/booking"
	"tatkal/booking/fraud/review"
	"tatkal/recon"
)

// The steps of TestRandomInterleavings beyond the passenger's: charting
// and the chart's delivery, fraud decisions, their enforcement and
// appeals, reconciliation, and COMMIT answers lost on the wire.

// backOffice gives the world four fraud analysts (two decide, two who had
// no part in a decision answer its appeals), an enforcement batch
// that enforces a decision as soon as it is approved, and reconciliation
// fetching from the stack's simulators.
func (w *world) backOffice() {
	for i, login := range []string{"il-fraud-a", "il-fraud-b", "il-fraud-c", "il-fraud-d"} {
		if err := w.s.Pool.QueryRow(w.ctx, `INSERT INTO console_users (login, name, role, password_hash) VALUES ($1, $1, 'fraud', 'x') RETURNING id`,
			login).Scan(&w.analysts[i]); err != nil {
			w.t.Fatal(err)
		}
	}
	w.review = review.New(w.s.Pool)
	w.review.EnforceDelay = 0
	w.enforcer = &review.Enforcer{Review: w.review, Booking: w.s.Service}
	w.recon = w.s.App.Recon
	keys := map[string]string{}
	for _, g := range w.s.Gateways {
		keys[g.ID] = g.APIKey
	}
	w.sources = recon.Sources{PSPURL: w.s.PSP.URL, GatewayKeys: keys, CoreURL: w.s.Core.URL, CoreKey: w.s.CoreKey}
}

// chart prepares a shard's chart, beside whatever else runs on it.
func (w *world) chart(shardID int64) {
	ctx, cancel := context.WithTimeout(w.ctx, 10*time.Second)
	defer cancel()
	var rep booking.ChartReport
	_, err := w.promoting1(shardID, func() ([]booking.Promoted, error) {
		var err error
		rep, err = w.s.Service.Chart(ctx, shardID)
		return rep.Promoted, err
	})
	w.note("chart shard %d: already %v, promoted %d, cancelled %v: %v", shardID, rep.Already, len(rep.Promoted), rep.Cancelled, err)
	if err == nil && !rep.Already {
		w.count["charted"].Add(1)
	}
}

// sendChart delivers a charted shard's chart by hand, beside its job (the
// core answers a replay as the first).
func (w *world) sendChart(pick int) {
	var ids []int64
	if err := w.s.Pool.QueryRow(w.ctx, `SELECT coalesce(array_agg(id ORDER BY id), '{}') FROM inventory_shards
		WHERE id = ANY($1) AND chart_state = 'CHARTED' AND chart_core_state = 'PENDING'`, w.shardIDs()).Scan(&ids); err != nil {
		w.t.Errorf("charts to send: %v", err)
		return
	}
	if len(ids) == 0 {
		return
	}
	id := ids[pick%len(ids)]
	// A hung core costs the send what it costs a job.
	ctx, cancel := context.WithTimeout(w.ctx, time.Second)
	defer cancel()
	_, err := w.promoting1(id, func() ([]booking.Promoted, error) { return nil, w.s.Service.SendChart(ctx, id) })
	w.note("send chart of shard %d by hand: %v", id, err)
	w.count["chart-send-early"].Add(1)
}

// fraudStep flags two or three of the run's accounts as a cluster of the
// shard's window; one analyst decides to cancel their bookings or ban
// them, a second approves, and the batch enforces it now or on its next
// pass, while their payments may still be on the way.
func (w *world) fraudStep(n, i int, shardID int64, pick int) func() {
	members := make([]int64, 0, 3)
	for _, k := range w.rng.Perm(len(w.users))[:2+w.rng.IntN(2)] {
		members = append(members, w.users[k])
	}
	outcome, reason := review.CancelBookings, "PASSENGER_RESALE"
	// Past the planned rounds, a ban waits until the passengers' paths are
	// met (a ban shuts its members out of them).
	if w.rng.IntN(3) == 0 && !(w.steer && w.passengersMissing()) {
		outcome, reason = review.Ban, "AUTOMATION"
	}
	now := w.rng.IntN(2) == 0
	return func() {
		ctx := w.ctx
		var cluster int64
		err := w.s.Pool.QueryRow(ctx, `INSERT INTO fraud_clusters (window_opens_at, score, flagged, members, evidence)
			SELECT window_opens_at, 9, true, $2, '{"why":["interleaving test"]}' FROM inventory_shards WHERE id = $1 RETURNING id`,
			shardID, len(members)).Scan(&cluster)
		if err == nil {
			_, err = w.s.Pool.Exec(ctx, `INSERT INTO fraud_cluster_members (cluster_id, user_id) SELECT $1, unnest($2::bigint[])`, cluster, members)
		}
		if err != nil {
			w.t.Errorf("flag cluster: %v", err)
			return
		}
		first, second := w.analysts[pick%2], w.analysts[1-pick%2]
		if _, err := w.review.Claim(ctx, first, cluster, time.Minute); err != nil {
			w.t.Errorf("claim cluster %d: %v", cluster, err)
			return
		}
		d, err := w.review.Decide(ctx, first, cluster, review.Decision{Outcome: outcome, Reason: reason})
		if err != nil {
			w.t.Errorf("decide cluster %d: %v", cluster, err)
			return
		}
		if err := w.review.Approve(ctx, second, d.ID); err != nil {
			w.t.Errorf("approve decision %d: %v", d.ID, err)
			return
		}
		w.note("fraud decision %d: %s of %v (shard %d's window)", d.ID, outcome, members, shardID)
		w.count["fraud-decided"].Add(1)
		if now {
			w.enforce("at once")
		}
	}
}

// enforce runs the enforcement batch: every approved decision is due.
func (w *world) enforce(how string) {
	ctx, cancel := context.WithTimeout(w.ctx, 10*time.Second)
	defer cancel()
	n, err := w.enforcer.RunDue(ctx)
	if n > 0 || err != nil {
		w.note("fraud batch (%s): %d decisions enforced %v", how, n, err)
	}
	w.count["fraud-enforced"].Add(int64(n))
}

// appeal has a member acted on by a decision appeal it, and an analyst
// answer: upheld (the account restored) two times in three.
func (w *world) appeal(pick int) {
	ctx := w.ctx
	// The banned first: they can do nothing else.
	var users []int64
	if err := w.s.Pool.QueryRow(ctx, `SELECT coalesce(array_agg(DISTINCT f.user_id ORDER BY f.user_id), '{}') FROM fraud_enforcements f
		JOIN fraud_decisions d ON d.id = f.decision_id JOIN users u ON u.id = f.user_id
		WHERE d.enforced_at IS NOT NULL AND f.action <> 'RESTORE' AND (u.banned_at IS NOT NULL
			OR NOT EXISTS (SELECT 1 FROM users b WHERE b.banned_at IS NOT NULL))`).Scan(&users); err != nil {
		w.t.Errorf("members to appeal: %v", err)
		return
	}
	if len(users) == 0 {
		return
	}
	user := users[pick%len(users)]
	a, err := w.review.FileAppeal(ctx, user, "We book for our own family; please look again.")
	w.note("appeal by %d against decision %d: %v", user, a.DecisionID, err)
	if err != nil {
		return
	}
	w.count["appeal-filed"].Add(1)
	uphold := pick%3 != 0
	// Nobody of the decision answers its appeal; against a two-analyst
	// decision, upholding takes a proposal and a second analyst.
	ans, err := w.review.AnswerAppeal(ctx, w.analysts[2], a.ID, uphold, "looked again")
	if err == nil && ans.Verdict == review.Proposed {
		ans, err = w.review.AnswerAppeal(ctx, w.analysts[3], a.ID, true, "agreed")
	}
	w.note("appeal %d answered (upheld %v): %+v %v", a.ID, uphold, ans, err)
	if err == nil && ans.Verdict == review.Upheld {
		w.count["appeal-upheld"].Add(1)
	}
}

// reconcile fetches a gateway's settlement file of the day and reconciles
// the day; or, for recon.Core, the core's export of the journey date. The
// automatic resolutions it finds are jobs.
func (w *world) reconcile(gw string, journey time.Time) {
	ctx, cancel := context.WithTimeout(w.ctx, 20*time.Second)
	defer cancel()
	const by = "job:recon_fetch"
	now := time.Now().In(booking.IST)
	day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, booking.IST)
	if gw == recon.Core {
		day = journey
		cctx, ccancel := context.WithTimeout(ctx, time.Second) // the core may hang
		defer ccancel()
		if _, err := w.recon.FetchCore(cctx, w.sources, journey, by); err != nil {
			w.note("fetch the core's export: %v", err)
			return
		}
	} else if _, err := w.recon.FetchSettlement(ctx, w.sources, gw, day, by); err != nil {
		w.note("fetch %s settlement: %v", gw, err)
		return
	}
	sum, err := w.recon.Run(ctx, recon.RunRequest{Gateway: gw, Date: day, By: by})
	w.note("reconcile %s %s: %d matched, %d exceptions (%d new, %d cleared): %v", gw, day.Format(time.DateOnly),
		sum.Matched, sum.Exceptions, sum.NewExceptions, sum.Cleared, err)
	if err == nil {
		w.count["recon-run"].Add(1)
	}
}

// lostCommits are the transactions whose COMMIT's answer a wave may lose:
// the server commits, the caller hears an error. Each is named by a piece
// of one of its statements' SQL (pgProxy.setMarker), and weighted: the
// rarer the transaction, the more often it is the one chosen.
var lostCommits = []struct {
	name, sql string
	weight    int
}{
	{"hold", "INSERT INTO holds", 1},
	{"confirm", "UPDATE holds SET state = 'CONFIRMED'", 2},
	{"late-retake", "re-held after a late payment", 4},
	{"expire", "state_reason = 'hold window ended'", 1},
	{"cancel-booking", "UPDATE bookings SET status = 'CANCELLED', refund_due_paise", 2},
	{"promote", "UPDATE bookings SET status = 'CONFIRMED', waitlist_no = NULL", 4},
	{"chart", "chart_state = 'CHARTED'", 3},
	{"refund", "INSERT INTO refunds", 2},
	{"fraud-cancel", "INSERT INTO fraud_enforcements", 2},
}

// pickLostCommit chooses, one wave in three, the transaction whose COMMIT
// loses its answer (-1: none).
func (w *world) pickLostCommit() int {
	if w.rng.IntN(3) != 0 {
		return -1
	}
	total := 0
	for _, m := range lostCommits {
		total += m.weight
	}
	r := w.rng.IntN(total)
	for i, m := range lostCommits {
		if r -= m.weight; r < 0 {
			return i
		}
	}
	return -1
}

// loseCommit arms the proxy to lose the answer to the next COMMIT of the
// transaction lostCommits[i] names (none for i < 0).
func (w *world) loseCommit(i int) {
	if i < 0 {
		return
	}
	w.proxy.setMarker(lostCommits[i].sql)
	w.proxy.dropped.Store(0)
	w.proxy.armed.Store(true)
	w.count["commit-armed"].Add(1)
	w.note("the next COMMIT of a %s transaction loses its answer", lostCommits[i].name)
}

// commitLost disarms the proxy and notes whether it cut a COMMIT.
func (w *world) commitLost(i int) {
	if i < 0 {
		return
	}
	w.proxy.armed.Store(false)
	if w.proxy.dropped.Load() > 0 {
		w.count["commit-lost"].Add(1)
		w.count["commit-lost:"+lostCommits[i].name].Add(1)
		w.note("a %s transaction committed and its COMMIT's answer was lost", lostCommits[i].name)
	}
	w.proxy.setMarker("")
}

// describe names a broken invariant's likely cause for the report.
func describe(kind string) string {
	return map[string]string{
		"chart-live-hold":      "finding 1: charting ignores HELD holds",
		"chart-after":          "finding 1: a hold live at charting was paid for afterwards",
		"chart-undeliverable":  "finding 5: a charted booking rejected by the core during the chart's send",
		"ban":                  "finding 3: a BAN does not stop in-flight holds becoming tickets",
		"fraud-missed":         "finding 3: enforcement works from a snapshot and misses payments in flight",
		"promotion-berth-sold": "finding 4: a berth kept for waitlist promotion freed before the promotion",
		"seats-before-sweep":   "findings 2 or 8 (a Redis change undone, or left, against what committed), or 4 (a berth kept for promotion), if not a new one",
		"recon-open":           "finding 6: an automatic resolution that never resolves",
		"deadlock":             "finding 7: a lock-order cycle broken by the deadlock detector",
	}[kind]
}
