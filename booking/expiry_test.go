package booking

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"tatkal/booking/lab/seed"
)

// A group commit's holds that end in the same second share one expiry job,
// run when the last of them is due; a hold ending in another second keeps a
// job of its own. The group job expires its holds, and one whose window was
// extended meanwhile gets a job of its own at its new end instead of being
// dropped or expired early.
func TestHoldsOfOneSecondShareAnExpiryJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env, svc, shardID := committerFixture(t, DefaultRules(), 8)
	epoch, err := svc.Rebuild(ctx, shardID)
	if err != nil {
		t.Fatal(err)
	}
	users, err := seed.Users(ctx, env.Pool, seed.UsersSpec{Count: 4, Prefix: "exg", PasswordHash: "x"})
	if err != nil {
		t.Fatal(err)
	}
	second := time.Now().Truncate(time.Second).Add(time.Hour)
	ends := []time.Time{second.Add(100 * time.Millisecond), second.Add(700 * time.Millisecond), second.Add(300 * time.Millisecond),
		second.Add(3 * time.Second)}
	batch := make([]*pendingHold, len(users))
	for i, u := range users {
		batch[i] = pendingSeat(shardID, epoch, u, i, ends[i])
	}
	for i, r := range svc.committer.write(ctx, batch) {
		if r.err != nil || r.verdict != committed {
			t.Fatalf("hold %d: verdict %v err %v", i, r.verdict, r.err)
		}
	}

	type job struct {
		kind string
		at   time.Time
		args []byte
	}
	jobs := func() []job {
		t.Helper()
		rows, err := env.Pool.Query(ctx, `SELECT kind, scheduled_at, args FROM river_job
			WHERE kind IN ('hold_expire', 'hold_expire_group') ORDER BY scheduled_at`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []job
		for rows.Next() {
			var j job
			if err := rows.Scan(&j.kind, &j.at, &j.args); err != nil {
				t.Fatal(err)
			}
			out = append(out, j)
		}
		return out
	}
	got := jobs()
	if len(got) != 2 || got[0].kind != "hold_expire_group" || !got[0].at.Equal(ends[1]) ||
		got[1].kind != "hold_expire" || !got[1].at.Equal(ends[3]) {
		t.Fatalf("expiry jobs %+v, want a group job at %v and a lone one at %v", got, ends[1], ends[3])
	}
	var group ExpireHoldGroupArgs
	if err := json.Unmarshal(got[0].args, &group); err != nil {
		t.Fatal(err)
	}
	if len(group.Holds) != 3 {
		t.Fatalf("the group job names %d holds, want 3: %+v", len(group.Holds), group.Holds)
	}

	// The first hold is being paid for: its window runs a minute longer.
	extended := second.Add(time.Minute)
	if _, err := env.Pool.Exec(ctx, `UPDATE holds SET expires_at = $2 WHERE id = $1`, batch[0].row.ID, extended); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Pool.Exec(ctx, `DELETE FROM river_job`); err != nil {
		t.Fatal(err)
	}
	svc.now = func() time.Time { return ends[1].Add(time.Millisecond) }
	if err := svc.ExpireHolds(ctx, group.Holds); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{HoldHeld, HoldExpired, HoldExpired, HoldHeld} {
		var state string
		if err := env.Pool.QueryRow(ctx, `SELECT state FROM holds WHERE id = $1`, batch[i].row.ID).Scan(&state); err != nil || state != want {
			t.Errorf("hold %d is %s (err %v), want %s", i, state, err, want)
		}
	}
	got = jobs()
	if len(got) != 1 || got[0].kind != "hold_expire" {
		t.Fatalf("jobs after the group ran: %+v, want the extended hold's own", got)
	}
	var own ExpireHoldArgs
	if err := json.Unmarshal(got[0].args, &own); err != nil || own.HoldID != batch[0].row.ID {
		t.Fatalf("the job of its own is for %+v (err %v), want hold %s", own, err, batch[0].row.ID)
	}
	if d := got[0].at.Sub(extended); d < -time.Second || d > time.Second {
		t.Errorf("the extended hold's job runs at %v, want about %v", got[0].at, extended)
	}
}
