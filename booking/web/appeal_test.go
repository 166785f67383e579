package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"tatkal/booking"
	"tatkal/booking/auth"
	"tatkal/booking/fraud/review"
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/teststack"
	"tatkal/booking/payment"
)

// TestAppealPage: a member whose waitlisted booking a fraud review
// cancelled (refunded once, by the cancellation) and whose account it then
// banned signs in, sees the suspension, files an appeal on the page; it is
// in the analysts' queue; upheld, the page says so, the account books
// again, and no second refund is paid. A member nothing acted on is told so
// and nothing is filed.
func TestAppealPage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := teststack.New(t, teststack.Options{})
	_, date := s.DemoShard(t, 1, 5)
	hash, err := auth.HashPassword("pw-appeal", auth.Argon2Params{MemoryKiB: 64, Time: 1, Threads: 1})
	teststack.Must(t, err, "hash")
	ids, err := seed.Users(ctx, s.Pool, seed.UsersSpec{Count: 3, Prefix: "apl", PasswordHash: hash, WalletRupees: 20000})
	teststack.Must(t, err, "seed users")
	hold := func(i int, key string) (booking.HoldResult, error) {
		return s.Service.Hold(ctx, teststack.Caller(ids[i]), booking.HoldRequest{UserID: ids[i], IdempotencyKey: key, Train: "12951",
			Date: date, Class: "3A", Quota: "TQ", From: "MMCT", To: "NDLS", Passengers: []booking.Passenger{{Name: fmt.Sprintf("Appeal Person %c", 'A'+i),
				Age: 40 + i, Gender: "F", IDType: "PAN", IDRef: fmt.Sprintf("APPEA%04dL", i)}}})
	}
	// ids[0] takes the only berth; ids[1] is waitlisted: its cancellation refunds.
	for i := range 2 {
		h, err := hold(i, fmt.Sprintf("apl-hold-%d", i))
		teststack.Must(t, err, "hold")
		_, err = s.Payments.Initiate(ctx, teststack.Caller(ids[i]), payment.InitiateRequest{HoldID: h.HoldID, Method: payment.Wallet,
			IdempotencyKey: fmt.Sprintf("apl-pay-%d", i)})
		teststack.Must(t, err, "pay")
	}
	var window time.Time
	teststack.Must(t, s.Pool.QueryRow(ctx, `SELECT window_opens_at FROM inventory_shards s JOIN bookings b ON b.shard_id = s.id WHERE b.user_id = $1`, ids[1]).Scan(&window), "window")
	var cluster int64
	teststack.Must(t, s.Pool.QueryRow(ctx, `INSERT INTO fraud_clusters (window_opens_at, score, flagged, members, evidence)
		VALUES ($1, 3, true, 2, '{"why":["test"]}') RETURNING id`, window).Scan(&cluster), "cluster")
	_, err = s.Pool.Exec(ctx, `INSERT INTO fraud_cluster_members (cluster_id, user_id) VALUES ($1, $2), ($1, $3)`, cluster, ids[0], ids[1])
	teststack.Must(t, err, "members")
	var analysts [4]int64 // 0 decides, 1 approves; 2 and 3 answer the appeal
	for i := range analysts {
		teststack.Must(t, s.Pool.QueryRow(ctx, `INSERT INTO console_users (login, name, role, password_hash) VALUES ($1, $1, 'fraud', 'x') RETURNING id`,
			fmt.Sprintf("analyst-%d", i)).Scan(&analysts[i]), "analyst")
	}
	svc := review.New(s.Pool)
	svc.EnforceDelay = 0
	enf := &review.Enforcer{Review: svc, Booking: s.Service}
	_, err = svc.Claim(ctx, analysts[0], cluster, time.Minute)
	teststack.Must(t, err, "claim")
	d, err := svc.Decide(ctx, analysts[0], cluster, review.Decision{Outcome: review.CancelBookings, Reason: "PASSENGER_RESALE"})
	teststack.Must(t, err, "decide")
	teststack.Must(t, svc.Approve(ctx, analysts[1], d.ID), "approve")
	_, err = enf.RunDue(ctx)
	teststack.Must(t, err, "enforce cancel")
	count := func(sql string, args ...any) int {
		t.Helper()
		var n int
		teststack.Must(t, s.Pool.QueryRow(ctx, sql, args...).Scan(&n), "%s", sql)
		return n
	}
	refunds := `SELECT count(*) FROM refunds f JOIN payments p ON p.id = f.payment_id WHERE p.user_id = $1`
	if n := count(refunds, ids[1]); n != 1 {
		t.Fatalf("the waitlisted member got %d refunds from the cancellation, want 1", n)
	}
	// A second decision on the same members (a later window's cluster) bans them.
	var cluster2 int64
	teststack.Must(t, s.Pool.QueryRow(ctx, `INSERT INTO fraud_clusters (window_opens_at, score, flagged, members, evidence)
		VALUES ($1, 3, true, 2, '{"why":["test"]}') RETURNING id`, window.Add(time.Hour)).Scan(&cluster2), "cluster 2")
	_, err = s.Pool.Exec(ctx, `INSERT INTO fraud_cluster_members (cluster_id, user_id) VALUES ($1, $2), ($1, $3)`, cluster2, ids[0], ids[1])
	teststack.Must(t, err, "members 2")
	_, err = svc.Claim(ctx, analysts[0], cluster2, time.Minute)
	teststack.Must(t, err, "claim 2")
	d2, err := svc.Decide(ctx, analysts[0], cluster2, review.Decision{Outcome: review.Ban, Reason: "PASSENGER_RESALE"})
	teststack.Must(t, err, "decide 2")
	teststack.Must(t, svc.Approve(ctx, analysts[1], d2.ID), "approve 2")
	_, err = enf.RunDue(ctx)
	teststack.Must(t, err, "enforce ban")
	if _, err := hold(1, "apl-banned"); booking.ErrorReason(err) != "ACCOUNT_SUSPENDED" {
		t.Fatalf("banned member's hold: %v", err)
	}

	// The member on the page.
	b := newBrowser(t, s)
	b.signIn("apl00002", "pw-appeal")
	status, _, page := b.get("/appeal")
	if status != 200 || !strings.Contains(page, `data-testid="appeal-suspended"`) || !strings.Contains(page, `data-testid="appeal-form"`) {
		t.Fatalf("appeal page: %d %.1500s", status, page)
	}
	status, _, page = b.post("/appeal", "/appeal", url.Values{"statement": {"   "}})
	if status != http.StatusBadRequest || !strings.Contains(page, "Say in a few words") {
		t.Fatalf("empty appeal: %d %.1500s", status, page)
	}
	status, _, page = b.post("/appeal", "/appeal", url.Values{"statement": {"I booked for my own mother <b>myself</b>."}})
	if status != 200 || !strings.Contains(page, "With the reviewers") || strings.Contains(page, "<b>myself</b>") ||
		strings.Contains(page, `data-testid="appeal-form"`) {
		t.Fatalf("filed appeal: %d %.2500s", status, page)
	}
	// In the analysts' queue, against the latest decision (the ban).
	queue, err := svc.Appeals(ctx)
	if err != nil || len(queue) != 1 || queue[0].UserID != ids[1] || queue[0].DecisionID != d2.ID {
		t.Fatalf("analysts' queue: %+v %v", queue, err)
	}
	// Against a two-analyst ban: one analyst proposes, another upholds.
	_, err = svc.AnswerAppeal(ctx, analysts[2], queue[0].ID, true, "mother to be called")
	teststack.Must(t, err, "propose")
	if _, _, page = b.get("/appeal"); !strings.Contains(page, "With the reviewers") {
		t.Fatalf("with the uphold only proposed: %.2500s", page)
	}
	_, err = svc.AnswerAppeal(ctx, analysts[3], queue[0].ID, true, "mother confirmed")
	teststack.Must(t, err, "uphold")
	_, _, page = b.get("/appeal")
	if !strings.Contains(page, "Upheld: your account is restored") || !strings.Contains(page, "mother confirmed") ||
		strings.Contains(page, `data-testid="appeal-suspended"`) {
		t.Fatalf("after upholding: %.2500s", page)
	}
	if n := count(`SELECT count(*) FROM users WHERE id = $1 AND (banned_at IS NOT NULL OR risk_score <> 0)`, ids[1]); n != 0 {
		t.Error("the upheld member is still banned or flagged")
	}
	if n := count(`SELECT count(*) FROM users WHERE id = $1 AND banned_at IS NOT NULL`, ids[0]); n != 1 {
		t.Error("the other member's ban was lifted too")
	}
	if _, err := hold(1, "apl-restored"); booking.ErrorReason(err) == "ACCOUNT_SUSPENDED" {
		t.Errorf("restored member still refused: %v", err)
	}
	// The cancellation refunded once; the upheld appeal pays nothing again,
	// and enforcement run again does nothing either.
	_, err = enf.RunDue(ctx)
	teststack.Must(t, err, "enforce again")
	if n := count(refunds, ids[1]); n != 1 {
		t.Errorf("%d refunds after the upheld appeal, want still 1", n)
	}
	if n := count(`SELECT count(*) FROM bookings WHERE user_id = $1 AND status = 'CANCELLED'`, ids[1]); n != 1 {
		t.Errorf("the cancelled booking changed: %d cancelled", n)
	}

	// A member nothing acted on is told so.
	other := newBrowser(t, s)
	other.signIn("apl00003", "pw-appeal")
	status, _, page = other.post("/appeal", "/appeal", url.Values{"statement": {"why not"}})
	if status != http.StatusBadRequest || !strings.Contains(page, "No review decision has acted on this account") {
		t.Fatalf("nothing to appeal: %d %.1500s", status, page)
	}
	if n := count(`SELECT count(*) FROM fraud_appeals WHERE user_id = $1`, ids[2]); n != 0 {
		t.Errorf("%d appeals filed for a member nothing acted on", n)
	}
	// Signed out, the page sends you to sign in.
	if status, loc, _ := newBrowser(t, s).get("/appeal"); status != http.StatusSeeOther || !strings.HasPrefix(loc, "/signin") {
		t.Errorf("signed out: %d %s", status, loc)
	}
}
