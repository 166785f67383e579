package chaos_test

import (
	"context"
	"testing"

	"tatkal/booking/lab/chaos"
	"tatkal/booking/lab/testenv"
	"tatkal/booking/lab/teststack"
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
	fault, err := chaos.NewRedisFailover(ctx, rc.RedisCluster, st.Service.Store().MetaKey(shardID))
	teststack.Must(t, err, "find the shard's master")

	c := chaos.NewClient([]string{serves[0].URL, serves[1].URL}, date)
	tally := chaos.NewTally()
	c.Seen = tally.Seen
	travellers := newTravellers(st, users)
	c.Rush(ctx, travellers, func(wait func(n int64), done func() int64) {
		wait(int64(len(users)) / 4)
		if err := fault.Pull(tally, done, t.Logf); err != nil {
			t.Error(err)
		}
	})

	during, after := tally.Counts()
	t.Logf("answers from the kill to the takeover (0: no answer): %v; after: %v", during, after)
	held := report(t, travellers, c)
	checkInvariants(t, st, shardID, date, held)
	for i, p := range append(serves, workers...) {
		if !p.Alive() {
			t.Errorf("process %d of 4 did not survive the failover", i+1)
		}
	}
}
