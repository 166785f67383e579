package recon

import (
	"bytes"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/xuri/excelize/v2"

	"tatkal/booking"
	"tatkal/booking/sim/pspsim"
)

func TestMonthBuckets(t *testing.T) {
	t.Parallel()
	d := 24 * time.Hour
	for age, want := range map[time.Duration]int{0: 0, 3*d - time.Second: 0, 3 * d: 1, 8*d - time.Second: 1, 8 * d: 2,
		31*d - time.Second: 2, 31 * d: 3, 400 * d: 3} {
		if got := monthBucket(age); got != want {
			t.Errorf("age %v: bucket %d, want %d", age, got, want)
		}
	}
}

// The month's figures from the exceptions' history: a faulty day found
// this month (one resolved, one written off by two people), and earlier
// exceptions with their history in the months before; opening + found −
// resolved − written off = closing for every kind and owner, each figure
// as the database has it; the ageing at the month's end in its buckets; a
// finance lead signs a month that is over, which freezes its report.
func TestMonthEnd(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := w.ctx
	const gw = "bharatpg"
	m := w.make(append(cleanSet(gw, 4), clean(gw, "UPI", 150000), clean(gw, "CARD", 123456))...)
	w.settlementFaults(gw, pspsim.SettlementFaults{Drop: pspsim.FaultPick{Refs: []string{m[4].PSPRef}},
		ChangeAmount: pspsim.FaultPick{Refs: []string{m[5].PSPRef}, Paise: 1234}})
	w.ingestDay(gw)
	w.run(gw)
	found, err := w.svc.Exceptions(ctx, Filter{Gateway: gw, BusinessDate: w.day, State: "UNRESOLVED", Limit: 100})
	w.must(err)
	if len(found) < 2 {
		t.Fatalf("%d exceptions on the faulty day, want at least 2", len(found))
	}
	for _, p := range []string{"finance1", "finance2", "lead1"} {
		_, err := w.env.Pool.Exec(ctx, `INSERT INTO console_users (login, name, role, password_hash, finance_lead) VALUES ($1, $1, 'finance', 'x', $2)`,
			p, p == "lead1")
		w.must(err)
	}
	w.must(w.svc.ResolveManually(ctx, found[0].ID, "finance1", "MATCHED_MANUALLY", "seen by hand", nil))
	w.must(w.svc.ProposeWriteOff(ctx, found[1].ID, "finance1", "not worth chasing"))
	w.must(w.svc.ApproveWriteOff(ctx, found[1].ID, "finance2", "agreed"))

	// Earlier history, as the months before left it (the events' times are
	// the past's): last month one found and still open (A), one found and
	// resolved (B); one from the month before, open into last month (C)
	// and resolved this month.
	now := time.Now().In(booking.IST)
	this := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, booking.IST)
	last := this.AddDate(0, -1, 0)
	type past struct {
		kind   string
		stake  int64
		events []struct {
			at    time.Time
			state string
		}
	}
	ev := func(at time.Time, state string) struct {
		at    time.Time
		state string
	} {
		return struct {
			at    time.Time
			state string
		}{at, state}
	}
	a := past{OrphanLine, 700_00, nil}
	a.events = append(a.events, ev(last.AddDate(0, 0, 9), StateOpen), ev(last.AddDate(0, 0, 12), StateInvestigating))
	b := past{OrphanLine, 300_00, nil}
	b.events = append(b.events, ev(last.AddDate(0, 0, 4), StateOpen), ev(last.AddDate(0, 0, 19), StateResolved))
	c := past{UnexplainedCredit, 777_00, nil}
	c.events = append(c.events, ev(last.AddDate(0, -1, 0), StateOpen), ev(this.Add(time.Hour), StateResolved))
	for i, p := range []past{a, b, c} {
		id := uuid.New()
		state := p.events[len(p.events)-1].state
		var resolved *time.Time
		if state == StateResolved {
			resolved = &p.events[len(p.events)-1].at
		}
		k, _ := KindOf(p.kind)
		_, err := w.env.Pool.Exec(ctx, `INSERT INTO reconciliation_exceptions (id, kind, ref, gateway, business_date, amount_paise, stake_paise,
			owner_team, path, state, detected_at, due_at, first_run_id, last_run_id, resolved_at)
			VALUES ($1, $2, $3, $4, $5, $6, $6, $7, 'MANUAL', $8, $9, $9, 0, 0, $10)`,
			id, p.kind, "past-"+strconv.Itoa(i), gw, pgDate(p.events[0].at), p.stake, k.Owner, state, p.events[0].at, resolved)
		w.must(err)
		prev := ""
		for _, e := range p.events {
			_, err := w.env.Pool.Exec(ctx, `INSERT INTO reconciliation_exception_events (exception_id, at, actor, action, from_state, to_state)
				VALUES ($1, $2, 'test', 'PAST', $3, $4)`, id, e.at, prev, e.state)
			w.must(err)
			prev = e.state
		}
	}

	// Last month: opening C; found A and B; resolved B; closing A and C.
	lr, err := w.svc.MonthReport(ctx, MonthStart(last))
	w.must(err)
	flow := func(n int, paise int64) Flow { return Flow{n, paise} }
	if lr.Total.Opening != flow(1, 777_00) || lr.Total.Found != flow(2, 1000_00) || lr.Total.Resolved != flow(1, 300_00) ||
		lr.Total.WrittenOff != flow(0, 0) || lr.Total.Closing != flow(2, 1477_00) || !lr.Over || !lr.AsOf.Equal(this) {
		t.Fatalf("last month %+v", lr.Total)
	}
	// Aged at the month's end: A about 20 days, C over 30.
	if got := lr.AgeTotal.Buckets; got[2] != flow(1, 700_00) || got[3] != flow(1, 777_00) || got[0].Count+got[1].Count != 0 {
		t.Fatalf("last month's ageing %+v", got)
	}
	// This month: opening A and C, found the faulty day's, resolved C and
	// one, written off one; closing checked against the exceptions' state now.
	tr, err := w.svc.MonthReport(ctx, MonthStart(now))
	w.must(err)
	var openNow int
	var openPaise int64
	w.must(w.env.Pool.QueryRow(ctx, `SELECT count(*), coalesce(sum(stake_paise), 0) FROM reconciliation_exceptions
		WHERE state IN ('OPEN', 'INVESTIGATING')`).Scan(&openNow, &openPaise))
	var wo int64
	w.must(w.env.Pool.QueryRow(ctx, `SELECT written_off_paise FROM reconciliation_exceptions WHERE id = $1`, found[1].ID).Scan(&wo))
	detected := w.count(`SELECT count(*) FROM reconciliation_exception_events WHERE action = 'DETECTED' AND at >= $1`, this)
	if tr.Over || tr.Total.Opening != flow(2, 1477_00) || tr.Total.Found.Count != detected || detected < len(found) || tr.Total.Resolved.Count != 2 ||
		tr.Total.WrittenOff != flow(1, wo) || tr.Total.Closing != flow(openNow, openPaise) {
		t.Fatalf("this month %+v; open now %d of %d", tr.Total, openNow, openPaise)
	}
	for _, rows := range [][]PeriodRow{tr.ByKind, tr.ByOwner, lr.ByKind, lr.ByOwner, {tr.Total, lr.Total}} {
		for _, r := range rows {
			if !r.TiesOut() {
				t.Errorf("%s does not tie out: %+v", r.Key, r)
			}
		}
	}
	var treasury PeriodRow
	for _, r := range lr.ByOwner {
		if r.Key == "treasury" {
			treasury = r
		}
	}
	if treasury.Opening != flow(1, 777_00) || treasury.Closing != flow(1, 777_00) {
		t.Fatalf("treasury's last month %+v", treasury)
	}

	// Signing: only a finance lead, only a month that is over, once.
	if _, err := w.svc.SignMonth(ctx, last, "finance1"); booking.ErrorReason(err) != "NOT_FINANCE_LEAD" {
		t.Fatalf("signed by a clerk: %v", err)
	}
	if _, err := w.svc.SignMonth(ctx, now, "lead1"); booking.ErrorReason(err) != "MONTH_NOT_OVER" {
		t.Fatalf("this month signed: %v", err)
	}
	signed, err := w.svc.SignMonth(ctx, last, "lead1")
	w.must(err)
	if signed.SignedBy != "lead1" || signed.Drift || signed.Total != lr.Total {
		t.Fatalf("signed %+v", signed)
	}
	if _, err := w.svc.SignMonth(ctx, last, "lead1"); booking.ErrorReason(err) != "ALREADY_SIGNED" {
		t.Fatalf("signed twice: %v", err)
	}
	if n := w.count(`SELECT count(*) FROM audit_log WHERE actor = 'lead1' AND action = 'recon.month_signoff'`); n != 1 {
		t.Fatalf("%d audit rows of the sign-off", n)
	}
	// A late find in the signed month: the report stays as signed, and says
	// today's figures differ.
	late := uuid.New()
	_, err = w.env.Pool.Exec(ctx, `INSERT INTO reconciliation_exceptions (id, kind, ref, gateway, business_date, amount_paise, stake_paise,
		owner_team, path, detected_at, due_at, first_run_id, last_run_id) VALUES ($1, 'ORPHAN_LINE', 'late', $2, $3, 5000, 5000,
		'finance-settlement', 'MANUAL', $4, $4, 0, 0)`, late, gw, pgDate(last), last.AddDate(0, 0, 25))
	w.must(err)
	_, err = w.env.Pool.Exec(ctx, `INSERT INTO reconciliation_exception_events (exception_id, at, actor, action, to_state)
		VALUES ($1, $2, 'test', 'DETECTED', 'OPEN')`, late, last.AddDate(0, 0, 25))
	w.must(err)
	frozen, err := w.svc.MonthReport(ctx, last)
	w.must(err)
	if frozen.Total != lr.Total || !frozen.Drift || frozen.SignedBy != "lead1" {
		t.Fatalf("the signed month after a late find: %+v drift %v", frozen.Total, frozen.Drift)
	}
	if _, err := w.env.Pool.Exec(ctx, `UPDATE recon_month_signoffs SET signed_by = 'someone'`); err == nil {
		t.Fatal("a sign-off was changed")
	}

	// The month's workbook: the signed figures, as tables of numbers.
	var buf bytes.Buffer
	w.must(w.svc.WriteMonthXLSX(ctx, last, &buf))
	f, err := excelize.OpenReader(&buf)
	w.must(err)
	defer f.Close()
	if got := f.GetSheetList(); !slices.Equal(got, []string{"Month", "Period", "Ageing"}) {
		t.Fatalf("sheets %v", got)
	}
	tables, err := f.GetTables("Period")
	w.must(err)
	if len(tables) != 2 || tables[0].Name != "PeriodByKind" || tables[1].Name != "PeriodByOwner" {
		t.Fatalf("period tables %+v", tables)
	}
	rows, err := f.GetRows("Period", excelize.Options{RawCellValue: true})
	w.must(err)
	total := rows[len(lr.ByKind)+1] // the row under the kinds' table
	if total[0] != "All" || total[1] != "1" || total[2] != "777" || total[9] != "2" || total[10] != "1477" {
		t.Fatalf("period total row %q", total)
	}
	if got := numFmt(t, f, "Period", "K"+strconv.Itoa(len(lr.ByKind)+2)); got != MoneyFormat(1477_00) {
		t.Fatalf("closing amount's format %q", got)
	}
	if v, _ := f.GetCellValue("Month", "B7"); v != "lead1" {
		t.Fatalf("signed by %q", v)
	}
}
