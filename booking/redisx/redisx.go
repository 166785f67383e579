package redisx

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// connBuffer sizes each connection's read and write buffers, and
// pipelineBuffer those of the pipeline pool's. go-redis's defaults (32 KiB
// each way, 128 KiB for pipelines) are for large values; ours are scripts'
// arguments and answers of a few hundred bytes, and a serve process keeps
// up to 200 connections a node: 12.8 MB of buffers at the defaults, a
// twentieth of serve's memory budget in a rush (its heap profile).
const (
	connBuffer     = 8 << 10
	pipelineBuffer = 32 << 10
)

// Open connects to url: "redis://host:port/db" is one node; several
// addresses separated by commas ("redis://h1:7001,redis://h2:7002" or
// "h1:7001,h2:7002") are the seed nodes of a Redis Cluster. clusterAddrs,
// when set (REDIS_CLUSTER_ADDRS), selects cluster mode over url.
func Open(url, clusterAddrs string, poolSize int) (redis.UniversalClient, error) {
	seeds := clusterAddrs
	if seeds == "" && strings.Contains(url, ",") {
		seeds = url
	}
	if seeds == "" {
		opt, err := redis.ParseURL(url)
		if err != nil {
			return nil, fmt.Errorf("parse REDIS_URL: %w", err)
		}
		opt.PoolSize = poolSize
		opt.ReadBufferSize, opt.WriteBufferSize = connBuffer, connBuffer
		opt.PipelineReadBufferSize, opt.PipelineWriteBufferSize = pipelineBuffer, pipelineBuffer
		return redis.NewClient(opt), nil
	}
	var addrs []string
	var base *redis.Options
	for _, s := range strings.Split(seeds, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !strings.Contains(s, "://") {
			s = "redis://" + s
		}
		opt, err := redis.ParseURL(s)
		if err != nil {
			return nil, fmt.Errorf("parse Redis Cluster address %q: %w", s, err)
		}
		if opt.DB != 0 {
			return nil, fmt.Errorf("redis cluster address %q names database %d: a cluster has only database 0", s, opt.DB)
		}
		if base == nil {
			base = opt
		}
		addrs = append(addrs, opt.Addr)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("no Redis Cluster addresses in %q", seeds)
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, Username: base.Username, Password: base.Password,
		TLSConfig: base.TLSConfig, PoolSize: poolSize, ReadBufferSize: connBuffer, WriteBufferSize: connBuffer})
	c.AddHook(&followFailover{c: c})
	return c, nil
}

// ReloadEvery is how often a cluster client in use reloads its slot map.
// go-redis reloads it on a MOVED answer only; after a failover the dead
// master's slots are tried on it (and refused) until some command happens
// to be redirected. A second bounds how long a failover goes unnoticed.
const ReloadEvery = time.Second

// followFailover reloads a cluster client's slot map every ReloadEvery
// while the client is used, and at once (at most every 100 ms) after a
// command fails: a node gone, or a slot without a master, is what a
// failover looks like from here. The reload runs in go-redis's own
// short-lived goroutine, so no goroutine outlives the client.
type followFailover struct {
	c    *redis.ClusterClient
	last atomic.Int64 // unix nanoseconds of the last reload asked for
}

func (h *followFailover) reload(after time.Duration) {
	now, last := time.Now().UnixNano(), h.last.Load()
	if now-last >= int64(after) && h.last.CompareAndSwap(last, now) {
		h.c.ReloadState(context.Background())
	}
}

func (h *followFailover) after(err error) {
	if errors.Is(err, redis.ErrClosed) {
		return // closed by us: nothing to follow
	}
	if err != nil && err != redis.Nil && !isReply(err) {
		h.reload(100 * time.Millisecond)
		return
	}
	h.reload(ReloadEvery)
}

// isReply: an error the node answered that says nothing of the cluster's
// shape (a script's refusal, NOSCRIPT); CLUSTERDOWN and TRYAGAIN do.
func isReply(err error) bool {
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := re.Error()
	return !strings.HasPrefix(msg, "CLUSTERDOWN") && !strings.HasPrefix(msg, "TRYAGAIN") && !strings.HasPrefix(msg, "MASTERDOWN")
}

func (h *followFailover) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *followFailover) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.after(err)
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			// The node the slot map names is gone, so the command was never
			// sent: once the map is reloaded (and names the replica that
			// took over, if one has) it is sent again, once.
			h.c.ReloadState(ctx)
			select {
			case <-ctx.Done():
				return err
			case <-time.After(300 * time.Millisecond):
			}
			cmd.SetErr(nil)
			err = next(ctx, cmd)
		}
		return err
	}
}

func (h *followFailover) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.after(err)
		return err
	}
}

// Addr names where rdb points, for error messages.
func Addr(rdb redis.UniversalClient) string {
	switch c := rdb.(type) {
	case *redis.Client:
		return c.Options().Addr
	case *redis.ClusterClient:
		return "cluster " + strings.Join(c.Options().Addrs, ",")
	}
	return "redis"
}

// ScanKeys returns every key matching pattern, from every master of a
// cluster (SCAN walks one node only).
func ScanKeys(ctx context.Context, rdb redis.UniversalClient, pattern string) ([]string, error) {
	scan := func(ctx context.Context, c *redis.Client) ([]string, error) {
		var keys []string
		iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		return keys, iter.Err()
	}
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		var mu sync.Mutex
		var all []string
		err := c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			keys, err := scan(ctx, node)
			mu.Lock()
			all = append(all, keys...)
			mu.Unlock()
			return err
		})
		return all, err
	case *redis.Client:
		return scan(ctx, c)
	}
	return nil, fmt.Errorf("scan keys: unsupported Redis client %T", rdb)
}

// DeleteKeys deletes keys, which in a cluster may live in different
// slots: one DEL per key, pipelined.
func DeleteKeys(ctx context.Context, rdb redis.UniversalClient, keys []string) error {
	for len(keys) > 0 {
		n := min(len(keys), 500)
		_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for _, k := range keys[:n] {
				p.Del(ctx, k)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("delete keys: %w", err)
		}
		keys = keys[n:]
	}
	return nil
}

// DeletePrefix deletes every key under prefix (a scratch deployment's,
// when a rehearsal or chaos run ends), on every master of a cluster, best
// effort within 30 s.
func DeletePrefix(rdb redis.UniversalClient, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	keys, _ := ScanKeys(ctx, rdb, prefix+":*") // what it found is deleted even if a node failed
	DeleteKeys(ctx, rdb, keys)                 //nolint:errcheck // best effort
}
