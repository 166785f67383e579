package recon

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"golang.org/x/sync/errgroup"

	"tatkal/booking"
)

// Sources says where the outside files are fetched from: each gateway's
// settlement endpoint, the bank's statement and the core's export.
type Sources struct {
	HTTP *http.Client
	// PSPURL is the gateway simulator's base URL; a real deployment would
	// have one base URL per gateway.
	PSPURL      string
	GatewayKeys map[string]string // API key per gateway
	BankToken   string            // the bank statement API's credential
	CoreURL     string
	CoreKey     string
}

// Gateways are the gateways whose files can be fetched, in name order.
func (s Sources) Gateways() []string { return slices.Sorted(maps.Keys(s.GatewayKeys)) }

// FetchSettlement downloads and ingests a gateway's settlement file of day.
func (s *Service) FetchSettlement(ctx context.Context, src Sources, gateway string, day time.Time, by string) (FileInfo, error) {
	key := src.GatewayKeys[gateway]
	if key == "" {
		return FileInfo{}, booking.Errorf(booking.EINVALID, "NO_GATEWAY", "No API key for gateway %q.", gateway)
	}
	url := fmt.Sprintf("%s/gw/%s/v1/settlements/%s.csv", strings.TrimRight(src.PSPURL, "/"), gateway, dateOnly(day).Format(time.DateOnly))
	return s.fetch(ctx, src, url, key, FileMeta{Source: SourceSettlement, Gateway: gateway, BusinessDate: day, By: by,
		Name: fmt.Sprintf("%s-%s.csv", gateway, dateOnly(day).Format(time.DateOnly))})
}

// FetchBank downloads and ingests the bank's statement of day.
func (s *Service) FetchBank(ctx context.Context, src Sources, day time.Time, by string) (FileInfo, error) {
	if src.BankToken == "" {
		return FileInfo{}, booking.Errorf(booking.EINVALID, "NO_BANK_CREDENTIAL",
			"No bank statement credential: set TATKAL_BANK_TOKEN for the processes that run the back office.")
	}
	url := fmt.Sprintf("%s/bank/v1/statements/%s.csv", strings.TrimRight(src.PSPURL, "/"), dateOnly(day).Format(time.DateOnly))
	return s.fetch(ctx, src, url, src.BankToken, FileMeta{Source: SourceBank, BusinessDate: day, By: by,
		Name: "statement-" + dateOnly(day).Format(time.DateOnly) + ".csv"})
}

// FetchCore downloads and ingests the core's export of a journey date.
func (s *Service) FetchCore(ctx context.Context, src Sources, journey time.Time, by string) (FileInfo, error) {
	url := fmt.Sprintf("%s/v1/exports/%s?format=csv", strings.TrimRight(src.CoreURL, "/"), dateOnly(journey).Format(time.DateOnly))
	return s.fetch(ctx, src, url, src.CoreKey, FileMeta{Source: SourceCore, BusinessDate: journey, By: by,
		Name: "core-" + dateOnly(journey).Format(time.DateOnly) + ".csv"})
}

func (s *Service) fetch(ctx context.Context, src Sources, url, token string, meta FileMeta) (FileInfo, error) {
	client := src.HTTP
	if client == nil {
		client = &http.Client{Timeout: 5 * time.Minute}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return FileInfo{}, fmt.Errorf("fetch %s: %w", url, err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	meta.Fetched = true // from the issuer's own API, with our key
	resp, err := client.Do(req)
	if err != nil {
		return FileInfo{}, fmt.Errorf("fetch %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
		return FileInfo{}, fmt.Errorf("fetch %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
	}
	return s.Ingest(ctx, meta, resp.Body)
}

// FetchArgs fetches and ingests one gateway's settlement file of a day and
// the bank statements after it, then reconciles the day. The daily
// reconciliation (DailyArgs) inserts one per gateway for yesterday (T+1)
// and for each earlier day still open; On is the day it did so, so the
// same day run again on a later day is a job of its own.
type FetchArgs struct {
	Gateway string    `json:"gateway"`
	Date    time.Time `json:"date"`
	On      time.Time `json:"on,omitzero"`
}

func (FetchArgs) Kind() string { return "recon_fetch" }
func (FetchArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: booking.QueueMoney, MaxAttempts: 20, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// FetchWorker runs FetchArgs: the day's settlement file and the bank
// statements of the three days after (a payout lands on T+1, or T+2 over
// a Sunday) that are whole days by now, then a run judged now. A payout
// of T lands on T+1, so its statement is taken by the run of T again on
// T+2 (the day is still open: its payout is unmatched).
type FetchWorker struct {
	river.WorkerDefaults[FetchArgs]
	Recon   *Service
	Sources Sources
}

func (w *FetchWorker) Work(ctx context.Context, job *river.Job[FetchArgs]) error {
	by := "job:recon_fetch"
	journeys, err := w.Recon.journeyDates(ctx, job.Args.Gateway, job.Args.Date)
	if err != nil {
		return err
	}
	// The files are independent (each its own transaction and lineage):
	// fetched and ingested side by side, a day's million settlement lines
	// and the core's million export lines take the time of one.
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		_, err := w.Recon.FetchSettlement(gctx, w.Sources, job.Args.Gateway, job.Args.Date, by)
		return err
	})
	g.Go(func() error {
		// Only whole days: a statement of today is still growing, and its
		// missing credit would look like a missing payout.
		today := dateOnly(time.Now().In(booking.IST))
		for i := 1; i <= 3; i++ {
			if d := dateOnly(job.Args.Date).AddDate(0, 0, i); d.Before(today) {
				if _, err := w.Recon.FetchBank(gctx, w.Sources, d, by); err != nil {
					return err
				}
			}
		}
		return nil
	})
	g.Go(func() error {
		for _, j := range journeys {
			if _, err := w.Recon.FetchCore(gctx, w.Sources, j, by); err != nil {
				return err
			}
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return err
	}
	if _, err := w.Recon.Run(ctx, RunRequest{Gateway: job.Args.Gateway, Date: job.Args.Date, By: by}); err != nil {
		return err
	}
	// Each journey date's export as a whole: PNRs no gateway paid for.
	for _, j := range journeys {
		if _, err := w.Recon.Run(ctx, RunRequest{Gateway: Core, Date: j, By: by}); err != nil {
			return err
		}
	}
	return nil
}

// journeyDates are the journey dates of the bookings a gateway's day paid for.
func (s *Service) journeyDates(ctx context.Context, gateway string, day time.Time) ([]time.Time, error) {
	start := time.Date(day.Year(), day.Month(), day.Day(), 0, 0, 0, 0, booking.IST)
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT s.journey_date FROM payments p JOIN bookings b ON b.hold_id = p.hold_id
		JOIN inventory_shards s ON s.id = b.shard_id WHERE p.psp = $1 AND p.initiated_at >= $2 AND p.initiated_at < $3 ORDER BY 1`,
		gateway, start, start.AddDate(0, 0, 1))
	if err != nil {
		return nil, fmt.Errorf("journey dates: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[time.Time])
}

// EscalateWorker runs EscalateArgs.
type EscalateWorker struct {
	river.WorkerDefaults[EscalateArgs]
	Recon *Service
}

func (w *EscalateWorker) Work(ctx context.Context, _ *river.Job[EscalateArgs]) error {
	n, err := w.Recon.Escalate(ctx)
	if n > 0 {
		w.Recon.log.WarnContext(ctx, "reconciliation exceptions past their SLA escalated", "count", n)
	}
	return err
}
