// Package bench measures the hold path on one hot shard against the raw
// ceilings of Redis and PostgreSQL on the same machine, in the same run.
package bench

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"tatkal/booking"
)

// Options configure a run.
type Options struct {
	Duration    time.Duration
	Concurrency int
	Berths      int
	BaseURL     string
	Pool        *pgxpool.Pool
	Redis       redis.UniversalClient
	Service     *booking.Service
	SessionKey  []byte
}

// DefaultOptions are what `tatkal bench` uses without flags.
func DefaultOptions() Options {
	return Options{Duration: 5 * time.Second, Concurrency: 64, Berths: 400}
}

// Report is a run's figures.
type Report struct{}

func (r Report) String() string { return "" }

// Run measures.
func Run(ctx context.Context, opts Options) (Report, error) {
	return Report{}, errors.New("bench: not written yet")
}
