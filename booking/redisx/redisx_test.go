package redisx_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"tatkal/booking/lab/testenv"
	"tatkal/booking/redisx"
)

// After the master of a key's slot is killed and its replica takes over,
// the client reaches the key on the replica by itself: nothing answers
// MOVED (the old master is gone), so only its own slot map reload does it.
func TestClusterClientFollowsFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a private Redis Cluster")
	}
	rc := testenv.StartRedisCluster(t)
	rdb, err := redisx.Open(rc.URL, "", 4)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	ctx := context.Background()
	const key = "chaos16:{follow}"
	if err := rdb.Set(ctx, key, "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	master := rc.Master(t, key)
	replica := rc.ReplicaOf(t, master)
	// The write must have reached the replica before its master dies.
	rep := redis.NewClient(&redis.Options{Addr: replica.Addr, PoolSize: 1})
	defer rep.Close()
	rep.Do(ctx, "READONLY") //nolint:errcheck // the GET below says whether it took
	for rep.Get(ctx, key).Val() != "v" {
		time.Sleep(10 * time.Millisecond)
	}
	master.Kill()
	if _, err := rc.WaitFailover(replica); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 3*time.Second, "the client following the failover", func() error {
		v, err := rdb.Get(ctx, key).Result()
		return testenv.Want(err == nil && v == "v", "%q %v", v, err)
	})
}
