package admission

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// limit counts this call against the per-second limits of the caller's IP,
// device and account (fixed one-second windows in Redis, shared by every
// process). Over a limit is answered like overload. If Redis cannot count,
// the call goes on: the queue scripts that follow fail closed anyway.
func (s *Service) limit(ctx context.Context, c Caller, device string) error {
	pipe := s.rdb.Pipeline()
	over := s.limitCmds(ctx, pipe, c, device)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil
	}
	if over() {
		return highDemand()
	}
	return nil
}

// limitCmds adds the limit counters to pipe; the returned func, called
// after the pipeline ran, reports whether a limit was exceeded.
func (s *Service) limitCmds(ctx context.Context, pipe redis.Pipeliner, c Caller, device string) func() bool {
	sec := strconv.FormatInt(s.now().Unix(), 10)
	type lim struct {
		key string
		max int
	}
	ls := []lim{
		{s.cfg.Prefix + ":rl:a:" + strconv.FormatInt(c.UserID, 10) + ":" + sec, s.cfg.LimitAccount},
		{s.cfg.Prefix + ":rl:d:" + device + ":" + sec, s.cfg.LimitDevice},
	}
	if c.IP != "" {
		ls = append(ls, lim{s.cfg.Prefix + ":rl:i:" + c.IP + ":" + sec, s.cfg.LimitIP})
	}
	cmds := make([]*redis.IntCmd, len(ls))
	for i, l := range ls {
		cmds[i] = pipe.Incr(ctx, l.key)
		pipe.Expire(ctx, l.key, 2*time.Second)
	}
	return func() bool {
		for i, l := range ls {
			if cmds[i].Val() > int64(l.max) {
				s.cfg.Funnel.Add(0, "queue_rate_limited", 1)
				return true
			}
		}
		return false
	}
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
