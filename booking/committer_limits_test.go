package booking

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"tatkal/booking/db"
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/testenv"
)

// Two accounts of one verified phone in one group commit: the INSERT's own
// count cannot see the batch's other row, so the batch counts its rows
// itself; the person's cap (2) lets the first through and answers the
// second with the day's cap, which a batch of one each would have done.
func TestPersonCapCountsTheBatchItself(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rules := DefaultRules()
	rules.PersonDailyCap, rules.DailyCap = 2, 4
	env, svc, shardID := committerFixture(t, rules, 8)
	epoch, err := svc.Rebuild(ctx, shardID)
	if err != nil {
		t.Fatal(err)
	}
	users, err := seed.Users(ctx, env.Pool, seed.UsersSpec{Count: 4, Prefix: "pcb", PasswordHash: "x"})
	if err != nil {
		t.Fatal(err)
	}
	// users[:3] are one person; users[3] another, beside them in the batch.
	if _, err := env.Pool.Exec(ctx, `UPDATE users SET phone_hash = CASE WHEN id = $2 THEN 'person-b' ELSE 'person-a' END,
		id_verification_status = 'VERIFIED' WHERE id = ANY($1)`, users, users[3]); err != nil {
		t.Fatal(err)
	}
	row := func(user int64, berth int) *pendingHold {
		return pendingSeat(shardID, epoch, user, berth, time.Now().Add(time.Minute))
	}
	if r := svc.committer.write(ctx, []*pendingHold{row(users[0], 0)}); r[0].err != nil || r[0].verdict != committed {
		t.Fatalf("the person's first hold: verdict %v err %v", r[0].verdict, r[0].err)
	}
	r := svc.committer.write(ctx, []*pendingHold{row(users[1], 1), row(users[3], 2), row(users[2], 3)})
	want := []commitVerdict{committed, committed, rejectedDailyCap}
	for i := range r {
		if r[i].err != nil || r[i].verdict != want[i] {
			t.Errorf("row %d of the batch: verdict %v err %v, want %v", i, r[i].verdict, r[i].err, want[i])
		}
	}
	var n int
	if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM holds WHERE user_id = ANY($1) AND state = 'HELD'`, users[:3]).Scan(&n); err != nil || n != 2 {
		t.Errorf("the person holds %d (err %v), want 2", n, err)
	}
}

// pendingSeat is a one-passenger seat hold of user on berth, taken today
// under epoch, for writing to the committer directly.
func pendingSeat(shardID, epoch, user int64, berth int, expires time.Time) *pendingHold {
	return &pendingHold{row: holdRow{ID: uuid.New(), ShardID: shardID, UserID: user, IdemKey: uuid.NewString(), Kind: KindSeat,
		From: 0, To: 7, Berths: []int{berth}, Passengers: []Passenger{{Name: "Traveller", Age: 30 + berth, Gender: "M", IDType: "PAN", IDRef: "ABCDE1234F"}},
		Fare: Fare{TotalPaise: 100}, Epoch: epoch, OpeningDay: time.Now().UTC().Truncate(24 * time.Hour), ExpiresAt: expires}}
}

// committerFixture is a service (its committer written to directly) on a
// fresh database with the demo trains and one open shard of berths.
func committerFixture(t *testing.T, rules Rules, berths int) (*testenv.Env, *Service, int64) {
	t.Helper()
	ctx := context.Background()
	env := testenv.New(t)
	client, err := river.NewClient(riverpgxv5.New(env.Pool), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	svc := NewService(ServiceConfig{Pool: env.Pool, Store: env.Store, Jobs: client, Rules: rules, Log: slog.Default()})
	open := -time.Minute
	if _, err := seed.Demo(ctx, env.Pool, seed.DemoOptions{OpensIn: &open}); err != nil {
		t.Fatal(err)
	}
	shardID, err := seed.Shard(ctx, env.Pool, seed.ShardSpec{Train: "12951", Date: time.Now().AddDate(0, 0, 3), Class: "3A", Berths: berths,
		OpensAt: time.Now().Add(-time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	return env, svc, shardID
}

// The batch's INSERT runs its per-row checks once per row, whatever the
// number of open shards: joined to inventory_shards, the planner had taken
// the open shards as its outer loop and unnested the batch, with its
// daily-cap count, once per open shard. Its generic plan (the committer's
// transactions use generic plans) is read with EXPLAIN ANALYZE: no function
// scan (the batch's unnest) may loop.
func TestHoldsInsertUnnestsTheBatchOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env, svc, shardID := committerFixture(t, DefaultRules(), 8)
	epoch, err := svc.Rebuild(ctx, shardID)
	if err != nil {
		t.Fatal(err)
	}
	var open int
	if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM inventory_shards WHERE chart_state = 'OPEN'`).Scan(&open); err != nil || open < 2 {
		t.Fatalf("%d open shards (%v): the fixture needs several", open, err)
	}
	users, err := seed.Users(ctx, env.Pool, seed.UsersSpec{Count: 6, Prefix: "plan", PasswordHash: "x"})
	if err != nil {
		t.Fatal(err)
	}
	// EXECUTE takes no parameters of the statement around it: the batch
	// goes as array literals.
	n := len(users)
	ids := make([]uuid.UUID, n)
	arr := func(typ string, f func(i int) string) string {
		xs := make([]string, n)
		for i := range n {
			xs[i] = f(i)
		}
		return "'{" + strings.Join(xs, ",") + "}'::" + typ
	}
	each := func(v string) func(int) string { return func(int) string { return v } }
	day, expires := time.Now().UTC().Format(time.DateOnly), time.Now().Add(time.Minute).UTC().Format(time.RFC3339Nano)
	for i := range ids {
		ids[i] = uuid.New()
	}
	args := []string{
		arr("uuid[]", func(i int) string { return ids[i].String() }), arr("bigint[]", each(fmt.Sprint(shardID))),
		arr("bigint[]", func(i int) string { return fmt.Sprint(users[i]) }), arr("text[]", func(i int) string { return "k" + fmt.Sprint(i) }),
		arr("text[]", each(KindSeat)), arr("int[]", each("1")), arr("int[]", each("2")), arr("int[]", each("1")), arr("text[]", each(`"{1}"`)),
		arr("int[]", each("NULL")), arr("text[]", each(`"[]"`)), arr("bigint[]", each("100")), arr("text[]", each(`"{}"`)),
		arr("bigint[]", each(fmt.Sprint(epoch))), arr("date[]", each(day)), arr("timestamptz[]", each(`"`+expires+`"`)), arr("text[]", each("NULL")),
		"2", arr("text[]", each("h")), arr("bool[]", each("t")), "12", "24", "4",
	}
	tx, err := env.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // nothing is kept
	if _, err := tx.Exec(ctx, db.GenericPlans); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "PREPARE holds_insert AS "+insertHoldsSQL); err != nil {
		t.Fatal(err)
	}
	var plan []map[string]any
	if err := tx.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE holds_insert(`+strings.Join(args, ", ")+`)`).Scan(&plan); err != nil {
		t.Fatal(err)
	}
	var walk func(node map[string]any)
	scans := 0
	walk = func(node map[string]any) {
		if node["Node Type"] == "Function Scan" {
			scans++
			if loops, _ := node["Actual Loops"].(float64); loops != 1 {
				t.Errorf("the batch's unnest ran %v times (%d open shards), want once", loops, open)
			}
		}
		if kids, ok := node["Plans"].([]any); ok {
			for _, k := range kids {
				walk(k.(map[string]any))
			}
		}
	}
	walk(plan[0]["Plan"].(map[string]any))
	if scans == 0 {
		t.Errorf("no unnest in the plan: %v", plan)
	}
	var inserted int
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM holds WHERE id = ANY($1)`, ids).Scan(&inserted); err != nil || inserted != n {
		t.Errorf("the INSERT took %d of %d rows (%v)", inserted, n, err)
	}
}
