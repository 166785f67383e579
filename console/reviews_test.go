package console_test

import (
	"context"
	"fmt"
	"html"
	"strings"
	"testing"
	"time"

	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
	"tatkal/booking/payment"
	"tatkal/booking/winreview"
)

// TestWindowReviewWrittenByTheJob: once a window has closed and settled,
// the window_review job (run by River in the stack's workers) writes its
// review: the funnel against the berths on sale, the money by state (one
// wallet payment taken, one UPI payment still open), the open payment as
// an incident and the lever changed while the window was open, each
// figure as the database has it; the console lists it and shows it.
func TestWindowReviewWrittenByTheJob(t *testing.T) {
	t.Parallel()
	s := setup(t, teststack.Options{Work: true})
	ctx := context.Background()
	shardID, date := s.DemoShard(t, 2, 0)
	users, err := seed.Users(ctx, s.Pool, seed.UsersSpec{Count: 3, Prefix: "wr", PasswordHash: "x", WalletRupees: 10000})
	teststack.Must(t, err, "users")
	h0, err := s.Service.Hold(ctx, teststack.Caller(users[0]), holdReq(users[0], "wr-hold-0", date))
	teststack.Must(t, err, "hold 0")
	pay, err := s.Payments.Initiate(ctx, teststack.Caller(users[0]), payment.InitiateRequest{HoldID: h0.HoldID, Method: payment.Wallet, IdempotencyKey: "wr-pay-0"})
	if err != nil || pay.State != payment.Success {
		t.Fatalf("wallet payment: %+v %v", pay, err)
	}
	h1, err := s.Service.Hold(ctx, teststack.Caller(users[1]), holdReq(users[1], "wr-hold-1", date))
	teststack.Must(t, err, "hold 1")
	_, err = s.Payments.Initiate(ctx, teststack.Caller(users[1]), paymentReq(h1.HoldID.String(), "UPI"))
	teststack.Must(t, err, "upi payment")
	if res, err := s.Service.Hold(ctx, teststack.Caller(users[2]), holdReq(users[2], "wr-hold-2", date)); err != nil || res.Status != "SOLD_OUT" {
		t.Fatalf("third hold: %+v %v", res, err)
	}
	ch, err := s.Console.Levers().Propose(ctx, actor(t, s, "ops1"), propose("shard_throttle", fmt.Sprintf("shard:%d", shardID), "100"))
	teststack.Must(t, err, "lever")
	// The window closed 20 minutes ago (its review is due after
	// winreview.Settle), and the lever was changed while it was open.
	_, err = s.Pool.Exec(ctx, `UPDATE inventory_shards SET window_opens_at = now() - interval '2 hours', window_closes_at = now() - interval '20 minutes' WHERE id = $1`, shardID)
	teststack.Must(t, err, "close the window")
	_, err = s.Pool.Exec(ctx, `UPDATE lever_changes SET proposed_at = now() - interval '1 hour' WHERE id = $1`, ch.ID)
	teststack.Must(t, err, "lever in the window")

	// The watch raised a queue alarm on this shard in the window (resolved
	// since), one on another shard and one on this shard after it closed:
	// only the first is the window's incident.
	_, err = s.Pool.Exec(ctx, `INSERT INTO alarms (raised_at, kind, scope, detail, resolved_at) VALUES
		(now() - interval '90 minutes', 'queue_depth', 'shard:' || $1::bigint, '900 waiting', now() - interval '80 minutes'),
		(now() - interval '90 minutes', 'queue_depth', 'shard:' || ($1::bigint + 1000), 'another shard', NULL),
		(now() - interval '5 minutes', 'queue_depth', 'shard:' || $1::bigint, 'after the window', NULL)`, shardID)
	teststack.Must(t, err, "alarms")
	_, err = s.River.Insert(ctx, winreview.Args{}, nil)
	teststack.Must(t, err, "insert the job")
	testenv.Eventually(t, 20*time.Second, "the review written", func() error {
		var n int
		if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM window_reviews WHERE shard_id = $1`, shardID).Scan(&n); err != nil || n != 1 {
			var jobs string
			s.Pool.QueryRow(ctx, `SELECT coalesce(string_agg(state::text || ' ' || errors::text, '; '), 'none') FROM river_job WHERE kind = 'window_review'`).Scan(&jobs) //nolint:errcheck
			return fmt.Errorf("%d reviews (%v); jobs: %s", n, err, jobs)
		}
		return nil
	})
	var rv winreview.Review
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT figures FROM window_reviews WHERE shard_id = $1`, shardID).Scan(&rv), "read review")
	// The figures, against the database.
	var holds, bookings, paidPaise, openPaise int64
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM holds WHERE shard_id = $1),
		(SELECT count(*) FROM bookings WHERE shard_id = $1 AND status = 'CONFIRMED'),
		(SELECT amount_paise FROM payments WHERE hold_id = $2), (SELECT amount_paise FROM payments WHERE hold_id = $3)`,
		shardID, h0.HoldID, h1.HoldID).Scan(&holds, &bookings, &paidPaise, &openPaise), "figures")
	f := rv.Funnel
	if f.BerthsOnSale != 2 || f.Holds != holds || holds != 2 || f.Bookings != bookings || bookings != 1 || f.SeatsConfirmed != 1 || f.SoldShare != 0.5 {
		t.Fatalf("funnel %+v; database: %d holds, %d bookings", f, holds, bookings)
	}
	if rv.Money.CapturedPaise != paidPaise || paidPaise == 0 || rv.Money.UnknownPayments != 0 {
		t.Fatalf("money %+v; database: %d paid", rv.Money, paidPaise)
	}
	var states []string
	for _, p := range rv.Money.Payments {
		states = append(states, fmt.Sprintf("%s %d %d", p.State, p.Count, p.Paise))
	}
	var openState string
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT state FROM payments WHERE hold_id = $1`, h1.HoldID).Scan(&openState), "open state")
	if want := []string{fmt.Sprintf("%s 1 %d", openState, openPaise), fmt.Sprintf("SUCCESS 1 %d", paidPaise)}; strings.Join(states, ",") != strings.Join(want, ",") {
		t.Fatalf("payments by state %v, want %v", states, want)
	}
	if len(rv.Incidents) != 2 || !strings.Contains(rv.Incidents[0], "1 payment(s) still open") ||
		rv.Incidents[1] != fmt.Sprintf("alarm queue_depth (shard:%d): 900 waiting", shardID) {
		t.Fatalf("incidents %q", rv.Incidents)
	}
	if len(rv.LeversPulls) != 1 || rv.LeversPulls[0].ID != ch.ID || rv.LeversPulls[0].ProposedBy != "ops1" || rv.LeversPulls[0].New != "100" {
		t.Fatalf("levers %+v", rv.LeversPulls)
	}
	if rv.Fairness != nil {
		t.Fatalf("fairness for a direct window: %+v", rv.Fairness)
	}

	b := newBrowser(t, s.Server.URL)
	b.login("ops1")
	_, list, _ := b.get("/console/reviews")
	if !strings.Contains(list, fmt.Sprintf(`data-testid="review-%d"`, shardID)) || !strings.Contains(list, "1 of 2 berths (50%)") {
		t.Fatalf("reviews list:\n%.3000s", list)
	}
	_, page, _ := b.get(fmt.Sprintf("/console/reviews/%d", shardID))
	page = html.UnescapeString(page)
	for _, want := range []string{"bookings confirmed", "payments SUCCESS", "1 payment(s) still open", fmt.Sprintf("#%d shard_throttle shard:%d", ch.ID, shardID), "ops1 at"} {
		if !strings.Contains(page, want) {
			t.Fatalf("review page lacks %q:\n%.4000s", want, page)
		}
	}
	if code, _, _ := b.get("/console/reviews/999999"); code != 404 {
		t.Fatalf("no such review: %d", code)
	}
	fin := newBrowser(t, s.Server.URL)
	fin.login("fraud1")
	if code, _, _ := fin.get("/console/reviews"); code != 403 {
		t.Fatalf("fraud reading reviews: %d", code)
	}
}
