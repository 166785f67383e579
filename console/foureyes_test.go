package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"tatkal/booking"
	"tatkal/booking/lab/teststack"
	"tatkal/recon"
)

// unpaidPayment records a payment for a live hold of the finance day that
// the customer never paid (the gateway has no record of it).
func unpaidPayment(t *testing.T, s *teststack.Stack, amount int64) (pay, hold uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	shard, _ := s.DemoShard(t, 8, 0)
	user := s.Users(t, "fe"+uuid.NewString()[:4], 1)[0]
	day, _ := time.ParseInLocation(time.DateOnly, financeDay, booking.IST)
	at := day.Add(12 * time.Hour)
	pay, hold = uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	teststack.Must(t, s.Pool.QueryRow(ctx, `INSERT INTO holds (id, shard_id, user_id, idempotency_key, kind, from_seq, to_seq, seat_count, berths,
		passengers, fare_paise, fare_breakup, state, epoch, opening_day, created_at, expires_at)
		VALUES ($1, $2, $3, $4, 'SEAT', 0, 1, 1, ARRAY[1], '[]', $5, '{}', 'HELD', 1, $6, $7, now() + interval '1 hour') RETURNING id`,
		hold, shard, user, "k"+hold.String(), amount, day, at).Scan(&hold), "hold")
	_, err := s.Pool.Exec(ctx, `INSERT INTO payments (id, hold_id, user_id, psp, route, method, amount_paise, state, idempotency_key, deadline, initiated_at)
		VALUES ($1, $2, $3, 'swiftpay', 'UPI', 'UPI', $4, 'AWAITING_USER', $5, now() + interval '1 hour', $6)`, pay, hold, user, amount, "p"+pay.String(), at)
	teststack.Must(t, err, "payment")
	return pay, hold
}

// forgedCapture is a swiftpay settlement file of the finance day with one
// CAPTURE line for our payment pay, which nobody paid.
func forgedCapture(pay uuid.UUID, amount int64) string {
	r := fmt.Sprintf("%d.%02d", amount/100, amount%100)
	return swiftHead + fmt.Sprintf("CAPTURE,swp_forged_1,%s,,,UPI,%s,0.00,0.00,%s,04/06/2025 12:05:00,05/06/2025,SWP20250604\n", pay, r, r)
}

// Issue 32 (1, 3), tried over HTTP as a dishonest finance clerk would:
// upload a settlement file with a CAPTURE line for a payment nobody made,
// run the day, let the automatic resolution run, then close what is left
// alone. Before the fix the resolution applied the file's SUCCESS: the
// payment became SUCCESS and a PNR was issued on one person's word. Now
// the upload waits for a second person, its uploader cannot accept it,
// the accepted line only makes us ask the gateway (which made no such
// payment), and closing it needs the gateway's answer, never a note or a
// write-off code.
func TestOneFinancePersonCannotIssueATicketFromAnUpload(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{})
	ctx := context.Background()
	const amount = 145000
	pay, hold := unpaidPayment(t, s, amount)
	clerk := newBrowser(t, s.Server.URL)
	clerk.login("finance1")
	code, body := clerk.upload("/console/finance/files", url.Values{"source": {"SETTLEMENT"}, "gateway": {"swiftpay"}, "date": {financeDay}},
		"swiftpay-20250604.csv", forgedCapture(pay, amount))
	if code != http.StatusCreated {
		t.Fatalf("upload: %d\n%.2000s", code, body)
	}
	if code, _, _ := clerk.post("/console/finance/runs", url.Values{"gateway": {"swiftpay"}, "date": {financeDay}}); code != http.StatusSeeOther {
		t.Fatalf("run: %d", code)
	}
	var exID uuid.UUID
	var fileID int64
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT e.id, f.id FROM reconciliation_exceptions e, recon_files f
		WHERE e.kind = 'PAID_NOT_BOOKED' AND e.payment_id = $1 AND f.name = 'swiftpay-20250604.csv'`, pay).Scan(&exID, &fileID), "exception")
	nothingMoved := func(when string) {
		t.Helper()
		var state string
		var tickets, refunds int
		teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT state, (SELECT count(*) FROM bookings WHERE hold_id = $2),
			(SELECT count(*) FROM refunds WHERE payment_id = $1) FROM payments WHERE id = $1`, pay, hold).Scan(&state, &tickets, &refunds), "payment")
		if state == "SUCCESS" || tickets != 0 || refunds != 0 {
			t.Fatalf("%s: the forged capture made the payment %s, %d tickets, %d refunds", when, state, tickets, refunds)
		}
	}
	// The worker runs the exception's automatic resolution, as River would.
	resolve := func() {
		t.Helper()
		teststack.Must(t, s.App.Recon.Resolve(ctx, exID, s.Payments, s.Service), "resolve")
	}
	resolve()
	nothingMoved("after the automatic resolution")
	if st, _, _ := exceptionState(t, s, exID.String()); st != recon.StateOpen {
		t.Fatalf("an unaccepted upload's exception is %s", st)
	}

	// The uploader cannot accept their own file; the files page offers it
	// to nobody but a second person.
	acceptPath := fmt.Sprintf("/console/finance/files/%d/accept", fileID)
	if _, body, _ := clerk.get("/console/finance/files"); !strings.Contains(body, "awaits a second person") || strings.Contains(body, `data-testid="file-`+strconv.FormatInt(fileID, 10)+`-accept"`) {
		t.Fatalf("the uploader's files page:\n%.4000s", body)
	}
	if code, body, _ := clerk.post(acceptPath, url.Values{}); code != http.StatusForbidden || !strings.Contains(body, "second person") {
		t.Fatalf("the uploader accepting: %d\n%.500s", code, body)
	}
	second := newBrowser(t, s.Server.URL)
	second.login("finance2")
	if _, body, _ := second.get("/console/finance/files"); !strings.Contains(body, `data-testid="file-`+strconv.FormatInt(fileID, 10)+`-accept"`) {
		t.Fatalf("the second person is not offered the acceptance:\n%.4000s", body)
	}
	if code, _, _ := second.post(acceptPath, url.Values{}); code != http.StatusSeeOther {
		t.Fatalf("the second person accepting: %d", code)
	}
	// The accepted line makes us ask the gateway: it made no such payment.
	resolve()
	nothingMoved("after the gateway was asked")
	if st, _, _ := exceptionState(t, s, exID.String()); st != recon.StateInvestigating {
		t.Fatalf("after the gateway's answer the exception is %s", st)
	}

	// Closing it alone: no code writes it off; a proposed write-off blocks
	// resolving; the gateway's answer that it took nothing does close it.
	path := "/console/finance/exceptions/" + exID.String()
	if code, _, _ := clerk.post(path+"/resolve", url.Values{"code": {"WRITTEN_OFF"}, "note": {"closing"}}); code != http.StatusBadRequest {
		t.Fatalf("resolve as WRITTEN_OFF: %d", code)
	}
	if code, _, _ := clerk.post(path+"/writeoff", url.Values{"note": {"not worth chasing"}}); code != http.StatusSeeOther {
		t.Fatalf("propose write-off: %d", code)
	}
	if code, _, _ := clerk.post(path+"/writeoff", url.Values{"approve": {"1"}}); code != http.StatusForbidden {
		t.Fatalf("self-approved write-off: %d", code)
	}
	if code, body, _ := clerk.post(path+"/resolve", url.Values{"code": {"NOT_CAPTURED"}, "note": {"gateway has nothing"}}); code != http.StatusConflict ||
		!strings.Contains(body, "proposed writing it off") {
		t.Fatalf("resolve with a write-off proposed: %d\n%.500s", code, body)
	}
	if code, _, _ := clerk.post(path+"/writeoff", url.Values{"withdraw": {"1"}}); code != http.StatusSeeOther {
		t.Fatalf("withdraw the write-off: %d", code)
	}
	if code, _, _ := clerk.post(path+"/resolve", url.Values{"code": {"REFUNDED"}, "note": {"refunded by hand"}}); code != http.StatusConflict {
		t.Fatalf("resolve as refunded with no refund: %d", code)
	}
	if code, _, _ := clerk.post(path+"/resolve", url.Values{"code": {"NOT_CAPTURED"}, "note": {"the gateway has nothing"}}); code != http.StatusSeeOther {
		t.Fatalf("resolve on the gateway's word: %d", code)
	}
	if st, _, res := exceptionState(t, s, exID.String()); st != recon.StateResolved || res != "NOT_CAPTURED" {
		t.Fatalf("after the resolution: %s %s", st, res)
	}
	nothingMoved("at the end")
}
