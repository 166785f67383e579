-- THROTTLE: one call against a shard's throttle, by GCRA (the generic cell
-- rate algorithm). The key holds the theoretical arrival time (TAT, in
-- microseconds of the Redis server's clock, so every process and every
-- cluster node agree): a call is admitted while TAT - now <= tolerance,
-- and then moves TAT one emission interval on. With a tolerance of one
-- interval, any one-second span admits at most rate + 1 calls.
-- KEYS: 1 the throttle key (the shard's hash tag), 2 optionally the
-- attempt's idempotency key (same tag)
-- ARGV: 1 emission interval in microseconds, 2 tolerance in microseconds
-- Returns { 1, 0 } admitted, or { 0, wait_ms } until the next slot.
-- A repeat of an attempt already decided (its idempotency key is known)
-- goes through without spending a slot: it is answered from its record
-- (a passenger whose HELD answer was lost asks again while the hold's
-- clock runs), and asks nothing new of the booking core.
if KEYS[2] and redis.call('EXISTS', KEYS[2]) == 1 then
  return { 1, 0 }
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local ahead = tat - now
if ahead > tolerance then
  return { 0, math.ceil((ahead - tolerance) / 1000) }
end
tat = tat + interval
-- The key lives only while it still says something: past TAT it is as if absent.
redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', math.ceil((tat - now) / 1000) + 1)
return { 1, 0 }
