package testenv

import (
	"context"
	"errors"
	"testing"
	"time"

	"tatkal/booking/lab/localsrv"
)

// RedisCluster is a private Redis Cluster of one test, three masters and a
// replica of each, whose nodes the test may kill: the suite's cluster on
// 7001-7003 is shared and has no replicas. Its Master and ReplicaOf fail
// the test instead of returning an error.
type RedisCluster struct{ *localsrv.RedisCluster }

// RedisNode is one redis-server of a RedisCluster.
type RedisNode = localsrv.RedisNode

// StartRedisCluster starts a private cluster (localsrv.StartRedisCluster)
// for the test and kills its nodes when the test ends. It skips the test
// where redis-server is not installed.
func StartRedisCluster(t testing.TB) *RedisCluster {
	t.Helper()
	rc, err := localsrv.StartRedisCluster()
	if errors.Is(err, localsrv.ErrNotInstalled) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	return &RedisCluster{rc}
}

// Master is the node that serves key's slot now.
func (rc *RedisCluster) Master(t testing.TB, key string) *RedisNode {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := rc.RedisCluster.Master(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// ReplicaOf is the replica of master.
func (rc *RedisCluster) ReplicaOf(t testing.TB, master *RedisNode) *RedisNode {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := rc.RedisCluster.ReplicaOf(ctx, master)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
