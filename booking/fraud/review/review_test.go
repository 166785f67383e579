package review

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"tatkal/booking"
	"tatkal/booking/fraud"
	"tatkal/booking/lab/testenv"
)

type bundle struct {
	env              *testenv.Env
	svc              *Service
	window           time.Time
	fraud1, fraud2   int64 // analysts
	ops, disabled    int64 // may not review
	clusters         []int64
	clustererService *fraud.Service
}

func setup(t *testing.T) bundle {
	t.Helper()
	ctx := context.Background()
	env := testenv.New(t)
	g, err := fraud.Generate(ctx, env.Pool, fraud.Recorder{Key: []byte("review-test-key-0123456789")},
		fraud.Population{Rings: 3, RingSize: 5, Families: 5, Honest: 60, Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	fs := &fraud.Service{Pool: env.Pool, Clusterer: fraud.Clusterer{Config: fraud.DefaultConfig()}}
	if _, err := fs.ClusterWindow(ctx, g.OpensAt); err != nil {
		t.Fatal(err)
	}
	b := bundle{env: env, svc: New(env.Pool), window: g.OpensAt, clustererService: fs}
	for _, u := range []struct {
		id       *int64
		login    string
		role     string
		disabled bool
	}{{&b.fraud1, "fraud1", "fraud", false}, {&b.fraud2, "fraud2", "admin", false}, {&b.ops, "ops1", "ops", false}, {&b.disabled, "fraud9", "fraud", true}} {
		if err := env.Pool.QueryRow(ctx, `INSERT INTO console_users (login, name, role, password_hash, disabled) VALUES ($1, $1, $2, 'x', $3) RETURNING id`,
			u.login, u.role, u.disabled).Scan(u.id); err != nil {
			t.Fatal(err)
		}
	}
	q, err := b.svc.Queue(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range q {
		b.clusters = append(b.clusters, it.ClusterID)
	}
	if len(b.clusters) != 3 {
		t.Fatalf("queue has %d clusters, want the 3 rings", len(b.clusters))
	}
	return b
}

func (b bundle) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := b.env.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestQueueByScore(t *testing.T) {
	t.Parallel()
	b := setup(t)
	q, err := b.svc.Queue(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(q); i++ {
		if q[i].Score > q[i-1].Score {
			t.Errorf("queue not by score: %v then %v", q[i-1].Score, q[i].Score)
		}
	}
	if n := b.count(t, `SELECT count(*) FROM fraud_clusters WHERE flagged AND status = 'OPEN'`); n != len(q) {
		t.Errorf("queue %d, flagged open clusters %d", len(q), n)
	}
}

// TestClaimIsExclusive: two analysts claim one cluster at the same instant;
// exactly one gets it, the other may neither claim nor decide until the
// claim lapses, and then may.
func TestClaimIsExclusive(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.clusters[0]
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, 2)
	for i, a := range []int64{b.fraud1, b.fraud2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, errs[i] = b.svc.Claim(ctx, a, c, time.Minute)
		}()
	}
	close(start)
	wg.Wait()
	won, lost := b.fraud1, b.fraud2
	switch {
	case errs[0] == nil && errs[1] != nil:
	case errs[1] == nil && errs[0] != nil:
		won, lost = b.fraud2, b.fraud1
	default:
		t.Fatalf("claims: %v, %v; want exactly one", errs[0], errs[1])
	}
	if code := booking.ErrorCode(errs[0]) + booking.ErrorCode(errs[1]); code != booking.ECONFLICT {
		t.Errorf("losing claim code = %q, want conflict", code)
	}
	if n := b.count(t, `SELECT count(*) FROM fraud_clusters WHERE id = $1 AND claimed_by = $2`, c, won); n != 1 {
		t.Errorf("cluster not held by the winner")
	}
	d := Decision{Outcome: Watch, Reason: "AUTOMATION"}
	if _, err := b.svc.Decide(ctx, lost, c, d); booking.ErrorCode(err) != booking.ECONFLICT {
		t.Errorf("the loser decided: %v", err)
	}
	if err := b.svc.Release(ctx, lost, c); booking.ErrorCode(err) != booking.ECONFLICT {
		t.Errorf("the loser released the winner's claim: %v", err)
	}
	// The claim lapses: the other analyst may take it, and the first may no longer decide.
	later := *b.svc
	later.now = func() time.Time { return time.Now().Add(2 * time.Minute) }
	if _, err := later.Claim(ctx, lost, c, time.Minute); err != nil {
		t.Fatalf("claim after lapse: %v", err)
	}
	if _, err := later.Decide(ctx, won, c, d); booking.ErrorCode(err) != booking.ECONFLICT {
		t.Errorf("a lapsed claim decided: %v", err)
	}
	if _, err := later.Decide(ctx, lost, c, d); err != nil {
		t.Fatalf("decide: %v", err)
	}
	if n := b.count(t, `SELECT count(*) FROM audit_log WHERE action = 'fraud.claim' AND subject = $1`, "cluster:"+itoa(c)); n != 2 {
		t.Errorf("claims audited: %d, want 2", n)
	}
}

// TestBadDecisionsChangeNothing: every refused decision leaves the
// cluster open and writes no decision and no audit record.
func TestBadDecisionsChangeNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.clusters[0]
	if _, err := b.svc.Claim(ctx, b.ops, c, 0); booking.ErrorCode(err) != booking.EFORBIDDEN {
		t.Errorf("ops claimed: %v", err)
	}
	if _, err := b.svc.Claim(ctx, b.disabled, c, 0); booking.ErrorCode(err) != booking.EFORBIDDEN {
		t.Errorf("a disabled analyst claimed: %v", err)
	}
	if _, err := b.svc.Claim(ctx, b.fraud1, c, 3*time.Hour); booking.ErrorCode(err) != booking.EINVALID {
		t.Errorf("a 3 h claim: %v", err)
	}
	if _, err := b.svc.Claim(ctx, b.fraud1, 1<<40, 0); booking.ErrorCode(err) != booking.ENOTFOUND {
		t.Errorf("claim of no cluster: %v", err)
	}
	audits := b.count(t, `SELECT count(*) FROM audit_log`)
	if _, err := b.svc.Decide(ctx, b.fraud1, c, Decision{Outcome: Watch, Reason: "AUTOMATION"}); booking.ErrorCode(err) != booking.ECONFLICT {
		t.Errorf("decided without a claim: %v", err)
	}
	if _, err := b.svc.Claim(ctx, b.fraud1, c, 0); err != nil {
		t.Fatal(err)
	}
	audits++
	for name, d := range map[string]Decision{
		"outcome":      {Outcome: "DELETE", Reason: "AUTOMATION"},
		"reason":       {Outcome: Ban, Reason: "VIBES"},
		"clear reason": {Outcome: Ban, Reason: "FALSE_POSITIVE"},
		"act reason":   {Outcome: Clear, Reason: "AUTOMATION"},
		"other note":   {Outcome: Watch, Reason: "OTHER"},
		"blank note":   {Outcome: Watch, Reason: "OTHER", Note: " \x00\u200b "},
		"long note":    {Outcome: Watch, Reason: "OTHER", Note: longNote()},
	} {
		if _, err := b.svc.Decide(ctx, b.fraud1, c, d); booking.ErrorCode(err) != booking.EINVALID {
			t.Errorf("%s: err = %v, want invalid", name, err)
		}
	}
	if _, err := b.svc.Decide(ctx, b.ops, c, Decision{Outcome: Watch, Reason: "AUTOMATION"}); booking.ErrorCode(err) != booking.EFORBIDDEN {
		t.Errorf("ops decided: %v", err)
	}
	if n := b.count(t, `SELECT count(*) FROM fraud_decisions`); n != 0 {
		t.Errorf("%d decisions after refusals", n)
	}
	if n := b.count(t, `SELECT count(*) FROM fraud_clusters WHERE status <> 'OPEN'`); n != 0 {
		t.Errorf("%d clusters closed after refusals", n)
	}
	if n := b.count(t, `SELECT count(*) FROM audit_log`); n != audits {
		t.Errorf("audit records %d, want %d", n, audits)
	}
}

// TestBulkDecisionNeedsSecondAnalyst: a cancel is recorded awaiting
// approval; the deciding analyst may not approve it, another may, once.
func TestBulkDecisionNeedsSecondAnalyst(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.clusters[0]
	if _, err := b.svc.Claim(ctx, b.fraud1, c, 0); err != nil {
		t.Fatal(err)
	}
	dec, err := b.svc.Decide(ctx, b.fraud1, c, Decision{Outcome: CancelBookings, Reason: "PASSENGER_RESALE", Note: "same 5 passengers on\x00 every account"})
	if err != nil {
		t.Fatal(err)
	}
	if !dec.NeedsApproval {
		t.Error("a bulk cancel does not need approval")
	}
	if _, err := b.svc.Decide(ctx, b.fraud1, c, Decision{Outcome: Watch, Reason: "AUTOMATION"}); booking.ErrorCode(err) != booking.ECONFLICT {
		t.Errorf("decided a closed cluster again: %v", err)
	}
	if err := b.svc.Approve(ctx, b.fraud1, dec.ID); booking.ErrorCode(err) != booking.EFORBIDDEN {
		t.Errorf("self-approval: %v", err)
	}
	if _, err := b.env.Pool.Exec(ctx, `UPDATE fraud_decisions SET approved_by = analyst_id, approved_at = now() WHERE id = $1`, dec.ID); err == nil {
		t.Error("the database let the deciding analyst approve")
	}
	if err := b.svc.Approve(ctx, b.ops, dec.ID); booking.ErrorCode(err) != booking.EFORBIDDEN {
		t.Errorf("ops approved: %v", err)
	}
	if err := b.svc.Approve(ctx, b.fraud2, dec.ID); err != nil {
		t.Fatal(err)
	}
	if err := b.svc.Approve(ctx, b.fraud2, dec.ID); booking.ErrorCode(err) != booking.ECONFLICT {
		t.Errorf("approved twice: %v", err)
	}
	var note string
	var approver int64
	if err := b.env.Pool.QueryRow(ctx, `SELECT note, approved_by FROM fraud_decisions WHERE id = $1`, dec.ID).Scan(&note, &approver); err != nil {
		t.Fatal(err)
	}
	if approver != b.fraud2 || note != "same 5 passengers on every account" {
		t.Errorf("decision = %q approved by %d", note, approver)
	}
	if n := b.count(t, `SELECT count(*) FROM audit_log WHERE action IN ('fraud.decide', 'fraud.approve')`); n != 2 {
		t.Errorf("decision audits = %d, want 2", n)
	}
	// A non-bulk decision needs no approval.
	c2 := b.clusters[1]
	if _, err := b.svc.Claim(ctx, b.fraud2, c2, 0); err != nil {
		t.Fatal(err)
	}
	d2, err := b.svc.Decide(ctx, b.fraud2, c2, Decision{Outcome: Clear, Reason: "FAMILY_OR_OFFICE"})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.svc.Approve(ctx, b.fraud1, d2.ID); booking.ErrorCode(err) != booking.ECONFLICT {
		t.Errorf("approved a clear: %v", err)
	}
}

// TestRerunKeepsClaimedAndDecided: running the window again replaces only
// clusters nobody is working on; a claimed and a decided cluster keep their
// ids and are not duplicated.
func TestRerunKeepsClaimedAndDecided(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	claimed, decided := b.clusters[0], b.clusters[1]
	for _, c := range []int64{claimed, decided} {
		if _, err := b.svc.Claim(ctx, b.fraud1, c, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.svc.Decide(ctx, b.fraud1, decided, Decision{Outcome: Watch, Reason: "AUTOMATION"}); err != nil {
		t.Fatal(err)
	}
	before := b.count(t, `SELECT count(*) FROM fraud_clusters`)
	if _, err := b.clustererService.ClusterWindow(ctx, b.window); err != nil {
		t.Fatal(err)
	}
	if n := b.count(t, `SELECT count(*) FROM fraud_clusters WHERE id = ANY($1) `, []int64{claimed, decided}); n != 2 {
		t.Errorf("claimed and decided clusters after rerun: %d of 2", n)
	}
	if n := b.count(t, `SELECT count(*) FROM fraud_clusters WHERE id = $1 AND claimed_by = $2`, claimed, b.fraud1); n != 1 {
		t.Error("rerun dropped the claim")
	}
	if n := b.count(t, `SELECT count(*) FROM fraud_clusters`); n != before {
		t.Errorf("clusters after rerun %d, before %d: duplicates", n, before)
	}
	if n := b.count(t, `SELECT count(*) FROM fraud_clusters WHERE flagged AND status = 'OPEN'`); n != 2 {
		t.Errorf("open flagged after rerun: %d, want 2", n)
	}
}

// TestPartlyDecidedCaseSurvivesARerun: a case with a decision on some
// members, its claim released, is kept by a new clustering run of its
// window (its decisions refer to it), not replaced.
func TestPartlyDecidedCaseSurvivesARerun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.clusters[0]
	if _, err := b.svc.Claim(ctx, b.fraud1, c, 0); err != nil {
		t.Fatal(err)
	}
	var member int64
	if err := b.env.Pool.QueryRow(ctx, `SELECT min(user_id) FROM fraud_cluster_members WHERE cluster_id = $1`, c).Scan(&member); err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.Decide(ctx, b.fraud1, c, Decision{Outcome: Watch, Reason: "SHARED_DEVICES", Members: []int64{member}}); err != nil {
		t.Fatal(err)
	}
	if err := b.svc.Release(ctx, b.fraud1, c); err != nil {
		t.Fatal(err)
	}
	if _, err := b.clustererService.ClusterWindow(ctx, b.window); err != nil {
		t.Fatalf("rerun with a partly decided case: %v", err)
	}
	if n := b.count(t, `SELECT count(*) FROM fraud_clusters WHERE id = $1 AND status = 'OPEN'`, c); n != 1 {
		t.Fatalf("the partly decided case after a rerun: %d, want kept open", n)
	}
}

func longNote() string {
	b := make([]byte, maxNote+1)
	for i := range b {
		b[i] = 'x'
	}
	return string(b)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
