package fraud_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/google/uuid"

	"tatkal/booking/fraud"
	"tatkal/booking/fraud/review"
	"tatkal/booking/lab/testenv"
)

// TestClearAllowsTheSameGroupNextWindow: an office's four accounts pay
// with one corporate card for travellers of their own choosing; the first
// window flags them, an analyst CLEARs the cluster, and the next window's
// same card among the same accounts flags nobody, while the allow-list
// entries expire in AllowFor.
func TestClearAllowsTheSameGroupNextWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := testenv.New(t)
	rec := fraud.Recorder{Key: []byte("allow-test-key-0123456789abcdef")}
	ist := time.FixedZone("IST", 5*3600+1800)
	w1 := time.Date(2026, 12, 9, 10, 0, 0, 0, ist)
	w2 := w1.AddDate(0, 0, 1)
	var shards []int64
	for _, w := range []time.Time{w1, w2} {
		g, err := fraud.Generate(ctx, env.Pool, rec, fraud.Population{OpensAt: w, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		shards = append(shards, g.ShardID)
	}
	users := make([]int64, 4)
	for i := range users {
		if err := env.Pool.QueryRow(ctx, `INSERT INTO users (login, password_hash, created_at) VALUES ($1, 'x', now() - interval '10 days') RETURNING id`,
			fmt.Sprintf("desk%d", i)).Scan(&users[i]); err != nil {
			t.Fatal(err)
		}
	}
	signals := func(w time.Time, shard int64, who []int64) {
		var sigs []fraud.Signal
		for i, u := range who {
			sigs = append(sigs, fraud.Signal{HoldID: uuid.New(), ShardID: shard, UserID: u, DeviceID: fmt.Sprintf("desk-dev-%d", u),
				IP: netip.AddrFrom4([4]byte{100, 64, byte(u % 200), 7}), SolveMS: 4000 + 311*i, HeldAt: w.Add(time.Duration(5+i) * time.Second),
				Instrument: "card:cfp_corporate", Passengers: []fraud.Passenger{
					{Name: fmt.Sprintf("Traveller%c Mehra", 'A'+i), Age: 30 + i, IDType: "PAN", IDRef: fmt.Sprintf("ABCDE%04dF", int(u)*10+int(w.Day()))},
					{Name: fmt.Sprintf("Colleague%c Iyer", 'A'+i), Age: 40 + i, IDType: "PAN", IDRef: fmt.Sprintf("FGHIJ%04dK", int(u)*10+int(w.Day()))}}})
		}
		if err := rec.Record(ctx, env.Pool, sigs); err != nil {
			t.Fatal(err)
		}
	}
	svc := &fraud.Service{Pool: env.Pool, Clusterer: fraud.Clusterer{Config: fraud.DefaultConfig()}}
	flagged := func(w time.Time) map[int64]bool {
		t.Helper()
		if _, err := svc.ClusterWindow(ctx, w); err != nil {
			t.Fatal(err)
		}
		rows, err := env.Pool.Query(ctx, `SELECT m.user_id FROM fraud_cluster_members m JOIN fraud_clusters c ON c.id = m.cluster_id
			WHERE c.window_opens_at = $1 AND c.flagged AND m.flagged`, w)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		out := map[int64]bool{}
		for rows.Next() {
			var u int64
			if err := rows.Scan(&u); err != nil {
				t.Fatal(err)
			}
			out[u] = true
		}
		return out
	}
	signals(w1, shards[0], users)
	if f := flagged(w1); len(f) != 4 {
		t.Fatalf("window 1 flagged %v, want the four accounts on the card", f)
	}
	var analyst, cluster int64
	if err := env.Pool.QueryRow(ctx, `INSERT INTO console_users (login, name, role, password_hash) VALUES ('fraud1', 'fraud1', 'fraud', 'x') RETURNING id`).Scan(&analyst); err != nil {
		t.Fatal(err)
	}
	if err := env.Pool.QueryRow(ctx, `SELECT id FROM fraud_clusters WHERE window_opens_at = $1 AND flagged`, w1).Scan(&cluster); err != nil {
		t.Fatal(err)
	}
	rv := review.New(env.Pool)
	if _, err := rv.Claim(ctx, analyst, cluster, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := rv.Decide(ctx, analyst, cluster, review.Decision{Outcome: review.Clear, Reason: "FAMILY_OR_OFFICE", Note: "the office's travel desk"}); err != nil {
		t.Fatal(err)
	}
	var n int
	var expires time.Time
	if err := env.Pool.QueryRow(ctx, `SELECT count(*), min(expires_at) FROM fraud_allow`).Scan(&n, &expires); err != nil || n != 4 {
		t.Fatalf("allow-list entries %d (%v), want 4", n, err)
	}
	if d := time.Until(expires); d < fraud.AllowFor-time.Hour || d > fraud.AllowFor {
		t.Errorf("allow-list entries expire in %s, want %s", d, fraud.AllowFor)
	}
	signals(w2, shards[1], users)
	if f := flagged(w2); len(f) != 0 {
		t.Errorf("cleared accounts %v flagged again in the next window", f)
	}
}
