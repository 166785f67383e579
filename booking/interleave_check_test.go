package booking_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"tatkal/booking"
	"tatkal/booking/inventory"
	"tatkal/booking/payment"
	"tatkal/booking/prs"
)

// check asserts the invariants after a settled round; final also demands
// that no payment or refund is still open:
//   - seats: per shard, Redis and PostgreSQL agree and no berth is lost
//     (inventory.Check); no two confirmed passengers share a berth on
//     overlapping legs;
//   - the core: every ticket we hold is synced and confirmed (or
//     waitlisted) there, nothing we cancelled is live there, nothing is
//     there we never booked;
//   - cancellations: only a passenger, charting, the core's rejection or a
//     fraud decision cancels a booking;
//   - money: every captured payment is a ticket, a refund (in full, or what
//     the rules give back for a cancelled ticket) or in a person's review;
//     one kept charge per hold; no live ticket whose money went back; every
//     payment past its deadline resolved; the wallet ledger adds up;
//   - charts: a charted shard has no live hold, no live booking that is not
//     on its chart, every booking on its chart still confirmed, and its
//     chart delivered to the core, which holds the same chart;
//   - fraud: no booking made after its account's ban was enforced, no live
//     booking of a cancel decision's members that was paid for before the
//     decision was enforced;
//   - reconciliation: no automatic exception left open once its jobs ran;
//   - PostgreSQL broke no lock-order cycle (deadlock);
//   - whatever the steps saw broken (a berth kept for a promotion sold).
func (w *world) check(n int, final bool) {
	t, ctx := w.t, w.ctx
	t.Helper()
	fail := func(kind, format string, args ...any) {
		t.Helper()
		msg := fmt.Sprintf(format, args...)
		if why := describe(kind); why != "" {
			msg += "\n(" + why + ")"
		}
		w.mu.Lock()
		trace := strings.Join(w.trace, "\n  ")
		if len(w.before) > 0 {
			trace = strings.Join(w.before, "\n  ") + "\n  --\n  " + trace
		}
		seen := w.broken[kind]
		w.broken[kind] = true
		w.mu.Unlock()
		switch {
		case !w.keepGoing:
			t.Fatalf("round %d (seed %d): %s: %s\nsteps of this round and the one before:\n  %s", n, w.seed, kind, msg, trace)
		case !seen:
			t.Errorf("round %d (seed %d): %s: %s\nsteps of this round and the one before:\n  %s", n, w.seed, kind, msg, trace)
		}
	}
	w.mu.Lock()
	found := w.found
	w.found = nil
	w.mu.Unlock()
	for _, v := range found {
		fail(v.kind, "%s", v.msg)
	}
	shards := w.shardIDs()
	w.checkSeats(shards, fail)
	w.checkCore(shards, fail)
	w.checkMoney(shards, final, fail)
	w.checkCharts(shards, fail)
	w.checkFraud(fail)
	w.checkRecon(fail)
	var deadlocks int64
	if err := w.s.Pool.QueryRow(ctx, `SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`).Scan(&deadlocks); err != nil {
		fail("check", "deadlocks: %v", err)
	}
	if deadlocks > w.deadlocks {
		// PostgreSQL's statistics lag by up to a second: the cycle may be
		// of the round before. The steps' errors name the transactions.
		var seen []string
		w.mu.Lock()
		for _, l := range w.trace {
			if strings.Contains(l, "deadlock") {
				seen = append(seen, l)
			}
		}
		w.mu.Unlock()
		fail("deadlock", "PostgreSQL broke %d lock-order cycles by aborting a transaction; the errors seen: %v", deadlocks-w.deadlocks, seen)
		w.deadlocks = deadlocks
	}
	w.observe()
}

type failFunc func(kind, format string, args ...any)

// checkSeats: Redis and PostgreSQL agree on every shard; no berth is
// sold twice.
func (w *world) checkSeats(shards []int64, fail failFunc) {
	for _, id := range shards {
		rep, err := inventory.Check(w.ctx, w.s.Pool, w.s.Store, id, w.s.Service.Rules().HoldWindow)
		if err != nil {
			fail("check", "check shard %d: %v", id, err)
			continue
		}
		forgiveOrphans(&rep)
		if !rep.OK() {
			fail("seats", "shard %d: Redis and PostgreSQL disagree, or a berth is lost:\n%s", id, rep)
		}
	}
	var twice []string
	rows, err := w.s.Pool.Query(w.ctx, `SELECT a.booking_id || '/' || b.booking_id || ' berth ' || a.berth_idx FROM booking_passengers a
		JOIN booking_passengers b ON b.shard_id = a.shard_id AND b.berth_idx = a.berth_idx AND (b.booking_id, b.seq) > (a.booking_id, a.seq)
			AND int4range(a.from_seq, a.to_seq) && int4range(b.from_seq, b.to_seq)
		WHERE a.shard_id = ANY($1) AND a.status = 'CONFIRMED' AND b.status = 'CONFIRMED'`, shards)
	if err == nil {
		twice, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	switch {
	case err != nil:
		fail("check", "berths: %v", err)
	case len(twice) > 0:
		fail("seats", "berths sold twice on overlapping legs (bookings): %v", twice)
	}
}

// checkSeatsBeforeSweep: in a round without Redis faults, once every job
// has run and before the sweeper, Redis and PostgreSQL agree on every
// shard (see settle). A shard whose Redis state is behind PostgreSQL's
// epoch is stale, not in disagreement: it refuses holds until it is
// rebuilt (a promotion or a chart whose COMMIT's answer was lost leaves
// that to the sweeper).
func (w *world) checkSeatsBeforeSweep() {
	for _, id := range w.shardIDs() {
		rep, err := inventory.Check(w.ctx, w.s.Pool, w.s.Store, id, w.s.Service.Rules().HoldWindow)
		if err != nil {
			w.t.Errorf("check shard %d: %v", id, err)
			continue
		}
		if slices.ContainsFunc(rep.Violations, func(v string) bool { return strings.Contains(v, "holds are refused until a rebuild loads") }) {
			continue
		}
		forgiveOrphans(&rep)
		if !rep.OK() {
			w.violate("seats-before-sweep", "shard %d: with no Redis fault this round and every job run, Redis and PostgreSQL disagree "+
				"until the sweeper repairs it:\n%s", id, rep)
		}
	}
}

// orphanLife is how long a Redis hold with no row may stand: a hold whose
// write PostgreSQL refused (a banned account's, say) and whose undo then
// failed (an injected Redis fault) keeps its berths until the sweeper
// counts its attempt lost, 30 s after it was made (booking's lostAfter),
// while inventory.Check calls it broken after InFlightGrace (10 s).
//
// The sweeper frees it on its first pass after that which gets through;
// the run's injected Redis faults fail whole passes for a while (a run saw
// one at 30.4 s with every sweep of its shard since 30 s failing), so an
// orphan is a violation only once a second 30 s has gone by as well.
const orphanLife = 60 * time.Second

// orphanAge finds a Redis hold with no row in a violation.
var orphanAge = regexp.MustCompile(`^Redis has hold \S+ \(H\) that PostgreSQL does not hold, for (\S+)$`)

// forgiveOrphans drops from rep the Redis holds with no row younger than
// orphanLife.
func forgiveOrphans(rep *inventory.Report) {
	rep.Violations = slices.DeleteFunc(rep.Violations, func(v string) bool {
		m := orphanAge.FindStringSubmatch(v)
		if m == nil {
			return false
		}
		age, err := time.ParseDuration(m[1])
		return err == nil && age < orphanLife
	})
}

// allowedCancel says whether a cancel reason is one the run causes: a
// passenger's (recorded by the step), charting's, the core's rejection, or
// a fraud decision's.
func (w *world) allowedCancel(hold uuid.UUID, reason string) bool {
	w.mu.Lock()
	byPassenger := w.cancelled[hold]
	w.mu.Unlock()
	return byPassenger || reason == booking.ChartCancelReason || strings.HasPrefix(reason, "rejected by the reservation core") ||
		strings.HasPrefix(reason, "cancelled after fraud review")
}

// checkCore: the core's records agree with ours.
func (w *world) checkCore(shards []int64, fail failFunc) {
	atCore := map[string]string{}
	w.mu.Lock()
	var dates []time.Time
	for _, s := range w.shards {
		dates = append(dates, s.date)
	}
	w.mu.Unlock()
	for _, d := range dates {
		coreBookings, err := w.core.Export(w.ctx, d)
		if err != nil {
			fail("check", "core export of %s: %v", d.Format(time.DateOnly), err)
			return
		}
		for _, b := range coreBookings {
			atCore[b.PNR] = b.State
		}
	}
	type bookingRow struct {
		PNR, Status, State string
		HoldID             uuid.UUID
		Reason             string
	}
	rows, err := w.s.Pool.Query(w.ctx, `SELECT pnr, status, prs_state, hold_id, cancel_reason FROM bookings WHERE shard_id = ANY($1) ORDER BY id`, shards)
	if err != nil {
		fail("check", "bookings: %v", err)
		return
	}
	// Collected first: a failure must not leave a connection checked out.
	bookings, err := pgx.CollectRows(rows, pgx.RowToStructByPos[bookingRow])
	if err != nil {
		fail("check", "bookings: %v", err)
		return
	}
	ours := map[string]bool{}
	for _, b := range bookings {
		ours[b.PNR] = true
		live := b.Status == booking.BookingConfirmed || b.Status == booking.BookingWaitlisted
		switch {
		case live && (b.State != "SYNCED" || atCore[b.PNR] != b.Status):
			fail("core", "ticket %s is %s/%s here and %q at the core", b.PNR, b.Status, b.State, atCore[b.PNR])
		case b.Status == booking.BookingCancelled && atCore[b.PNR] != "" && atCore[b.PNR] != prs.StateCancelled:
			fail("core", "cancelled booking %s (%s) is still %s at the core", b.PNR, b.Reason, atCore[b.PNR])
		case b.Status == booking.BookingCancelled && !w.allowedCancel(b.HoldID, b.Reason):
			fail("cancel-reason", "booking %s of hold %s was cancelled though nobody in the run cancelled it: %s", b.PNR, b.HoldID, b.Reason)
		}
	}
	for pnr, state := range atCore {
		if !ours[pnr] && state != prs.StateCancelled {
			fail("core", "the core holds %s (%s), which we never booked", pnr, state)
		}
	}
}

// checkMoney: every captured payment is a ticket or a refund.
func (w *world) checkMoney(shards []int64, final bool, fail failFunc) {
	type paymentRow struct {
		ID                    uuid.UUID
		State, Method         string
		Amount                int64
		HoldID                uuid.UUID
		Booking               string
		RefundDue             int64
		Refunded, PendingRefs int64
		InReview, Overdue     bool
	}
	rows, err := w.s.Pool.Query(w.ctx, `SELECT p.id, p.state, p.method, p.amount_paise, p.hold_id, coalesce(b.status, ''),
			coalesce(b.refund_due_paise, 0),
			coalesce((SELECT sum(r.amount_paise) FROM refunds r WHERE r.payment_id = p.id), 0)::bigint,
			(SELECT count(*) FROM refunds r WHERE r.payment_id = p.id AND r.state = 'PENDING'),
			EXISTS (SELECT 1 FROM payment_reviews v WHERE v.payment_id = p.id AND v.resolved_at IS NULL),
			p.deadline < now()
		FROM payments p JOIN holds h ON h.id = p.hold_id LEFT JOIN bookings b ON b.hold_id = p.hold_id
		WHERE h.shard_id = ANY($1) ORDER BY p.hold_id, p.resolved_at NULLS LAST, p.id`, shards)
	if err != nil {
		fail("check", "payments: %v", err)
		return
	}
	payments, err := pgx.CollectRows(rows, pgx.RowToStructByPos[paymentRow])
	if err != nil {
		fail("check", "payments: %v", err)
		return
	}
	kept := map[uuid.UUID]int{}      // charges kept per hold
	live := map[uuid.UUID]bool{}     // holds with a live ticket
	reviewed := map[uuid.UUID]bool{} // holds with a payment in a person's review
	var inReview int64
	for _, p := range payments {
		if p.Booking == booking.BookingConfirmed || p.Booking == booking.BookingWaitlisted {
			live[p.HoldID] = true
		}
		if p.InReview {
			reviewed[p.HoldID] = true
			inReview++
		}
		if p.PendingRefs > 0 && final {
			fail("money", "payment %s has a refund still pending at the end", p.ID)
		}
		switch p.State {
		case payment.Success, payment.Refunded:
			switch {
			case p.Refunded > p.Amount:
				fail("money", "%s payment %s of %d paise was refunded %d: more than was captured", p.Method, p.ID, p.Amount, p.Refunded)
			case p.Refunded == p.Amount:
			case p.Refunded == 0 && p.Booking != "",
				p.Booking == booking.BookingCancelled && p.Refunded == p.RefundDue:
				// A ticket, or a cancelled one refunded what the rules give.
				kept[p.HoldID]++
				if kept[p.HoldID] > 1 {
					fail("money", "hold %s was paid for twice (payment %s) and only one charge refunded", p.HoldID, p.ID)
				}
			case p.InReview:
			default:
				fail("money", "%s payment %s of %d paise (%s) is neither a ticket (booking %q, refund due %d) nor a refund (%d refunded)",
					p.Method, p.ID, p.Amount, p.State, p.Booking, p.RefundDue, p.Refunded)
			}
		case payment.Failed:
			if p.Refunded != 0 {
				fail("money", "failed payment %s was refunded %d", p.ID, p.Refunded)
			}
		default:
			switch {
			case p.InReview:
			case final:
				fail("money", "%s payment %s still %s at the end", p.Method, p.ID, p.State)
			case p.Overdue:
				fail("money", "%s payment %s is still %s past its deadline and no person reviews it", p.Method, p.ID, p.State)
			}
		}
	}
	w.count["in-review"].Store(inReview)
	for hold := range live {
		if kept[hold] == 0 && !reviewed[hold] {
			fail("money", "hold %s has a live ticket and every charge for it was refunded: a ticket given for nothing", hold)
		}
	}
	var orphans []string
	rows, err = w.s.Pool.Query(w.ctx, `SELECT b.pnr FROM bookings b WHERE b.shard_id = ANY($1)
		AND NOT EXISTS (SELECT 1 FROM payments p WHERE p.hold_id = b.hold_id AND p.state IN ('SUCCESS', 'REFUNDED'))`, shards)
	if err == nil {
		orphans, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	switch {
	case err != nil:
		fail("check", "bookings: %v", err)
	case len(orphans) > 0:
		fail("money", "bookings without a captured payment: %v", orphans)
	}
	if bad, err := payment.CheckLedger(w.ctx, w.s.Pool); err != nil || len(bad) > 0 {
		fail("money", "wallet ledger: %v %v", bad, err)
	}
}

// checkCharts: a chart is the shard's last word.
func (w *world) checkCharts(shards []int64, fail failFunc) {
	type chartRow struct {
		ID                int64
		State, Core, Why  string
		Body              []byte
		Train, Class, Qta string
		Date              time.Time
	}
	rows, err := w.s.Pool.Query(w.ctx, `SELECT id, chart_state, coalesce(chart_core_state, ''), coalesce(chart_error, ''),
			coalesce(chart_body, 'null'), train_number, class, quota, journey_date
		FROM inventory_shards WHERE id = ANY($1) AND chart_state <> 'OPEN' ORDER BY id`, shards)
	if err != nil {
		fail("check", "charts: %v", err)
		return
	}
	charts, err := pgx.CollectRows(rows, pgx.RowToStructByPos[chartRow])
	if err != nil {
		fail("check", "charts: %v", err)
		return
	}
	for _, c := range charts {
		if c.State != "CHARTED" {
			fail("chart", "shard %d's chart is %s: %s", c.ID, c.State, c.Why)
			continue
		}
		var chart prs.Chart
		if err := json.Unmarshal(c.Body, &chart); err != nil {
			fail("check", "chart of shard %d: %v", c.ID, err)
			continue
		}
		var live []string
		rows, err := w.s.Pool.Query(w.ctx, `SELECT id::text || ' (' || kind || ', ' || user_id || ')' FROM holds
			WHERE shard_id = $1 AND state = 'HELD' ORDER BY id`, c.ID)
		if err == nil {
			live, err = pgx.CollectRows(rows, pgx.RowTo[string])
		}
		switch {
		case err != nil:
			fail("check", "holds of shard %d: %v", c.ID, err)
		case len(live) > 0:
			fail("chart-live-hold", "shard %d is charted (%s) and still has live holds that can be paid for: %v", c.ID, chart.Ref, live)
		}
		onChart := map[string]bool{}
		for _, e := range chart.Confirmed {
			onChart[e.PNR] = true
		}
		type b struct{ PNR, Status, Reason string }
		rows, err = w.s.Pool.Query(w.ctx, `SELECT pnr, status, cancel_reason FROM bookings WHERE shard_id = $1 ORDER BY pnr`, c.ID)
		if err != nil {
			fail("check", "bookings of shard %d: %v", c.ID, err)
			continue
		}
		bs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[b])
		if err != nil {
			fail("check", "bookings of shard %d: %v", c.ID, err)
			continue
		}
		for _, x := range bs {
			switch {
			case x.Status == booking.BookingWaitlisted:
				fail("chart-after", "shard %d is charted (%s) and booking %s is WAITLISTED on it: a waitlist ticket issued after charting", c.ID, chart.Ref, x.PNR)
			case x.Status == booking.BookingConfirmed && !onChart[x.PNR]:
				fail("chart-after", "shard %d is charted (%s) and booking %s is CONFIRMED but not on the chart: confirmed after charting", c.ID, chart.Ref, x.PNR)
			case x.Status != booking.BookingConfirmed && onChart[x.PNR]:
				fail("chart-undeliverable", "booking %s is on shard %d's chart (%s) as confirmed and is %s here (%s): the chart no longer says who travels",
					x.PNR, c.ID, chart.Ref, x.Status, x.Reason)
			}
		}
		switch c.Core {
		case "FAILED":
			fail("chart-undeliverable", "shard %d's chart %s could not be delivered to the core: %s", c.ID, chart.Ref, c.Why)
			continue
		case "PENDING":
			fail("chart-undeliverable", "shard %d's chart %s is still waiting to be delivered after its jobs ran: %s", c.ID, chart.Ref, c.Why)
			continue
		}
		at, _, err := w.core.GetChart(w.ctx, c.Train, c.Date, c.Class, c.Qta)
		if err != nil {
			fail("chart-undeliverable", "shard %d's chart %s is SENT, and the core has none: %v", c.ID, chart.Ref, err)
			continue
		}
		var ours, theirs []string
		for _, e := range chart.Confirmed {
			ours = append(ours, e.PNR)
		}
		for _, e := range at.Confirmed {
			theirs = append(theirs, e.PNR)
		}
		if at.Ref != chart.Ref || !slices.Equal(ours, theirs) {
			fail("chart", "shard %d's chart is %s %v here and %s %v at the core", c.ID, chart.Ref, ours, at.Ref, theirs)
		}
	}
}

// checkFraud: an enforced decision holds for what was in flight.
func (w *world) checkFraud(fail failFunc) {
	// A ban stops what its members had in flight: nothing they book is
	// confirmed once the ban is enforced, until an appeal lifts it.
	var after []string
	rows, err := w.s.Pool.Query(w.ctx, `SELECT b.pnr || ' of user ' || b.user_id || ' booked ' || b.booked_at || ', ban enforced ' || d.enforced_at
		FROM bookings b JOIN users u ON u.id = b.user_id AND u.banned_at IS NOT NULL
		JOIN LATERAL (SELECT d.enforced_at FROM fraud_enforcements f JOIN fraud_decisions d ON d.id = f.decision_id
			WHERE f.user_id = u.id AND f.action = 'BAN' AND d.enforced_at IS NOT NULL ORDER BY d.enforced_at DESC LIMIT 1) d ON true
		WHERE b.booked_at > d.enforced_at ORDER BY b.id`)
	if err == nil {
		after, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	switch {
	case err != nil:
		fail("check", "bans: %v", err)
	case len(after) > 0:
		fail("ban", "tickets issued to banned accounts after their ban was enforced: %v", after)
	}
	// A cancel decision cancels every booking its members made in the
	// window, those whose payment was on its way when the batch ran too:
	// once it is enforced, none paid for before then is still live (a
	// charted shard's are beyond cancelling).
	var missed []string
	rows, err = w.s.Pool.Query(w.ctx, `SELECT DISTINCT b.pnr || ' (' || b.status || ') of user ' || b.user_id || ', decision ' || d.id
		FROM fraud_decisions d JOIN fraud_clusters c ON c.id = d.cluster_id
		JOIN fraud_cluster_members m ON m.cluster_id = c.id
		JOIN inventory_shards s ON s.window_opens_at = c.window_opens_at AND s.chart_state = 'OPEN'
		JOIN bookings b ON b.shard_id = s.id AND b.user_id = m.user_id AND b.status IN ('CONFIRMED', 'WAITLISTED')
		JOIN payments p ON p.hold_id = b.hold_id AND p.state = 'SUCCESS'
		WHERE d.outcome = 'CANCEL_BOOKINGS' AND d.enforced_at IS NOT NULL
		  AND (b.booked_at < d.enforced_at OR p.initiated_at < d.enforced_at)`)
	if err == nil {
		missed, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	switch {
	case err != nil:
		fail("check", "cancel decisions: %v", err)
	case len(missed) > 0:
		fail("fraud-missed", "bookings a cancel decision should have cancelled are live (paid for or booked before it was enforced): %v", missed)
	}
}

// checkRecon: every automatic exception was resolved, or handed to a
// person, by its job.
func (w *world) checkRecon(fail failFunc) {
	var open []string
	rows, err := w.s.Pool.Query(w.ctx, `SELECT e.kind || ' ' || e.ref || ' (' || (SELECT count(*) FROM reconciliation_exception_events v
			WHERE v.exception_id = e.id AND v.action = 'REOPENED') || ' reopenings)'
		FROM reconciliation_exceptions e WHERE e.path = 'AUTO' AND e.state = 'OPEN' AND NOT e.needs_approval ORDER BY e.detected_at`)
	if err == nil {
		open, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	switch {
	case err != nil:
		fail("check", "exceptions: %v", err)
	case len(open) > 0:
		fail("recon-open", "automatic exceptions still OPEN after their resolution jobs ran: %v", open)
	}
}

// observe counts what happened in the database, for the coverage check.
func (w *world) observe() {
	for k, q := range map[string]string{
		"waitlist-paid":   `SELECT count(*) FROM bookings WHERE waitlist_no IS NOT NULL OR promoted_at IS NOT NULL`,
		"promoted":        `SELECT count(*) FROM bookings WHERE promoted_at IS NOT NULL`,
		"chart-sent":      `SELECT count(*) FROM inventory_shards WHERE chart_core_state = 'SENT'`,
		"core-rejected":   `SELECT count(*) FROM bookings WHERE prs_state = 'REJECTED'`,
		"fraud-cancelled": `SELECT count(*) FROM bookings WHERE cancel_reason LIKE 'cancelled after fraud review%'`,
		"banned":          `SELECT count(*) FROM fraud_enforcements WHERE action = 'BAN'`,
		"recon-auto":      `SELECT count(*) FROM reconciliation_exceptions WHERE path = 'AUTO'`,
		"recon-resolved":  `SELECT count(*) FROM reconciliation_exceptions WHERE resolution LIKE 'AUTO\_%'`,
	} {
		var n int64
		if err := w.s.Pool.QueryRow(w.ctx, q).Scan(&n); err != nil {
			w.t.Errorf("count %s: %v", k, err)
			continue
		}
		w.count[k].Store(n)
	}
}
