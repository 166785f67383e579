package admission

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Why the waiting room turned a traveller away, for the user trace.
const (
	RefusedRateLimit = "RATE_LIMITED" // over its own account or device limit
	RefusedEarlyPoll = "EARLY_POLL"   // polled before poll_after_ms: the previous answer again
	RefusedSoldOut   = "SOLD_OUT"     // the queue was released: nothing left to sell
	RefusedLapsed    = "OFFER_LAPSED" // admitted, but not back within the pick-up window
)

// Refusal is one refusal a traveller got in a queue.
type Refusal struct {
	At      time.Time
	ShardID int64
	Reason  string
	Detail  string
}

// refusalsKept bounds each traveller's list; refusalsTTL outlives a window.
const (
	refusalsKept = 50
	refusalsTTL  = 48 * time.Hour
)

func refusalsKey(prefix string, userID int64) string {
	return prefix + ":qref:" + strconv.FormatInt(userID, 10)
}

// refused notes a refusal in the traveller's capped list: one pipelined
// write, at most one per answer given (early polls are noted once per
// cached answer), so recording never costs more than the refusal did. A
// failed write is only logged: the trace is a diagnosis, not a record.
func (s *Service) refused(ctx context.Context, userID, shardID int64, reason, detail string) {
	k := refusalsKey(s.cfg.Prefix, userID)
	v := strconv.FormatInt(s.now().UnixMilli(), 10) + "|" + strconv.FormatInt(shardID, 10) + "|" + reason + "|" + detail
	p := s.rdb.Pipeline()
	p.LPush(ctx, k, v)
	p.LTrim(ctx, k, 0, refusalsKept-1)
	p.Expire(ctx, k, refusalsTTL)
	if _, err := p.Exec(ctx); err != nil {
		s.log.Debug("note queue refusal", "user", userID, "reason", reason, "err", err)
	}
}

// Refusals lists the latest refusals userID got in any queue, newest first
// (for the console's user trace).
func (s *Service) Refusals(ctx context.Context, userID int64) ([]Refusal, error) {
	vs, err := s.rdb.LRange(ctx, refusalsKey(s.cfg.Prefix, userID), 0, refusalsKept-1).Result()
	if err != nil {
		return nil, fmt.Errorf("queue refusals of %d: %w", userID, err)
	}
	out := make([]Refusal, 0, len(vs))
	for _, v := range vs {
		f := strings.SplitN(v, "|", 4)
		if len(f) < 4 {
			continue
		}
		ms, _ := strconv.ParseInt(f[0], 10, 64)
		id, _ := strconv.ParseInt(f[1], 10, 64)
		out = append(out, Refusal{At: time.UnixMilli(ms), ShardID: id, Reason: f[2], Detail: f[3]})
	}
	return out, nil
}
