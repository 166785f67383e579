package recon

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"tatkal/booking/prs"
	"tatkal/booking/sim/pspsim"
)

// cleanSet is n payments of a gateway that went right, every method, some
// partly refunded.
func cleanSet(gw string, n int) []spec {
	methods := []string{"UPI", "CARD", "NB"}
	var out []spec
	for i := range n {
		s := clean(gw, methods[i%3], 120000+int64(i)*1237)
		if i%5 == 4 {
			s.refund = 6500
		}
		out = append(out, s)
	}
	return out
}

func bps(amount int64, b int) int64 { return (amount*int64(b) + 5000) / 10000 }

// A clean day of both gateways: every line matches, nothing is an
// exception, and a rerun says the same.
func TestCleanDay(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	// A wallet top-up through each gateway too: captured, nothing to book.
	topups := []spec{{gateway: "swiftpay", method: "UPI", amount: 500000, ours: "SUCCESS", captured: true, topup: true},
		{gateway: "bharatpg", method: "CARD", amount: 250000, ours: "SUCCESS", captured: true, topup: true}}
	w.make(append(append(cleanSet("swiftpay", 30), cleanSet("bharatpg", 30)...), topups...)...)
	for _, gw := range []string{"swiftpay", "bharatpg"} {
		w.ingestDay(gw)
		sum := w.run(gw)
		if ex := w.exceptions(gw); len(ex) != 0 || sum.Exceptions != 0 {
			t.Fatalf("%s: clean day has %d exceptions: %+v", gw, len(ex), ex)
		}
		// 30 captures and a top-up, 6 refunds, one payout, 30 bookings in the core.
		if sum.OurItems != 37 || sum.Lines != 37 || sum.Matched != 37+1+30 || sum.Payouts == 0 || sum.Payouts != sum.Net {
			t.Fatalf("%s: run %+v", gw, sum)
		}
		again := w.run(gw)
		if again.Matched != sum.Matched || again.Exceptions != 0 || again.NewExceptions != 0 || again.Cleared != 0 {
			t.Fatalf("%s: rerun %+v", gw, again)
		}
	}
	if n := w.count(`SELECT count(*) FROM river_job WHERE kind = 'recon_resolve'`); n != 0 {
		t.Fatalf("%d resolution jobs on a clean day", n)
	}
}

// want is an exception a test expects: kind, reference, amount, difference.
type want struct {
	kind, ref    string
	amount, diff int64
	path         string
}

// A day with every fault the gateway, the bank and the core can make and
// every state our side can be in: each is found once, with the right kind
// and amount; a rerun changes nothing; a corrected file clears what it
// corrects, and both files stay visible.
func TestFaultyDay(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	const gw = "swiftpay"
	base := cleanSet(gw, 24)
	faulty := []spec{
		clean(gw, "UPI", 150000),  // 0 dropped from the file
		clean(gw, "CARD", 210000), // 1 written twice
		clean(gw, "NB", 175000),   // 2 amount changed
		clean(gw, "CARD", 333300), // 3 fee overcharged
		clean(gw, "UPI", 99900),   // 4 moved to the next day's file: no exception
		func() spec { s := clean(gw, "NB", 250000); s.refund = 40000; return s }(), // 5 refund omitted
		clean(gw, "CARD", 180000), // 6 charged back
		func() spec { s := clean(gw, "UPI", 260000); s.refund = 30000; return s }(),   // 7 refund amount changed
		{gateway: gw, method: "UPI", amount: 145000, ours: "UNKNOWN", captured: true}, // 8 paid, not booked
		{gateway: gw, method: "CARD", amount: 155000, ours: "FAILED", captured: true}, // 9 we said FAILED
		clean(gw, "UPI", 165000), // 10 booked; a second charge on its hold follows
		{gateway: gw, method: "NB", amount: 135000, ours: "UNKNOWN", booked: true, synced: true}, // 11 booked, never paid
		clean(gw, "CARD", 195000), // 12 dropped from the core's export
		clean(gw, "UPI", 205000),  // 13 fare changed in the core's export
		clean(gw, "NB", 215000),   // 14 booked; a second payment, unresolved here, captured there
	}
	made := w.make(append(base, faulty...)...)
	f := made[len(base):]
	more := w.make(
		spec{gateway: gw, method: "UPI", amount: 165000, ours: "SUCCESS", captured: true, sameHold: f[10], at: 10 * 60e9},
		spec{gateway: gw, method: "NB", amount: 215000, ours: "UNKNOWN", captured: true, sameHold: f[14], at: 10 * 60e9},
	)
	dup, unresolved := more[0], more[1]
	// The other gateway paid for a booking on the same journey date.
	w.make(clean("bharatpg", "UPI", 125000))

	payout := "SWP" + w.day.Format("20060102")
	w.settlementFaults(gw, pspsim.SettlementFaults{
		Drop:          pspsim.FaultPick{Refs: []string{f[0].PSPRef}},
		Duplicate:     pspsim.FaultPick{Refs: []string{f[1].PSPRef}},
		ChangeAmount:  pspsim.FaultPick{Refs: []string{f[2].PSPRef, f[7].RefundRef}, Paise: 250},
		OverchargeFee: pspsim.FaultPick{Refs: []string{f[3].PSPRef}, Bps: 50},
		NextDay:       pspsim.FaultPick{Refs: []string{f[4].PSPRef}},
		OmitRefund:    pspsim.FaultPick{Refs: []string{f[5].RefundRef}},
		Chargeback:    pspsim.FaultPick{Refs: []string{f[6].PSPRef}},
		ShortPay:      pspsim.FaultPick{Refs: []string{payout}, Paise: 700},
		PhantomLines:  1,
	})
	w.exportFaults(prs.ExportFaults{Seed: 3, Drop: prs.ExportPick{PNRs: []string{f[12].PNR}},
		ChangeFare: prs.ExportPick{PNRs: []string{f[13].PNR}, Paise: 500}, UnknownPNRs: 1})
	w.ingestDay(gw)
	sum := w.run(gw)

	// The fee a card line should carry, and what the overcharged one did.
	a := f[3].Amount
	fee, gst := bps(a, 180), bps(bps(a, 180), 1800)
	over := bps(a, 180) + bps(a, 50)
	wants := []want{
		{MissingInSettlement, f[0].ID.String(), f[0].Amount, 0, PathInquiry},
		{DuplicateLine, gw + "|CAPTURE|" + f[1].PSPRef, f[1].Amount, 0, PathManual},
		{AmountMismatch, f[2].ID.String(), f[2].Amount, 250, PathManual},
		{FeeMismatch, f[3].ID.String(), over + bps(over, 1800), over + bps(over, 1800) - fee - gst, PathManual},
		{RefundNotSettled, f[5].RefundID.String(), f[5].Refund, 0, PathInquiry},
		{Chargeback, gw + "|" + f[6].PSPRef, f[6].Amount, 0, PathManual},
		{RefundMismatch, f[7].RefundID.String(), f[7].Refund, 250, PathInquiry},
		{PaidNotBooked, f[8].ID.String(), f[8].Amount, 0, PathAuto},
		{StatusMismatch, f[9].ID.String(), f[9].Amount, 0, PathManual},
		{DuplicateCharge, dup.ID.String(), dup.Amount, 0, PathAuto},
		{BookedNotPaid, f[11].PNR, f[11].Amount, 0, PathInquiry},
		{CoreMissing, f[12].PNR, f[12].Amount, 0, PathResync},
		{CoreMismatch, f[13].PNR, f[13].Amount, 500, PathResync},
		{StatusMismatch, unresolved.ID.String(), unresolved.Amount, 0, PathAuto},
	}
	// The phantom line, the short payout and the unknown PNR: their
	// references come from the files.
	var phantom struct {
		ref    string
		amount int64
	}
	w.must(w.env.Pool.QueryRow(w.ctx, `SELECT ext_ref, amount_paise FROM recon_lines WHERE current AND source = 'SETTLEMENT'
		AND business_date = $1 AND ext_ref LIKE 'pay_PH%'
		AND ext_ref NOT IN (SELECT psp_ref FROM payments WHERE psp_ref IS NOT NULL)`, w.day).Scan(&phantom.ref, &phantom.amount))
	wants = append(wants, want{OrphanLine, gw + "|CAPTURE|" + phantom.ref, phantom.amount, 0, PathManual})
	var net, credit int64
	w.must(w.env.Pool.QueryRow(w.ctx, `SELECT (SELECT sum(net_paise) FROM recon_lines WHERE current AND payout_id = $1 AND source = 'SETTLEMENT'),
		(SELECT net_paise FROM recon_lines WHERE current AND source = 'BANK' AND ext_ref = $1)`, payout).Scan(&net, &credit))
	if credit != net-700 {
		t.Fatalf("bank credit %d, lines' net %d: the short payment is not 700 paise", credit, net)
	}
	wants = append(wants, want{PayoutMismatch, payout, net, -700, PathManual})
	var orphanPNR string
	var orphanFare int64
	w.must(w.env.Pool.QueryRow(w.ctx, `SELECT ext_ref, amount_paise FROM recon_lines WHERE current AND source = 'CORE'
		AND ext_ref NOT IN (SELECT pnr FROM bookings)`).Scan(&orphanPNR, &orphanFare))

	got := w.exceptions(gw)
	check := func(got []Exception) {
		t.Helper()
		var lines []string
		seen := map[string]bool{}
		for _, e := range got {
			lines = append(lines, fmt.Sprintf("%s %s %d %d %s", e.Kind, e.Ref, e.AmountPaise, e.DiffPaise, e.Path))
			key := e.Kind + " " + e.Ref
			if seen[key] {
				t.Errorf("found twice: %s", key)
			}
			seen[key] = true
		}
		var wantLines []string
		for _, x := range wants {
			wantLines = append(wantLines, fmt.Sprintf("%s %s %d %d %s", x.kind, x.ref, x.amount, x.diff, x.path))
		}
		slices.Sort(lines)
		slices.Sort(wantLines)
		if !slices.Equal(lines, wantLines) {
			t.Fatalf("exceptions:\n got  %s\n want %s", strings.Join(lines, "\n      "), strings.Join(wantLines, "\n      "))
		}
	}
	check(got)
	for _, e := range got {
		k, _ := KindOf(e.Kind)
		if e.State != StateOpen || e.Owner != k.Owner || !e.DueAt.Equal(e.DetectedAt.Add(k.SLA)) {
			t.Errorf("%s: state %s owner %s due %v (detected %v)", e.Kind, e.State, e.Owner, e.DueAt, e.DetectedAt)
		}
	}
	if sum.Exceptions != len(wants) || sum.NewExceptions != len(wants) {
		t.Fatalf("run counts %d exceptions, %d new; want %d", sum.Exceptions, sum.NewExceptions, len(wants))
	}
	// The moved line matched a day late, within tolerance.
	if n := w.count(`SELECT count(*) FROM recon_matches WHERE run_id = $1 AND our_ref = $2 AND rule = 'KEY, T+1'`, sum.ID, f[4].ID.String()); n != 1 {
		t.Fatalf("the next-day line matched %d times", n)
	}
	// Automatic resolutions: one job each, in the run's transaction.
	jobs := `SELECT count(*) FROM river_job WHERE kind = 'recon_resolve'`
	if n := w.count(jobs); n != 5 {
		t.Fatalf("%d resolution jobs, want 5 (paid-not-booked, duplicate charge, unresolved status, two core re-syncs)", n)
	}

	// A rerun changes nothing: same rows, same states, no new jobs or events.
	events := `SELECT count(*) FROM reconciliation_exception_events`
	before := w.count(events)
	again := w.run(gw)
	check(w.exceptions(gw))
	if again.NewExceptions != 0 || again.Cleared != 0 || again.Exceptions != sum.Exceptions || again.Matched != sum.Matched ||
		w.count(jobs) != 5 || w.count(events) != before {
		t.Fatalf("rerun changed things: %+v (first %+v)", again, sum)
	}
	for _, e := range w.exceptions(gw) {
		if !slices.ContainsFunc(got, func(g Exception) bool { return g.ID == e.ID && g.State == e.State }) {
			t.Fatalf("rerun replaced %s %s", e.Kind, e.Ref)
		}
	}

	// The unknown PNR belongs to the journey date, not to a gateway: no
	// gateway's run finds it (before, each gateway with a booking on that
	// date found it again); the journey date's core run finds it once, and
	// its rerun changes nothing.
	w.ingestDay("bharatpg")
	w.run("bharatpg")
	orphans := `SELECT count(*) FROM reconciliation_exceptions WHERE kind = 'CORE_ORPHAN'`
	if n := w.count(orphans); n != 0 {
		t.Fatalf("the gateways' runs found %d core orphans", n)
	}
	for range 2 {
		core, err := w.svc.Run(w.ctx, RunRequest{Gateway: Core, Date: w.shard.Journey, By: "finance1"})
		w.must(err)
		ex, err := w.svc.Exceptions(w.ctx, Filter{Gateway: Core, BusinessDate: w.shard.Journey, Limit: 10})
		w.must(err)
		if len(ex) != 1 || ex[0].Kind != CoreOrphan || ex[0].Ref != orphanPNR || ex[0].AmountPaise != orphanFare || ex[0].Path != PathManual ||
			core.Exceptions != 1 || w.count(orphans) != 1 || core.Lines != core.Matched+1 {
			t.Fatalf("core run %+v: %+v", core, ex)
		}
	}

	// The gateway corrects its file and the bank its statement: what they
	// corrected clears on the rerun, never deleted; both files stay.
	w.settlementFaults(gw, pspsim.SettlementFaults{})
	fi, err := w.svc.FetchSettlement(w.ctx, w.src, gw, w.day, "finance1")
	w.must(err)
	if fi.Replayed || fi.Superseded == 0 {
		t.Fatalf("corrected file: %+v", fi)
	}
	replay, err := w.svc.FetchSettlement(w.ctx, w.src, gw, w.day, "finance2")
	w.must(err)
	if !replay.Replayed || replay.ID != fi.ID {
		t.Fatalf("the same file again: %+v", replay)
	}
	files, err := w.svc.Files(w.ctx, SourceSettlement, gw, w.day)
	w.must(err)
	if len(files) != 2 || files[0].ID != fi.ID || files[0].SupersededBy != nil || files[1].SupersededBy == nil || *files[1].SupersededBy != fi.ID {
		t.Fatalf("files: %+v", files)
	}
	// The next day's file loses the line moved into it, so that line is
	// not seen twice.
	_, err = w.svc.FetchSettlement(w.ctx, w.src, gw, w.day.AddDate(0, 0, 1), "finance1")
	w.must(err)
	_, err = w.svc.FetchBank(w.ctx, w.src, w.day.AddDate(0, 0, 1), "finance1")
	w.must(err)
	third := w.run(gw)
	cleared := map[string]bool{MissingInSettlement: true, DuplicateLine: true, AmountMismatch: true, FeeMismatch: true,
		RefundNotSettled: true, Chargeback: true, RefundMismatch: true, OrphanLine: true, PayoutMismatch: true}
	for _, e := range w.exceptions(gw) {
		if cleared[e.Kind] != (e.State == StateResolved && e.Resolution == ClearedOnRerun) {
			t.Errorf("after the corrected file: %s %s is %s %s", e.Kind, e.Ref, e.State, e.Resolution)
		}
	}
	if third.Cleared != len(cleared) || third.NewExceptions != 0 {
		t.Fatalf("third run: %+v", third)
	}
	if n := w.count(`SELECT count(*) FROM reconciliation_exception_events WHERE action = 'CLEARED_ON_RERUN'`); n != len(cleared) {
		t.Fatalf("%d clearing events", n)
	}
}

// Wallet payments have no gateway file, but their bookings are still
// checked against the core's export by the "wallet" run.
func TestWalletDay(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	var specs []spec
	for i := range 6 {
		specs = append(specs, spec{gateway: "", method: "WALLET", amount: 110000 + int64(i), ours: "SUCCESS", booked: true, synced: true})
	}
	m := w.make(specs...)
	w.exportFaults(prs.ExportFaults{Drop: prs.ExportPick{PNRs: []string{m[2].PNR}}})
	_, err := w.svc.FetchCore(w.ctx, w.src, w.shard.Journey, "job:test")
	w.must(err)
	sum := w.run(Wallet)
	ex := w.exceptions(Wallet)
	if len(ex) != 1 || ex[0].Kind != CoreMissing || ex[0].Ref != m[2].PNR || ex[0].AmountPaise != m[2].Amount || sum.Matched != 5 {
		t.Fatalf("wallet run %+v: %+v", sum, ex)
	}
}

// Matching reads payment_reviews: a payment a person is reviewing gets no
// automatic resolution (its exception goes to a person, the review in its
// evidence, and no job is enqueued), while the same faults on payments
// not in review are resolved automatically. A review opened after the
// run sends the open automatic exception to a person on the rerun, and
// its already enqueued job leaves the money alone.
func TestReviewedPaymentsGoToAPerson(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	const gw = "swiftpay"
	base := w.make(clean(gw, "UPI", 120000), clean(gw, "CARD", 130000))
	paid := w.make(
		spec{gateway: gw, method: "UPI", amount: 145000, ours: "UNKNOWN", captured: true}, // paid, not booked; in review
		spec{gateway: gw, method: "UPI", amount: 146000, ours: "UNKNOWN", captured: true}, // paid, not booked; review later
	)
	dup := w.make(spec{gateway: gw, method: "UPI", amount: 120000, ours: "SUCCESS", captured: true, sameHold: base[0], at: 10 * 60e9})[0]
	review := func(id uuid.UUID) int64 {
		var rid int64
		w.must(w.env.Pool.QueryRow(w.ctx, `INSERT INTO payment_reviews (payment_id, kind, detail) VALUES ($1, 'SUCCESS_UNCONFIRMED', '{}')
			RETURNING id`, id).Scan(&rid))
		return rid
	}
	r0, rdup := review(paid[0].ID), review(dup.ID)
	w.ingestDay(gw)
	w.run(gw)

	byRef := func() map[string]Exception {
		out := map[string]Exception{}
		for _, e := range w.exceptions(gw) {
			out[e.Kind+" "+e.Ref] = e
		}
		return out
	}
	got := byRef()
	for _, c := range []struct {
		kind   string
		id     uuid.UUID
		path   string
		review int64
	}{
		{PaidNotBooked, paid[0].ID, PathManual, r0},
		{DuplicateCharge, dup.ID, PathManual, rdup},
		{PaidNotBooked, paid[1].ID, PathAuto, 0},
	} {
		e, ok := got[c.kind+" "+c.id.String()]
		if !ok {
			t.Fatalf("no %s for %s: %v", c.kind, c.id, got)
		}
		var ev struct {
			Review int64 `json:"payment_review"`
		}
		w.must(json.Unmarshal(e.Evidence, &ev))
		if e.Path != c.path || ev.Review != c.review {
			t.Errorf("%s %s: path %s, review in evidence %d; want %s, %d", c.kind, c.id, e.Path, ev.Review, c.path, c.review)
		}
	}
	if len(got) != 3 {
		t.Fatalf("exceptions %v, want the three above", got)
	}
	jobs := `SELECT count(*) FROM river_job WHERE kind = 'recon_resolve'`
	if n := w.count(jobs); n != 1 {
		t.Fatalf("%d resolution jobs, want 1 (the payment not in review)", n)
	}

	// A review opened since: the rerun hands the open exception to a
	// person (no second job), and the job enqueued before moves nothing.
	r1 := review(paid[1].ID)
	again := w.run(gw)
	if again.NewExceptions != 0 || again.Cleared != 0 || w.count(jobs) != 1 {
		t.Fatalf("rerun: %+v, %d jobs", again, w.count(jobs))
	}
	e := byRef()[PaidNotBooked+" "+paid[1].ID.String()]
	var ev struct {
		Review int64 `json:"payment_review"`
	}
	w.must(json.Unmarshal(e.Evidence, &ev))
	if e.Path != PathManual || ev.Review != r1 {
		t.Fatalf("after the review: path %s, review %d; want MANUAL, %d", e.Path, ev.Review, r1)
	}
	if err := w.svc.Resolve(w.ctx, e.ID, nil, nil); err != nil {
		t.Fatalf("resolve: %v", err)
	}
	e, err := w.svc.Exception(w.ctx, e.ID)
	w.must(err)
	if e.State != StateInvestigating {
		t.Fatalf("the job on a payment in review left the exception %s", e.State)
	}
	if n := w.count(`SELECT count(*) FROM refunds WHERE payment_id = $1`, paid[1].ID); n != 0 {
		t.Fatal("the job on a payment in review refunded it")
	}
}

// A run whose own transaction fails after its core leg committed (here:
// stopped at the pause point between the two) leaves nothing: no run, no
// matches, no handed-over findings; the rerun finds the core's faults once.
func TestRunFailingAfterItsCoreLegLeavesNothing(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	const gw = "swiftpay"
	m := w.make(cleanSet(gw, 6)...)
	w.exportFaults(prs.ExportFaults{Drop: prs.ExportPick{PNRs: []string{m[0].PNR}}, ChangeFare: prs.ExportPick{PNRs: []string{m[1].PNR}, Paise: 500}})
	w.ingestDay(gw)
	runCtx, stop := context.WithCancel(w.ctx)
	w.svc.cfg.Pause = func(_ context.Context, point string) {
		if point == "recon.run.core-leg-committed" {
			// The core leg's rows are committed by now, under the run's id.
			if n := w.count(`SELECT count(*) FROM recon_run_found`); n != 2 {
				t.Errorf("%d findings handed over, want the 2 core faults", n)
			}
			stop()
		}
	}
	if _, err := w.svc.Run(runCtx, RunRequest{Gateway: gw, Date: w.day, AsOf: w.day.AddDate(0, 0, 4), By: "finance1"}); err == nil {
		t.Fatal("a run stopped mid-way succeeded")
	}
	w.svc.cfg.Pause = nil
	for _, q := range []string{`SELECT count(*) FROM recon_runs`, `SELECT count(*) FROM recon_matches`, `SELECT count(*) FROM recon_run_found`,
		`SELECT count(*) FROM reconciliation_exceptions`} {
		if n := w.count(q); n != 0 {
			t.Fatalf("%s: %d after the failed run", q, n)
		}
	}
	sum := w.run(gw)
	got := map[string]int{}
	for _, e := range w.exceptions(gw) {
		got[e.Kind+" "+e.PNR]++
	}
	if len(got) != 2 || got[CoreMissing+" "+m[0].PNR] != 1 || got[CoreMismatch+" "+m[1].PNR] != 1 || sum.Exceptions != 2 {
		t.Fatalf("rerun found %v (%+v)", got, sum)
	}
	if n := w.count(`SELECT count(*) FROM recon_run_found`); n != 0 {
		t.Fatalf("%d findings left in the hand-over table", n)
	}
}
