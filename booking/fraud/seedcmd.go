package fraud

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// SeedAbuseDirect is `tatkal seed abuse --direct`: the population's
// signals written straight into the database (Generate), without the API:
// fast enough for populations of tens of thousands, which the API path
// (booking/lab/rehearse.Abuse) takes minutes over. With cluster, the window is
// clustered at once and measured. key keys the signal hashes
// (TATKAL_FRAUD_KEY; a random one when unset, as the population is
// synthetic).
func SeedAbuseDirect(ctx context.Context, pool *pgxpool.Pool, key []byte, p Population, cluster bool, out io.Writer) error {
	if len(key) == 0 {
		key = []byte(rand.Text())
	}
	g, err := Generate(ctx, pool, Recorder{Key: key}, p)
	if err != nil {
		return fmt.Errorf("seed abuse: %w", err)
	}
	var tried int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM fraud_refused_attempts WHERE window_opens_at = $1`, g.OpensAt).Scan(&tried); err != nil {
		return fmt.Errorf("seed abuse: %w", err)
	}
	fmt.Fprintf(out, "window %s (shard %d): %d ring accounts in %d rings, %d family accounts in %d families, %d honest (signals written directly; %d attempts the passenger limit refused)\n",
		g.OpensAt.Format(time.RFC3339), g.ShardID, len(g.Ring), p.Rings, len(g.Family), p.Families, len(g.Honest), tried)
	if !cluster {
		fmt.Fprintln(out, "the window is clustered by the worker once its shard has closed, or now with --cluster")
		return nil
	}
	svc := &Service{Pool: pool, Clusterer: Clusterer{Config: DefaultConfig()}}
	start := time.Now()
	res, err := svc.ClusterWindow(ctx, g.OpensAt)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "clustered in %s: %s\n", time.Since(start).Round(time.Millisecond), Measure(res, g))
	return nil
}
