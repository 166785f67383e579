package admission

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"tatkal/booking"
	"tatkal/booking/inventory"
	"tatkal/booking/lab/seed"
	"tatkal/booking/lab/testenv"
)

type bundle struct {
	env   *testenv.Env
	svc   *Service
	clock *testenv.Clock
	date  time.Time
}

// setup returns a waiting room on a fresh database with the demo network.
func setup(t testing.TB, mod func(*Config)) *bundle {
	t.Helper()
	return setupOn(t, testenv.RedisURL(), mod)
}

// setupOn is setup on the Redis at redisURL (a node or a cluster).
func setupOn(t testing.TB, redisURL string, mod func(*Config)) *bundle {
	t.Helper()
	env := testenv.NewOn(t, redisURL, testenv.PoolSize())
	ctx := context.Background()
	open := -time.Hour
	if _, err := seed.Demo(ctx, env.Pool, seed.DemoOptions{OpensIn: &open}); err != nil {
		t.Fatalf("seed demo: %v", err)
	}
	clk := &testenv.Clock{}
	cfg := Config{Pool: env.Pool, Redis: env.Redis, Prefix: env.KeyPrefix, Store: env.Store,
		Catalog: booking.NewCatalog(env.Pool, time.Minute), Secret: []byte("0123456789abcdef0123456789abcdef-test"),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: clk.Now, LimitAccount: 1000, LimitDevice: 1000}
	if mod != nil {
		mod(&cfg)
	}
	svc, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	d := time.Now().In(booking.IST).AddDate(0, 0, 7)
	return &bundle{env: env, svc: svc, clock: clk, date: time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, booking.IST)}
}

// shard creates a queue-mode shard of train 12951 opening at opens and
// loads it into Redis.
func (b *bundle) shard(t testing.TB, class string, berths int, opens time.Time, mode string) *booking.Shard {
	t.Helper()
	ctx := context.Background()
	wl := 0
	id, err := seed.Shard(ctx, b.env.Pool, seed.ShardSpec{Train: "12951", Date: b.date, Class: class, Berths: berths,
		OpensAt: opens, Mode: mode, WaitlistCap: &wl})
	if err != nil {
		t.Fatalf("seed shard: %v", err)
	}
	if _, err := inventory.Rebuild(ctx, b.env.Pool, b.env.Store, id); err != nil {
		t.Fatalf("load shard: %v", err)
	}
	s, err := b.svc.cfg.Catalog.ByID(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// caller is a verified account with a bound device.
func (b *bundle) caller(uid int64) Caller {
	return Caller{UserID: uid, Verified: true, CreatedAt: time.Now().AddDate(0, -1, 0),
		SessionToken: "st_session_" + strconv.FormatInt(uid, 10),
		DeviceToken:  b.svc.devices.BindDevice(uid, fmt.Sprintf("dev%d", uid), time.Now().Add(time.Hour))}
}

func intentOf(s *booking.Shard) Intent {
	return Intent{TrainNo: s.Train, JourneyDate: s.Date, Class: s.Class, Quota: s.Quota}
}

// admitted is how many the shard's queue admitted and how many of them it
// knows PostgreSQL logged, from its meta in Redis.
func (b *bundle) admitted(t testing.TB, shardID int64) (admitted, logged int64) {
	t.Helper()
	mv, err := b.env.Redis.HMGet(context.Background(), b.svc.qkey(shardID, "m"), "admitted", "logged").Result()
	if err != nil {
		t.Fatal(err)
	}
	return atoi64(mv[0]), atoi64(mv[1])
}

func reasonOf(err error) string { return booking.ErrorReason(err) }

// admissionOrder is who PostgreSQL logged as admitted to the shard, in order.
func (b *bundle) admissionOrder(t testing.TB, shardID int64) []int64 {
	t.Helper()
	rows, err := b.env.Pool.Query(context.Background(), `SELECT user_id FROM admission_log WHERE shard_id = $1 ORDER BY seq`, shardID)
	if err != nil {
		t.Fatal(err)
	}
	order, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	return order
}
