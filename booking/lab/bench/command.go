package bench

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"tatkal/booking/app"
	"tatkal/booking/secrets"
)

// Command is tatkal bench: it runs the process as booking/app builds it
// (server and committer, no workers) and measures it; the bench runs its
// own simulators, so secrets are fresh as in dev.
func Command(ctx context.Context, cfg app.Config, opts Options, out io.Writer) error {
	cfg = cfg.WithDevSecrets()
	cfg.MetricsAddr = "off"
	if len(cfg.SessionKey) == 0 {
		cfg.SessionKey, _ = hex.DecodeString(secrets.Random())
	}
	if err := app.Migrate(ctx, cfg, io.Discard); err != nil {
		return err
	}
	signalsOff := new(atomic.Bool)
	signalsOff.Store(opts.NoSignals)
	opts.SignalsOff = signalsOff
	// Every hold through HTTP solves a booking challenge: the lightest (1+1
	// bits), so the figure is the hold path's and its one extra request.
	a, err := app.New(ctx, cfg, app.Options{Serve: true, BenchSignalsOff: signalsOff, ChallengeBits: 1, RiskyExtraBits: 1})
	if err != nil {
		return err
	}
	defer a.Close()
	runCtx, stop := context.WithCancel(ctx)
	var g errgroup.Group
	g.Go(func() error { return a.Run(runCtx) })
	opts.BaseURL, opts.Pool, opts.Redis, opts.Service, opts.Admission = a.URL(), a.Pool, a.Redis, a.Booking, a.Admission
	opts.Payments, opts.Gateways, opts.NewPayments = a.Payments, a.Config.Gateways(), a.NewPayments
	opts.SessionKey = a.Config.SessionKey
	opts.CommitWriters, opts.ConfirmWriters = a.Config.CommitWriters, a.Config.ConfirmWriters
	opts.Log = slog.Default()
	rep, err := Run(ctx, opts)
	stop()
	if rerr := g.Wait(); err == nil {
		err = rerr
	}
	if err != nil {
		return err
	}
	fmt.Fprint(out, rep.String())
	return nil
}
