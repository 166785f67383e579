-- ENTER: put an account in a shard's queue once.
-- KEYS: z (members: user ids, score: place), m (meta), at (arrival ms by member)
-- ARGV: member, cohort score ('' for a late entrant), expire-at ms, now ms
-- A cohort score is used only while the queue is not sealed; once the
-- controller has started admitting, everyone new queues behind, in arrival
-- order (score 2^52 + arrival number), so no admitted place ever moves.
local z, m = KEYS[1], KEYS[2]
local score = redis.call('ZSCORE', z, ARGV[1])
local created = 0
if not score then
  if ARGV[2] == '' or redis.call('HGET', m, 'sealed') then
    local seq = redis.call('HINCRBY', m, 'seq', 1)
    score = string.format('%.0f', 4503599627370496 + seq)
  else
    score = ARGV[2]
  end
  redis.call('ZADD', z, score, ARGV[1])
  created = 1
  -- When this place was taken, for the window's fairness figures.
  if KEYS[3] and ARGV[4] then
    redis.call('HSET', KEYS[3], ARGV[1], ARGV[4])
    redis.call('PEXPIREAT', KEYS[3], ARGV[3])
  end
  if redis.call('ZCARD', z) == 1 then
    redis.call('PEXPIREAT', z, ARGV[3])
    redis.call('HSET', m, 'created', '1')
    redis.call('PEXPIREAT', m, ARGV[3])
  end
end
return {created, score}
