-- SNAPSHOT: the whole state of a shard at one instant, for the invariant check.
-- KEYS: 1 meta 2 cnt 3 holds 4 live 5 daily, then ARGV[1] leg bitmaps (legs
--       0, 1, ...), then the berth-type bitmaps
-- A missing bitmap comes back as nil.
local legs = tonumber(redis.call('HGET', KEYS[1], 'legs') or '0')
local nleg = tonumber(ARGV[1])
local leg_maps, type_maps = {}, {}
for l = 1, math.min(legs, nleg) do leg_maps[l] = redis.call('GET', KEYS[5 + l]) end
for i = 6 + nleg, #KEYS do type_maps[#type_maps + 1] = redis.call('GET', KEYS[i]) end
return { redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', KEYS[2]),
         redis.call('HGETALL', KEYS[3]), leg_maps, type_maps,
         { redis.call('HEXISTS', KEYS[2], PAD), redis.call('HEXISTS', KEYS[3], PAD),
           redis.call('HEXISTS', KEYS[4], PAD), redis.call('HEXISTS', KEYS[5], PAD) } }
