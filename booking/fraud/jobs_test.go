package fraud

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"tatkal/booking/lab/testenv"
)

// TestScheduleRunsClosedWindows: the periodic scheduler enqueues a run for
// a closed window with signals, not for one still open; the run's clusters
// and its fraud_runs row land in the database; a window already run is not
// due again until a new signal arrives.
func TestScheduleRunsClosedWindows(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	closed := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
	open := time.Now().Add(-5 * time.Minute).Truncate(time.Second) // before its first early pass
	g, err := Generate(ctx, b.env.Pool, b.rec, Population{Rings: 2, RingSize: 5, Families: 5, Honest: 40, Seed: 11, OpensAt: closed})
	if err != nil {
		t.Fatal(err)
	}
	g2, err := Generate(ctx, b.env.Pool, b.rec, Population{Rings: 1, RingSize: 5, Seed: 12, OpensAt: open})
	if err != nil {
		t.Fatal(err)
	}
	svc := &Service{Pool: b.env.Pool, Clusterer: Clusterer{Config: DefaultConfig()}}
	workers := river.NewWorkers()
	river.AddWorker(workers, &ClusterWorker{Svc: svc})
	river.AddWorker(workers, &ScheduleWorker{Svc: svc})
	client, err := river.NewClient(riverpgxv5.New(b.env.Pool), &river.Config{
		Workers: workers, Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 2}},
		FetchCooldown: 20 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond, TestOnly: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Stop(context.Background()) }) //nolint:errcheck
	if _, err := client.Insert(ctx, ScheduleArgs{}, nil); err != nil {
		t.Fatal(err)
	}
	var flagged int
	testenv.Eventually(t, 30*time.Second, "the closed window's run", func() error {
		err := b.env.Pool.QueryRow(ctx, `SELECT flagged FROM fraud_runs WHERE window_opens_at = $1`, g.OpensAt).Scan(&flagged)
		if err != nil && err != pgx.ErrNoRows {
			t.Fatalf("run of the closed window: %v", err)
		}
		return err
	})
	if flagged != 2 {
		t.Errorf("closed window: %d clusters flagged, want the 2 rings", flagged)
	}
	var openRuns int
	if err := b.env.Pool.QueryRow(ctx, `SELECT count(*) FROM fraud_runs WHERE window_opens_at = $1`, g2.OpensAt).Scan(&openRuns); err != nil || openRuns != 0 {
		t.Errorf("window still open was run (%d, %v)", openRuns, err)
	}
	due, err := svc.DueWindows(ctx, time.Now(), 10)
	if err != nil || len(due) != 0 {
		t.Errorf("due after the run = %v (%v), want none", due, err)
	}
	// A late signal (a confirmation recorded after the run) makes it due again.
	for id := range g.Ring {
		var hold [16]byte
		if err := b.env.Pool.QueryRow(ctx, `SELECT hold_id FROM fraud_signals WHERE user_id = $1`, id).Scan(&hold); err != nil {
			t.Fatal(err)
		}
		if _, err := b.env.Pool.Exec(ctx, `UPDATE fraud_signals SET recorded_at = now() + interval '1 second' WHERE hold_id = $1`, hold); err != nil {
			t.Fatal(err)
		}
		break
	}
	due, err = svc.DueWindows(ctx, time.Now(), 10)
	if err != nil || len(due) != 1 || !due[0].Equal(g.OpensAt) {
		t.Errorf("due after a late signal = %v (%v), want [%v]", due, err, g.OpensAt)
	}
}

// TestOpenWindowIsClusteredMinutesAfterItOpens: a window whose shards are
// still open is due 10 minutes after its opening and again after 30 (the
// default early passes), not before, not twice for one pass, and never
// while open when the passes are turned off.
func TestOpenWindowIsClusteredMinutesAfterItOpens(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	opens := time.Now().Add(-11 * time.Minute).Truncate(time.Second)
	if _, err := Generate(ctx, b.env.Pool, b.rec, Population{Rings: 1, RingSize: 5, Honest: 10, Seed: 21, OpensAt: opens}); err != nil {
		t.Fatal(err)
	}
	var open bool
	if err := b.env.Pool.QueryRow(ctx, `SELECT bool_and(window_closes_at > now()) FROM inventory_shards WHERE window_opens_at = $1`, opens).Scan(&open); err != nil || !open {
		t.Fatalf("the window's shards should still be open: %v %v", open, err)
	}
	svc := &Service{Pool: b.env.Pool, Clusterer: Clusterer{Config: DefaultConfig()}}
	due := func(s *Service, now time.Time) []time.Time {
		t.Helper()
		d, err := s.DueWindows(ctx, now, 10)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := due(svc, opens.Add(5*time.Minute)); len(d) != 0 {
		t.Errorf("due 5 minutes after the opening: %v, want none yet", d)
	}
	if d := due(svc, time.Now()); len(d) != 1 || !d[0].Equal(opens) {
		t.Fatalf("due 11 minutes after the opening: %v, want [%v]", d, opens)
	}
	off := &Service{Pool: b.env.Pool, Clusterer: svc.Clusterer, EarlyPasses: []time.Duration{}}
	if d := due(off, time.Now()); len(d) != 0 {
		t.Errorf("with no early passes an open window is due: %v", d)
	}
	res, err := svc.ClusterWindow(ctx, opens)
	if err != nil {
		t.Fatal(err)
	}
	if res.Flagged() != 1 {
		t.Errorf("the 10-minute pass flagged %d clusters, want the ring", res.Flagged())
	}
	if d := due(svc, time.Now()); len(d) != 0 {
		t.Errorf("due again for the pass it just ran: %v", d)
	}
	if d := due(svc, opens.Add(31*time.Minute)); len(d) != 0 {
		t.Errorf("due at the 30-minute pass with no signal since the last run: %v, want none", d)
	}
	// A signal after the run (a late payment): due at the next pass, not before.
	if _, err := b.env.Pool.Exec(ctx, `UPDATE fraud_signals SET recorded_at = now() + interval '1 second'
		WHERE hold_id = (SELECT hold_id FROM fraud_signals WHERE window_opens_at = $1 LIMIT 1)`, opens); err != nil {
		t.Fatal(err)
	}
	if d := due(svc, opens.Add(20*time.Minute)); len(d) != 0 {
		t.Errorf("due 20 minutes after the opening, its 10-minute pass run: %v, want none", d)
	}
	if d := due(svc, opens.Add(31*time.Minute)); len(d) != 1 || !d[0].Equal(opens) {
		t.Errorf("due at the 30-minute pass after a new signal: %v, want [%v]", d, opens)
	}
}
