package fraud

import (
	"context"
	"testing"
	"time"
)

// TestLabelsScaleWeights: six CLEARs of clusters linked by a card halve
// the card's weight (the floor), six confirmations of clusters linked by a
// device raise it (up to the cap), and a kind with fewer decisions than
// LearnMin keeps its weight.
func TestLabelsScaleWeights(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	var analyst int64
	if err := b.env.Pool.QueryRow(ctx, `INSERT INTO console_users (login, name, role, password_hash) VALUES ('fraud1', 'fraud1', 'fraud', 'x') RETURNING id`).Scan(&analyst); err != nil {
		t.Fatal(err)
	}
	decide := func(kinds, outcome, reason string, n int) {
		for range n {
			var id int64
			if err := b.env.Pool.QueryRow(ctx, `INSERT INTO fraud_clusters (window_opens_at, score, flagged, members, evidence, status)
				VALUES ($1, 1, true, 2, jsonb_build_object('kinds', $2::jsonb), 'CLOSED') RETURNING id`, time.Now(), kinds).Scan(&id); err != nil {
				t.Fatal(err)
			}
			if _, err := b.env.Pool.Exec(ctx, `INSERT INTO fraud_decisions (cluster_id, analyst_id, outcome, reason_code, needs_approval)
				VALUES ($1, $2, $3, $4, false)`, id, analyst, outcome, reason); err != nil {
				t.Fatal(err)
			}
		}
	}
	decide(`{"card": 3}`, "CLEAR", "FAMILY_OR_OFFICE", 6)
	decide(`{"device": 1}`, "BAN", "SHARED_DEVICES", 6)
	decide(`{"phone": 1}`, "CLEAR", "FALSE_POSITIVE", LearnMin-1)
	base := DefaultConfig()
	cfg, labels, err := learn(ctx, b.env.Pool, base)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Weights[KindCard] != base.Weights[KindCard]*LearnFloor || labels[KindCard].Decided != 6 || labels[KindCard].Confirmed != 0 {
		t.Errorf("card weight %.3f (labels %+v), want %.3f", cfg.Weights[KindCard], labels[KindCard], base.Weights[KindCard]*LearnFloor)
	}
	if want := base.Weights[KindDevice] * 1.5; cfg.Weights[KindDevice] < base.Weights[KindDevice]*1.4 || cfg.Weights[KindDevice] > want+1e-9 {
		t.Errorf("device weight %.3f, want about %.3f", cfg.Weights[KindDevice], want)
	}
	if cfg.Weights[KindPhone] != base.Weights[KindPhone] || base.Weights[KindCard] != DefaultConfig().Weights[KindCard] {
		t.Errorf("phone weight %.3f with %d decisions, want %.3f unchanged (and the base config untouched)", cfg.Weights[KindPhone], LearnMin-1, base.Weights[KindPhone])
	}
}
