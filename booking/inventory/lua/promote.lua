-- PROMOTE: apply a waitlist promotion PostgreSQL has committed, as a delta:
-- the cancelled bookings' records go (their berths freed, as RELEASE's
-- cancel would), the promoted waitlisted bookings (X) become sold (C) on
-- the berths PostgreSQL gave them, and the shard moves to the promotion's
-- epoch. Fenced: only from the epoch the promotion started from, so a
-- rebuild or another writer in between makes it answer STALE. Everything
-- is checked before the first write (a script stopped half way keeps its
-- writes): any disagreement with Redis answers MISMATCH and changes
-- nothing. On STALE, MISMATCH or NOT_READY the caller rebuilds the shard.
-- KEYS: 1 meta 2 cnt 3 holds 4 exp 5 live, 6.. leg bitmaps of legs 0, 1, ...
--       (MaxLegs of them)
-- ARGV: 1 epoch the promotion started from 2 its epoch
--       3 cancelled hold ids "id\n..." (absent ones are skipped)
--       4 promotions "hold_id=b1,b2\n..." (berths in passenger order)
local cur, loaded_by = unpack(redis.call('HMGET', KEYS[1], 'epoch', 'node'))
if not cur or moved_node(loaded_by) then return { 'NOT_READY' } end
if cur ~= ARGV[1] then return { 'STALE', cur } end
local legs = tonumber(redis.call('HGET', KEYS[1], 'legs'))
local needed = { KEYS[2], KEYS[3] }
for l = 0, legs - 1 do needed[#needed + 1] = KEYS[6 + l] end
if not all_exist(needed) then return { 'NOT_READY' } end

-- Plan. freed[leg][berth]: berths the cancelled records give back.
local freed, drops = {}, {}
for id in string.gmatch(ARGV[3], '([^\n]+)\n') do
  local s = redis.call('HGET', KEYS[3], id)
  if s then
    local r = rec_parse(s)
    drops[#drops + 1] = { id = id, r = r }
    if r.state ~= 'W' and r.state ~= 'X' then
      for l = r.from, r.to - 1 do
        freed[l] = freed[l] or {}
        for _, b in ipairs(r.berths) do freed[l][b] = true end
      end
    end
  end
end
local taken, promos = {}, {}
for id, csv in string.gmatch(ARGV[4], '([^=\n]+)=([^\n]*)\n') do
  local s = redis.call('HGET', KEYS[3], id)
  if not s then return { 'MISMATCH', id } end
  local r = rec_parse(s)
  local berths = {}
  for b in string.gmatch(csv, '[^,]+') do berths[#berths + 1] = b end
  if r.state ~= 'X' or #berths ~= r.n then return { 'MISMATCH', id } end
  for l = r.from, r.to - 1 do
    taken[l] = taken[l] or {}
    for _, b in ipairs(berths) do
      local free = (freed[l] and freed[l][b]) or redis.call('GETBIT', KEYS[6 + l], b) == 1
      if not free or taken[l][b] then return { 'MISMATCH', id } end
      taken[l][b] = true
    end
  end
  promos[#promos + 1] = { id = id, r = r, berths = berths, csv = csv }
end

-- Write: the cancelled first (their berths free), then the promoted.
for _, d in ipairs(drops) do
  local r = d.r
  if r.state ~= 'W' and r.state ~= 'X' then
    for l = r.from, r.to - 1 do
      for _, b in ipairs(r.berths) do redis.call('SETBIT', KEYS[6 + l], b, '1') end
    end
    count_add(KEYS[2], r.state == 'C' and 'c' or 'h', r.from, r.to, '-' .. r.n_str)
  else
    redis.call('HINCRBY', KEYS[1], 'wlcount', '-' .. r.n_str)
  end
  redis.call('HDEL', KEYS[3], d.id)
  redis.call('ZREM', KEYS[4], d.id)
  if redis.call('HGET', KEYS[5], r.user) == d.id then redis.call('HDEL', KEYS[5], r.user) end
end
for _, p in ipairs(promos) do
  local r = p.r
  for l = r.from, r.to - 1 do
    for _, b in ipairs(p.berths) do redis.call('SETBIT', KEYS[6 + l], b, '0') end
  end
  count_add(KEYS[2], 'c', r.from, r.to, r.n_str)
  redis.call('HINCRBY', KEYS[1], 'wlcount', '-' .. r.n_str)
  redis.call('HSET', KEYS[3], p.id, string.format('C|%s|%d|%d|%s|%s|%s|%s', r.user, r.from, r.to, r.expires, p.csv, r.wl, r.n_str))
end
redis.call('HSET', KEYS[1], 'epoch', ARGV[2])
return { 'PROMOTED', string.format('%d', #drops), string.format('%d', #promos) }
