package testenv

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"tatkal/booking/redisx"
)

var shared struct {
	once sync.Once
	rdb  redis.UniversalClient
	err  error
}

// Redis is one client per test binary for tests that need Redis alone (the
// seat scripts' own tests): a pool of 64 for the parallel benchmarks. It is
// never closed: the binary ends with it. TATKAL_TEST_REDIS_URL may name a
// cluster's nodes.
func Redis(tb testing.TB) redis.UniversalClient {
	tb.Helper()
	shared.once.Do(func() {
		shared.rdb, shared.err = redisx.Open(RedisURL(), "", 64)
		if shared.err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		shared.err = shared.rdb.Ping(ctx).Err()
	})
	if shared.err != nil {
		tb.Fatalf("redis at %s: %v", RedisURL(), shared.err)
	}
	return shared.rdb
}

// RedisPrefix returns a fresh key prefix whose keys on rdb are deleted
// when the test ends.
func RedisPrefix(tb testing.TB, rdb redis.UniversalClient) string {
	tb.Helper()
	prefix := "t" + randHex(5)
	tb.Cleanup(func() { wipe(tb, rdb, prefix) })
	return prefix
}

// Keys lists the keys under prefix, on every master of a cluster.
func Keys(tb testing.TB, rdb redis.UniversalClient, prefix string) []string {
	tb.Helper()
	keys, err := redisx.ScanKeys(context.Background(), rdb, prefix+":*")
	if err != nil {
		tb.Errorf("scan redis %s: %v", prefix, err)
	}
	return keys
}

// wipe deletes every key under prefix, as a Redis restart would.
func wipe(tb testing.TB, rdb redis.UniversalClient, prefix string) {
	if err := redisx.DeleteKeys(context.Background(), rdb, Keys(tb, rdb, prefix)); err != nil {
		tb.Errorf("wipe redis %s: %v", prefix, err)
	}
}
