// Package teststack starts the booking stack of one test: service,
// committer, River workers and the /v1 API on a real HTTP server.
package teststack

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"tatkal/booking"
	"tatkal/booking/api"
	"tatkal/booking/auth"
	"tatkal/booking/seed"
	"tatkal/booking/testenv"
	"tatkal/jobs"
)

// Stack is one test's running booking stack.
type Stack struct {
	*testenv.Env
	Service *booking.Service
	River   *river.Client[pgx.Tx]
	Server  *httptest.Server
	Signer  *auth.Signer
}

// Options adjust a stack; zero values mean defaults.
type Options struct {
	Rules            *booking.Rules
	MaxHoldsInFlight int
	Work             bool // run River workers (hold expiry, seat sync, sweeper)
	SweepInterval    time.Duration
}

// New builds and starts a stack on a fresh database.
func New(t testing.TB, opts Options) *Stack {
	t.Helper()
	env := testenv.New(t)
	return Start(t, env, opts)
}

// Start starts a stack on an existing env (two stacks on one env are
// two app processes sharing PostgreSQL and Redis).
func Start(t testing.TB, env *testenv.Env, opts Options) *Stack {
	t.Helper()
	rules := booking.DefaultRules()
	if opts.Rules != nil {
		rules = *opts.Rules
	}
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	svcs := &jobs.Services{}
	client, err := jobs.NewClient(env.Pool, svcs, jobs.Config{Work: opts.Work, SweepInterval: opts.SweepInterval, Logger: log, Workers: 10})
	if err != nil {
		t.Fatalf("river: %v", err)
	}
	svc := booking.NewService(booking.ServiceConfig{Pool: env.Pool, Store: env.Store, Jobs: client, Rules: rules, Log: log,
		Catalog: booking.NewCatalog(env.Pool, time.Minute)})
	svcs.Booking = svc
	signer, err := auth.NewSigner([]byte(strings.Repeat("k", 32)))
	if err != nil {
		t.Fatal(err)
	}
	r := chi.NewRouter()
	api.New(api.Config{Service: svc, Pool: env.Pool, Signer: signer, MaxHoldsInFlight: opts.MaxHoldsInFlight, Log: log}).Routes(r)
	srv := httptest.NewServer(r)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		svc.RunCommitter(ctx, 3)
	}()
	if opts.Work {
		if err := client.Start(ctx); err != nil {
			t.Fatalf("start river: %v", err)
		}
	}
	t.Cleanup(func() {
		srv.Close()
		if opts.Work {
			stopCtx, c := context.WithTimeout(context.Background(), 10*time.Second)
			client.Stop(stopCtx) //nolint:errcheck
			c()
		}
		cancel()
		wg.Wait()
	})
	return &Stack{Env: env, Service: svc, River: client, Server: srv, Signer: signer}
}

// Token signs a session for a verified individual account.
func (s *Stack) Token(userID int64) string {
	return s.Signer.Sign(auth.Session{UserID: userID, Verified: true, CreatedAt: time.Now().Add(-30 * 24 * time.Hour),
		ExpiresAt: time.Now().Add(time.Hour)})
}

// Caller is the booking.Caller of a verified individual account.
func Caller(userID int64) booking.Caller {
	return booking.Caller{UserID: userID, Verified: true, CreatedAt: time.Now().Add(-30 * 24 * time.Hour)}
}

// DemoShard seeds the demo network and one open shard of train 12951 3A
// (MMCT..NDLS, 7 legs) with berths berths, returning its id and date.
func (s *Stack) DemoShard(t testing.TB, berths int, waitlist int) (int64, time.Time) {
	t.Helper()
	ctx := context.Background()
	open := -time.Minute
	if _, err := seed.Demo(ctx, s.Pool, seed.DemoOptions{OpensIn: &open}); err != nil {
		t.Fatalf("seed demo: %v", err)
	}
	date := time.Now().In(booking.IST).AddDate(0, 0, 5)
	date = time.Date(date.Year(), date.Month(), date.Day(), 0, 0, 0, 0, booking.IST)
	id, err := seed.Shard(ctx, s.Pool, seed.ShardSpec{Train: "12951", Date: date, Class: "3A", Berths: berths,
		OpensAt: time.Now().Add(-time.Minute), WaitlistCap: &waitlist})
	if err != nil {
		t.Fatalf("seed shard: %v", err)
	}
	if _, err := s.Service.Rebuild(ctx, id); err != nil {
		t.Fatalf("load shard: %v", err)
	}
	return id, date
}

// Users seeds n verified users and returns their ids.
func (s *Stack) Users(t testing.TB, prefix string, n int) []int64 {
	t.Helper()
	hash, err := auth.HashPassword("pw-"+prefix, auth.Argon2Params{MemoryKiB: 64, Time: 1, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	ids, err := seed.Users(context.Background(), s.Pool, seed.UsersSpec{Count: n, Prefix: prefix, PasswordHash: hash})
	if err != nil {
		t.Fatalf("seed users: %v", err)
	}
	return ids
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Stations of train 12951 in order, for journeys in tests.
var Stations12951 = []string{"MMCT", "BVI", "ST", "BRC", "RTM", "NAD", "KOTA", "NDLS"}

// Must fails the test on err.
func Must(t testing.TB, err error, what string, args ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", fmt.Sprintf(what, args...), err)
	}
}
