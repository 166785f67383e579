-- SNAPSHOT: the whole state of a shard at one instant, for the invariant check.
-- KEYS: 1 meta 2 occ 3 cnt 4 holds
return { redis.call('HGETALL', KEYS[1]), redis.call('GET', KEYS[2]) or '',
         redis.call('HGETALL', KEYS[3]), redis.call('HGETALL', KEYS[4]) }
