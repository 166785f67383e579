package recon

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/riverqueue/river"

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

// FetchArgs fetches and ingests one gateway's settlement file and the
// bank statement of its settlement date, then reconciles the day: the
// daily (T+1) job, one per gateway.
type FetchArgs struct {
	Gateway string    `json:"gateway"`
	Date    time.Time `json:"date"`
}

func (FetchArgs) Kind() string { return "recon_fetch" }
func (FetchArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: booking.QueueMoney, MaxAttempts: 20, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}
