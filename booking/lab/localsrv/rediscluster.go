package localsrv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisCluster is a private Redis Cluster, three masters and a replica of
// each, whose nodes may be killed.
type RedisCluster struct {
	// URL lists the masters' addresses, as REDIS_URL takes a cluster.
	URL   string
	Nodes []*RedisNode
	dir   string
}

// RedisNode is one redis-server of a RedisCluster.
type RedisNode struct {
	Addr   string
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process has ended
}

// Kill ends the node with SIGKILL, as a crash would.
func (n *RedisNode) Kill() {
	n.cmd.Process.Kill() //nolint:errcheck // it may have ended already
	<-n.exited
}

// StartRedisCluster starts six redis-servers on free loopback ports,
// makes them a cluster of three masters with one replica each, and waits
// until every slot is served and every replica has synced. A replica
// takes over from a master that has not answered for cluster-node-timeout
// (1 s here). Close kills the nodes and removes their directory. It
// returns an error wrapping ErrNotInstalled where redis-server is missing.
func StartRedisCluster() (*RedisCluster, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, fmt.Errorf("private Redis Cluster: %w: %w", ErrNotInstalled, err)
	}
	dir, err := os.MkdirTemp("", "tatkal-redis-")
	if err != nil {
		return nil, fmt.Errorf("private Redis Cluster: %w", err)
	}
	rc := &RedisCluster{dir: dir}
	if err := rc.start(); err != nil {
		rc.Close()
		return nil, err
	}
	return rc, nil
}

func (rc *RedisCluster) start() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var addrs []string
	for range 6 {
		n, err := rc.startNode(ctx)
		if err != nil {
			return err
		}
		rc.Nodes = append(rc.Nodes, n)
		addrs = append(addrs, n.Addr)
	}
	// The first three become the masters, each of the others a replica.
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("redis-cli --cluster create: %w\n%s", err, out)
	}
	rc.URL = strings.Join(addrs[:3], ",")
	for _, n := range rc.Nodes {
		if err := waitClusterOK(ctx, n.Addr); err != nil {
			return fmt.Errorf("redis cluster node %s: %w", n.Addr, err)
		}
		// Before a replica has synced, a failover would promote an empty copy.
		if err := waitSynced(ctx, n.Addr); err != nil {
			return fmt.Errorf("redis cluster node %s: %w", n.Addr, err)
		}
	}
	return nil
}

// nodePort picks a node's port; a test may hand out a taken one.
var nodePort = FreePort

// startNode starts one redis-server on a free port and waits for its
// answer. A port is free when FreePort looks, not necessarily when
// redis-server binds it (another test's listener or outgoing connection may
// take it between): a node that exits before it answers, or whose port
// answers for another process, is started again on other ports. The
// cluster bus gets a free port of its own: by default it is the port plus
// 10,000, which nobody checked was free, and which above 55535 is no port
// (redis-server then refuses to start).
func (rc *RedisCluster) startNode(ctx context.Context) (*RedisNode, error) {
	var lastErr error
	for range 5 {
		port, err := nodePort()
		if err != nil {
			return nil, err
		}
		bus, err := FreePort()
		if err != nil {
			return nil, err
		}
		nd, err := os.MkdirTemp(rc.dir, strconv.Itoa(port)+"-")
		if err != nil {
			return nil, fmt.Errorf("private Redis Cluster: %w", err)
		}
		cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
			"--cluster-port", strconv.Itoa(bus), "--cluster-config-file", filepath.Join(nd, "nodes.conf"),
			"--cluster-node-timeout", "1000", "--dir", nd, "--save", "", "--appendonly", "no", "--logfile", filepath.Join(nd, "redis.log"))
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("start redis-server: %w", err)
		}
		n := &RedisNode{Addr: "127.0.0.1:" + strconv.Itoa(port), cmd: cmd, exited: make(chan struct{})}
		go func() {
			cmd.Wait() //nolint:errcheck // an early exit is seen on exited
			close(n.exited)
		}()
		upCtx, cancel := context.WithCancel(ctx)
		go func() {
			select {
			case <-n.exited:
				cancel()
			case <-upCtx.Done():
			}
		}()
		pid, err := waitPID(upCtx, n.Addr)
		cancel()
		select {
		case <-n.exited:
			log, _ := os.ReadFile(filepath.Join(nd, "redis.log"))
			lastErr = fmt.Errorf("redis-server on %s exited at start: %s", n.Addr, strings.TrimSpace(string(log)))
			continue
		default:
		}
		if err != nil {
			n.Kill()
			return nil, fmt.Errorf("redis-server %s: %w", n.Addr, err)
		}
		if pid != cmd.Process.Pid {
			n.Kill()
			lastErr = fmt.Errorf("%s answers for process %d, not the redis-server started there (%d)", n.Addr, pid, cmd.Process.Pid)
			continue
		}
		return n, nil
	}
	return nil, lastErr
}

// waitPID waits until addr answers and returns the process id it gives.
func waitPID(ctx context.Context, addr string) (int, error) {
	if err := waitPing(ctx, addr); err != nil {
		return 0, err
	}
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, fmt.Errorf("%s: no process_id in INFO server", addr)
}

// Close kills every node and removes their directory.
func (rc *RedisCluster) Close() {
	for _, n := range rc.Nodes {
		n.Kill()
	}
	os.RemoveAll(rc.dir) //nolint:errcheck // a temporary directory
}

// Master is the node that serves key's slot now.
func (rc *RedisCluster) Master(ctx context.Context, key string) (*RedisNode, error) {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{rc.Nodes[0].Addr}})
	defer rdb.Close()
	slot, err := rdb.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		return nil, fmt.Errorf("slot of %s: %w", key, err)
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
				return n, nil
			}
		}
	}
	return nil, fmt.Errorf("no master serves slot %d of %s", slot, key)
}

// ReplicaOf is the replica of master.
func (rc *RedisCluster) ReplicaOf(ctx context.Context, master *RedisNode) (*RedisNode, error) {
	for _, n := range rc.Nodes {
		c := redis.NewClient(&redis.Options{Addr: n.Addr})
		role, err := c.Do(ctx, "ROLE").Slice()
		c.Close()
		if err == nil && len(role) >= 3 && role[0] == "slave" && fmt.Sprintf("%v:%v", role[1], role[2]) == master.Addr {
			return n, nil
		}
	}
	return nil, fmt.Errorf("no replica of %s", master.Addr)
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
			return forced, fmt.Errorf("replica %s did not take over: %v: %w", replica.Addr, role, errors.Join(err, ctx.Err()))
		}
		time.Sleep(50 * time.Millisecond)
	}
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

// waitSynced waits until a replica has its master's data (a no-op on a
// master).
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
