package teststack

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"tatkal/booking"
	"tatkal/booking/db"
	"tatkal/booking/inventory"
	"tatkal/booking/payment"
	"tatkal/booking/prs"
	"tatkal/booking/secrets"
	"tatkal/jobs"
)

// WorkerEnv names the environment a worker process reads (see RunWorker).
const WorkerEnv = "TATKAL_TEST_WORKER"

// WorkerEnviron is the environment that makes a test binary run as a
// worker of this stack (see RunWorkerFromEnv).
func (s *Stack) WorkerEnviron() []string {
	return append(os.Environ(),
		WorkerEnv+"=1",
		"TATKAL_TEST_WORKER_DB="+s.DatabaseURL,
		"TATKAL_TEST_WORKER_REDIS="+s.RedisURL,
		"TATKAL_TEST_WORKER_PREFIX="+s.KeyPrefix,
		"TATKAL_TEST_WORKER_CORE="+s.Core.URL,
		"TATKAL_TEST_WORKER_PSP="+s.PSP.URL,
		"TATKAL_PRS_KEY="+s.CoreKey,
		"TATKAL_PSP_API_KEYS="+s.gatewaySecrets(func(g payment.GatewayConfig) []string { return []string{g.APIKey} }).String(),
		"TATKAL_WEBHOOK_SECRETS="+s.gatewaySecrets(func(g payment.GatewayConfig) []string {
			out := make([]string, len(g.WebhookSecrets))
			for i, b := range g.WebhookSecrets {
				out[i] = string(b)
			}
			return out
		}).String(),
	)
}

func (s *Stack) gatewaySecrets(of func(payment.GatewayConfig) []string) secrets.PerGateway {
	p := secrets.PerGateway{}
	for _, g := range s.Gateways {
		p[g.ID] = of(g)
	}
	return p
}

// RunWorkerFromEnv runs River workers for the stack named in the
// environment until the process is killed. A test's TestMain calls it when
// WorkerEnv is set, so a test can run a worker as a real process and kill
// it mid-job.
func RunWorkerFromEnv() error {
	ctx := context.Background()
	pool, err := db.Open(ctx, os.Getenv("TATKAL_TEST_WORKER_DB"), 6) // 4 workers, River's own, one spare
	if err != nil {
		return err
	}
	opt, err := redis.ParseURL(os.Getenv("TATKAL_TEST_WORKER_REDIS"))
	if err != nil {
		return err
	}
	rdb := redis.NewClient(opt)
	store := inventory.New(rdb, os.Getenv("TATKAL_TEST_WORKER_PREFIX"))
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	svcs := &jobs.Services{}
	client, err := jobs.NewClient(pool, svcs, jobs.Config{Work: true, SweepInterval: time.Hour, Logger: log, Workers: 4,
		RescueStuckJobsAfter: 3 * time.Second, JobTimeout: 2 * time.Second})
	if err != nil {
		return err
	}
	svc := booking.NewService(booking.ServiceConfig{Pool: pool, Store: store, Jobs: client, Rules: booking.DefaultRules(), Log: log,
		Core: prs.NewClient(os.Getenv("TATKAL_TEST_WORKER_CORE"), os.Getenv("TATKAL_PRS_KEY"), &http.Client{Timeout: 10 * time.Second})})
	keys, err := secrets.ParseList("TATKAL_PSP_API_KEYS", os.Getenv("TATKAL_PSP_API_KEYS"))
	if err != nil {
		return err
	}
	hooks, err := secrets.ParseList("TATKAL_WEBHOOK_SECRETS", os.Getenv("TATKAL_WEBHOOK_SECRETS"))
	if err != nil {
		return err
	}
	var gws []payment.GatewayConfig
	for _, id := range keys.IDs() {
		g := payment.GatewayConfig{ID: id, BaseURL: os.Getenv("TATKAL_TEST_WORKER_PSP"), APIKey: keys[id][0]}
		for _, h := range hooks[id] {
			g.WebhookSecrets = append(g.WebhookSecrets, []byte(h))
		}
		gws = append(gws, g)
	}
	svcs.Booking = svc
	svcs.Payments = payment.New(payment.Config{Pool: pool, Redis: rdb, Prefix: os.Getenv("TATKAL_TEST_WORKER_PREFIX"), Booking: svc, Jobs: client,
		Gateways: gws, Log: log})
	if err := client.Start(ctx); err != nil {
		return fmt.Errorf("start workers: %w", err)
	}
	fmt.Println("worker ready")
	select {}
}
