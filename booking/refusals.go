package booking

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// HoldRefusal is one hold attempt a traveller was refused, for the
// console's user trace ("why did this person not get a ticket"): sold out,
// daily cap, live hold, throttled, high demand, no admission, and so on.
type HoldRefusal struct {
	At      time.Time
	ShardID int64
	Reason  string // the error's reason (DAILY_CAP, LIVE_HOLD_EXISTS, THROTTLED, HIGH_DEMAND...) or SOLD_OUT
	Detail  string // what the traveller was told
}

// The refusal log is a diagnosis, not a record: bounded per account and
// in time, written off the hold path, dropped when it cannot keep up.
const (
	refusalsKept   = 50              // per account, newest first
	refusalsTTL    = 48 * time.Hour  // outlives a window and the day after
	refusalsQueued = 4096            // refusals waiting to be written; more are dropped
	refusalsBatch  = 256             // written in one pipeline
	refusalsWait   = 2 * time.Second // bound of one batch's write
)

// refusalLog writes hold refusals to a capped Redis list per account. The
// hold path only offers the refusal to a buffered channel (never blocks);
// a writer drains it in pipelined batches, so a flood of refusals (a
// sold-out rush) costs one round trip per batch, not per refusal. The
// writer runs only while there is something to write, so an idle service
// keeps no goroutine.
type refusalLog struct {
	rdb     redis.UniversalClient
	key     func(userID int64) string
	ch      chan refusalNote
	writing atomic.Bool
	ctx     context.Context // the service's background: ends with Close
	log     *slog.Logger
}

type refusalNote struct {
	user int64
	HoldRefusal
}

func (s *Service) startRefusalLog() {
	if s.store == nil {
		return
	}
	st := s.store
	s.refusals = &refusalLog{rdb: st.Redis(), key: func(u int64) string { return st.UserKey(u, "holdref") },
		ch: make(chan refusalNote, refusalsQueued), ctx: s.background, log: s.log}
}

// noteRefusal offers a refusal to the log; a full log drops it.
func (s Holds) noteRefusal(userID, shardID int64, reason, detail string) {
	l := s.refusals
	if l == nil || userID == 0 {
		return
	}
	select {
	case l.ch <- refusalNote{userID, HoldRefusal{At: s.now(), ShardID: shardID, Reason: reason, Detail: detail}}:
	default:
		return
	}
	if l.writing.CompareAndSwap(false, true) {
		go l.drain()
	}
}

// drain writes batches until the channel is empty, then stops; a refusal
// offered as it stops starts it again (the second check below).
func (l *refusalLog) drain() {
	batch := make([]refusalNote, 0, refusalsBatch)
	for {
		batch = batch[:0]
	fill:
		for len(batch) < refusalsBatch {
			select {
			case n := <-l.ch:
				batch = append(batch, n)
			default:
				break fill
			}
		}
		if len(batch) == 0 {
			l.writing.Store(false)
			if len(l.ch) == 0 || !l.writing.CompareAndSwap(false, true) {
				return
			}
			continue
		}
		if l.ctx.Err() != nil {
			continue // closing: drop what is queued
		}
		wctx, cancel := context.WithTimeout(l.ctx, refusalsWait)
		p := l.rdb.Pipeline()
		for _, n := range batch {
			k := l.key(n.user)
			p.LPush(wctx, k, encodeRefusal(n.HoldRefusal))
			p.LTrim(wctx, k, 0, refusalsKept-1)
			p.Expire(wctx, k, refusalsTTL)
		}
		if _, err := p.Exec(wctx); err != nil {
			l.log.Debug("note hold refusals", "n", len(batch), "err", err)
		}
		cancel()
	}
}

func encodeRefusal(r HoldRefusal) string {
	return strconv.FormatInt(r.At.UnixMilli(), 10) + "|" + strconv.FormatInt(r.ShardID, 10) + "|" + r.Reason + "|" + r.Detail
}

// HoldRefusals lists the latest hold refusals of userID, newest first.
func (s Holds) HoldRefusals(ctx context.Context, userID int64) ([]HoldRefusal, error) {
	if s.refusals == nil {
		return nil, nil
	}
	vs, err := s.refusals.rdb.LRange(ctx, s.refusals.key(userID), 0, refusalsKept-1).Result()
	if err != nil {
		return nil, fmt.Errorf("hold refusals of %d: %w", userID, err)
	}
	out := make([]HoldRefusal, 0, len(vs))
	for _, v := range vs {
		f := strings.SplitN(v, "|", 4)
		if len(f) < 4 {
			continue
		}
		ms, _ := strconv.ParseInt(f[0], 10, 64)
		id, _ := strconv.ParseInt(f[1], 10, 64)
		out = append(out, HoldRefusal{At: time.UnixMilli(ms), ShardID: id, Reason: f[2], Detail: f[3]})
	}
	return out, nil
}
