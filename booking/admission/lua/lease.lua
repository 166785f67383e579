-- LEASE: take or renew the controller lease. KEYS: leader, fence counter.
-- ARGV: instance id, ttl ms, floor. Returns the holder's fence, or 0 when
-- another instance holds it. Every new holder gets a larger fence, above
-- floor too: a queue that has seen a fence larger than the counter's (the
-- counter was lost with Redis) makes the next one larger still.
if tonumber(ARGV[3] or '0') > tonumber(redis.call('GET', KEYS[2]) or '0') then
  redis.call('SET', KEYS[2], ARGV[3])
end
local cur = redis.call('GET', KEYS[1])
if not cur then
  local f = redis.call('INCR', KEYS[2])
  redis.call('SET', KEYS[1], ARGV[1] .. '|' .. f, 'PX', ARGV[2])
  return f
end
local sep = string.find(cur, '|', 1, true)
if string.sub(cur, 1, sep - 1) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return tonumber(string.sub(cur, sep + 1))
end
return 0
