package chaos_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tatkal/booking/testenv"
	"tatkal/booking/teststack"
)

// The Redis master that owns the rush shard's slot is killed with SIGKILL
// mid-rush, in a cluster of three masters with a replica each; its replica
// takes over. Replication is asynchronous, so the promoted copy may have
// missed the last holds: the shard is refused (503 SHARD_REBUILDING) until
// it is rebuilt from PostgreSQL, and after drain the invariants hold with
// no berth sold twice. The drain itself proves the rebuild: the shard was
// loaded on the dead master, and the replica's copy is never ready.
func TestSeveralProcessesSurviveRedisFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a private Redis Cluster and four processes")
	}
	ctx := context.Background()
	rc := testenv.StartRedisCluster(t)
	st, shardID, date, users := newRush(t, teststack.Options{RedisURL: rc.URL}, 100)
	serves := []*teststack.Process{st.StartProcess(t, true, env...), st.StartProcess(t, true, env...)}
	workers := []*teststack.Process{st.StartProcess(t, false, env...), st.StartProcess(t, false, env...)}
	master := rc.Master(t, st.Service.Store().MetaKey(shardID))
	replica := rc.ReplicaOf(t, master)

	c := newClient([]string{serves[0].URL, serves[1].URL}, date)
	var after atomic.Bool
	var mu sync.Mutex
	reasons := map[string]int{}
	c.seen = func(status int, reason string) {
		if after.Load() && reason != "" {
			mu.Lock()
			reasons[reason]++
			mu.Unlock()
		}
	}
	travellers := newTravellers(st, users)
	c.rushWith(ctx, travellers, func(wait func(n int64), done func() int64) {
		wait(int64(len(users)) / 4)
		after.Store(true)
		master.Kill()
		killed := time.Now()
		t.Logf("killed the shard's Redis master %s after %d travellers", master.Addr, done())
		forced, err := rc.WaitFailover(replica)
		if err != nil {
			t.Error(err)
			return
		}
		t.Logf("replica %s took over in %s (told to: %v), after %d travellers", replica.Addr,
			time.Since(killed).Round(time.Millisecond), forced, done())
	})

	mu.Lock()
	t.Logf("refusals after the kill: %v", reasons)
	mu.Unlock()
	held := report(t, travellers, c)
	checkInvariants(t, st, shardID, date, held)
	for i, p := range append(serves, workers...) {
		if !p.Alive() {
			t.Errorf("process %d of 4 did not survive the failover", i+1)
		}
	}
}
