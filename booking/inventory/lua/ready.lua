-- READY: { '1', epoch } when the shard's state is whole, { '0' } when it is
-- missing or only partly there (a partial loss: rebuilt like a lost one),
-- or was loaded on another node (a failover: see moved_node).
-- KEYS: 1 meta 2 cnt 3 holds 4 live 5 daily, then ARGV[1] leg bitmaps
--       (legs 0, 1, ...), then the berth-type bitmaps
local m = redis.call('HMGET', KEYS[1], 'epoch', 'legs', 'coaches', 'node')
if not m[1] or moved_node(m[4]) then return { '0' } end
local nleg = tonumber(ARGV[1])
local legs = tonumber(m[2] or '0')
if not m[3] or legs < 1 or legs > nleg then return { '0' } end
local needed = { KEYS[2], KEYS[3], KEYS[4], KEYS[5] }
for l = 1, legs do needed[#needed + 1] = KEYS[5 + l] end
for i = 6 + nleg, #KEYS do needed[#needed + 1] = KEYS[i] end
if not all_exist(needed) then return { '0' } end
return { '1', m[1] }
