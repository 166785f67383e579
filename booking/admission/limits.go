package admission

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultLimitIP is the per-second limit on unauthenticated requests from
// one source address. Sized from BenchmarkEarlyPollHTTP (booking/api): a
// NAT of 10,000 honest travellers, each making one unauthenticated request
// (login, prepare, availability, fairness) every 10 s in the rush, sends
// 1,000 a second, under it; 2,000 cheap answers a second cost about a
// tenth of a core.
const DefaultLimitIP = 2000

// limit counts an Enter against the per-second limits of the caller's
// account and device (fixed one-second windows in Redis, shared by every
// process). Over a limit is answered like overload and noted in the
// caller's trace. If Redis cannot count, the call goes on: the queue
// scripts that follow fail closed anyway.
func (s *Service) limit(ctx context.Context, c Caller, device string, shardID int64) error {
	pipe := s.rdb.Pipeline()
	over := s.limitCmds(ctx, pipe, c, device)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil
	}
	if what := over(); what != "" {
		s.refused(ctx, c.UserID, shardID, RefusedRateLimit, what)
		return highDemand()
	}
	return nil
}

// limitCmds adds the limit counters to pipe; the returned func, called
// after the pipeline ran, names the limit exceeded ("" for none).
// Signed-in, device-bound calls count per account and device only, never
// per source address: behind a carrier NAT thousands of honest travellers
// share one, and one of them breaking pacing must not cost the others.
func (s *Service) limitCmds(ctx context.Context, pipe redis.Pipeliner, c Caller, device string) func() string {
	sec := strconv.FormatInt(s.now().Unix(), 10)
	type lim struct {
		key, what string
		max       int
	}
	ls := []lim{
		{s.cfg.Prefix + ":rl:a:" + strconv.FormatInt(c.UserID, 10) + ":" + sec, "account", s.cfg.LimitAccount},
		{s.cfg.Prefix + ":rl:d:" + device + ":" + sec, "device", s.cfg.LimitDevice},
	}
	cmds := make([]*redis.IntCmd, len(ls))
	for i, l := range ls {
		cmds[i] = pipe.Incr(ctx, l.key)
		pipe.Expire(ctx, l.key, 2*time.Second)
	}
	return func() string {
		for i, l := range ls {
			if n := cmds[i].Val(); n > int64(l.max) {
				s.cfg.Funnel.Add(0, "queue_rate_limited", 1)
				return fmt.Sprintf("%d queue calls in one second from this %s, more than %d", n, l.what, l.max)
			}
		}
		return ""
	}
}

// LimitAddress counts an unauthenticated request against its source
// address (LimitIP a second); over it is the uniform high-demand answer.
// Signed-in calls never come here. If Redis cannot count, the request goes
// on: what it reaches is cheap or has its own limits.
func (s *Service) LimitAddress(ctx context.Context, ip string) error {
	if ip == "" {
		return nil
	}
	key := s.cfg.Prefix + ":rl:i:" + ip + ":" + strconv.FormatInt(s.now().Unix(), 10)
	pipe := s.rdb.Pipeline()
	n := pipe.Incr(ctx, key)
	pipe.Expire(ctx, key, 2*time.Second)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil
	}
	if n.Val() > int64(s.cfg.LimitIP) {
		s.cfg.Funnel.Add(0, "ip_rate_limited", 1)
		return highDemand()
	}
	return nil
}

// pipe runs build's commands in one round trip. If Redis has lost the
// scripts (a restart), it loads them and tries once more.
func (s *Service) pipe(ctx context.Context, build func(redis.Pipeliner)) error {
	for try := 0; ; try++ {
		p := s.rdb.Pipeline()
		build(p)
		_, err := p.Exec(ctx)
		if err != nil && try == 0 && strings.Contains(err.Error(), "NOSCRIPT") {
			for _, sc := range []*redis.Script{s.enter, s.status} {
				if err := sc.Load(ctx, s.rdb).Err(); err != nil {
					return err
				}
			}
			continue
		}
		return err
	}
}
