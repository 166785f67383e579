package testenv

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"tatkal/booking/db"
	"tatkal/booking/inventory"
	"tatkal/booking/redisx"
	"tatkal/migrations"
)

// Env is one test's private world.
type Env struct {
	DatabaseURL string
	Pool        *pgxpool.Pool
	Redis       redis.UniversalClient
	RedisURL    string
	KeyPrefix   string
	Store       *inventory.Store
}

// BaseURL is the server the test databases live on.
func BaseURL() string {
	if u := os.Getenv("TATKAL_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://127.0.0.1:5432/postgres?sslmode=disable"
}

// RedisURL is the Redis the tests use: TATKAL_TEST_REDIS_URL, which may
// list several nodes of a Redis Cluster separated by commas.
func RedisURL() string {
	if u := os.Getenv("TATKAL_TEST_REDIS_URL"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/0"
}

// ClusterURL is the Redis Cluster of the tests' cluster variants:
// TATKAL_TEST_REDIS_CLUSTER, by default the three masters .ci/run starts.
func ClusterURL() string {
	if u := os.Getenv("TATKAL_TEST_REDIS_CLUSTER"); u != "" {
		return u
	}
	return "127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003"
}

// EachRedis runs test twice, as parallel subtests: against the single
// Redis node and against the Redis Cluster. Where no cluster answers, the
// cluster variant is skipped, saying how to start one, unless
// TATKAL_TEST_REDIS_CLUSTER_REQUIRED is set (.ci/run sets it).
func EachRedis(t *testing.T, test func(t *testing.T, redisURL string)) {
	t.Run("node", func(t *testing.T) {
		t.Parallel()
		test(t, RedisURL())
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		if err := clusterReachable(); err != nil {
			if os.Getenv("TATKAL_TEST_REDIS_CLUSTER_REQUIRED") != "" {
				t.Fatalf("redis cluster at %s: %v", ClusterURL(), err)
			}
			t.Skipf("no Redis Cluster at %s (%v); .ci/run starts one", ClusterURL(), err)
		}
		test(t, ClusterURL())
	})
}

func clusterReachable() error {
	rdb, err := redisx.Open(ClusterURL(), "", 4)
	if err != nil {
		return err
	}
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	info, err := rdb.ClusterInfo(ctx).Result()
	if err != nil {
		return err
	}
	if !strings.Contains(info, "cluster_state:ok") {
		return fmt.Errorf("cluster state is not ok")
	}
	return nil
}

// PoolSize is each test database's pool: TATKAL_TEST_DB_POOL, default 16.
// go test runs about four tests at once (two packages, two tests each), and
// with a dev stack beside them the whole must fit in PostgreSQL's default
// 100 connections; 16 leaves a stack's River workers, committer and a
// test's paused transaction room to meet.
func PoolSize() int32 {
	if n, err := strconv.Atoi(os.Getenv("TATKAL_TEST_DB_POOL")); err == nil && n >= 4 {
		return int32(n)
	}
	return 16
}

// New creates the test's database and Redis prefix and removes both when
// the test ends.
func New(t testing.TB) *Env {
	t.Helper()
	return NewWithPool(t, PoolSize())
}

// NewWithPool is New with a pool of size connections, for a test that
// runs more transactions at once than the default pool holds (so it
// measures contention in PostgreSQL, not a queue for connections).
func NewWithPool(t testing.TB, size int32) *Env {
	t.Helper()
	return NewOn(t, RedisURL(), size)
}

// NewOn is NewWithPool on the Redis at redisURL (a node or a cluster).
func NewOn(t testing.TB, redisURL string, size int32) *Env {
	t.Helper()
	return newOn(t, BaseURL(), redisURL, size)
}

// NewOnPostgres is NewOn with the database on pg, a test's private
// PostgreSQL (StartPostgres).
func NewOnPostgres(t testing.TB, pg *Postgres, redisURL string, size int32) *Env {
	t.Helper()
	return newOn(t, pg.BaseURL, redisURL, size)
}

// newOn creates the test's database on the server at base, migrated by
// cloning the server's template database.
func newOn(t testing.TB, base, redisURL string, size int32) *Env {
	t.Helper()
	ctx := context.Background()
	tmpl, err := template(ctx, base)
	if err != nil {
		t.Fatalf("test template database: %v", err)
	}
	name := "tatkal_t_" + randHex(6)
	url := db.WithDatabase(base, name)
	if err := db.CreateDatabaseFrom(ctx, url, tmpl); err != nil {
		t.Fatalf("create test database: %v", err)
	}
	pool, err := db.Open(ctx, url, size)
	if err != nil {
		t.Fatalf("open test database: %v", err)
	}
	rdb, err := redisx.Open(redisURL, "", 64)
	if err != nil {
		t.Fatalf("open redis: %v", err)
	}
	prefix := "t" + randHex(5)
	env := &Env{DatabaseURL: url, Pool: pool, Redis: rdb, RedisURL: redisURL, KeyPrefix: prefix, Store: inventory.New(rdb, prefix)}
	t.Cleanup(func() {
		pool.Close()
		env.WipeRedis(t)
		rdb.Close()
		dropDatabase(base, name)
	})
	return env
}

// WipeRedis deletes every key of this test, as a Redis restart would.
func (e *Env) WipeRedis(t testing.TB) { wipe(t, e.Redis, e.KeyPrefix) }

func dropDatabase(base, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)") //nolint:errcheck
}

// template returns the name of a migrated database to clone, building it
// once per schema version (the name carries a hash of the migrations) on
// the server at base.
func template(ctx context.Context, base string) (string, error) {
	h := sha256.New()
	fs.WalkDir(migrations.FS, ".", func(path string, d fs.DirEntry, err error) error { //nolint:errcheck
		if err == nil && !d.IsDir() {
			b, _ := fs.ReadFile(migrations.FS, path)
			h.Write([]byte(path))
			h.Write(b)
		}
		return nil
	})
	name := "tatkal_tmpl_" + hex.EncodeToString(h.Sum(nil))[:12]
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", fmt.Errorf("reach PostgreSQL: %w", err)
	}
	defer conn.Close(ctx)
	// Serialise builders across test binaries running in parallel.
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(7461238)"); err != nil {
		return "", err
	}
	defer conn.Exec(ctx, "SELECT pg_advisory_unlock(7461238)") //nolint:errcheck
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", err
	}
	if exists {
		return name, nil
	}
	building := name + "_build"
	conn.Exec(ctx, "DROP DATABASE IF EXISTS "+building+" WITH (FORCE)") //nolint:errcheck
	url := db.WithDatabase(base, building)
	if err := db.CreateDatabase(ctx, url); err != nil {
		return "", err
	}
	pool, err := db.Open(ctx, url, 4)
	if err != nil {
		return "", err
	}
	err = db.Migrate(ctx, pool)
	pool.Close()
	if err != nil {
		return "", err
	}
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+building+" RENAME TO "+name); err != nil {
		return "", err
	}
	return name, nil
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) //nolint:errcheck
	return hex.EncodeToString(b)
}

// DeadlocksAtClose closes the test's pool and returns how many deadlocks
// PostgreSQL broke in the test's database. A backend reports its count when
// it exits, so this waits for the database's backends to be gone first.
func (e *Env) DeadlocksAtClose(t testing.TB) int64 {
	t.Helper()
	e.Pool.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, BaseURL())
	if err != nil {
		t.Fatalf("connect to read deadlocks: %v", err)
	}
	defer conn.Close(context.Background())
	name := e.Pool.Config().ConnConfig.Database
	for {
		var backends, deadlocks int64
		if err := conn.QueryRow(ctx, `SELECT numbackends, deadlocks FROM pg_stat_database WHERE datname = $1`, name).
			Scan(&backends, &deadlocks); err != nil {
			t.Fatalf("read deadlocks of %s: %v", name, err)
		}
		if backends == 0 {
			return deadlocks
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s still has %d backends after its pool closed", name, backends)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
