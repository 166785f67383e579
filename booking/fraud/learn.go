package fraud

import (
	"context"
	"fmt"
	"math"
)

// Labels feed back into the weights, simply enough to explain: for each
// link kind, the share of the decided clusters carrying it that analysts
// confirmed (any outcome but CLEAR), smoothed (one confirmed and one
// cleared added), over the neutral 0.5, scales the kind's weight, between
// LearnFloor and LearnCap, once LearnMin clusters with the kind are decided.
// A kind that keeps linking desks and households the analysts clear loses
// weight; one that keeps finding rings gains some.
const (
	LearnMin   = 5
	LearnFloor = 0.5
	LearnCap   = 1.5
)

// KindLabel is what the decisions say of one link kind.
type KindLabel struct {
	Decided, Confirmed int
	Factor             float64 // what its weight is multiplied by
}

// learn scales cfg's weights by the labelled decisions (see LearnMin).
func learn(ctx context.Context, q Querier, cfg Config) (Config, map[string]KindLabel, error) {
	rows, err := q.Query(ctx, `
		SELECT k.kind, count(*), count(*) FILTER (WHERE d.outcome <> 'CLEAR')
		FROM fraud_decisions d JOIN fraud_clusters c ON c.id = d.cluster_id
		CROSS JOIN LATERAL jsonb_object_keys(coalesce(c.evidence->'kinds', '{}'::jsonb)) AS k(kind)
		GROUP BY k.kind`)
	if err != nil {
		return cfg, nil, fmt.Errorf("fraud learn: %w", err)
	}
	labels := map[string]KindLabel{}
	for rows.Next() {
		var kind string
		var l KindLabel
		if err := rows.Scan(&kind, &l.Decided, &l.Confirmed); err != nil {
			rows.Close()
			return cfg, nil, fmt.Errorf("fraud learn: %w", err)
		}
		l.Factor = 1
		if l.Decided >= LearnMin {
			precision := float64(l.Confirmed+1) / float64(l.Decided+2)
			l.Factor = math.Round(min(LearnCap, max(LearnFloor, precision/0.5))*100) / 100
		}
		labels[kind] = l
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return cfg, nil, fmt.Errorf("fraud learn: %w", err)
	}
	w := make(map[string]float64, len(cfg.Weights))
	for k, v := range cfg.Weights {
		w[k] = v
		if l, ok := labels[k]; ok {
			w[k] = v * l.Factor
		}
	}
	cfg.Weights = w
	return cfg, labels, nil
}
