package fraud

import (
	"context"
	"fmt"
	"time"
)

// dropAllowed removes the edges between two accounts that one CLEAR
// decision cleared, while its allow-list entries last (fraud_allow): the
// office desk cleared once is not flagged again every window for the card
// it was cleared for. An edge to an account outside that decision stays.
func dropAllowed(ctx context.Context, q Querier, window time.Time, edges []Edge) ([]Edge, error) {
	if len(edges) == 0 {
		return edges, nil
	}
	users := make([]int64, 0, 2*len(edges))
	for _, e := range edges {
		users = append(users, e.A, e.B)
	}
	rows, err := q.Query(ctx, `SELECT user_id, decision_id FROM fraud_allow WHERE user_id = ANY($1) AND expires_at > $2`, users, window)
	if err != nil {
		return nil, fmt.Errorf("fraud cluster %s: allow list: %w", window, err)
	}
	allowed := map[int64][]int64{}
	for rows.Next() {
		var u, d int64
		if err := rows.Scan(&u, &d); err != nil {
			rows.Close()
			return nil, fmt.Errorf("fraud cluster %s: allow list: %w", window, err)
		}
		allowed[u] = append(allowed[u], d)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("fraud cluster %s: allow list: %w", window, err)
	}
	if len(allowed) == 0 {
		return edges, nil
	}
	kept := edges[:0:0]
	for _, e := range edges {
		same := false
		for _, d := range allowed[e.A] {
			for _, d2 := range allowed[e.B] {
				same = same || d == d2
			}
		}
		if !same {
			kept = append(kept, e)
		}
	}
	return kept, nil
}

// AllowCleared writes the allow-list entries of a CLEAR decision: each
// member of its cluster, until ttl from now. The review's CLEAR calls it
// in the decision's transaction.
func AllowCleared(ctx context.Context, q Querier, decisionID, clusterID int64, ttl time.Duration) error {
	if _, err := q.Exec(ctx, `INSERT INTO fraud_allow (decision_id, user_id, expires_at)
		SELECT $1, user_id, now() + $3::float8 * interval '1 second' FROM fraud_cluster_members WHERE cluster_id = $2
		ON CONFLICT DO NOTHING`, decisionID, clusterID, ttl.Seconds()); err != nil {
		return fmt.Errorf("fraud allow-list cluster %d: %w", clusterID, err)
	}
	return nil
}

// AllowFor is how long a CLEAR keeps its accounts' links among themselves
// from being held against them again: three months of windows, after
// which an analyst looks again.
const AllowFor = 90 * 24 * time.Hour
