-- CONFIRM: a held seat becomes sold (or a waitlist offer a waitlisted booking).
-- KEYS: 1 meta 2 cnt 3 holds 4 exp 5 live
-- ARGV: 1 hold_id
if not redis.call('HGET', KEYS[1], 'epoch') then return { 'NOT_READY' } end
local hold_id = ARGV[1]
local s = redis.call('HGET', KEYS[3], hold_id)
if not s then return { 'GONE' } end
local r = rec_parse(s)
if r.state == 'C' or r.state == 'X' then return { 'CONFIRMED' } end
if r.state == 'H' then
  count_add(KEYS[2], 'h', r.from, r.to, -#r.berths)
  count_add(KEYS[2], 'c', r.from, r.to, #r.berths)
  r.state = 'C'
else
  r.state = 'X'
end
redis.call('HSET', KEYS[3], hold_id, rec_string(r))
redis.call('ZREM', KEYS[4], hold_id)
if redis.call('HGET', KEYS[5], r.user) == hold_id then redis.call('HDEL', KEYS[5], r.user) end
return { 'CONFIRMED' }
