package fraud

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// NearMiss is a member of an open cluster that scored below the flag but
// within reach of it (Config.NearMiss × MemberScore): what an analyst
// browses for the rings that were careful, small or split.
type NearMiss struct {
	ClusterID int64     `json:"cluster_id"`
	Window    time.Time `json:"window"`
	UserID    int64     `json:"user_id"`
	Score     float64   `json:"score"`
	Members   int       `json:"members"`
	Why       string    `json:"why"`
}

// NearMisses lists the near misses of the open clusters, highest score
// first, at most limit (1-500).
func NearMisses(ctx context.Context, q Querier, cfg Config, limit int) ([]NearMiss, error) {
	limit = min(max(limit, 1), 500)
	rows, err := q.Query(ctx, `
		SELECT c.id, c.window_opens_at, m.user_id, m.score, c.members, m.why
		FROM fraud_cluster_members m JOIN fraud_clusters c ON c.id = m.cluster_id
		WHERE NOT m.flagged AND c.status = 'OPEN' AND m.score >= $1 AND m.score < $2
		ORDER BY m.score DESC, c.id, m.user_id LIMIT $3`, cfg.NearMiss*cfg.MemberScore, cfg.MemberScore, limit)
	if err != nil {
		return nil, fmt.Errorf("fraud near misses: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (NearMiss, error) {
		var n NearMiss
		var score float32
		err := r.Scan(&n.ClusterID, &n.Window, &n.UserID, &score, &n.Members, &n.Why)
		n.Score = float64(score)
		return n, err
	})
	if err != nil {
		return nil, fmt.Errorf("fraud near misses: %w", err)
	}
	return out, nil
}
