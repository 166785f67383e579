package review_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"tatkal/booking"
	"tatkal/booking/fraud/review"
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
	"tatkal/booking/payment"
)

// newQuietRing is a ring of n accounts with money in their wallets, on a
// shard of berths berths and no waitlist, whose gateway payments wait for
// their customer (teststack.QuietRoutes); the test books for them, then
// flags them.
func newQuietRing(t *testing.T, berths, n int) *ring {
	t.Helper()
	r := &ring{}
	r.s = teststack.New(t, teststack.Options{Routes: teststack.QuietRoutes()})
	r.shardID, r.date = r.s.DemoShard(t, berths, 0)
	ids, err := seed.Users(context.Background(), r.s.Pool, seed.UsersSpec{Count: n, Prefix: "inflight", PasswordHash: "x", WalletRupees: 20000})
	if err != nil {
		t.Fatal(err)
	}
	r.members = ids
	return r
}

// hold holds a berth for user; want is the answer's status.
func (r *ring) hold(t *testing.T, user int64, key, want string) booking.HoldResult {
	t.Helper()
	res, err := r.s.Service.Hold(context.Background(), teststack.Caller(user), booking.HoldRequest{UserID: user, IdempotencyKey: key,
		Train: "12951", Date: r.date, Class: "3A", Quota: "TQ", From: "MMCT", To: "NDLS",
		Passengers: []booking.Passenger{{Name: "Tout Passenger", Age: 41, Gender: "M", IDType: "PAN", IDRef: "TOUTP4141K"}}})
	if err != nil || res.Status != want {
		t.Fatalf("hold %s for %d: %+v %v, want %s", key, user, res, err, want)
	}
	return res
}

// payUPI starts a UPI payment of a hold, left waiting for its customer.
func (r *ring) payUPI(t *testing.T, user int64, hold uuid.UUID, key string) payment.View {
	t.Helper()
	v, err := r.s.Payments.Initiate(context.Background(), teststack.Caller(user), payment.InitiateRequest{HoldID: hold, Method: payment.UPI,
		VPA: fmt.Sprintf("u%d@okbank", user), IdempotencyKey: key})
	if err != nil || v.State != payment.AwaitingUser {
		t.Fatalf("UPI payment of %s: %+v %v", hold, v, err)
	}
	return v
}

// decided is a decision on the ring by analyst a, approved by analyst b.
func (r *ring) decided(t *testing.T, outcome, reason string) int64 {
	t.Helper()
	ctx := context.Background()
	if _, err := r.svc.Claim(ctx, r.analysts[0], r.cluster, time.Minute); err != nil {
		t.Fatal(err)
	}
	d, err := r.svc.Decide(ctx, r.analysts[0], r.cluster, review.Decision{Outcome: outcome, Reason: reason})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.svc.Approve(ctx, r.analysts[1], d.ID); err != nil {
		t.Fatal(err)
	}
	return d.ID
}

// approveLate is the customer approving at their bank after enforcement:
// we ask the gateway, as the inquiry job would, and run the late-success
// job, as its worker would (there are none here).
func (r *ring) approveLate(t *testing.T, p uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	r.s.ApproveAtGateway(t, p)
	r.s.Payments.Inquire(ctx, p) //nolint:errcheck // what it did is read from the database
	teststack.Must(t, r.s.Payments.ResolveLateSuccess(ctx, p), "late success of %s", p)
}

// refundedInFull fails unless hold got no ticket and its payment p was
// refunded once, in full, and the member was told why.
func (r *ring) refundedInFull(t *testing.T, user int64, hold, p uuid.UUID, why string) {
	t.Helper()
	var bookings, refunds int
	var refunded, paid int64
	teststack.Must(t, r.s.Pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM bookings WHERE hold_id = $1),
		(SELECT count(*) FROM refunds WHERE payment_id = $2), (SELECT coalesce(sum(amount_paise), 0) FROM refunds WHERE payment_id = $2),
		(SELECT coalesce(captured_paise, 0) FROM payments WHERE id = $2 AND state IN ('SUCCESS', 'REFUNDED'))`, hold, p).
		Scan(&bookings, &refunds, &refunded, &paid), "outcome of %s", hold)
	if bookings != 0 || refunds != 1 || paid == 0 || refunded != paid {
		t.Errorf("hold %s paid after enforcement: %d bookings, %d refunds of %d paise for %d captured; want no ticket and the money back once",
			hold, bookings, refunds, refunded, paid)
	}
	var body string
	teststack.Must(t, r.s.Pool.QueryRow(context.Background(), `SELECT coalesce(max(body), '') FROM notifications
		WHERE user_id = $1 AND kind = 'REFUND_STARTED' AND ref = $2`, user, p.String()).Scan(&body), "refund notice")
	if !strings.Contains(body, why) {
		t.Errorf("the refund notice of %s says %q, want it to say %q", p, body, why)
	}
}

// status is what the member sees of hold over the API: its state and
// message.
func (r *ring) status(t *testing.T, user int64, hold uuid.UUID) (string, string) {
	t.Helper()
	resp := testenv.Call(t, testenv.Request{Method: http.MethodGet, URL: r.s.Server.URL + "/v1/bookings/" + hold.String() + "/status",
		Token: r.s.Token(user)})
	var v struct{ State, Message string }
	if resp.Status != 200 || resp.Decode(&v) != nil {
		t.Fatalf("status of %s: %d %s", hold, resp.Status, resp.Raw)
	}
	return v.State, v.Message
}

// Issue 33 (3): a cancellation decision enforced while a member's UPI
// payment waits at their bank, and while another member's hold has lapsed
// with its payment still out, ends both holds with the bookings it
// cancels: when the customers approve afterwards, no ticket is issued and
// each payment is refunded in full, once; the members are told why. Before,
// enforcement read only the bookings: the first payment became a ticket on
// the callback, the second a ticket by the late-success retake, both after
// the decision was marked enforced.
func TestCancelDecisionEndsHoldsWhosePaymentIsInFlight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newQuietRing(t, 4, 3)
	booked := r.hold(t, r.members[0], "inflight-hold-0", "HELD")
	if _, err := r.s.Payments.Initiate(ctx, teststack.Caller(r.members[0]), payment.InitiateRequest{HoldID: booked.HoldID, Method: payment.Wallet,
		IdempotencyKey: "inflight-pay-0"}); err != nil {
		t.Fatal(err)
	}
	pending := r.hold(t, r.members[1], "inflight-hold-1", "HELD")
	pendingPay := r.payUPI(t, r.members[1], pending.HoldID, "inflight-pay-1")
	lapsed := r.hold(t, r.members[2], "inflight-hold-2", "HELD")
	lapsedPay := r.payUPI(t, r.members[2], lapsed.HoldID, "inflight-pay-2")
	_, err := r.s.Pool.Exec(ctx, `UPDATE holds SET expires_at = now() - interval '1 second' WHERE id = $1`, lapsed.HoldID)
	teststack.Must(t, err, "run the hold's time out")
	_, err = r.s.Service.ExpireHold(ctx, lapsed.HoldID)
	teststack.Must(t, err, "expire the hold")

	r.flag(t)
	d := r.decided(t, review.CancelBookings, "PASSENGER_RESALE")
	teststack.Must(t, r.enforcer().Enforce(ctx, d), "enforce")
	for _, h := range []struct {
		user int64
		hold uuid.UUID
	}{{r.members[1], pending.HoldID}, {r.members[2], lapsed.HoldID}} {
		if state, msg := r.status(t, h.user, h.hold); state != "CANCELLED" || !strings.Contains(msg, "fraud review") {
			t.Errorf("after enforcement the member sees hold %s as %s: %q", h.hold, state, msg)
		}
		if n := count(t, r, `SELECT count(*) FROM notifications WHERE user_id = $1 AND kind = 'HOLD_CANCELLED' AND ref = $2`, h.user, h.hold.String()); n == 0 {
			t.Errorf("member %d was not told hold %s was ended", h.user, h.hold)
		}
	}
	if n := count(t, r, `SELECT count(*) FROM bookings WHERE hold_id = $1 AND status = 'CANCELLED'`, booked.HoldID); n != 1 {
		t.Fatal("the member's ticket was not cancelled")
	}
	if n := count(t, r, `SELECT count(*) FROM notifications WHERE user_id = $1 AND kind = 'BOOKING_CANCELLED'`, r.members[0]); n == 0 {
		t.Error("the member whose ticket was cancelled was not told")
	}
	if n := count(t, r, `SELECT count(*) FROM audit_log WHERE action = 'fraud.end_hold'`); n != 2 {
		t.Errorf("%d ended holds audited, want 2", n)
	}

	// The customers approve at their banks now.
	r.approveLate(t, pendingPay.ID)
	r.approveLate(t, lapsedPay.ID)
	r.refundedInFull(t, r.members[1], pending.HoldID, pendingPay.ID, "fraud review")
	r.refundedInFull(t, r.members[2], lapsed.HoldID, lapsedPay.ID, "fraud review")
	if state, msg := r.status(t, r.members[1], pending.HoldID); state != "REFUND_INITIATED" || !strings.Contains(msg, "fraud review") {
		t.Errorf("after the refund the member sees %s: %q", state, msg)
	}
	// Enforced once: run again, nothing more happens.
	teststack.Must(t, r.enforcer().Enforce(ctx, d), "enforce again")
	if n := count(t, r, `SELECT count(*) FROM fraud_enforcements WHERE decision_id = $1 AND action = 'CANCEL'`, d); n != 3 {
		t.Errorf("%d cancellations recorded, want 3 (a ticket and two holds)", n)
	}
	r.s.CheckInvariants(t, r.shardID)
}

// Issue 33 (3): a ban ends the members' live holds when it is enforced:
// the berths are back on sale at once, a hold not yet paid can no longer
// be paid for, and a payment that was waiting at the bank and is approved
// afterwards is refunded in full, once. Before, a banned member's holds
// kept their berths until they ran out.
func TestBanEndsTheMembersLiveHolds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newQuietRing(t, 2, 2)
	pending := r.hold(t, r.members[0], "ban-hold-0", "HELD")
	pendingPay := r.payUPI(t, r.members[0], pending.HoldID, "ban-pay-0")
	unpaid := r.hold(t, r.members[1], "ban-hold-1", "HELD")
	outsider := r.s.Users(t, "honest", 1)[0]
	r.hold(t, outsider, "honest-hold-0", "SOLD_OUT")

	r.flag(t)
	d := r.decided(t, review.Ban, "AUTOMATION")
	teststack.Must(t, r.enforcer().Enforce(ctx, d), "enforce")
	if n := count(t, r, `SELECT count(*) FROM holds WHERE id = ANY($1) AND state = 'CANCELLED'`, []uuid.UUID{pending.HoldID, unpaid.HoldID}); n != 2 {
		t.Fatalf("%d of the banned members' 2 live holds ended", n)
	}
	r.hold(t, outsider, "honest-hold-1", "HELD")
	if _, err := r.s.Payments.Initiate(ctx, teststack.Caller(r.members[1]), payment.InitiateRequest{HoldID: unpaid.HoldID, Method: payment.UPI,
		VPA: "ban1@okbank", IdempotencyKey: "ban-pay-1"}); booking.ErrorReason(err) != "HOLD_CANCELLED" {
		t.Errorf("paying for the banned member's ended hold: %v, want HOLD_CANCELLED", err)
	}
	for _, u := range r.members {
		if n := count(t, r, `SELECT count(*) FROM notifications WHERE user_id = $1 AND kind = 'HOLD_CANCELLED'`, u); n == 0 {
			t.Errorf("banned member %d was not told their hold was ended", u)
		}
	}
	r.approveLate(t, pendingPay.ID)
	r.refundedInFull(t, r.members[0], pending.HoldID, pendingPay.ID, "fraud review")
	r.s.CheckInvariants(t, r.shardID)
}
