package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisCluster is a private Redis Cluster of one test, three masters and a
// replica of each, whose nodes the test may kill: the suite's cluster on
// 7001-7003 is shared and has no replicas.
type RedisCluster struct {
	// URL lists the masters' addresses, as REDIS_URL takes a cluster.
	URL   string
	Nodes []*RedisNode
}

// RedisNode is one redis-server of a RedisCluster.
type RedisNode struct {
	Addr string
	cmd  *exec.Cmd
}

// Kill ends the node with SIGKILL, as a crash would.
func (n *RedisNode) Kill() {
	n.cmd.Process.Kill() //nolint:errcheck // it may have ended already
	n.cmd.Wait()         //nolint:errcheck // killed: its exit status says so
}

// StartRedisCluster starts six redis-servers on free loopback ports,
// makes them a cluster of three masters with one replica each, waits until
// every slot is served, and kills the nodes when the test ends. A replica
// takes over from a master that has not answered for cluster-node-timeout
// (1 s here). It skips the test where redis-server is not installed.
func StartRedisCluster(t testing.TB) *RedisCluster {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("no redis-server installed")
	}
	dir := t.TempDir()
	rc := &RedisCluster{}
	var addrs []string
	for i := range 6 {
		port := freePort(t)
		nd := filepath.Join(dir, strconv.Itoa(port))
		if err := os.Mkdir(nd, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(nd, "nodes.conf"), "--cluster-node-timeout", "1000",
			"--dir", nd, "--save", "", "--appendonly", "no", "--logfile", filepath.Join(nd, "redis.log"))
		if err := cmd.Start(); err != nil {
			t.Fatalf("start redis-server %d: %v", i, err)
		}
		n := &RedisNode{Addr: "127.0.0.1:" + strconv.Itoa(port), cmd: cmd}
		t.Cleanup(n.Kill)
		rc.Nodes = append(rc.Nodes, n)
		addrs = append(addrs, n.Addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, n := range rc.Nodes {
		if err := waitPing(ctx, n.Addr); err != nil {
			t.Fatalf("redis-server %s: %v", n.Addr, err)
		}
	}
	// The first three become the masters, each of the others a replica.
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	rc.URL = strings.Join(addrs[:3], ",")
	for _, n := range rc.Nodes {
		if err := waitClusterOK(ctx, n.Addr); err != nil {
			t.Fatalf("redis cluster node %s: %v", n.Addr, err)
		}
		if err := waitSynced(ctx, n.Addr); err != nil {
			t.Fatalf("redis cluster node %s: %v", n.Addr, err)
		}
	}
	return rc
}

// waitSynced waits until a replica has its master's data (a no-op on a
// master): before that, a failover would promote an empty copy.
func waitSynced(ctx context.Context, addr string) error {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	for {
		info, err := c.Info(ctx, "replication").Result()
		if err == nil && (strings.Contains(info, "role:master") || strings.Contains(info, "master_link_status:up")) {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("replica not in sync: %v %s", err, info)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Master is the node that serves key's slot now.
func (rc *RedisCluster) Master(t testing.TB, key string) *RedisNode {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{rc.Nodes[0].Addr}})
	defer rdb.Close()
	slot, err := rdb.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		t.Fatalf("slot of %s: %v", key, err)
	}
	for _, n := range rc.Nodes {
		c := redis.NewClient(&redis.Options{Addr: n.Addr})
		slots, err := c.ClusterSlots(ctx).Result()
		role, _ := c.Do(ctx, "ROLE").Slice()
		c.Close()
		if err != nil || len(role) == 0 || role[0] != "master" {
			continue
		}
		for _, s := range slots {
			if int64(s.Start) <= slot && slot <= int64(s.End) && len(s.Nodes) > 0 && s.Nodes[0].Addr == n.Addr {
				return n
			}
		}
	}
	t.Fatalf("no master serves slot %d of %s", slot, key)
	return nil
}

func waitPing(ctx context.Context, addr string) error {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	for {
		err := c.Ping(ctx).Err()
		if err == nil || ctx.Err() != nil {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func waitClusterOK(ctx context.Context, addr string) error {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	for {
		info, err := c.ClusterInfo(ctx).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("cluster state not ok: %v %s", err, info)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ReplicaOf is the replica of master.
func (rc *RedisCluster) ReplicaOf(t testing.TB, master *RedisNode) *RedisNode {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, n := range rc.Nodes {
		c := redis.NewClient(&redis.Options{Addr: n.Addr})
		role, err := c.Do(ctx, "ROLE").Slice()
		c.Close()
		if err == nil && len(role) >= 3 && role[0] == "slave" && fmt.Sprintf("%v:%v", role[1], role[2]) == master.Addr {
			return n
		}
	}
	t.Fatalf("no replica of %s", master.Addr)
	return nil
}

// WaitFailover waits until replica has taken over from its dead master
// and the cluster serves every slot again. The cluster elects it by itself
// within a few node timeouts; past 5 s the replica is told to take over
// (CLUSTER FAILOVER TAKEOVER), as an operator would, and forced says so.
func (rc *RedisCluster) WaitFailover(replica *RedisNode) (forced bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: replica.Addr})
	defer c.Close()
	force := time.Now().Add(5 * time.Second)
	for {
		role, err := c.Do(ctx, "ROLE").Slice()
		if err == nil && len(role) > 0 && role[0] == "master" {
			return forced, waitClusterOK(ctx, replica.Addr)
		}
		if time.Now().After(force) {
			c.Do(ctx, "CLUSTER", "FAILOVER", "TAKEOVER") //nolint:errcheck // checked by ROLE
			forced, force = true, time.Now().Add(5*time.Second)
		}
		if ctx.Err() != nil {
			return forced, fmt.Errorf("replica %s did not take over: %v %v", replica.Addr, role, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
