package teststack

import (
	"context"
	"fmt"
	"os"
	"time"

	"tatkal/booking/app"
)

// WorkerEnv names the environment a worker process reads (see RunWorker).
const WorkerEnv = "TATKAL_TEST_WORKER"

// SweepIntervalEnv sets a worker process's sweep interval (default: an
// hour, so the sweeper stays out of the tests' way).
const SweepIntervalEnv = "TATKAL_TEST_SWEEP_INTERVAL"

// NotCreatedAfterEnv sets how long a worker process's payments wait for a
// gateway with no record of them before failing them (default: the
// payment package's 2 min), for a test whose gateway lost creations.
const NotCreatedAfterEnv = "TATKAL_TEST_NOT_CREATED_AFTER"

// InquiryAfterEnv sets how soon a process's gateway payments are asked
// after by the safety-net inquiry (default: the payment package's 15 s),
// for a test whose gateway loses webhooks and must not wait that long.
const InquiryAfterEnv = "TATKAL_TEST_INQUIRY_AFTER"

// WorkerEnviron is the environment that makes a test binary run as a
// worker of this stack (see RunWorkerFromEnv): the stack's configuration
// as tatkal chaos hands it to its processes (app.Config.Environ).
func (s *Stack) WorkerEnviron() []string {
	return append(s.App.Config.Environ(), WorkerEnv+"=1",
		"TATKAL_DB_POOL=8",        // 4 workers, River's own, the controller, spares
		"TATKAL_CHALLENGE_BITS=8") // every hold solves one: cheap in tests
}

// RunWorkerFromEnv runs the process tatkal worker runs, from the
// environment, until the process is killed; a test's TestMain calls it when
// WorkerEnv is set, so a test can run a worker as a real process and kill
// it mid-job. Only River's patience is shortened.
func RunWorkerFromEnv() error {
	ctx := context.Background()
	cfg, err := app.FromEnv()
	if err != nil {
		return err
	}
	// The sweeper stays out of the tests' way unless a test asks for it.
	cfg.SweepInterval = time.Hour
	if v := os.Getenv(SweepIntervalEnv); v != "" {
		if cfg.SweepInterval, err = time.ParseDuration(v); err != nil {
			return fmt.Errorf("%s: %w", SweepIntervalEnv, err)
		}
	}
	pay, err := paymentTuningFromEnv()
	if err != nil {
		return err
	}
	return runUntilKilled(ctx, cfg, app.Options{Work: true, Payment: pay,
		Jobs: app.JobTuning{Workers: 4, RescueStuckJobsAfter: 3 * time.Second, JobTimeout: 2 * time.Second}},
		func(*app.App) string { return "worker ready" })
}

// paymentTuningFromEnv reads the payment waits a test shortens for its
// processes (NotCreatedAfterEnv, InquiryAfterEnv); serve processes create
// payments and their inquiries, workers fail the ones never created.
func paymentTuningFromEnv() (app.PaymentTuning, error) {
	var pay app.PaymentTuning
	for _, e := range []struct {
		name string
		to   *time.Duration
	}{{NotCreatedAfterEnv, &pay.NotCreatedAfter}, {InquiryAfterEnv, &pay.InquiryAfter}} {
		v := os.Getenv(e.name)
		if v == "" {
			continue
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			return pay, fmt.Errorf("%s: %w", e.name, err)
		}
		*e.to = d
	}
	return pay, nil
}
