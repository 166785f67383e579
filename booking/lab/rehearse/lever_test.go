package rehearse

import (
	"context"
	"testing"
	"time"

	"tatkal/booking"
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/testenv"
)

// TestControllerOutageOnlyOnSandboxShards: the rehearsal pulls the
// admission_paused lever on a sandbox shard only, audited as its own; a
// real shard is refused and left alone.
func TestControllerOutageOnlyOnSandboxShards(t *testing.T) {
	env := testenv.New(t)
	ctx := context.Background()
	open := -time.Minute
	if _, err := seed.Demo(ctx, env.Pool, seed.DemoOptions{OpensIn: &open}); err != nil {
		t.Fatal(err)
	}
	d := time.Now().In(booking.IST).AddDate(0, 0, 6)
	id, err := seed.Shard(ctx, env.Pool, seed.ShardSpec{Train: "12951", Date: time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, booking.IST),
		Class: "3A", Berths: 8, Mode: "queue"})
	if err != nil {
		t.Fatal(err)
	}
	count := func(q string) int {
		var n int
		if err := env.Pool.QueryRow(ctx, q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if err := setLever(ctx, env.Pool, id, true); err == nil {
		t.Fatal("paused admissions on a real shard")
	}
	if n := count(`SELECT count(*) FROM console_levers WHERE name = 'admission_paused'`); n != 0 {
		t.Fatalf("%d lever rows after a refusal", n)
	}
	if _, err := env.Pool.Exec(ctx, `UPDATE inventory_shards SET sandbox = true WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if err := setLever(ctx, env.Pool, id, true); err != nil {
		t.Fatal(err)
	}
	if err := setLever(ctx, env.Pool, id, false); err != nil {
		t.Fatal(err)
	}
	if n := count(`SELECT count(*) FROM console_levers WHERE name = 'admission_paused' AND value = 'off' AND updated_by = 'rehearsal'`); n != 1 {
		t.Fatalf("%d lever rows, want the one set off", n)
	}
	if n := count(`SELECT count(*) FROM audit_log WHERE action = 'rehearsal.fault'`); n != 2 {
		t.Fatalf("%d audited faults, want 2", n)
	}
}
