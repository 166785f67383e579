package recon

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"tatkal/booking"
	"tatkal/booking/payment"
)

// forgedSettlement is the gateway's real settlement file of the world's
// day with one CAPTURE line added per forged payment: a copy of a real
// line with the payment's reference and amount, as a dishonest insider
// would write it.
func (w *world) forgedSettlement(gw string, forged ...*made) string {
	w.t.Helper()
	body := w.realFile(SourceSettlement, gw, w.day)
	lines := strings.Split(strings.TrimRight(string(body), "\n"), "\n")
	var real string
	for _, l := range lines[1:] {
		if strings.HasPrefix(l, "CAPTURE,") {
			real = l
		}
	}
	if real == "" {
		w.t.Fatalf("no capture line to copy in:\n%s", body)
	}
	out := append([]string(nil), lines...)
	for i, m := range forged {
		f := strings.Split(real, ",")
		rupees := fmt.Sprintf("%d.%02d", m.Amount/100, m.Amount%100)
		// Txn type, gateway id, merchant order id, ..., gross, MDR, GST, net.
		f[1], f[2], f[6], f[7], f[8], f[9] = fmt.Sprintf("swp_forged_%d", i), m.ID.String(), rupees, "0.00", "0.00", rupees
		out = append(out, strings.Join(f, ","))
	}
	return strings.Join(out, "\n") + "\n"
}

// insertOnly gives the world a recon service whose resolutions are
// enqueued and left for the test to run (no process works them), and
// returns its client.
func (w *world) insertOnly() *river.Client[pgx.Tx] {
	w.t.Helper()
	c, err := river.NewClient(riverpgxv5.New(w.env.Pool), &river.Config{})
	w.must(err)
	w.svc = New(Config{Pool: w.env.Pool, Jobs: c})
	return c
}

// UploadedCaptureIsEvidenceNotTheTruth is TestUploadedCaptureIsEvidenceNotTheTruth
// (issue 32, 1): a finance person uploads a settlement file with CAPTURE
// lines for payments nobody made and runs the day. Before the fix, the
// automatic path applied the file's SUCCESS: the payment became SUCCESS
// and a PNR was issued, and above the limit the uploader approved it.
// Now: the upload starts nothing until a second person accepts it; the
// uploader (who also ran the day) can neither accept it nor approve a move
// resting on it; once accepted, the gateway is asked and its answer (no
// such payment) is all that is applied; no ticket, no refund, no wallet
// money comes of the forged lines.
func UploadedCaptureIsEvidenceNotTheTruth(t *testing.T, start StartProc) {
	st := start(t, ProcOptions{})
	ctx := context.Background()
	pool := st.Env.Pool
	w := liveWorld(t, st, "fe")
	insertOnly := w.insertOnly()

	const gw = "swiftpay"
	w.make(spec{gateway: gw, method: "UPI", amount: 100000, ours: "SUCCESS", captured: true, booked: true})
	unpaid := w.make(spec{gateway: gw, method: "UPI", amount: 145000, ours: "AWAITING_USER"})[0]
	large := w.make(spec{gateway: gw, method: "UPI", amount: 2_000_000, ours: "AWAITING_USER"})[0]

	info, err := w.svc.Ingest(ctx, FileMeta{Source: SourceSettlement, Gateway: gw, BusinessDate: w.day, Name: "swiftpay-corrected.csv", By: "finance1"},
		strings.NewReader(w.forgedSettlement(gw, unpaid, large)))
	w.must(err)
	if info.Origin != OriginUpload || info.Accepted() {
		t.Fatalf("an upload is %s, accepted by %q", info.Origin, info.AcceptedBy)
	}
	_, err = w.svc.Run(ctx, RunRequest{Gateway: gw, Date: w.day, By: "finance1"})
	w.must(err)
	byPayment := map[uuid.UUID]Exception{}
	for _, e := range w.exceptions(gw) {
		if e.PaymentID != nil && e.Kind == PaidNotBooked {
			byPayment[*e.PaymentID] = e
		}
	}
	small, big := byPayment[unpaid.ID], byPayment[large.ID]
	if small.Path != PathAuto || small.NeedsApproval || big.Path != PathAuto || !big.NeedsApproval {
		t.Fatalf("exceptions of the forged lines: %+v / %+v", small, big)
	}
	nothingMoved := func(when string) {
		t.Helper()
		if n := w.count(`SELECT count(*) FROM payments WHERE id = ANY($1) AND state = 'SUCCESS'`, []uuid.UUID{unpaid.ID, large.ID}); n != 0 {
			t.Fatalf("%s: %d forged payments are SUCCESS", when, n)
		}
		if n := w.count(`SELECT count(*) FROM bookings WHERE hold_id = ANY($1)`, []uuid.UUID{unpaid.Hold, large.Hold}); n != 0 {
			t.Fatalf("%s: %d tickets for forged payments", when, n)
		}
		if n := w.count(`SELECT count(*) FROM refunds WHERE payment_id = ANY($1)`, []uuid.UUID{unpaid.ID, large.ID}); n != 0 {
			t.Fatalf("%s: %d refunds of forged payments", when, n)
		}
	}

	// The automatic path waits for a second person's acceptance of the file.
	w.must(w.svc.Resolve(ctx, small.ID, st.Payments, st.Service))
	if got, _ := w.svc.Exception(ctx, small.ID); got.State != StateOpen {
		t.Fatalf("resolved on an unaccepted upload: %s", got.State)
	}
	nothingMoved("before acceptance")

	// The uploader, who also ran the day, is nobody's second person.
	if err := w.svc.ApproveAutomatic(ctx, big.ID, "finance1", insertOnly); booking.ErrorReason(err) != "SAME_PERSON" {
		t.Fatalf("the uploader approving the move: %v", err)
	}
	if err := w.svc.AcceptFile(ctx, info.ID, "finance1"); booking.ErrorReason(err) != "SAME_PERSON" {
		t.Fatalf("the uploader accepting their own file: %v", err)
	}
	w.must(w.svc.ApproveAutomatic(ctx, big.ID, "finance3", insertOnly))
	w.must(w.svc.Resolve(ctx, big.ID, st.Payments, st.Service))
	if got, _ := w.svc.Exception(ctx, big.ID); got.State != StateOpen {
		t.Fatalf("approved but resting on an unaccepted upload, it is %s", got.State)
	}
	nothingMoved("after approval")

	// A second person accepts: the resolutions that waited are enqueued
	// again (their first jobs finished without acting).
	w.must2(pool.Exec(ctx, `UPDATE river_job SET state = 'completed', finalized_at = now() WHERE kind = 'recon_resolve'`))
	w.must(w.svc.AcceptFile(ctx, info.ID, "finance2"))
	// Not completed: the stack's own River client may already have picked
	// them up (it has no recon worker, so they fail and wait to retry).
	if n := w.count(`SELECT count(*) FROM river_job WHERE kind = 'recon_resolve' AND state <> 'completed'
		AND (args->>'exception_id')::uuid = ANY($1)`, []uuid.UUID{small.ID, big.ID}); n != 2 {
		t.Fatalf("%d resolutions enqueued by the acceptance, want 2", n)
	}
	// The jobs run: the gateway is asked, and it has no such payments.
	for _, e := range []Exception{small, big} {
		w.must(w.svc.Resolve(ctx, e.ID, st.Payments, st.Service))
		got, _ := w.svc.Exception(ctx, e.ID)
		hist, _ := w.svc.History(ctx, e.ID)
		last := hist[len(hist)-1]
		if got.State != StateInvestigating || !strings.Contains(last.Note, "asked the gateway: the gateway has no record") {
			t.Fatalf("after the gateway's answer: %s, %+v", got.State, last)
		}
	}
	nothingMoved("after the gateway's answer")
	if n := w.count(`SELECT count(*) FROM payments WHERE id = ANY($1) AND state = $2`, []uuid.UUID{unpaid.ID, large.ID}, payment.Failed); n != 2 {
		t.Fatalf("%d of the never-made payments are FAILED on the gateway's word, want 2", n)
	}
	if n := w.count(`SELECT count(*) FROM audit_log WHERE actor = 'finance2' AND action = 'recon.file_accept'`); n != 1 {
		t.Fatalf("%d audit rows of the acceptance", n)
	}
}

// ResolvingNeedsEvidence is TestResolvingNeedsEvidence (issue 32, 3): a
// customer charged without a ticket is closed only on a recorded refund or
// the gateway's word that it took nothing, never on a note; no code means
// a write-off; nothing is resolved while a write-off is proposed.
func ResolvingNeedsEvidence(t *testing.T, start StartProc) {
	st := start(t, ProcOptions{})
	ctx := context.Background()
	w := liveWorld(t, st, "ev")
	w.insertOnly()
	const gw = "swiftpay"
	lost := w.make(spec{gateway: gw, method: "UPI", amount: 145000, ours: "UNKNOWN", captured: true})[0]
	_, err := w.svc.FetchSettlement(ctx, w.src, gw, w.day, "job:test")
	w.must(err)
	_, err = w.svc.Run(ctx, RunRequest{Gateway: gw, Date: w.day, By: "finance1"})
	w.must(err)
	var e Exception
	for _, x := range w.exceptions(gw) {
		if x.Kind == PaidNotBooked && *x.PaymentID == lost.ID {
			e = x
		}
	}
	if e.ID == uuid.Nil {
		t.Fatalf("no PAID_NOT_BOOKED for the lost payment: %+v", w.exceptions(gw))
	}
	refused := map[string]string{
		"WRITTEN_OFF":      "BAD_CODE",
		"NO_ACTION_NEEDED": "BAD_CODE",
		"REFUNDED":         "NO_EVIDENCE",
		"BOOKED":           "NO_EVIDENCE",
		"NOT_CAPTURED":     "GATEWAY_DISAGREES",
	}
	for code, want := range refused {
		if err := w.svc.ResolveManually(ctx, e.ID, "finance1", code, "settled with the customer by phone", st.Payments); booking.ErrorReason(err) != want {
			t.Errorf("resolve as %s: %v, want %s", code, err, want)
		}
	}
	w.must(w.svc.ProposeWriteOff(ctx, e.ID, "finance1", "not worth chasing"))
	if err := w.svc.ApproveWriteOff(ctx, e.ID, "finance1", ""); booking.ErrorReason(err) != "SAME_PERSON" {
		t.Fatalf("self-approved write-off: %v", err)
	}
	if err := w.svc.ResolveManually(ctx, e.ID, "finance1", "REFUNDED", "refunded", st.Payments); booking.ErrorReason(err) != "WRITE_OFF_PROPOSED" {
		t.Fatalf("resolve while a write-off is proposed: %v", err)
	}
	if got, _ := w.svc.Exception(ctx, e.ID); got.State != StateOpen {
		t.Fatalf("refusals changed the exception: %s", got.State)
	}
	w.must(w.svc.WithdrawWriteOff(ctx, e.ID, "finance1", "refund instead"))
	// With the refund recorded (as the late-success path records it), the
	// customer is whole and the exception may close, naming the refund.
	refund := uuid.New()
	w.must2(w.env.Pool.Exec(ctx, `INSERT INTO refunds (id, payment_id, reason, amount_paise, state) VALUES ($1, $2, 'LATE_SUCCESS_NO_SEAT', $3, 'PENDING')`,
		refund, lost.ID, lost.Amount))
	w.must(w.svc.ResolveManually(ctx, e.ID, "finance1", "REFUNDED", "refund started", st.Payments))
	hist, _ := w.svc.History(ctx, e.ID)
	if last := hist[len(hist)-1]; last.Action != "RESOLVED:REFUNDED" || !strings.Contains(last.Note, refund.String()) {
		t.Fatalf("resolution history: %+v", last)
	}
}

// ResolutionHoldsTheExceptionsLock is TestResolutionHoldsTheExceptionsLock
// (issue 33, 6): an automatic resolution holds the exception's lock from
// its read to its close, so a person acting on the exception meanwhile
// (here: approving a write-off another person proposed) waits, then finds
// it closed. Before, the resolution read the exception unlocked, moved
// the money and closed it; the write-off approved in between stood, and the
// refunded money was also written off.
func ResolutionHoldsTheExceptionsLock(t *testing.T, start StartProc) {
	st := start(t, ProcOptions{})
	ctx := context.Background()
	w := liveWorld(t, st, "lk")
	reached, release := make(chan struct{}), make(chan struct{})
	c, err := river.NewClient(riverpgxv5.New(w.env.Pool), &river.Config{})
	w.must(err)
	w.svc = New(Config{Pool: w.env.Pool, Jobs: c, Pause: func(ctx context.Context, point string) {
		if point == "recon.resolve.after-effect" {
			close(reached)
			<-release
		}
	}})
	const gw = "swiftpay"
	lost := w.make(spec{gateway: gw, method: "UPI", amount: 145000, ours: "UNKNOWN", captured: true})[0]
	w.must2(w.env.Pool.Exec(ctx, `UPDATE holds SET updated_at = now() - interval '2 hours' WHERE id = $1`, lost.Hold))
	_, err = w.svc.FetchSettlement(ctx, w.src, gw, w.day, "job:test")
	w.must(err)
	_, err = w.svc.Run(ctx, RunRequest{Gateway: gw, Date: w.day, By: "finance1"})
	w.must(err)
	var e Exception
	for _, x := range w.exceptions(gw) {
		if x.Kind == PaidNotBooked {
			e = x
		}
	}
	w.must(w.svc.ProposeWriteOff(ctx, e.ID, "finance1", "not worth chasing"))
	resolved := make(chan error, 1)
	go func() { resolved <- w.svc.Resolve(ctx, e.ID, st.Payments, st.Service) }()
	<-reached // the money has moved; the exception is not closed yet
	approved := make(chan error, 1)
	go func() { approved <- w.svc.ApproveWriteOff(ctx, e.ID, "finance2", "agreed") }()
	// The approval waits on the exception's lock (or, before the fix, is
	// already done).
	deadline := time.Now().Add(10 * time.Second)
	for w.count(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) == 0 {
		select {
		case err := <-approved:
			approved <- err
			deadline = time.Now() // it did not wait
		default:
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(release)
	w.must(<-resolved)
	if err := <-approved; booking.ErrorReason(err) != "EXCEPTION_CLOSED" {
		t.Fatalf("the write-off approved during the resolution: %v, want EXCEPTION_CLOSED", err)
	}
	got, _ := w.svc.Exception(ctx, e.ID)
	if got.State != StateResolved || !strings.HasPrefix(got.Resolution, "AUTO_") {
		t.Fatalf("after both: %s %s, want resolved automatically", got.State, got.Resolution)
	}
	if n := w.count(`SELECT count(*) FROM refunds WHERE payment_id = $1`, lost.ID); n != 1 {
		t.Fatalf("%d refunds", n)
	}
}

// ReopenedExceptionIsResolvedAgain is TestReopenedExceptionIsResolvedAgain
// (issue 33, 6): an exception cleared on a rerun and reopened by the next
// gets its automatic resolution enqueued again, though its first job
// finished. Before, River kept the finished job's arguments unique and
// skipped the new one, so the automatic path never ran again.
func ReopenedExceptionIsResolvedAgain(t *testing.T, start StartProc) {
	st := start(t, ProcOptions{})
	ctx := context.Background()
	w := liveWorld(t, st, "ro")
	w.insertOnly()
	const gw = "swiftpay"
	lost := w.make(spec{gateway: gw, method: "UPI", amount: 145000, ours: "UNKNOWN", captured: true})[0]
	w.must2(w.env.Pool.Exec(ctx, `UPDATE holds SET updated_at = now() - interval '2 hours' WHERE id = $1`, lost.Hold))
	file, err := w.svc.FetchSettlement(ctx, w.src, gw, w.day, "job:test")
	w.must(err)
	_, err = w.svc.Run(ctx, RunRequest{Gateway: gw, Date: w.day, By: "finance1"})
	w.must(err)
	// The stack's own workers do not work resolutions: a job stays a row.
	jobs := func() int { return w.count(`SELECT count(*) FROM river_job WHERE kind = 'recon_resolve'`) }
	if jobs() != 1 {
		t.Fatalf("%d resolution jobs after the first run", jobs())
	}
	// The job ran (finding, say, a review open at the time); the lines
	// then vanish from the day's file for a run, and come back.
	w.must2(w.env.Pool.Exec(ctx, `UPDATE river_job SET state = 'completed', finalized_at = now() WHERE kind = 'recon_resolve'`))
	w.must2(w.env.Pool.Exec(ctx, `UPDATE recon_lines SET current = false WHERE file_id = $1`, file.ID))
	_, err = w.svc.Run(ctx, RunRequest{Gateway: gw, Date: w.day, By: "finance1"})
	w.must(err)
	w.must2(w.env.Pool.Exec(ctx, `UPDATE recon_lines SET current = true WHERE file_id = $1`, file.ID))
	_, err = w.svc.Run(ctx, RunRequest{Gateway: gw, Date: w.day, By: "finance1"})
	w.must(err)
	var state string
	var id uuid.UUID
	w.must(w.env.Pool.QueryRow(ctx, `SELECT id, state FROM reconciliation_exceptions WHERE kind = 'PAID_NOT_BOOKED'`).Scan(&id, &state))
	if state != StateOpen || jobs() != 2 {
		t.Fatalf("reopened: %s with %d resolution jobs in all, want OPEN with a second one", state, jobs())
	}
	w.must(w.svc.Resolve(ctx, id, st.Payments, st.Service))
	if n := w.count(`SELECT count(*) FROM refunds WHERE payment_id = $1`, lost.ID); n != 1 {
		t.Fatalf("%d refunds after the reopened exception's resolution", n)
	}
}
