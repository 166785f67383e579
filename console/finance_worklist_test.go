package console_test

import (
	"context"
	"encoding/csv"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"tatkal/booking"
	"tatkal/booking/lab/teststack"
	"tatkal/recon"
)

// worklistDay is a day of swiftpay's clerk work: three lines we never
// issued (one whose transaction id would run as a formula in a
// spreadsheet), a capture the gateway never made for an unpaid payment of
// ours, a real capture of a payment that bought no ticket, and a payout
// the bank short-paid by ₹10.
type worklistDay struct {
	unpaid, captured uuid.UUID // our payments
	capturedRef      string    // the gateway's transaction id of the real capture
}

const formulaRef = "=HYPERLINK(evil)"

func seedWorklistDay(t *testing.T, s *teststack.Stack) worklistDay {
	t.Helper()
	ctx := context.Background()
	var d worklistDay
	var unpaidHold uuid.UUID
	d.unpaid, unpaidHold = unpaidPayment(t, s, 145000)
	d.captured = uuid.Must(uuid.NewV7())
	d.capturedRef = s.CaptureAtGateway(t, "swiftpay", d.captured, 120000)
	day, _ := time.ParseInLocation(time.DateOnly, financeDay, booking.IST)
	var shard int64
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT shard_id FROM holds WHERE id = $1`, unpaidHold).Scan(&shard), "shard")
	user := s.Users(t, "wl"+uuid.NewString()[:4], 1)[0]
	hold := uuid.Must(uuid.NewV7())
	at := day.Add(13 * time.Hour)
	_, err := s.Pool.Exec(ctx, `INSERT INTO holds (id, shard_id, user_id, idempotency_key, kind, from_seq, to_seq, seat_count, berths,
		passengers, fare_paise, fare_breakup, state, epoch, opening_day, created_at, expires_at)
		VALUES ($1, $2, $3, $4, 'SEAT', 0, 1, 1, ARRAY[2], '[]', 120000, '{}', 'EXPIRED', 1, $5, $6, $6)`, hold, shard, user, "k"+hold.String(), day, at)
	teststack.Must(t, err, "hold")
	_, err = s.Pool.Exec(ctx, `INSERT INTO payments (id, hold_id, user_id, psp, route, method, amount_paise, captured_paise, state, idempotency_key,
		deadline, initiated_at, resolved_at, psp_ref, gateway_confirmed_at)
		VALUES ($1, $2, $3, 'swiftpay', 'UPI', 'UPI', 120000, 120000, 'SUCCESS', $4, $5, $5, $5, $6, $5)`,
		d.captured, hold, user, "p"+d.captured.String(), at, d.capturedRef)
	teststack.Must(t, err, "payment")

	var b strings.Builder
	b.WriteString(swiftHead)
	line := func(ref, order string, rupees int, minute int) {
		fmt.Fprintf(&b, "CAPTURE,%s,%s,,,UPI,%d.00,0.00,0.00,%d.00,04/06/2025 12:%02d:00,05/06/2025,SWP20250604\n", ref, order, rupees, rupees, minute)
	}
	line("swp_orphan_1", "ord-unknown-1", 1000, 1)
	line("swp_orphan_2", "ord-unknown-2", 2000, 2)
	line(`"`+formulaRef+`"`, "ord-unknown-3", 3000, 3)
	line("swp_forged_1", d.unpaid.String(), 1450, 5)
	line(d.capturedRef, d.captured.String(), 1200, 6)
	for _, f := range []struct {
		meta recon.FileMeta
		body string
	}{
		{recon.FileMeta{Source: recon.SourceSettlement, Gateway: "swiftpay", BusinessDate: day, Name: "swiftpay-20250604.csv", By: "job:recon_fetch", Fetched: true},
			b.String()},
		{recon.FileMeta{Source: recon.SourceBank, BusinessDate: day.AddDate(0, 0, 1), Name: "bank-20250605.csv", By: "job:recon_fetch", Fetched: true},
			bankFile(1000 + 2000 + 3000 + 1450 + 1200 - 10)},
	} {
		if _, err := s.App.Recon.Ingest(ctx, f.meta, strings.NewReader(f.body)); err != nil {
			t.Fatalf("ingest %s: %v", f.meta.Name, err)
		}
	}
	return d
}

// exceptionsOf maps the day's exceptions: the orphan lines by their
// transaction id, those about a payment by its id, the rest by kind.
func exceptionsOf(t *testing.T, s *teststack.Stack) map[string]string {
	t.Helper()
	rows, err := s.Pool.Query(context.Background(), `SELECT id::text, kind, psp_ref, coalesce(payment_id::text, '') FROM reconciliation_exceptions`)
	teststack.Must(t, err, "exceptions")
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, kind, ref, pay string
		teststack.Must(t, rows.Scan(&id, &kind, &ref, &pay), "scan")
		key := kind
		switch {
		case kind == recon.OrphanLine:
			key = ref
		case pay != "":
			key = pay
		}
		out[key] = id
	}
	return out
}

var (
	rowRE   = regexp.MustCompile(`data-testid="exception-([0-9a-f-]{36})"`)
	stakeRE = regexp.MustCompile(`data-testid="stake">([^<]*)<`)
)

// listed is the exception ids a list page shows, in order.
func listed(body string) []string {
	var out []string
	for _, m := range rowRE.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

func historyCount(t *testing.T, s *teststack.Stack, id string) int {
	t.Helper()
	var n int
	teststack.Must(t, s.Pool.QueryRow(context.Background(), `SELECT count(*) FROM reconciliation_exception_events WHERE exception_id = $1`, id).Scan(&n), "history")
	return n
}

// The exception list worked over HTTP: the gateway's transaction id on
// each row and the age from the transaction, sorting, my queue, bulk
// actions with the single action's rules (a refused row changes nothing
// of its own and blocks no other), team hand-over and the export.
func TestExceptionWorklist(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{Routes: teststack.QuietRoutes()})
	ctx := context.Background()
	d := seedWorklistDay(t, s)
	clerk := newBrowser(t, s.Server.URL)
	clerk.login("finance1")
	if code, body, _ := clerk.post("/console/finance/runs", url.Values{"gateway": {"swiftpay"}, "date": {financeDay}}); code != http.StatusSeeOther {
		t.Fatalf("run: %d\n%.1000s", code, body)
	}
	ex := exceptionsOf(t, s)
	unpaid := d.unpaid.String()
	for _, k := range []string{"swp_orphan_1", "swp_orphan_2", formulaRef, unpaid, d.captured.String(), recon.PayoutMismatch} {
		if ex[k] == "" {
			t.Fatalf("no exception for %s: %v", k, ex)
		}
	}

	// The gateway's transaction id, not our internal id; the age from the
	// transaction (a year and more ago) beside the age from detection.
	code, body, _ := clerk.get("/console/finance/exceptions?state=UNRESOLVED")
	if code != 200 {
		t.Fatalf("list: %d", code)
	}
	row := func(body, id string) string {
		i := strings.Index(body, `data-testid="exception-`+id+`"`)
		if i < 0 {
			t.Fatalf("exception %s not listed", id)
		}
		j := strings.Index(body[i:], "</tr>")
		return body[i : i+j]
	}
	pnb := row(body, ex[unpaid])
	if !strings.Contains(pnb, `data-testid="gateway-ref">swp_forged_1<`) || strings.Contains(pnb, ">"+d.unpaid.String()+"<") {
		t.Fatalf("the paid-not-booked row does not show the gateway's transaction id first:\n%s", pnb)
	}
	if m := regexp.MustCompile(`data-testid="txn-age">(\d+) d`).FindStringSubmatch(pnb); m == nil || m[1] < "1" {
		t.Fatalf("age from the transaction:\n%s", pnb)
	}
	// The PNR of the ticket the payment's hold came to (booked since the
	// run found it), beside the gateway's transaction id.
	_, err := s.Pool.Exec(ctx, `INSERT INTO bookings (pnr, hold_id, user_id, shard_id, from_seq, to_seq, status, fare_paise)
		SELECT '2123456789', h.id, h.user_id, h.shard_id, 0, 1, 'CONFIRMED', 120000 FROM holds h JOIN payments p ON p.hold_id = h.id WHERE p.id = $1`, d.captured)
	teststack.Must(t, err, "booking")
	_, body, _ = clerk.get("/console/finance/exceptions?state=UNRESOLVED")
	if cap := row(body, ex[d.captured.String()]); !strings.Contains(cap, `data-testid="pnr">2123456789<`) ||
		!strings.Contains(cap, `data-testid="gateway-ref">`+d.capturedRef+`<`) {
		t.Fatalf("the captured payment's row shows no PNR and gateway txn id:\n%s", cap)
	}
	_, err = s.Pool.Exec(ctx, `DELETE FROM bookings WHERE pnr = '2123456789'`)
	teststack.Must(t, err, "booking")

	// Sort by the amount at stake, both ways; a bad sort is refused.
	stakes := func(q string) []string {
		t.Helper()
		code, body, _ := clerk.get("/console/finance/exceptions?state=UNRESOLVED&" + q)
		if code != 200 {
			t.Fatalf("list %s: %d", q, code)
		}
		var out []string
		for _, m := range stakeRE.FindAllStringSubmatch(body, -1) {
			out = append(out, m[1])
		}
		return out
	}
	paise := func(inr string) int64 {
		var r, p int64
		fmt.Sscanf(strings.ReplaceAll(strings.TrimPrefix(inr, "₹"), ",", ""), "%d.%d", &r, &p) //nolint:errcheck
		return r*100 + p
	}
	up, down := stakes("sort=stake"), stakes("sort=-stake")
	if len(up) < 5 || !slices.IsSortedFunc(up, func(a, b string) int { return int(paise(a) - paise(b)) }) {
		t.Fatalf("sorted by stake ascending: %v", up)
	}
	if !slices.IsSortedFunc(down, func(a, b string) int { return int(paise(b) - paise(a)) }) || down[0] == up[0] {
		t.Fatalf("sorted by stake descending: %v", down)
	}
	if code, body, _ := clerk.get("/console/finance/exceptions?sort=amount"); code != http.StatusBadRequest || !strings.Contains(body, "Sort by one of") {
		t.Fatalf("bad sort: %d", code)
	}
	// Sorted by the transaction's age, the oldest first: the unpaid
	// payment (12:00) comes before the orphan lines (12:01-12:03), in
	// their order.
	_, body, _ = clerk.get("/console/finance/exceptions?state=UNRESOLVED&sort=-txn_age")
	ids := listed(body)
	for _, k := range []string{"swp_orphan_1", "swp_orphan_2", formulaRef} {
		if slices.Index(ids, ex[unpaid]) > slices.Index(ids, ex[k]) {
			t.Fatalf("oldest transaction first: %v, want %s before %s", ids, ex[unpaid], ex[k])
		}
	}
	if slices.Index(ids, ex["swp_orphan_1"]) > slices.Index(ids, ex["swp_orphan_2"]) {
		t.Fatalf("oldest transaction first: orphan 1 (12:01) after orphan 2 (12:02): %v", ids)
	}

	// Bulk-assign two orphans to me: my queue holds them, another's none.
	bulk := func(b *browser, action string, ids []string, extra url.Values) (int, string) {
		t.Helper()
		form := url.Values{"action": {action}, "id": ids, "back": {"state=UNRESOLVED"}}
		for k, v := range extra {
			form[k] = v
		}
		code, body, _ := b.post("/console/finance/exceptions/bulk", form)
		return code, body
	}
	outcome := func(body, id string) (ok bool, text string) {
		t.Helper()
		m := regexp.MustCompile(`data-testid="outcome-` + id + `" data-ok="(true|false)">(?s:(.*?))</tr>`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no outcome for %s:\n%.3000s", id, body)
		}
		return m[1] == "true", m[2]
	}
	if code, body := bulk(clerk, "assign", []string{ex["swp_orphan_1"], ex["swp_orphan_2"]}, url.Values{"assignee": {"finance1"}}); code != 200 ||
		!strings.Contains(body, "2 done, 0 refused") {
		t.Fatalf("bulk assign: %d\n%.2000s", code, body)
	}
	_, body, _ = clerk.get("/console/finance/exceptions?mine=1&state=UNRESOLVED")
	if ids := listed(body); len(ids) != 2 || !slices.Contains(ids, ex["swp_orphan_1"]) || !slices.Contains(ids, ex["swp_orphan_2"]) {
		t.Fatalf("finance1's queue: %v", ids)
	}
	second := newBrowser(t, s.Server.URL)
	second.login("finance2")
	if _, body, _ := second.get("/console/finance/exceptions?mine=1&state=UNRESOLVED"); len(listed(body)) != 0 {
		t.Fatalf("finance2's queue: %v", listed(body))
	}

	// Bulk resolve: the payout mismatch does not take NOT_OUR_LINE, so it
	// is refused and unchanged; the orphans beside it are resolved.
	before := historyCount(t, s, ex[recon.PayoutMismatch])
	code, body = bulk(clerk, "resolve", []string{ex["swp_orphan_1"], ex[recon.PayoutMismatch], ex["swp_orphan_2"]},
		url.Values{"code": {"NOT_OUR_LINE"}, "note": {"swiftpay: another merchant's lines"}})
	if code != 200 || !strings.Contains(body, "2 done, 1 refused") {
		t.Fatalf("bulk resolve: %d\n%.3000s", code, body)
	}
	if ok, text := outcome(body, ex[recon.PayoutMismatch]); ok || !strings.Contains(text, "not a way to close") {
		t.Fatalf("the payout mismatch's outcome: %v %s", ok, text)
	}
	if st, _, _ := exceptionState(t, s, ex[recon.PayoutMismatch]); st != recon.StateOpen || historyCount(t, s, ex[recon.PayoutMismatch]) != before {
		t.Fatalf("the refused row changed: %s", st)
	}
	for _, k := range []string{"swp_orphan_1", "swp_orphan_2"} {
		if st, _, res := exceptionState(t, s, ex[k]); st != recon.StateResolved || res != "NOT_OUR_LINE" {
			t.Fatalf("%s: %s %s", k, st, res)
		}
	}

	// Four eyes in bulk: the proposer's own approvals are refused row by
	// row; the second person's go through.
	pair := []string{ex[recon.PayoutMismatch], ex[formulaRef]}
	if code, body := bulk(clerk, "writeoff", pair, url.Values{"note": {"below the cost of chasing"}}); code != 200 || !strings.Contains(body, "2 done, 0 refused") {
		t.Fatalf("bulk propose write-off: %d\n%.2000s", code, body)
	}
	if code, body := bulk(clerk, "approve-writeoff", pair, nil); code != 200 || !strings.Contains(body, "0 done, 2 refused") ||
		!strings.Contains(body, "needs a second person") {
		t.Fatalf("self-approval in bulk: %d\n%.3000s", code, body)
	}
	for _, id := range pair {
		if st, _, _ := exceptionState(t, s, id); st != recon.StateOpen {
			t.Fatalf("self-approved %s: %s", id, st)
		}
	}
	if code, body := bulk(second, "approve-writeoff", pair, nil); code != 200 || !strings.Contains(body, "2 done, 0 refused") {
		t.Fatalf("second person's bulk approval: %d\n%.3000s", code, body)
	}
	for _, id := range pair {
		if st, _, _ := exceptionState(t, s, id); st != recon.StateWrittenOff {
			t.Fatalf("written off %s: %s", id, st)
		}
	}
	// Nothing selected, or an unknown action: refused, nothing changes.
	if code, body := bulk(clerk, "assign", nil, nil); code != http.StatusBadRequest || !strings.Contains(body, "Select the exceptions") {
		t.Fatalf("bulk with nothing selected: %d", code)
	}
	if code, _ := bulk(clerk, "delete", []string{ex[unpaid]}, nil); code != http.StatusBadRequest {
		t.Fatalf("unknown bulk action: %d", code)
	}

	// Team hand-over: to refunds, unassigned and open for them; an unknown
	// team, or the team it is with, is refused and changes nothing.
	pnbPath := "/console/finance/exceptions/" + ex[unpaid]
	if code, _, _ := clerk.post(pnbPath+"/assign", url.Values{"assignee": {"finance1"}}); code != http.StatusSeeOther {
		t.Fatalf("assign: %d", code)
	}
	if code, _, _ := clerk.post(pnbPath+"/team", url.Values{"team": {"catering"}}); code != http.StatusBadRequest {
		t.Fatalf("hand to an unknown team: %d", code)
	}
	if code, _, _ := clerk.post(pnbPath+"/team", url.Values{"team": {"payments-ops"}}); code != http.StatusConflict {
		t.Fatalf("hand to its own team: %d", code)
	}
	var owner string
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT owner_team FROM reconciliation_exceptions WHERE id = $1`, ex[unpaid]).Scan(&owner), "owner")
	if owner != "payments-ops" {
		t.Fatalf("after refused hand-overs the owner is %s", owner)
	}
	if code, _, _ := clerk.post(pnbPath+"/team", url.Values{"team": {"refunds"}, "note": {"the customer wants the money back"}}); code != http.StatusSeeOther {
		t.Fatalf("hand to refunds: %d", code)
	}
	st, who, _ := exceptionState(t, s, ex[unpaid])
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT owner_team FROM reconciliation_exceptions WHERE id = $1`, ex[unpaid]).Scan(&owner), "owner")
	if owner != "refunds" || st != recon.StateOpen || who != "" {
		t.Fatalf("handed over: %s %s %q", owner, st, who)
	}
	if _, body, _ := clerk.get("/console/finance/exceptions?owner=refunds"); !slices.Equal(listed(body), []string{ex[unpaid]}) {
		t.Fatalf("filter by team: %v", listed(body))
	}
	if _, body, _ := clerk.get(pnbPath); !strings.Contains(body, "HANDED_TO_TEAM") || !strings.Contains(body, "from payments-ops to refunds") {
		t.Fatalf("the hand-over is not in the history:\n%.4000s", body)
	}

	// The export: the filtered list as CSV, the formula-like transaction
	// id as text, amounts as numbers.
	r, _ := http.NewRequest("GET", s.Server.URL+"/console/finance/exceptions.csv?kind=ORPHAN_LINE&sort=stake", nil)
	resp, err := clerk.c.Do(r)
	teststack.Must(t, err, "export")
	defer resp.Body.Close()
	recs, err := csv.NewReader(resp.Body).ReadAll()
	if err != nil || resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("export: %d %v", resp.StatusCode, err)
	}
	if len(recs) != 4 || !slices.Equal(recs[0], recon.WorklistHeader) {
		t.Fatalf("export rows: %v", recs)
	}
	if recs[1][2] != "swp_orphan_1" || recs[1][6] != "1000.00" || recs[3][2] != "'"+formulaRef || recs[3][6] != "3000.00" {
		t.Fatalf("export: %v", recs[1:])
	}
	var audited int
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_log WHERE actor = 'finance1' AND action = 'recon.export' AND subject = 'recon_exceptions'`).Scan(&audited), "audit")
	if audited != 1 {
		t.Fatalf("exports audited: %d", audited)
	}
}

// Real actions on the money from an exception (issue 35, 6): "ask the
// gateway now" applies only the gateway's answer, as the inquiry does (a
// capture the gateway never made fails our payment, nothing is refunded
// or booked); "refund now" takes two people, is refused where the gateway
// holds no money, and refunds through the refund path where it does.
func TestExceptionMoneyActions(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{Routes: teststack.QuietRoutes()})
	ctx := context.Background()
	d := seedWorklistDay(t, s)
	// A payment the gateway captured and we count SUCCESS, in no
	// settlement file: MISSING_IN_SETTLEMENT, on the inquiry path.
	missing := uuid.Must(uuid.NewV7())
	missingRef := s.CaptureAtGateway(t, "swiftpay", missing, 80000)
	_, err := s.Pool.Exec(ctx, `INSERT INTO payments (id, purpose, user_id, psp, route, method, amount_paise, captured_paise, state,
		idempotency_key, deadline, initiated_at, resolved_at, psp_ref, gateway_confirmed_at)
		SELECT $1, 'TOPUP', user_id, 'swiftpay', 'UPI', 'UPI', 80000, 80000, 'SUCCESS', $2, $3, $3, $3, $4, $3 FROM payments WHERE id = $5`,
		missing, "p"+missing.String(), time.Date(2025, 6, 4, 14, 0, 0, 0, booking.IST), missingRef, d.captured)
	teststack.Must(t, err, "payment")
	clerk := newBrowser(t, s.Server.URL)
	clerk.login("finance1")
	if code, _, _ := clerk.post("/console/finance/runs", url.Values{"gateway": {"swiftpay"}, "date": {financeDay}}); code != http.StatusSeeOther {
		t.Fatalf("run: %d", code)
	}
	ex := exceptionsOf(t, s)
	// Asked on the inquiry path, the gateway's answer goes into the history.
	var kind, path string
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT kind, path FROM reconciliation_exceptions WHERE id = $1`, ex[missing.String()]).Scan(&kind, &path), "missing")
	if kind != recon.MissingInSettlement || path != recon.PathInquiry {
		t.Fatalf("the unsettled payment's exception: %s %s", kind, path)
	}
	if code, body, _ := clerk.post("/console/finance/exceptions/"+ex[missing.String()]+"/ask", nil); code != http.StatusSeeOther {
		t.Fatalf("ask on the inquiry path: %d\n%.2000s", code, body)
	}
	if _, body, _ := clerk.get("/console/finance/exceptions/" + ex[missing.String()]); !strings.Contains(body, "ASKED_GATEWAY") ||
		!strings.Contains(body, "the gateway says SUCCESS, captured 80000 paise; our payment is SUCCESS") {
		t.Fatalf("the gateway's answer is not in the history:\n%.6000s", body)
	}
	second := newBrowser(t, s.Server.URL)
	second.login("finance2")
	moved := func(pay uuid.UUID) (state string, refunds, tickets int) {
		t.Helper()
		teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT p.state, (SELECT count(*) FROM refunds WHERE payment_id = p.id),
			(SELECT count(*) FROM bookings WHERE hold_id = p.hold_id) FROM payments p WHERE p.id = $1`, pay).Scan(&state, &refunds, &tickets), "payment")
		return
	}

	// Nothing to ask on a manual path.
	if code, body, _ := clerk.post("/console/finance/exceptions/"+ex["swp_orphan_1"]+"/ask", nil); code != http.StatusConflict ||
		!strings.Contains(body, "nothing to ask the gateway") {
		t.Fatalf("ask on an orphan line: %d", code)
	}

	// Refund now, where the gateway took nothing: proposed by one, refused
	// to the proposer, refused to the second person on the gateway's word.
	unpaidPath := "/console/finance/exceptions/" + ex[d.unpaid.String()]
	if _, body, _ := clerk.get(unpaidPath); !strings.Contains(body, `data-testid="form-ask"`) || !strings.Contains(body, `data-testid="form-refund"`) {
		t.Fatalf("the exception page offers no money actions:\n%.5000s", body)
	}
	if code, _, _ := clerk.post(unpaidPath+"/refund", url.Values{"note": {""}}); code != http.StatusBadRequest {
		t.Fatalf("refund proposal without a note: %d", code)
	}
	if code, _, _ := clerk.post(unpaidPath+"/refund", url.Values{"note": {"customer says they were charged"}}); code != http.StatusSeeOther {
		t.Fatalf("propose refund: %d", code)
	}
	if code, body, _ := clerk.post(unpaidPath+"/refund", url.Values{"approve": {"1"}}); code != http.StatusForbidden || !strings.Contains(body, "second person") {
		t.Fatalf("self-approved refund: %d", code)
	}
	if code, body, _ := second.post(unpaidPath+"/refund", url.Values{"approve": {"1"}}); code != http.StatusConflict || !strings.Contains(body, "no record of the payment") {
		t.Fatalf("refund of money the gateway never took: %d\n%.3000s", code, body)
	}
	if st, refunds, tickets := moved(d.unpaid); st != "AWAITING_USER" || refunds != 0 || tickets != 0 {
		t.Fatalf("after the refused refund: %s, %d refunds, %d tickets", st, refunds, tickets)
	}
	if code, _, _ := clerk.post(unpaidPath+"/refund", url.Values{"withdraw": {"1"}}); code != http.StatusSeeOther {
		t.Fatalf("withdraw the refund proposal: %d", code)
	}

	// Ask the gateway now: it has no record of the payment, so our payment
	// fails (the gateway's answer, applied as the inquiry does) and a
	// person looks; nothing is refunded or booked.
	if code, body, _ := clerk.post(unpaidPath+"/ask", nil); code != http.StatusSeeOther {
		t.Fatalf("ask the gateway now: %d\n%.2000s", code, body)
	}
	if st, refunds, tickets := moved(d.unpaid); st != "FAILED" || refunds != 0 || tickets != 0 {
		t.Fatalf("after asking: %s, %d refunds, %d tickets", st, refunds, tickets)
	}
	if st, _, _ := exceptionState(t, s, ex[d.unpaid.String()]); st != recon.StateInvestigating {
		t.Fatalf("after asking the exception is %s", st)
	}
	var asked int
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM reconciliation_exception_events WHERE exception_id = $1 AND actor = 'finance1'
		AND note LIKE '%asked the gateway%'`, ex[d.unpaid.String()]).Scan(&asked), "history")
	if asked != 1 {
		t.Fatalf("the gateway's answer in the history, by the person who asked: %d", asked)
	}

	// Refund now, where the gateway holds the money: two people, then the
	// refund is recorded (its job enqueued) and the exception resolved.
	capPath := "/console/finance/exceptions/" + ex[d.captured.String()]
	if code, _, _ := second.post(capPath+"/refund", url.Values{"note": {"no ticket came of it"}}); code != http.StatusSeeOther {
		t.Fatalf("propose refund: %d", code)
	}
	if code, _, _ := second.post(capPath+"/refund", url.Values{"approve": {"1"}}); code != http.StatusForbidden {
		t.Fatalf("self-approved refund: %d", code)
	}
	// finance1 ran the reconciliation that found it: not the second person either.
	if code, body, _ := clerk.post(capPath+"/refund", url.Values{"approve": {"1"}}); code != http.StatusForbidden || !strings.Contains(body, "ran the reconciliation") {
		t.Fatalf("approval by the person who ran the day: %d", code)
	}
	if st, refunds, _ := moved(d.captured); st != "SUCCESS" || refunds != 0 {
		t.Fatalf("before the second person: %s, %d refunds", st, refunds)
	}
	admin := newBrowser(t, s.Server.URL)
	admin.login("admin1")
	// A late success booked the hold since the day was run: the payment paid
	// for a ticket that stands, and is not refunded as if none came of it.
	_, err = s.Pool.Exec(ctx, `INSERT INTO bookings (pnr, hold_id, user_id, shard_id, from_seq, to_seq, status, fare_paise)
		SELECT '2123456780', h.id, h.user_id, h.shard_id, 0, 1, 'CONFIRMED', 120000 FROM holds h JOIN payments p ON p.hold_id = h.id WHERE p.id = $1`, d.captured)
	teststack.Must(t, err, "a booking of the captured payment's hold")
	if code, body, _ := admin.post(capPath+"/refund", url.Values{"approve": {"1"}}); code != http.StatusConflict || !strings.Contains(body, "cancel the booking") {
		t.Fatalf("refund of a payment whose ticket stands: %d\n%.2000s", code, body)
	}
	if st, refunds, _ := moved(d.captured); st != "SUCCESS" || refunds != 0 {
		t.Fatalf("after the refused refund: %s, %d refunds", st, refunds)
	}
	_, err = s.Pool.Exec(ctx, `DELETE FROM bookings WHERE pnr = '2123456780'`)
	teststack.Must(t, err, "the booking gone again")
	if code, body, _ := admin.post(capPath+"/refund", url.Values{"approve": {"1"}, "note": {"checked with the customer"}}); code != http.StatusSeeOther {
		t.Fatalf("second person's approval: %d\n%.3000s", code, body)
	}
	var reason, rstate string
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT reason, state FROM refunds WHERE payment_id = $1`, d.captured).Scan(&reason, &rstate), "refund")
	if reason != booking.RefundLateSuccessNoSeat || rstate != "PENDING" {
		t.Fatalf("refund: %s %s", reason, rstate)
	}
	if st, _, res := exceptionState(t, s, ex[d.captured.String()]); st != recon.StateResolved || res != "REFUNDED" {
		t.Fatalf("after the refund the exception is %s %s", st, res)
	}
	var jobs int
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = 'refund_execute'`).Scan(&jobs), "jobs")
	if jobs == 0 {
		t.Fatal("no refund job enqueued")
	}
}
