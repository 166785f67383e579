-- ADMIT: the leader admits the next n entrants of a shard's queue.
-- KEYS: z, m, ba (batches by count), bt (batch counts by time), cl (claims)
-- ARGV: fence, n, now ms, room (most to admit now: places left minus the
-- outstanding offers plus the no-show allowance, worked out by the
-- controller; -1 for no bound), expire-at ms, sealed in PostgreSQL ('1' or
-- ''), floor (admissions PostgreSQL is known to hold), and for a window not
-- sealed in PostgreSQL the cohort its witness recorded this tick: the
-- queue's mark and entrants (-1: none recorded)
-- A lost queue (queue_lost, or fewer admitted than PostgreSQL logged: a
-- replica that missed the last writes) is refused ({'LOST'}): the caller
-- rebuilds it (REBUILD) instead of offering places again from its start.
-- A leader whose fence is older than one already seen is refused (STALE):
-- fencing at the resource, so a paused old leader cannot admit. Admission
-- moves a cursor over a fixed order, so no one is admitted twice. The first
-- call seals the queue: the randomised cohort is final from then on.
if queue_behind(KEYS[2], ARGV[6], ARGV[7]) then
  return {'LOST'}
end
-- Before the seal in PostgreSQL, the queue must still be the one the
-- witness recorded (a wipe between the two would seal what is left):
-- else the caller reopens the draw.
if ARGV[6] ~= '1' and tonumber(ARGV[9]) >= 0 then
  local left = redis.call('ZCOUNT', KEYS[1], '-inf', '(4503599627370496')
  if (redis.call('HGET', KEYS[2], 'created') or '') ~= ARGV[8] or left < tonumber(ARGV[9]) then
    return {'REOPEN', left}
  end
end
local fence = tonumber(ARGV[1])
local cur = tonumber(redis.call('HGET', KEYS[2], 'fence') or '0')
if fence < cur then return {'STALE', tostring(cur)} end
redis.call('HSET', KEYS[2], 'fence', ARGV[1], 'sealed', '1', 'node', node_id())
local admitted = tonumber(redis.call('HGET', KEYS[2], 'admitted') or '0')
local card = redis.call('ZCARD', KEYS[1])
local n = tonumber(ARGV[2])
local room = tonumber(ARGV[4])
if room >= 0 then n = math.min(n, room) end
local upto = math.min(admitted + math.max(n, 0), card)
for _, k in ipairs(KEYS) do redis.call('PEXPIREAT', k, ARGV[5]) end
if upto <= admitted then return {'OK', admitted, admitted} end
redis.call('HSET', KEYS[2], 'admitted', upto)
redis.call('ZADD', KEYS[3], upto, upto .. ':' .. ARGV[3] .. ':' .. ARGV[1])
redis.call('ZADD', KEYS[4], ARGV[3], upto)
redis.call('PEXPIREAT', KEYS[3], ARGV[5])
redis.call('PEXPIREAT', KEYS[4], ARGV[5])
return {'OK', admitted, upto}
