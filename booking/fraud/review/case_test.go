package review_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"tatkal/booking"
	"tatkal/booking/admission"
	"tatkal/booking/fraud/review"
)

// TestPerMemberDecisionsSpareTheRelative: a case is decided member by
// member. The ring's first two accounts get a cancellation and a ban (two
// outcomes on one member, each once); the relative linked by one booking
// is cleared. The case closes only once every member is decided; the
// claim can be handed to a second analyst, who then holds it alone; the
// ban waits for an analyst other than its author. Enforced, the ban and
// the cancellation reach the ring's two and nobody else, each banned
// member is told, and every decision row carries its label.
func TestPerMemberDecisionsSpareTheRelative(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRing(t)
	a, b, ops := r.analysts[0], r.analysts[1], int64(0)
	ring, relative := r.members[:2], r.members[5]
	if _, err := r.svc.Claim(ctx, a, r.cluster, time.Minute); err != nil {
		t.Fatal(err)
	}
	decide := func(who int64, outcome, reason string, members ...int64) (review.Decided, error) {
		return r.svc.Decide(ctx, who, r.cluster, review.Decision{Outcome: outcome, Reason: reason, Members: members})
	}
	cancel, err := decide(a, review.CancelBookings, "PASSENGER_RESALE", ring...)
	if err != nil || !cancel.NeedsApproval {
		t.Fatalf("cancel the ring's two: %+v %v", cancel, err)
	}
	ban, err := decide(a, review.Ban, "PASSENGER_RESALE", ring...)
	if err != nil || !ban.NeedsApproval {
		t.Fatalf("and ban them: %+v %v", ban, err)
	}
	before := count(t, r, `SELECT count(*) FROM fraud_decisions`)
	for name, try := range map[string]func() error{
		"the same outcome twice": func() error { _, err := decide(a, review.Ban, "PASSENGER_RESALE", ring[0]); return err },
		"an outsider":            func() error { _, err := decide(a, review.Ban, "PASSENGER_RESALE", 999999); return err },
		"closing undecided":      func() error { return r.svc.Close(ctx, a, r.cluster) },
		"hand to oneself":        func() error { _, err := r.svc.HandOver(ctx, a, r.cluster, a); return err },
		"hand to nobody":         func() error { _, err := r.svc.HandOver(ctx, a, r.cluster, ops); return err },
		"hand what one lacks":    func() error { _, err := r.svc.HandOver(ctx, b, r.cluster, a); return err },
	} {
		if err := try(); err == nil || booking.ErrorCode(err) == booking.EINTERNAL {
			t.Errorf("%s: %v, want a clear refusal", name, err)
		}
	}
	if n := count(t, r, `SELECT count(*) FROM fraud_decisions`); n != before {
		t.Fatalf("refused attempts wrote %d decisions", n-before)
	}
	if n := count(t, r, `SELECT count(*) FROM fraud_clusters WHERE id = $1 AND status = 'OPEN' AND claimed_by = $2`, r.cluster, a); n != 1 {
		t.Fatal("the case is no longer open and a's after refused attempts")
	}

	// Handed over: b holds the case, a can no longer act on it.
	if _, err := r.svc.HandOver(ctx, a, r.cluster, b); err != nil {
		t.Fatal(err)
	}
	if _, err := decide(a, review.Clear, "FAMILY_OR_OFFICE", relative); booking.ErrorReason(err) != "NOT_CLAIMED" {
		t.Fatalf("a deciding after handing over: %v, want NOT_CLAIMED", err)
	}
	if _, err := r.svc.Claim(ctx, a, r.cluster, time.Minute); booking.ErrorReason(err) != "CLAIMED" {
		t.Fatalf("a claiming back b's live claim: %v, want CLAIMED", err)
	}
	if _, err := decide(b, review.Clear, "FAMILY_OR_OFFICE", r.members[2:]...); err != nil {
		t.Fatalf("b clears the rest: %v", err)
	}
	if err := r.svc.Close(ctx, b, r.cluster); err != nil {
		t.Fatalf("close once every member is decided: %v", err)
	}
	if n := count(t, r, `SELECT count(*) FROM audit_log WHERE action = 'fraud.hand_over' AND subject = $1`, fmt.Sprintf("cluster:%d", r.cluster)); n != 1 {
		t.Errorf("%d hand-overs audited, want 1", n)
	}
	// Labels, for the weights: the ring CONFIRMED, the rest CLEAR.
	if n := count(t, r, `SELECT count(*) FROM fraud_decision_members m JOIN fraud_decisions d ON d.id = m.decision_id
		WHERE d.cluster_id = $1 AND d.label = 'CONFIRMED' AND m.user_id = ANY($2)`, r.cluster, ring); n != 4 {
		t.Errorf("%d CONFIRMED labels on the ring's two, want 4 (cancel and ban each)", n)
	}
	if n := count(t, r, `SELECT count(*) FROM fraud_decision_members m JOIN fraud_decisions d ON d.id = m.decision_id
		WHERE d.cluster_id = $1 AND d.label = 'CLEAR' AND m.user_id = $2`, r.cluster, relative); n != 1 {
		t.Errorf("the relative has %d CLEAR labels, want 1", n)
	}

	// Four eyes: the author cannot approve the ban; b did not author it.
	for _, d := range []int64{cancel.ID, ban.ID} {
		if err := r.svc.Approve(ctx, a, d); booking.ErrorReason(err) != "SAME_ANALYST" {
			t.Fatalf("author approving %d: %v", d, err)
		}
		if err := r.svc.Approve(ctx, b, d); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := r.enforcer().RunDue(ctx); err != nil || n != 3 {
		t.Fatalf("enforced %d (%v), want 3 (cancel, ban, clear)", n, err)
	}
	if n := count(t, r, `SELECT count(*) FROM users WHERE banned_at IS NOT NULL AND id = ANY($1)`, r.members); n != 2 {
		t.Errorf("%d members banned, want the ring's 2", n)
	}
	if n := count(t, r, `SELECT count(*) FROM users WHERE banned_at IS NOT NULL AND id = $1`, relative); n != 0 {
		t.Error("the relative was banned")
	}
	if n := count(t, r, `SELECT count(*) FROM bookings WHERE status = 'CANCELLED' AND hold_id = ANY($1)`, r.holds[:2]); n != 2 {
		t.Errorf("%d of the ring's bookings cancelled, want 2", n)
	}
	if n := count(t, r, `SELECT count(*) FROM bookings WHERE status = 'CANCELLED' AND hold_id = ANY($1)`, r.holds[2:]); n != 0 {
		t.Errorf("%d bookings of cleared members cancelled", n)
	}
	if n := count(t, r, `SELECT count(DISTINCT user_id) FROM notifications WHERE kind = 'ACCOUNT_SUSPENDED' AND ref LIKE $1`, fmt.Sprintf("decision:%d:%%", ban.ID)); n != 2 {
		t.Errorf("%d members told of the ban, want 2", n)
	}
}

// TestWatchHardensTheNextChallenge: WATCH does something: once enforced,
// the watched member's next booking challenge is harder until the entry
// lapses, while other members' are not; the member is told nothing and
// cannot appeal what they were not told; the entry lapses by itself.
func TestWatchHardensTheNextChallenge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRing(t)
	bits := func(uid int64) int {
		t.Helper()
		ch, err := r.s.Admission.Challenge(ctx, admission.Caller{UserID: uid, Verified: true, SessionToken: fmt.Sprintf("st_%d", uid)}, "attempt-0001")
		if err != nil {
			t.Fatal(err)
		}
		return ch.Bits
	}
	base := bits(r.members[0])
	if _, err := r.svc.Claim(ctx, r.analysts[0], r.cluster, time.Minute); err != nil {
		t.Fatal(err)
	}
	d, err := r.svc.Decide(ctx, r.analysts[0], r.cluster, review.Decision{Outcome: review.Watch, Reason: "SHARED_DEVICES", Members: r.members[:1]})
	if err != nil || d.NeedsApproval {
		t.Fatalf("watch: %+v %v", d, err)
	}
	if n, err := r.enforcer().RunDue(ctx); err != nil || n != 1 {
		t.Fatalf("enforced %d (%v)", n, err)
	}
	if n := bits(r.members[0]); n <= base {
		t.Errorf("watched member: %d bits, want more than %d", n, base)
	}
	if n := bits(r.members[1]); n != base {
		t.Errorf("unwatched member: %d bits, want %d", n, base)
	}
	if n := count(t, r, `SELECT count(*) FROM notifications WHERE user_id = $1`, r.members[0]) -
		count(t, r, `SELECT count(*) FROM notifications WHERE user_id = $1`, r.members[1]); n != 0 {
		t.Errorf("the watched member got %d more messages than another", n)
	}
	if _, err := r.svc.FileAppeal(ctx, r.members[0], "why?"); booking.ErrorReason(err) != "NOTHING_TO_APPEAL" {
		t.Errorf("appeal against a watch: %v, want NOTHING_TO_APPEAL", err)
	}
	if _, err := r.s.Pool.Exec(ctx, `UPDATE fraud_watch SET until = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	if n := bits(r.members[0]); n != base {
		t.Errorf("after the watch lapsed: %d bits, want %d", n, base)
	}
}

// TestAppealClaimedMaskedAndAnswered: an appeal is linked to its case,
// claimed by one analyst at a time (never one who took part in the
// decision), shows the member's statement with its ID numbers masked, and
// its answer is sent to the member.
func TestAppealClaimedMaskedAndAnswered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newRing(t)
	if _, err := r.svc.Claim(ctx, r.analysts[0], r.cluster, time.Minute); err != nil {
		t.Fatal(err)
	}
	d, err := r.svc.Decide(ctx, r.analysts[0], r.cluster, review.Decision{Outcome: review.ExtraChallenge, Reason: "AUTOMATION", Members: r.members[:1]})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.enforcer().RunDue(ctx); err != nil {
		t.Fatal(err)
	}
	a, err := r.svc.FileAppeal(ctx, r.members[0], "My PAN is ABCDE1234F and Aadhaar 1234 5678 9012; I travel with my mother, phone 9876543210.")
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.svc.Appeal(ctx, a.ID)
	if err != nil || got.ClusterID != r.cluster || got.DecisionID != d.ID {
		t.Fatalf("appeal: %+v %v, want case %d decision %d", got, err, r.cluster, d.ID)
	}
	masked := review.MaskIDs(got.Statement)
	for _, secret := range []string{"ABCDE1234F", "1234 5678 9012", "123456789012", "9876543210", "5678"} {
		if strings.Contains(masked, secret) {
			t.Errorf("masked statement shows %q: %s", secret, masked)
		}
	}
	if !strings.Contains(masked, "I travel with my mother, phone ••••••••10.") || !strings.Contains(masked, "My PAN is ••••••••4F and Aadhaar ••••••••••12;") {
		t.Errorf("masked statement lost its words: %s", masked)
	}
	if _, err := r.svc.ClaimAppeal(ctx, r.analysts[0], a.ID); booking.ErrorReason(err) != "OWN_DECISION" {
		t.Fatalf("the decision's analyst claiming its appeal: %v", err)
	}
	if _, err := r.svc.ClaimAppeal(ctx, r.analysts[2], a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := r.svc.ClaimAppeal(ctx, r.analysts[3], a.ID); booking.ErrorReason(err) != "CLAIMED" {
		t.Fatalf("a second analyst claiming: %v, want CLAIMED", err)
	}
	if _, err := r.svc.AnswerAppeal(ctx, r.analysts[3], a.ID, false, "no"); booking.ErrorReason(err) != "CLAIMED" {
		t.Fatalf("another analyst answering a claimed appeal: %v, want CLAIMED", err)
	}
	if ans, err := r.svc.AnswerAppeal(ctx, r.analysts[2], a.ID, true, "Your mother's bookings explain the link."); err != nil || ans.Verdict != review.Upheld {
		t.Fatalf("answer: %+v %v", ans, err)
	}
	var body string
	if err := r.s.Pool.QueryRow(ctx, `SELECT body FROM notifications WHERE user_id = $1 AND kind = 'APPEAL_ANSWERED' AND channel = 'EMAIL'`,
		r.members[0]).Scan(&body); err != nil || !strings.Contains(body, "upheld") || !strings.Contains(body, "mother's bookings") {
		t.Fatalf("the member's message: %q (%v)", body, err)
	}
}
