package fraud

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Edge kinds: what can link two accounts, and how much each says on its
// own. No single weak kind (a shared /24, a hold in the same few
// milliseconds, the same solve time, a common passenger name) reaches
// EdgeThreshold: in a Tatkal rush thousands of honest people coincide on
// those. A shared device or instrument does not reach it alone either:
// families share both. What a ring cannot avoid is several of them at once
// across many accounts.
const (
	KindDevice        = "device"         // same device binding
	KindInstrument    = "instrument"     // same UPI address, card or bank account
	KindPassengerID   = "passenger_id"   // same passenger ID number (hashed)
	KindPassengerName = "passenger_name" // same normalised passenger name and age
	KindNet24Early    = "net24_early"    // same /24 within seconds of the opening
	KindLoginSeq      = "login_seq"      // sequential logins or the same mailbox
	KindHoldBurst     = "hold_burst"     // holds within a few ms of each other
	KindSameSolve     = "same_solve"     // identical challenge solve time
	// KindRefusedPassenger links an account whose hold the passenger limit
	// refused with the accounts holding (or also trying) that passenger:
	// a third account reaching for someone two others already booked that
	// day. A family's third sibling trying the grandmother does it too, so
	// it weighs as a shared passenger ID and families stay spared by their
	// size and their kinship, as for any link.
	KindRefusedPassenger = "refused_passenger"
)

// Config holds the clustering thresholds; DefaultConfig is calibrated on
// the Generate population (see the test).
type Config struct {
	Weights       map[string]float64
	EdgeThreshold float64       // a pair below this is not an edge
	MinMembers    int           // a cluster smaller than this is never flagged: families and offices
	MinScore      float64       // nor one whose summed edge weight is below this
	EarlyMS       int64         // "within seconds of opening"
	BurstMS       int64         // "within a few ms"
	CliqueMax     int           // a key shared by more accounts links them as a star, not all pairs
	Lookback      time.Duration // how far back earlier windows' edges are joined in
	MaxEvidence   int           // edges kept in a cluster's evidence
	// KinShare: a cluster whose passengers carry one surname at least this
	// often books for relatives, a household (a joint family on the home
	// devices and UPI address), not a ring booking for customers. 0: off.
	KinShare float64
}

// DefaultConfig returns the calibrated thresholds.
func DefaultConfig() Config {
	return Config{
		Weights: map[string]float64{
			KindDevice: 0.4, KindInstrument: 0.5, KindPassengerID: 0.6, KindPassengerName: 0.3,
			KindNet24Early: 0.2, KindLoginSeq: 0.35, KindHoldBurst: 0.15, KindSameSolve: 0.15,
			KindRefusedPassenger: 0.6,
		},
		EdgeThreshold: 0.55,
		MinMembers:    4,
		MinScore:      2.0,
		EarlyMS:       10_000,
		BurstMS:       5,
		CliqueMax:     20,
		Lookback:      30 * 24 * time.Hour,
		MaxEvidence:   200,
		KinShare:      0.6,
	}
}

// EdgeEvidence is one reason two accounts are linked.
type EdgeEvidence struct {
	Kind   string  `json:"kind"`
	Weight float64 `json:"weight"`
	Shared int     `json:"shared"` // how many keys of this kind the pair shares
	Group  int     `json:"group"`  // the largest number of accounts on one such key
}

// Edge links two accounts (A < B) in one window.
type Edge struct {
	Window   time.Time      `json:"window"`
	A        int64          `json:"a"`
	B        int64          `json:"b"`
	Weight   float64        `json:"weight"`
	Evidence []EdgeEvidence `json:"evidence"`
}

// Cluster is one connected component of strong edges, scored.
type Cluster struct {
	ID       int64
	Window   time.Time
	Members  []int64
	Score    float64
	Flagged  bool
	Evidence ClusterEvidence
}

// ClusterEvidence is what an analyst reads: why, which kinds, which edges.
type ClusterEvidence struct {
	Why   []string       `json:"why"`
	Kinds map[string]int `json:"kinds"` // edges carrying each kind
	Edges []Edge         `json:"edges"` // strongest first, at most MaxEvidence
	// EdgesTotal counts every edge, including those cut from Edges.
	EdgesTotal int `json:"edges_total"`
	// Surname is the commonest surname among the window's passengers of the
	// members, and KinShare the share of passengers who carry it.
	Surname  string  `json:"surname,omitempty"`
	KinShare float64 `json:"kin_share,omitempty"`
}

// Result summarises one clustering run.
type Result struct {
	Window   time.Time
	Signals  int
	Edges    int // this window's edges
	Clusters []Cluster
}

// Flagged counts the flagged clusters of a run.
func (r Result) Flagged() int {
	n := 0
	for _, c := range r.Clusters {
		if c.Flagged {
			n++
		}
	}
	return n
}

// Clusterer builds the account graph of a window and finds its clusters.
type Clusterer struct {
	Config Config
	// Tune, when set, gives the thresholds in force at each run: Config
	// under the operators' changes (the rule lever's fraud_ scopes), so a
	// change needs no release.
	Tune func(Config) Config
}

// edgesSQL computes a window's edges set-wise, in two steps.
//
// Anchors first: every kind keyed on a shared value as (kind, key, account)
// rows; accounts on one key become all pairs (or a star around the
// smallest account when more than CliqueMax share it, which bounds the
// work for a key everyone shares); sequential logins link neighbours in
// numeric order. Only the anchor kinds ($8) are paired this way.
//
// Then the weak kinds (a shared /24 early, the same solve time, holds
// within BurstMS: together below EdgeThreshold, see anchorKinds) are looked
// up only for the candidate pairs an anchor already links: by account on
// the grouped keys, and for bursts by the (window, user) index. In a rush
// thousands of honest accounts share a /24 or a millisecond, and pairing
// them all first was nearly all of the query's time (about 100k candidate
// pairs for 11k signals, of which 1k become edges). The edges are the same:
// a pair without an anchor kind cannot reach the threshold.
//
// Pairs are summed per kind, then per pair, and kept above the threshold.
// Keys compare bytewise (COLLATE "C"): they are identifiers, and the
// database's collation made the sorts several times slower.
const edgesSQL = `
WITH sig AS MATERIALIZED (
	SELECT hold_id, user_id, device_id, instrument_fp, ip_net24, since_open_ms, solve_ms
	FROM fraud_signals WHERE window_opens_at = $1
), keyed AS (
	SELECT 'device' AS kind, device_id COLLATE "C" AS k, user_id FROM sig WHERE device_id <> ''
	UNION SELECT 'instrument', instrument_fp COLLATE "C", user_id FROM sig WHERE instrument_fp <> ''
	UNION SELECT 'passenger_id', p.id_hash COLLATE "C", s.user_id FROM sig s JOIN fraud_signal_passengers p USING (hold_id) WHERE p.id_hash <> ''
	UNION SELECT 'passenger_name', (p.name_norm || '|' || p.age) COLLATE "C", s.user_id FROM sig s JOIN fraud_signal_passengers p USING (hold_id)
	UNION SELECT 'net24_early', ip_net24::text COLLATE "C", user_id FROM sig WHERE ip_net24 IS NOT NULL AND since_open_ms BETWEEN 0 AND $2
	UNION SELECT 'same_solve', solve_ms::text COLLATE "C", user_id FROM sig WHERE solve_ms IS NOT NULL
), grouped AS MATERIALIZED (
	-- keys held by one account link nobody
	SELECT * FROM (
		SELECT kind, k, user_id, count(*) OVER w AS n, min(user_id) OVER w AS hub
		FROM keyed WINDOW w AS (PARTITION BY kind, k)
	) g WHERE n > 1
), logins AS MATERIALIZED (
	-- the mailbox without +tags and dots; its local part split into a stem
	-- and a trailing number
	SELECT user_id, local, rtrim(local, '0123456789') AS stem, mailbox FROM (
		SELECT u.id AS user_id,
		       replace(split_part(split_part(lower(u.login), '@', 1), '+', 1), '.', '') AS local,
		       replace(split_part(lower(u.login), '+', 1), '.', '') || CASE WHEN position('@' IN u.login) > 0 THEN '@' || split_part(lower(u.login), '@', 2) ELSE '' END AS mailbox
		FROM users u WHERE u.id IN (SELECT user_id FROM sig)
	) l
), tried AS MATERIALIZED (
	-- the passengers of the window's attempts the passenger limit refused,
	-- keyed by ID number, or by name and age when the attempt gave none:
	-- names and ages coincide among strangers (passenger_name weighs
	-- little for that), so an attempt with an ID is matched by its ID only
	SELECT DISTINCT CASE WHEN t.h <> '' THEN 'i' || t.h ELSE 'n' || t.n || '|' || t.a END COLLATE "C" AS k, r.user_id
	FROM fraud_refused_attempts r CROSS JOIN LATERAL unnest(r.id_hashes, r.name_norms, r.ages) AS t(h, n, a)
	WHERE r.window_opens_at = $1 AND 'refused_passenger' = ANY($8)
), sought AS MATERIALIZED (
	-- every account on those keys: their holders (by either key), and the
	-- others that tried them
	SELECT k, user_id FROM tried
	UNION
	SELECT x.k, s.user_id FROM sig s JOIN fraud_signal_passengers p USING (hold_id)
	CROSS JOIN LATERAL (VALUES (('i' || p.id_hash) COLLATE "C"), (('n' || p.name_norm || '|' || p.age) COLLATE "C")) x(k)
	WHERE x.k IN (SELECT k FROM tried)
), seq AS (
	SELECT user_id, num, lead(user_id) OVER w AS next_user, lead(num) OVER w AS next_num
	FROM (SELECT user_id, stem, substr(local, length(stem) + 1)::numeric AS num FROM logins
	      WHERE stem <> '' AND length(local) > length(stem) AND length(local) - length(stem) <= 12) l
	WINDOW w AS (PARTITION BY stem ORDER BY num, user_id)
), anchors AS (
	SELECT a.kind, a.user_id AS ua, b.user_id AS ub, a.n
	FROM grouped a JOIN grouped b ON a.kind = b.kind AND a.k = b.k AND a.user_id < b.user_id
	WHERE a.n <= $4 AND a.kind = ANY($8)
	UNION ALL
	SELECT kind, hub, user_id, n FROM grouped WHERE n > $4 AND user_id <> hub AND kind = ANY($8)
	UNION ALL
	SELECT 'login_seq', LEAST(user_id, next_user), GREATEST(user_id, next_user), 2
	FROM seq WHERE next_user IS NOT NULL AND next_num - num <= 3
	UNION ALL
	SELECT 'login_seq', LEAST(a.user_id, b.user_id), GREATEST(a.user_id, b.user_id), 2
	FROM logins a JOIN logins b ON a.mailbox = b.mailbox AND a.user_id < b.user_id
	UNION ALL
	-- one row per passenger key an account tried and another holds or tried
	SELECT 'refused_passenger', ua, ub, 2 FROM (
		SELECT DISTINCT t.k, LEAST(t.user_id, o.user_id) AS ua, GREATEST(t.user_id, o.user_id) AS ub
		FROM tried t JOIN sought o ON o.k = t.k AND o.user_id <> t.user_id
	) r
	UNION ALL
	-- bursts as an anchor (only when a low threshold makes them one): per
	-- hold, an index range scan for the next holds within BurstMS, at most
	-- 32 of them so a dense rush stays linear
	SELECT DISTINCT 'hold_burst', LEAST(a.user_id, b.user_id), GREATEST(a.user_id, b.user_id), 2
	FROM fraud_signals a
	JOIN LATERAL (
		SELECT x.user_id FROM fraud_signals x
		WHERE x.window_opens_at = $1 AND x.held_at >= a.held_at AND x.held_at <= a.held_at + $3::float8 * interval '1 millisecond'
		ORDER BY x.held_at LIMIT 32
	) b ON b.user_id <> a.user_id
	WHERE a.window_opens_at = $1 AND 'hold_burst' = ANY($8)
), cand AS MATERIALIZED (
	SELECT DISTINCT ua, ub FROM anchors
), pairs AS (
	SELECT * FROM anchors
	UNION ALL
	-- a weak key both accounts hold: a pair when few hold it, the hub's
	-- spoke when many do (the hub is the smallest account, so only ua)
	SELECT a.kind, c.ua, c.ub, a.n
	FROM cand c JOIN grouped a ON a.user_id = c.ua
	JOIN grouped b ON b.user_id = c.ub AND b.kind = a.kind AND b.k = a.k
	WHERE a.kind <> ALL($8) AND (a.n <= $4 OR a.hub = c.ua)
	UNION ALL
	SELECT 'hold_burst', c.ua, c.ub, 2 FROM cand c
	WHERE 'hold_burst' <> ALL($8) AND EXISTS (
		SELECT 1 FROM fraud_signals a JOIN fraud_signals b ON b.window_opens_at = $1 AND b.user_id = c.ub
		WHERE a.window_opens_at = $1 AND a.user_id = c.ua
		  AND b.held_at BETWEEN a.held_at - $3::float8 * interval '1 millisecond' AND a.held_at + $3::float8 * interval '1 millisecond')
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

// weakKinds are the kinds edgesSQL can look up for candidate pairs only;
// the others are always paired in full.
var weakKinds = []string{KindNet24Early, KindSameSolve, KindHoldBurst, KindPassengerName, KindDevice, KindInstrument, KindPassengerID}

// anchorKinds returns the kinds whose pairs are candidates: all but the
// lightest weak kinds whose weights together stay below EdgeThreshold. A
// pair with none of the anchor kinds then sums below the threshold, so it
// is never an edge and need not be paired. Sequential logins are always
// anchors (they are not keyed).
func (cfg Config) anchorKinds() []string {
	weak := slices.Clone(weakKinds)
	sort.SliceStable(weak, func(i, j int) bool { return cfg.Weights[weak[i]] < cfg.Weights[weak[j]] })
	sum, skip := 0.0, map[string]bool{}
	for _, k := range weak {
		w := max(cfg.Weights[k], 0)
		if sum+w >= cfg.EdgeThreshold {
			break
		}
		sum += w
		skip[k] = true
	}
	var out []string
	for k := range cfg.Weights {
		if !skip[k] {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// Run clusters one window: it replaces the window's edges with ones
// computed from its signals, joins in earlier windows' edges that touch this
// window's accounts (the existing graph, not all history), finds connected
// components with union-find and replaces the window's still-open clusters.
// Running it again for the same window gives the same clusters.
func (c Clusterer) Run(ctx context.Context, q Querier, window time.Time) (Result, error) {
	cfg := c.Config
	if c.Tune != nil {
		cfg = c.Tune(cfg)
	}
	res := Result{Window: window}
	if err := q.QueryRow(ctx, `SELECT count(*) FROM fraud_signals WHERE window_opens_at = $1`, window).Scan(&res.Signals); err != nil {
		return res, fmt.Errorf("fraud cluster %s: count signals: %w", window, err)
	}
	if _, err := q.Exec(ctx, `DELETE FROM fraud_edges WHERE window_opens_at = $1`, window); err != nil {
		return res, fmt.Errorf("fraud cluster %s: clear edges: %w", window, err)
	}
	kinds := make([]string, 0, len(cfg.Weights))
	for k := range cfg.Weights {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	weights := make([]float64, len(kinds))
	for i, k := range kinds {
		weights[i] = cfg.Weights[k]
	}
	tag, err := q.Exec(ctx, edgesSQL, window, cfg.EarlyMS, cfg.BurstMS, cfg.CliqueMax, kinds, weights, cfg.EdgeThreshold, cfg.anchorKinds())
	if err != nil {
		return res, fmt.Errorf("fraud cluster %s: edges: %w", window, err)
	}
	res.Edges = int(tag.RowsAffected())

	edges, err := loadEdges(ctx, q, window, cfg)
	if err != nil {
		return res, err
	}
	res.Clusters = components(window, edges, cfg)
	if err := kinship(ctx, q, window, res.Clusters, cfg); err != nil {
		return res, err
	}
	if err := saveClusters(ctx, q, window, res.Clusters); err != nil {
		return res, err
	}
	return res, nil
}

// loadEdges reads this window's edges and the earlier ones (within
// Lookback) that touch an account active in this window.
func loadEdges(ctx context.Context, q Querier, window time.Time, cfg Config) ([]Edge, error) {
	rows, err := q.Query(ctx, `
		WITH active AS (SELECT DISTINCT user_id FROM fraud_signals WHERE window_opens_at = $1)
		SELECT window_opens_at, user_a, user_b, weight, evidence FROM fraud_edges WHERE window_opens_at = $1
		UNION ALL
		SELECT e.window_opens_at, e.user_a, e.user_b, e.weight, e.evidence FROM fraud_edges e
		WHERE e.window_opens_at < $1 AND e.window_opens_at >= $2 AND e.weight >= $3
		  AND (e.user_a IN (SELECT user_id FROM active) OR e.user_b IN (SELECT user_id FROM active))`,
		window, window.Add(-cfg.Lookback), cfg.EdgeThreshold)
	if err != nil {
		return nil, fmt.Errorf("fraud cluster %s: load edges: %w", window, err)
	}
	defer rows.Close()
	var out []Edge
	for rows.Next() {
		var e Edge
		var ev []byte
		if err := rows.Scan(&e.Window, &e.A, &e.B, &e.Weight, &ev); err != nil {
			return nil, fmt.Errorf("fraud cluster %s: scan edge: %w", window, err)
		}
		if err := json.Unmarshal(ev, &e.Evidence); err != nil {
			return nil, fmt.Errorf("fraud cluster %s: edge evidence: %w", window, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("fraud cluster %s: load edges: %w", window, err)
	}
	return out, nil
}

// components runs union-find over the edges and scores each component of
// two or more accounts.
func components(window time.Time, edges []Edge, cfg Config) []Cluster {
	parent := map[int64]int64{}
	var find func(int64) int64
	find = func(x int64) int64 {
		p, ok := parent[x]
		if !ok {
			parent[x] = x
			return x
		}
		if p == x {
			return x
		}
		r := find(p)
		parent[x] = r
		return r
	}
	for _, e := range edges {
		ra, rb := find(e.A), find(e.B)
		if ra != rb {
			// the smaller id as root keeps the result independent of edge order
			parent[max(ra, rb)] = min(ra, rb)
		}
	}
	byRoot := map[int64]*Cluster{}
	for x := range parent {
		r := find(x)
		cl := byRoot[r]
		if cl == nil {
			cl = &Cluster{Window: window, Evidence: ClusterEvidence{Kinds: map[string]int{}}}
			byRoot[r] = cl
		}
		cl.Members = append(cl.Members, x)
	}
	for _, e := range edges {
		cl := byRoot[find(e.A)]
		cl.Score += e.Weight
		cl.Evidence.Edges = append(cl.Evidence.Edges, e)
		for _, ev := range e.Evidence {
			cl.Evidence.Kinds[ev.Kind]++
		}
	}
	out := make([]Cluster, 0, len(byRoot))
	for _, cl := range byRoot {
		slices.Sort(cl.Members)
		cl.Evidence.EdgesTotal = len(cl.Evidence.Edges)
		sort.Slice(cl.Evidence.Edges, func(i, j int) bool {
			a, b := cl.Evidence.Edges[i], cl.Evidence.Edges[j]
			if a.Weight != b.Weight {
				return a.Weight > b.Weight
			}
			if a.A != b.A {
				return a.A < b.A
			}
			return a.B < b.B
		})
		if len(cl.Evidence.Edges) > cfg.MaxEvidence {
			cl.Evidence.Edges = cl.Evidence.Edges[:cfg.MaxEvidence]
		}
		cl.Flagged = len(cl.Members) >= cfg.MinMembers && cl.Score >= cfg.MinScore
		cl.Evidence.Why = why(cl, cfg)
		out = append(out, *cl)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Score != out[j].Score {
			return out[i].Score > out[j].Score
		}
		return out[i].Members[0] < out[j].Members[0]
	})
	return out
}

// kinship reads the surnames of the passengers the flagged clusters'
// members booked in the window and unflags a cluster whose passengers
// mostly share one: relatives, as a joint family books them. A ring books
// for customers, strangers to each other.
func kinship(ctx context.Context, q Querier, window time.Time, clusters []Cluster, cfg Config) error {
	if cfg.KinShare <= 0 {
		return nil
	}
	var users []int64
	for _, cl := range clusters {
		if cl.Flagged {
			users = append(users, cl.Members...)
		}
	}
	if len(users) == 0 {
		return nil
	}
	// The passengers they tried to book and were refused count too: a
	// relative refused the grandmother tried a relative.
	rows, err := q.Query(ctx, `
		SELECT s.user_id, split_part(p.name_norm, ' ', -1) FROM fraud_signals s JOIN fraud_signal_passengers p USING (hold_id)
		WHERE s.window_opens_at = $1 AND s.user_id = ANY($2) AND p.name_norm <> ''
		UNION ALL
		SELECT r.user_id, split_part(n, ' ', -1) FROM fraud_refused_attempts r CROSS JOIN LATERAL unnest(r.name_norms) AS n
		WHERE r.window_opens_at = $1 AND r.user_id = ANY($2) AND n <> ''`, window, users)
	if err != nil {
		return fmt.Errorf("fraud cluster %s: surnames: %w", window, err)
	}
	surnames := map[int64][]string{}
	for rows.Next() {
		var u int64
		var sn string
		if err := rows.Scan(&u, &sn); err != nil {
			rows.Close()
			return fmt.Errorf("fraud cluster %s: surnames: %w", window, err)
		}
		surnames[u] = append(surnames[u], sn)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("fraud cluster %s: surnames: %w", window, err)
	}
	for i := range clusters {
		cl := &clusters[i]
		if !cl.Flagged {
			continue
		}
		count, total := map[string]int{}, 0
		for _, m := range cl.Members {
			for _, sn := range surnames[m] {
				count[sn]++
				total++
			}
		}
		if total == 0 {
			continue
		}
		for sn, n := range count {
			if n > count[cl.Evidence.Surname] || (n == count[cl.Evidence.Surname] && sn < cl.Evidence.Surname) {
				cl.Evidence.Surname = sn
			}
		}
		cl.Evidence.KinShare = float64(count[cl.Evidence.Surname]) / float64(total)
		if cl.Evidence.KinShare >= cfg.KinShare {
			cl.Flagged = false
			cl.Evidence.Why = why(cl, cfg)
		}
	}
	return nil
}

// memberKey spells sorted members as PostgreSQL prints a bigint[].
func memberKey(members []int64) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(m, 10))
	}
	b.WriteByte('}')
	return b.String()
}

// why says in words why a cluster was or was not flagged.
func why(cl *Cluster, cfg Config) []string {
	var out []string
	kinds := make([]string, 0, len(cl.Evidence.Kinds))
	for k := range cl.Evidence.Kinds {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool {
		if cl.Evidence.Kinds[kinds[i]] != cl.Evidence.Kinds[kinds[j]] {
			return cl.Evidence.Kinds[kinds[i]] > cl.Evidence.Kinds[kinds[j]]
		}
		return kinds[i] < kinds[j]
	})
	for _, k := range kinds {
		out = append(out, fmt.Sprintf("%d of %d links: %s", cl.Evidence.Kinds[k], cl.Evidence.EdgesTotal, k))
	}
	switch {
	case cl.Flagged:
		out = append(out, fmt.Sprintf("flagged: %d accounts, score %.2f (at least %d accounts and %.2f)", len(cl.Members), cl.Score, cfg.MinMembers, cfg.MinScore))
	case cfg.KinShare > 0 && cl.Evidence.KinShare >= cfg.KinShare && len(cl.Members) >= cfg.MinMembers && cl.Score >= cfg.MinScore:
		out = append(out, fmt.Sprintf("not flagged: %.0f%% of the passengers are named %s (at least %.0f%%): a household booking for relatives",
			100*cl.Evidence.KinShare, cl.Evidence.Surname, 100*cfg.KinShare))
	case len(cl.Members) < cfg.MinMembers:
		out = append(out, fmt.Sprintf("not flagged: %d accounts, the size of a family or office", len(cl.Members)))
	default:
		out = append(out, fmt.Sprintf("not flagged: score %.2f below %.2f", cl.Score, cfg.MinScore))
	}
	return out
}

// saveClusters replaces the window's open, unclaimed clusters with the new
// ones. Clusters an analyst has decided or holds a claim on stay as they
// were, and a new cluster with exactly their members is not added again.
func saveClusters(ctx context.Context, q Querier, window time.Time, clusters []Cluster) error {
	const replaceable = `c.window_opens_at = $1 AND c.status = 'OPEN' AND (c.claimed_until IS NULL OR c.claimed_until < now())
		AND NOT EXISTS (SELECT 1 FROM fraud_decisions d WHERE d.cluster_id = c.id)`
	if _, err := q.Exec(ctx, `DELETE FROM fraud_cluster_members m USING fraud_clusters c
		WHERE m.cluster_id = c.id AND `+replaceable, window); err != nil {
		return fmt.Errorf("fraud cluster %s: clear members: %w", window, err)
	}
	if _, err := q.Exec(ctx, `DELETE FROM fraud_clusters c WHERE `+replaceable, window); err != nil {
		return fmt.Errorf("fraud cluster %s: clear clusters: %w", window, err)
	}
	rows, err := q.Query(ctx, `SELECT array_agg(m.user_id ORDER BY m.user_id)::text FROM fraud_clusters c
		JOIN fraud_cluster_members m ON m.cluster_id = c.id WHERE c.window_opens_at = $1 GROUP BY c.id`, window)
	if err != nil {
		return fmt.Errorf("fraud cluster %s: kept clusters: %w", window, err)
	}
	kept, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("fraud cluster %s: kept clusters: %w", window, err)
	}
	keptSet := make(map[string]bool, len(kept))
	for _, k := range kept {
		keptSet[k] = true
	}
	// New clusters in three statements, not two per cluster: their ids
	// first, then the rows and the members set-wise.
	var todo []int
	for i := range clusters {
		if !keptSet[memberKey(clusters[i].Members)] {
			todo = append(todo, i)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	rows, err = q.Query(ctx, `SELECT nextval(pg_get_serial_sequence('fraud_clusters', 'id')) FROM generate_series(1, $1)`, len(todo))
	if err != nil {
		return fmt.Errorf("fraud cluster %s: cluster ids: %w", window, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return fmt.Errorf("fraud cluster %s: cluster ids: %w", window, err)
	}
	scores := make([]float64, len(todo))
	flagged := make([]bool, len(todo))
	sizes := make([]int, len(todo))
	evidence := make([]string, len(todo))
	var memberCluster, memberUser []int64
	for j, i := range todo {
		cl := &clusters[i]
		cl.ID = ids[j]
		ev, err := json.Marshal(cl.Evidence)
		if err != nil {
			return fmt.Errorf("fraud cluster %s: evidence: %w", window, err)
		}
		scores[j], flagged[j], sizes[j], evidence[j] = cl.Score, cl.Flagged, len(cl.Members), string(ev)
		for _, m := range cl.Members {
			memberCluster = append(memberCluster, cl.ID)
			memberUser = append(memberUser, m)
		}
	}
	if _, err := q.Exec(ctx, `
		INSERT INTO fraud_clusters (id, window_opens_at, score, flagged, members, evidence)
		SELECT id, $1, score, flagged, members, evidence::jsonb
		FROM unnest($2::bigint[], $3::float8[], $4::bool[], $5::int[], $6::text[]) AS t(id, score, flagged, members, evidence)`,
		window, ids, scores, flagged, sizes, evidence); err != nil {
		return fmt.Errorf("fraud cluster %s: insert clusters: %w", window, err)
	}
	if _, err := q.Exec(ctx, `INSERT INTO fraud_cluster_members (cluster_id, user_id) SELECT * FROM unnest($1::bigint[], $2::bigint[])`,
		memberCluster, memberUser); err != nil {
		return fmt.Errorf("fraud cluster %s: insert members: %w", window, err)
	}
	return nil
}
