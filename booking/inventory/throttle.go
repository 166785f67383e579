package inventory

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/throttle.lua
var throttleLua string

var throttleScript = redis.NewScript(throttleLua)

// Pace spends one call of the shard's throttle named kind ("hold", "pay"),
// paced at perSecond with a burst tolerance of one interval (GCRA, see
// lua/throttle.lua). It answers 0 when the call may go on, else how long
// until the next slot. The key shares the shard's hash tag, so on a Redis
// Cluster it lives beside the shard's seats. A hold attempt (idem not "")
// that the seat script has already decided goes through without spending
// a slot.
func (s *Store) Pace(ctx context.Context, shardID int64, kind string, perSecond int, userID int64, idem string) (time.Duration, error) {
	if perSecond <= 0 {
		return 0, fmt.Errorf("pace shard %d %s: rate %d", shardID, kind, perSecond)
	}
	interval := max(int64(time.Second/time.Microsecond)/int64(perSecond), 1)
	keys := []string{s.key(shardID, "throttle:"+kind)}
	if idem != "" {
		keys = append(keys, s.idemKey(shardID, userID, idem))
	}
	res, err := throttleScript.Run(ctx, s.rdb, keys, interval, interval).Int64Slice()
	if err != nil {
		return 0, fmt.Errorf("pace shard %d %s: %w", shardID, kind, err)
	}
	if len(res) != 2 {
		return 0, fmt.Errorf("pace shard %d %s: answer %v", shardID, kind, res)
	}
	if res[0] == 1 {
		return 0, nil
	}
	return max(time.Duration(res[1])*time.Millisecond, time.Millisecond), nil
}
