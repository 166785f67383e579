-- CONFIRM: a held (or retaken, R) seat becomes sold (or a waitlist offer a waitlisted booking).
-- The berths stay taken in the leg bitmaps; only counters and the record move.
-- KEYS: 1 meta 2 cnt 3 holds 4 exp 5 live
-- ARGV: 1 hold_id
if not redis.call('HGET', KEYS[1], 'epoch') then return { 'NOT_READY' } end
local hold_id = ARGV[1]
local s = redis.call('HGET', KEYS[3], hold_id)
if not s then
  -- Gone, unless the records themselves are (a partial loss).
  if redis.call('EXISTS', KEYS[3]) == 0 then return { 'NOT_READY' } end
  return { 'GONE' }
end
local r = rec_parse(s)
if r.state == 'C' or r.state == 'X' then return { 'CONFIRMED' } end
if redis.call('EXISTS', KEYS[2], KEYS[5]) ~= 2 then return { 'NOT_READY' } end
local state = 'X'
if r.state == 'H' or r.state == 'R' then
  local n = string.format('%d', #r.berths)
  count_add(KEYS[2], 'h', r.from, r.to, '-' .. n)
  count_add(KEYS[2], 'c', r.from, r.to, n)
  state = 'C'
end
-- Only the state changes: the record's first field.
redis.call('HSET', KEYS[3], hold_id, state .. string.sub(s, 2))
redis.call('ZREM', KEYS[4], hold_id)
if redis.call('HGET', KEYS[5], r.user) == hold_id then redis.call('HDEL', KEYS[5], r.user) end
return { 'CONFIRMED' }
