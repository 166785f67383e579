package fraud

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// SeedAbuseUsage is the one line of `tatkal seed abuse`.
const SeedAbuseUsage = `tatkal seed abuse [--rings K] [--ring-size M] [--families F] [--honest N] [--seed S] [--cluster]`

// SeedAbuse is `tatkal seed abuse`: a population of rings that share
// devices, instruments and passengers, families that share a device, and
// honest users, as one window's signals (Generate); with --cluster, the
// window is clustered at once and the rings found and innocents flagged
// are printed. key keys the signal hashes (TATKAL_FRAUD_KEY; a random one
// when unset, as the population is synthetic).
func SeedAbuse(ctx context.Context, open func(context.Context) (*pgxpool.Pool, error), key []byte, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("seed abuse", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintln(out, "Generate a population for fraud clustering: rings, families and honest users racing in one window.\n\nUsage: "+SeedAbuseUsage)
		fs.PrintDefaults()
	}
	p := Population{}
	fs.IntVar(&p.Rings, "rings", 6, "rings of touts' accounts")
	fs.IntVar(&p.RingSize, "ring-size", 6, "accounts per ring")
	fs.IntVar(&p.Families, "families", 40, "families or offices sharing a device (2-3 accounts)")
	fs.IntVar(&p.Honest, "honest", 800, "independent honest accounts")
	seed := fs.Uint64("seed", 1, "random seed (the same seed, the same population)")
	cluster := fs.Bool("cluster", false, "cluster the window at once and print what was found")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("seed abuse: unexpected %q; %s", fs.Arg(0), SeedAbuseUsage)
	}
	p.Seed = *seed
	pool, err := open(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	if len(key) == 0 {
		key = []byte(rand.Text())
	}
	rec := Recorder{Key: key}
	g, err := Generate(ctx, pool, rec, p)
	if err != nil {
		return fmt.Errorf("seed abuse: %w", err)
	}
	fmt.Fprintf(out, "window %s (shard %d): %d ring accounts in %d rings, %d family accounts in %d families, %d honest\n",
		g.OpensAt.Format(time.RFC3339), g.ShardID, len(g.Ring), p.Rings, len(g.Family), p.Families, len(g.Honest))
	if !*cluster {
		fmt.Fprintln(out, "the window is clustered by the worker once its shard has closed, or now with --cluster")
		return nil
	}
	svc := &Service{Pool: pool, Clusterer: Clusterer{Config: DefaultConfig()}}
	start := time.Now()
	res, err := svc.ClusterWindow(ctx, g.OpensAt)
	if err != nil {
		return err
	}
	found, innocents := 0, 0
	for _, c := range res.Clusters {
		if !c.Flagged {
			continue
		}
		for _, m := range c.Members {
			if _, ring := g.Ring[m]; ring {
				found++
			} else {
				innocents++
			}
		}
	}
	famFlagged := 0
	for _, c := range res.Clusters {
		if c.Flagged {
			for _, m := range c.Members {
				if _, fam := g.Family[m]; fam {
					famFlagged++
				}
			}
		}
	}
	precision := "n/a (nothing flagged)"
	if found+innocents > 0 {
		precision = fmt.Sprintf("%d/%d = %.3f", found, found+innocents, float64(found)/float64(found+innocents))
	}
	fmt.Fprintf(out, "clustered in %s: %d signals, %d edges, %d clusters (%d flagged)\n",
		time.Since(start).Round(time.Millisecond), res.Signals, res.Edges, len(res.Clusters), res.Flagged())
	fmt.Fprintf(out, "ring recall %d/%d; honest or family accounts flagged %d/%d (family %d/%d); precision of flagged accounts %s\n",
		found, len(g.Ring), innocents, len(g.Family)+len(g.Honest), famFlagged, len(g.Family), precision)
	return nil
}
