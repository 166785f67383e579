package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"tatkal/booking/redisx"
)

// MasterShare is how much of the spread phase one Redis master carried:
// the shards whose hash slot it owns and the hold decisions made on them.
type MasterShare struct {
	Addr   string
	Shards int
	Ops    int64
}

// prepareSpread creates the spread phase's shards. Each shard's keys share
// one hash tag, so in a Redis Cluster a shard lives on the master owning
// that tag's slot; many shards land on every master.
func prepareSpread(ctx context.Context, env *runEnv) error {
	for range env.opts.SpreadShards {
		sh, err := newShard(ctx, env.opts, env.opts.Berths, nil)
		if err != nil {
			return err
		}
		env.spread = append(env.spread, sh)
	}
	return nil
}

// spreadCycle is the cycle phase over many shards at once: client g holds
// on shard g mod n, then cancels, so no shard fills. It shows whether the
// hold path scales with shards when Redis is a cluster (each master runs
// its shards' scripts) and where the next limit is (PostgreSQL, the
// committer, these two cores).
func spreadCycle(ctx context.Context, env *runEnv) (Phase, error) {
	shards := env.spread
	perShard := make([]atomic.Int64, len(shards))
	t, elapsed := closedLoop(ctx, env.opts.Concurrency, env.opts.Duration, func(g int, t *tally, more func() bool) {
		i := g % len(shards)
		rng := rand.New(rand.NewPCG(uint64(g), 5))
		for n := 0; more(); n++ {
			if env.holdThenCancel(ctx, t, rng, shards[i], "m", g, n) {
				perShard[i].Add(1)
			}
		}
	})
	masters, err := shardMasters(ctx, env)
	if err != nil {
		return Phase{}, err
	}
	byAddr := map[string]*MasterShare{}
	for i, addr := range masters {
		m := byAddr[addr]
		if m == nil {
			m = &MasterShare{Addr: addr}
			byAddr[addr] = m
		}
		m.Shards++
		m.Ops += perShard[i].Load()
	}
	env.masters = env.masters[:0]
	for _, m := range byAddr {
		env.masters = append(env.masters, *m)
	}
	slices.SortFunc(env.masters, func(a, b MasterShare) int {
		if a.Addr < b.Addr {
			return -1
		}
		if a.Addr > b.Addr {
			return 1
		}
		return 0
	})
	return t.phase(fmt.Sprintf("spread: hold + cancel over %d shards", len(shards)), elapsed), nil
}

// shardMasters names, for each spread shard, the Redis master holding its
// keys: in a cluster the master owning the slot of the shard's hash tag,
// otherwise the one server.
func shardMasters(ctx context.Context, env *runEnv) ([]string, error) {
	out := make([]string, len(env.spread))
	cluster, ok := env.opts.Redis.(*redis.ClusterClient)
	for i, sh := range env.spread {
		if !ok {
			out[i] = redisx.Addr(env.opts.Redis)
			continue
		}
		c, err := cluster.MasterForKey(ctx, env.opts.Service.Store().MetaKey(sh.ID))
		if err != nil {
			return nil, fmt.Errorf("find the master of shard %d: %w", sh.ID, err)
		}
		out[i] = c.Options().Addr
	}
	return out, nil
}
