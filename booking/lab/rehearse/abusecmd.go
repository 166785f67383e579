package rehearse

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"tatkal/booking/app"
	"tatkal/booking/fraud"
)

// SeedAbuseUsage is the one line of `tatkal seed abuse`.
const SeedAbuseUsage = `tatkal seed abuse [--rings K] [--ring-size M] [--families F] [--honest N] [--seed S] [--cluster] [--url URL | --direct [--within-limits]] [--speed X]`

// SeedAbuse is `tatkal seed abuse`: a population of rings that share
// devices, instruments and passengers, families that share a device, and
// honest users, racing in one window through the HTTP API (Abuse): on its
// own stack over DATABASE_URL, where the population stays for the
// analysts, or on a running deployment (--url). --direct writes the
// signals straight into the database instead (fraud.SeedAbuseDirect), for
// populations too large to drive. With --cluster the window is clustered
// at once and measured.
func SeedAbuse(ctx context.Context, cfg app.Config, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("seed abuse", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintln(out, "Generate a population for fraud clustering: rings, families and honest users racing in one window, through the\n"+
			"HTTP API (sign in, verify, bind the device, hold, pay at the gateway's page) unless --direct.\n\nUsage: "+SeedAbuseUsage+
			"\n\nExample: tatkal seed abuse --rings 6 --ring-size 6 --families 40 --honest 800 --seed 1 --cluster")
		fs.PrintDefaults()
	}
	p := fraud.Population{}
	fs.IntVar(&p.Rings, "rings", 6, "rings of touts' accounts")
	fs.IntVar(&p.RingSize, "ring-size", 6, "accounts per ring")
	fs.IntVar(&p.Families, "families", 40, "families or offices sharing a device (2-5 accounts)")
	fs.IntVar(&p.Honest, "honest", 800, "independent honest accounts")
	fs.Uint64Var(&p.Seed, "seed", 1, "random seed (the same seed, the same population)")
	cluster := fs.Bool("cluster", false, "cluster the window at once and print what was found")
	direct := fs.Bool("direct", false, "write the signals straight into the database instead of driving the API")
	url := fs.String("url", "", "drive this running deployment (it must trust this machine in TATKAL_TRUSTED_PROXIES) instead of an own stack")
	speed := fs.Float64("speed", 1, "run the rush this many times faster than real time")
	fs.BoolVar(&p.WithinLimits, "within-limits", false, "with --direct: plan the sharing within the live limits, as the API path always does")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("seed abuse: unexpected %q; %s", fs.Arg(0), SeedAbuseUsage)
	}
	if *direct {
		pool, err := app.OpenCurrent(ctx, cfg)
		if err != nil {
			return err
		}
		defer pool.Close()
		return fraud.SeedAbuseDirect(ctx, pool, []byte(cfg.FraudKey), p, *cluster, out)
	}
	rep, err := Abuse(ctx, cfg, AbuseOptions{Population: p, URL: *url, Speed: *speed, Cluster: *cluster, Progress: out,
		Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))})
	if err != nil {
		return fmt.Errorf("seed abuse: %w", err)
	}
	fmt.Fprint(out, rep)
	if !*cluster {
		fmt.Fprintln(out, "the window is clustered by the worker once its shard has closed, or now with --cluster")
	}
	return nil
}
