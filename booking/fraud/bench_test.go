package fraud

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
)

// BenchmarkRecord measures one batch of 200 signals (3 passengers each), the
// size a group commit or a follow-up job would hand over.
func BenchmarkRecord(b *testing.B) {
	ctx := context.Background()
	env := setup(b)
	g, err := Generate(ctx, env.env.Pool, env.rec, Population{Honest: 200, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	sigs := make([]Signal, len(g.Honest))
	for i, id := range g.Honest {
		sigs[i] = Signal{ShardID: g.ShardID, UserID: id, DeviceID: fmt.Sprintf("dev%d", i), IP: netipFrom(i % 250), SolveMS: 1000 + i,
			HeldAt: g.OpensAt.Add(time.Duration(i) * time.Millisecond), Instrument: fmt.Sprintf("u%d@upi", i),
			Passengers: []Passenger{{Name: "A B", Age: 30, IDType: "PAN", IDRef: "X1"}, {Name: "C D", Age: 31}, {Name: "E F", Age: 9}}}
	}
	b.ResetTimer()
	for b.Loop() {
		for i := range sigs {
			sigs[i].HoldID = uuid.New()
		}
		if err := env.rec.Record(ctx, env.env.Pool, sigs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*len(sigs)), "µs/signal")
}

// BenchmarkClusterWindow measures one window's run over a large population
// (20 rings of 10, 500 families, 10,000 honest: about 11,400 signals), with
// its parts and a ceiling beside it, on one population in one process:
//
//   - window: Service.ClusterWindow, all of it (edges, union-find, clusters saved)
//   - edges: the edge query alone (edgesSQL, weak kinds only for anchored pairs)
//   - edges-allpairs: the first edge query, which paired every kind in full
//   - ceiling: reading the window's signals and passengers and grouping them by
//     key, nothing paired: what any clustering of these signals must at least do
//
// go test -run '^$' -bench ClusterWindow -benchtime 5x ./booking/fraud/
func BenchmarkClusterWindow(b *testing.B) {
	ctx := context.Background()
	env := setup(b)
	g, err := Generate(ctx, env.env.Pool, env.rec, Population{Rings: 20, RingSize: 10, Families: 500, Honest: 10000, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	cfg := DefaultConfig()
	kinds := slices.Sorted(maps.Keys(cfg.Weights))
	weights := make([]float64, len(kinds))
	for i, k := range kinds {
		weights[i] = cfg.Weights[k]
	}
	// inTx runs one statement as the run does (work_mem raised, the
	// window's edges cleared first), rolled back, and returns its rows.
	inTx := func(b *testing.B, sql string, args ...any) int64 {
		tx, err := env.env.Pool.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if _, err := tx.Exec(ctx, `SET LOCAL work_mem = '64MB'`); err != nil {
			b.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM fraud_edges WHERE window_opens_at = $1`, g.OpensAt); err != nil {
			b.Fatal(err)
		}
		tag, err := tx.Exec(ctx, sql, args...)
		if err != nil {
			b.Fatal(err)
		}
		return tag.RowsAffected()
	}
	b.Run("window", func(b *testing.B) {
		svc := &Service{Pool: env.env.Pool, Clusterer: Clusterer{Config: cfg}}
		var res Result
		for b.Loop() {
			if res, err = svc.ClusterWindow(ctx, g.OpensAt); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(res.Signals), "signals")
		b.ReportMetric(float64(res.Edges), "edges")
		b.ReportMetric(float64(res.Flagged()), "flagged")
	})
	b.Run("edges", func(b *testing.B) {
		var n int64
		for b.Loop() {
			n = inTx(b, edgesSQL, g.OpensAt, cfg.EarlyMS, cfg.BurstMS, cfg.CliqueMax, kinds, weights, cfg.EdgeThreshold, cfg.anchorKinds())
		}
		b.ReportMetric(float64(n), "edges")
	})
	b.Run("edges-allpairs", func(b *testing.B) {
		var n int64
		for b.Loop() {
			n = inTx(b, edgesSQLAllPairs, g.OpensAt, cfg.EarlyMS, cfg.BurstMS, cfg.CliqueMax, kinds, weights, cfg.EdgeThreshold)
		}
		b.ReportMetric(float64(n), "edges")
	})
	b.Run("ceiling", func(b *testing.B) {
		var n int64
		for b.Loop() {
			n = inTx(b, clusterCeilingSQL, g.OpensAt, cfg.EarlyMS)
		}
		b.ReportMetric(float64(n), "keys")
	})
}

// clusterCeilingSQL reads a window's signals and passengers as (kind, key,
// account) rows and counts the accounts per key: no pairs, no weights.
const clusterCeilingSQL = `
CREATE TEMP TABLE ceiling_keys ON COMMIT DROP AS
WITH sig AS MATERIALIZED (
	SELECT hold_id, user_id, device_id, instrument_fp, ip_net24, since_open_ms, solve_ms
	FROM fraud_signals WHERE window_opens_at = $1
), keyed AS (
	SELECT 'device' AS kind, device_id COLLATE "C" AS k, user_id FROM sig WHERE device_id <> ''
	UNION ALL SELECT 'instrument', instrument_fp COLLATE "C", user_id FROM sig WHERE instrument_fp <> ''
	UNION ALL SELECT 'passenger_id', p.id_hash COLLATE "C", s.user_id FROM sig s JOIN fraud_signal_passengers p USING (hold_id) WHERE p.id_hash <> ''
	UNION ALL SELECT 'passenger_name', (p.name_norm || '|' || p.age) COLLATE "C", s.user_id FROM sig s JOIN fraud_signal_passengers p USING (hold_id)
	UNION ALL SELECT 'net24_early', ip_net24::text COLLATE "C", user_id FROM sig WHERE ip_net24 IS NOT NULL AND since_open_ms BETWEEN 0 AND $2
	UNION ALL SELECT 'same_solve', solve_ms::text COLLATE "C", user_id FROM sig WHERE solve_ms IS NOT NULL
)
SELECT kind, k, count(DISTINCT user_id) AS n FROM keyed GROUP BY kind, k`

// edgesSQLAllPairs is the first edge query (before 2 Dec 2026), kept for the
// benchmark: every kind paired in full, weak ones included, then summed.
const edgesSQLAllPairs = `
WITH sig AS (
	SELECT * FROM fraud_signals WHERE window_opens_at = $1
), keyed AS (
	SELECT 'device' AS kind, device_id AS k, user_id FROM sig WHERE device_id <> ''
	UNION SELECT 'instrument', instrument_fp, user_id FROM sig WHERE instrument_fp <> ''
	UNION SELECT 'passenger_id', p.id_hash, s.user_id FROM sig s JOIN fraud_signal_passengers p USING (hold_id) WHERE p.id_hash <> ''
	UNION SELECT 'passenger_name', p.name_norm || '|' || p.age, s.user_id FROM sig s JOIN fraud_signal_passengers p USING (hold_id)
	UNION SELECT 'net24_early', ip_net24::text, user_id FROM sig WHERE ip_net24 IS NOT NULL AND since_open_ms BETWEEN 0 AND $2
	UNION SELECT 'same_solve', solve_ms::text, user_id FROM sig WHERE solve_ms IS NOT NULL
), grouped AS (
	SELECT kind, k, user_id,
	       count(*) OVER (PARTITION BY kind, k) AS n,
	       min(user_id) OVER (PARTITION BY kind, k) AS hub
	FROM keyed
), logins AS (
	-- the mailbox without +tags and dots, split into a stem and a trailing number
	SELECT DISTINCT u.id AS user_id,
	       (regexp_match(replace(split_part(split_part(lower(u.login), '@', 1), '+', 1), '.', ''), '^(.*?)([0-9]+)$')) AS m,
	       replace(split_part(lower(u.login), '+', 1), '.', '') || CASE WHEN position('@' IN u.login) > 0 THEN '@' || split_part(lower(u.login), '@', 2) ELSE '' END AS mailbox
	FROM users u WHERE u.id IN (SELECT user_id FROM sig)
), seq AS (
	SELECT user_id, m[1] AS stem, m[2]::numeric AS num,
	       lead(user_id) OVER w AS next_user, lead(m[2]::numeric) OVER w AS next_num
	FROM logins WHERE m IS NOT NULL AND m[1] <> '' AND length(m[2]) <= 12
	WINDOW w AS (PARTITION BY m[1] ORDER BY m[2]::numeric, user_id)
), bursts AS (
	-- per hold, an index range scan for the next holds within BurstMS
	-- (LATERAL makes the planner use the held_at index), at most 32 of them
	-- so a dense rush stays linear
	SELECT DISTINCT LEAST(a.user_id, b.user_id) AS ua, GREATEST(a.user_id, b.user_id) AS ub
	FROM fraud_signals a
	JOIN LATERAL (
		SELECT x.user_id FROM fraud_signals x
		WHERE x.window_opens_at = $1 AND x.held_at >= a.held_at AND x.held_at <= a.held_at + $3::float8 * interval '1 millisecond'
		ORDER BY x.held_at LIMIT 32
	) b ON b.user_id <> a.user_id
	WHERE a.window_opens_at = $1
), pairs AS (
	SELECT a.kind, a.user_id AS ua, b.user_id AS ub, a.n
	FROM grouped a JOIN grouped b ON a.kind = b.kind AND a.k = b.k AND a.user_id < b.user_id
	WHERE a.n <= $4
	UNION ALL
	SELECT kind, hub, user_id, n FROM grouped WHERE n > $4 AND user_id <> hub
	UNION ALL
	SELECT 'login_seq', LEAST(user_id, next_user), GREATEST(user_id, next_user), 2
	FROM seq WHERE next_user IS NOT NULL AND next_num - num <= 3
	UNION ALL
	SELECT 'login_seq', LEAST(a.user_id, b.user_id), GREATEST(a.user_id, b.user_id), 2
	FROM logins a JOIN logins b ON a.mailbox = b.mailbox AND a.user_id < b.user_id
	UNION ALL
	SELECT 'hold_burst', ua, ub, 2 FROM bursts
), per_kind AS (
	SELECT p.kind, p.ua, p.ub, count(*)::int AS shared, max(p.n)::int AS grp, w.weight
	FROM pairs p JOIN unnest($5::text[], $6::float8[]) AS w(kind, weight) ON w.kind = p.kind
	GROUP BY p.kind, p.ua, p.ub, w.weight
), edges AS (
	SELECT ua, ub, sum(weight) AS weight,
	       jsonb_agg(jsonb_build_object('kind', kind, 'weight', weight, 'shared', shared, 'group', grp) ORDER BY weight DESC, kind) AS evidence
	FROM per_kind GROUP BY ua, ub HAVING sum(weight) >= $7
)
INSERT INTO fraud_edges (window_opens_at, user_a, user_b, weight, evidence)
SELECT $1, ua, ub, weight, evidence FROM edges
`
