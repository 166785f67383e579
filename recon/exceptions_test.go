package recon

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"tatkal/booking"
	"tatkal/booking/sim/pspsim"
)

func code(err error) booking.Code { return booking.ErrorCode(err) }

// The lifecycle: OPEN → INVESTIGATING → RESOLVED with a code and note, or
// WRITTEN_OFF by two people; notes and a full history; every bad request a
// clear error that changes nothing; escalation past the SLA.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	const gw = "swiftpay"
	m := w.make(clean(gw, "UPI", 100000), clean(gw, "CARD", 200000), clean(gw, "NB", 300000))
	w.settlementFaults(gw, pspsim.SettlementFaults{Drop: pspsim.FaultPick{Refs: []string{m[0].PSPRef, m[1].PSPRef, m[2].PSPRef}}})
	w.ingestDay(gw)
	w.run(gw)
	ex := w.exceptions(gw)
	var missing []Exception
	for _, e := range ex {
		if e.Kind == MissingInSettlement {
			missing = append(missing, e)
		}
	}
	if len(missing) != 3 {
		t.Fatalf("exceptions %+v", ex)
	}
	slices.SortFunc(missing, func(x, y Exception) int { return int(x.AmountPaise - y.AmountPaise) })
	a, b, c := missing[0].ID, missing[1].ID, missing[2].ID
	ctx, svc := w.ctx, w.svc
	snapshot := func() string {
		var s string
		w.must(w.env.Pool.QueryRow(ctx, `SELECT string_agg(concat_ws('|', id, state, assignee, resolution, writeoff_by, approved_by, resolved_by), ',' ORDER BY id)
			FROM reconciliation_exceptions`).Scan(&s))
		return s + "|" + strings.Repeat("e", w.count(`SELECT count(*) FROM reconciliation_exception_events`))
	}

	// Bad requests change nothing.
	before := snapshot()
	for name, err := range map[string]error{
		"no actor":          svc.Assign(ctx, a, "", "asha"),
		"no assignee":       svc.Assign(ctx, a, "finance1", ""),
		"unknown":           svc.Assign(ctx, uuid.New(), "finance1", "asha"),
		"empty note":        svc.AddNote(ctx, a, "finance1", "  "),
		"bad code":          svc.ResolveManually(ctx, a, "finance1", "fixed it", "note", nil),
		"reserved code":     svc.ResolveManually(ctx, a, "finance1", ClearedOnRerun, "note", nil),
		"auto code":         svc.ResolveManually(ctx, a, "finance1", "AUTO_REFUND", "note", nil),
		"no note":           svc.ResolveManually(ctx, a, "finance1", "TIMING_DIFFERENCE", "", nil),
		"unproposed":        svc.ApproveWriteOff(ctx, a, "finance2", ""),
		"no approval asked": svc.ApproveAutomatic(ctx, a, "finance2", w.river),
	} {
		if code(err) == booking.EINTERNAL || err == nil {
			t.Errorf("%s: %v, want a clear error", name, err)
		}
	}
	if _, err := svc.Exceptions(ctx, Filter{Kind: "NOPE"}); code(err) != booking.EINVALID {
		t.Errorf("unknown kind filter: %v", err)
	}
	if snapshot() != before {
		t.Fatal("a refused request changed something")
	}

	// a: assigned, noted, resolved with a code.
	w.must(svc.Assign(ctx, a, "finance1", "asha"))
	w.must(svc.AddNote(ctx, a, "asha", "gateway says the line is in tomorrow's file"))
	w.must(svc.ResolveManually(ctx, a, "asha", "TIMING_DIFFERENCE", "the gateway's ops: in tomorrow's file", nil))
	got, _ := svc.Exception(ctx, a)
	if got.State != StateResolved || got.Resolution != "TIMING_DIFFERENCE" || got.ResolvedBy != "asha" || got.ResolvedAt == nil || got.Assignee != "asha" {
		t.Fatalf("resolved: %+v", got)
	}
	if err := svc.Assign(ctx, a, "finance1", "ravi"); code(err) != booking.ECONFLICT {
		t.Fatalf("assigning a resolved exception: %v", err)
	}
	w.must(svc.AddNote(ctx, a, "ravi", "a note after the fact is kept"))
	hist, err := svc.History(ctx, a)
	w.must(err)
	var actions []string
	for _, h := range hist {
		actions = append(actions, h.Actor+":"+h.Action)
	}
	if want := []string{"run:" + strconv.FormatInt(got.FirstRunID, 10) + ":DETECTED", "finance1:ASSIGNED", "asha:NOTE", "asha:RESOLVED:TIMING_DIFFERENCE", "ravi:NOTE"}; !slices.Equal(actions, want) {
		t.Fatalf("history %v, want %v", actions, want)
	}

	if n := w.count(`SELECT count(*) FROM audit_log WHERE subject = $1 AND action LIKE 'recon.%'`, "recon_exception:"+a.String()); n != 4 {
		t.Fatalf("%d audit records of the exception's changes, want 4", n)
	}

	// b: a write-off needs a second person.
	w.must(svc.ProposeWriteOff(ctx, b, "finance1", "₹2,000 not worth chasing"))
	if err := svc.ProposeWriteOff(ctx, b, "finance2", "again"); code(err) != booking.ECONFLICT {
		t.Fatalf("second proposal: %v", err)
	}
	var be *booking.Error
	if err := svc.ApproveWriteOff(ctx, b, "finance1", ""); !errors.As(err, &be) || be.Reason != "SAME_PERSON" {
		t.Fatalf("the proposer approving: %v", err)
	}
	if got, _ := svc.Exception(ctx, b); got.State != StateOpen {
		t.Fatalf("refused approval changed the state: %s", got.State)
	}
	w.must(svc.ApproveWriteOff(ctx, b, "finance2", "agreed"))
	if got, _ := svc.Exception(ctx, b); got.State != StateWrittenOff || got.WriteOffBy != "finance1" || got.ApprovedBy != "finance2" {
		t.Fatalf("written off: %+v", got)
	}

	// A rerun leaves closed exceptions alone and still finds the open one.
	w.run(gw)
	if got, _ := svc.Exception(ctx, a); got.State != StateResolved || got.Resolution != "TIMING_DIFFERENCE" {
		t.Fatalf("rerun changed a resolved exception: %+v", got)
	}
	if got, _ := svc.Exception(ctx, c); got.State != StateOpen {
		t.Fatalf("rerun: %+v", got)
	}
	open, err := svc.Exceptions(ctx, Filter{State: "UNRESOLVED", Owner: "finance-settlement", MinPaise: 250000})
	w.must(err)
	if len(open) != 1 || open[0].ID != c {
		t.Fatalf("filtered: %+v", open)
	}

	// Past its SLA (24 h) the open one is escalated, once.
	svc.cfg.Now = func() time.Time { return time.Now().Add(25 * time.Hour) }
	n, err := svc.Escalate(ctx)
	w.must(err)
	if n2, _ := svc.Escalate(ctx); n != 1 || n2 != 0 {
		t.Fatalf("escalated %d then %d", n, n2)
	}
	if got, _ := svc.Exception(ctx, c); got.EscalatedAt == nil {
		t.Fatal("not escalated")
	}
	if AgeBucket(25*time.Hour) != "1-3 d" || AgeBucket(time.Hour) != "0-1 d" || AgeBucket(100*time.Hour) != "3-7 d" || AgeBucket(200*time.Hour) != "over 7 d" {
		t.Fatal("age buckets")
	}
}

// An automatic money move above the configured limit waits for a second
// finance person: the run enqueues no job for it, only for the one under
// the limit; an approval enqueues it once, and a second approval is refused.
func TestApprovalLimit(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := w.ctx
	w.svc = New(Config{Pool: w.env.Pool, Jobs: w.river, ApprovalLimitPaise: 1500_00})
	const gw = "swiftpay"
	m := w.make(
		spec{gateway: gw, method: "UPI", amount: 140000, ours: "UNKNOWN", captured: true}, // paid, not booked: ₹1,400
		spec{gateway: gw, method: "UPI", amount: 160000, ours: "UNKNOWN", captured: true}, // paid, not booked: ₹1,600
	)
	w.ingestDay(gw)
	w.run(gw)
	jobs := func(id uuid.UUID) int {
		return w.count(`SELECT count(*) FROM river_job WHERE kind = 'recon_resolve' AND args->>'exception_id' = $1`, id.String())
	}
	byPayment := map[uuid.UUID]Exception{}
	for _, e := range w.exceptions(gw) {
		if e.Kind == PaidNotBooked && e.PaymentID != nil {
			byPayment[*e.PaymentID] = e
		}
	}
	under, over := byPayment[m[0].ID], byPayment[m[1].ID]
	if under.ID == uuid.Nil || over.ID == uuid.Nil {
		t.Fatalf("paid-not-booked exceptions: %+v", byPayment)
	}
	if under.NeedsApproval || jobs(under.ID) != 1 {
		t.Fatalf("under the limit: needs approval %v, %d jobs; want none and one", under.NeedsApproval, jobs(under.ID))
	}
	if !over.NeedsApproval || jobs(over.ID) != 0 {
		t.Fatalf("over the limit: needs approval %v, %d jobs; want it and none", over.NeedsApproval, jobs(over.ID))
	}
	// A rerun enqueues nothing more.
	w.run(gw)
	if jobs(under.ID) != 1 || jobs(over.ID) != 0 {
		t.Fatalf("after a rerun: %d and %d jobs", jobs(under.ID), jobs(over.ID))
	}
	var be *booking.Error
	if err := w.svc.ApproveAutomatic(ctx, under.ID, "finance2", w.river); !errors.As(err, &be) || be.Reason != "NO_APPROVAL_NEEDED" {
		t.Fatalf("approving one under the limit: %v", err)
	}
	w.must(w.svc.ApproveAutomatic(ctx, over.ID, "finance2", w.river))
	if err := w.svc.ApproveAutomatic(ctx, over.ID, "finance3", w.river); !errors.As(err, &be) || be.Reason != "ALREADY_APPROVED" {
		t.Fatalf("a second approval: %v", err)
	}
	got, err := w.svc.Exception(ctx, over.ID)
	w.must(err)
	if got.ApprovedBy != "finance2" || jobs(over.ID) != 1 {
		t.Fatalf("approved: by %q, %d jobs; want finance2 and one", got.ApprovedBy, jobs(over.ID))
	}
}

// Escalation tells the finance lead once per escalation: the active lead
// gets one console message when exceptions pass their SLA (not the other
// finance person, not the disabled lead, not ops); a rerun of the job sends
// nothing new; a later exception passing its SLA is a new escalation and a
// new message, and with no active lead left every finance person gets it.
func TestEscalationMessagesFinance(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	const gw = "swiftpay"
	m := w.make(clean(gw, "UPI", 100000), clean(gw, "CARD", 200000))
	w.settlementFaults(gw, pspsim.SettlementFaults{Drop: pspsim.FaultPick{Refs: []string{m[0].PSPRef, m[1].PSPRef}}})
	w.ingestDay(gw)
	w.run(gw)
	ctx, svc := w.ctx, w.svc
	var users []int64
	for _, u := range []struct {
		login, role    string
		lead, disabled bool
	}{{"lead1", "finance", true, false}, {"clerk1", "finance", false, false}, {"gone", "finance", true, true}, {"ops1", "ops", false, false}} {
		var id int64
		w.must(w.env.Pool.QueryRow(ctx, `INSERT INTO console_users (login, name, role, password_hash, finance_lead, disabled)
			VALUES ($1, $1, $2, 'x', $3, $4) RETURNING id`, u.login, u.role, u.lead, u.disabled).Scan(&id))
		users = append(users, id)
	}
	ex := w.exceptions(gw)
	if len(ex) != 2 {
		t.Fatalf("exceptions %+v", ex)
	}
	// The second is due much later: only the first passes its SLA now.
	w.must2(w.env.Pool.Exec(ctx, `UPDATE reconciliation_exceptions SET due_at = due_at + interval '30 days' WHERE id = $1`, ex[1].ID))
	svc.cfg.Now = func() time.Time { return time.Now().Add(25 * time.Hour) }
	messages := func() int { return w.count(`SELECT count(*) FROM console_messages`) }
	if n, err := svc.Escalate(ctx); err != nil || n != 1 {
		t.Fatalf("escalated %d, %v", n, err)
	}
	if got := messages(); got != 1 {
		t.Fatalf("%d messages after the first escalation, want one to the active finance lead", got)
	}
	for i, want := range []int{1, 0, 0, 0} {
		msgs, err := svc.Messages(ctx, users[i], 10)
		w.must(err)
		if len(msgs) != want {
			t.Fatalf("user %d: %+v", i, msgs)
		}
		if want == 1 && (msgs[0].Kind != MessageEscalated || msgs[0].Link != OverdueLink ||
			!strings.Contains(msgs[0].Body, "1 reconciliation exception(s)") || !strings.Contains(msgs[0].Body, MissingInSettlement)) {
			t.Fatalf("message %+v", msgs[0])
		}
	}
	o, ok, err := svc.Overdue(ctx)
	w.must(err)
	if !ok || o.Count != 1 || o.Oldest.ID != ex[0].ID {
		t.Fatalf("overdue %+v %v", o, ok)
	}
	// Reruns of the job send nothing new.
	svc.cfg.Now = func() time.Time { return time.Now().Add(26 * time.Hour) }
	for range 2 {
		w.must((&EscalateWorker{Recon: svc}).Work(ctx, nil))
	}
	if got := messages(); got != 1 {
		t.Fatalf("%d messages after reruns", got)
	}
	// The second passing its SLA later is a new escalation; the lead has
	// left, so every active finance person (the clerk) is told.
	w.must2(w.env.Pool.Exec(ctx, `UPDATE console_users SET disabled = true WHERE login = 'lead1'`))
	svc.cfg.Now = func() time.Time { return time.Now().Add(31 * 24 * time.Hour) }
	if n, err := svc.Escalate(ctx); err != nil || n != 1 {
		t.Fatalf("escalated %d, %v", n, err)
	}
	if msgs, _ := svc.Messages(ctx, users[1], 10); len(msgs) != 1 {
		t.Fatalf("the finance clerk without a lead got %+v", msgs)
	}
	if n, _ := svc.Escalate(ctx); n != 0 || messages() != 2 {
		t.Fatalf("second escalation: %d messages, rerun escalated %d", messages(), n)
	}
	if o, _, _ := svc.Overdue(ctx); o.Count != 2 || o.Paise != 300000 {
		t.Fatalf("overdue %+v", o)
	}
}
