-- SOLDOUT: what a process's sold-out cache (SoldOutCache) needs to answer
-- SOLD_OUT exactly as HOLD would, read in one atomic step.
-- KEYS: 1 meta 2 cnt 3 holds 4 live 5 daily 6 seen, 7.. leg bitmaps of
--       legs 0, 1, ... (MaxLegs of them), then the berth-type bitmaps
-- ARGV: 1 the stamp the cache holds ('' for none) 2 MaxLegs
-- The stamp is epoch.chg: HOLD bumps chg on every hold or waitlist offer,
-- RELEASE on every release, and LOAD and PROMOTE change the epoch. While
-- it stands still no seat or waitlist place came back and no user gained
-- state here, so a cache that holds it still holds the truth: SAME.
-- Otherwise STATE: the stamp, the legs, the waitlist places left, each
-- leg's bitmap, then every user with state here (live, daily, seen; HOLD
-- answers those by their state, not SOLD_OUT). A shard partly or wholly
-- lost answers NOT_READY, as HOLD would refuse it.
local m = redis.call('HMGET', KEYS[1], 'epoch', 'legs', 'chg', 'wlcap', 'wlcount', 'node')
-- Loaded on another node (a failover's replica may lack the last writes):
-- HOLD refuses it and has it rebuilt, so the cache must not answer for it.
if not m[1] or not m[2] or moved_node(m[6]) then return { 'NOT_READY' } end
local legs = tonumber(m[2])
local needed = { KEYS[2], KEYS[3], KEYS[4], KEYS[5] }
for l = 1, legs do needed[#needed + 1] = KEYS[6 + l] end
for i = 7 + tonumber(ARGV[2]), #KEYS do needed[#needed + 1] = KEYS[i] end
if not all_exist(needed) then return { 'NOT_READY' } end
local stamp = m[1] .. '.' .. (m[3] or '0')
if stamp == ARGV[1] then return { 'SAME', stamp } end
local out = { 'STATE', stamp, m[2], string.format('%d', tonumber(m[4] or '0') - tonumber(m[5] or '0')) }
for l = 1, legs do out[#out + 1] = redis.call('GET', KEYS[6 + l]) end
for _, k in ipairs({ KEYS[4], KEYS[5] }) do
  for _, u in ipairs(redis.call('HKEYS', k)) do
    if u ~= PAD then out[#out + 1] = u end
  end
end
for _, u in ipairs(redis.call('SMEMBERS', KEYS[6])) do out[#out + 1] = u end
return out
