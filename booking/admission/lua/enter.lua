-- ENTER: put an account in a shard's queue once.
-- KEYS: z (members: user ids, score: place), m (meta), at (arrival ms by member)
-- ARGV: member, cohort score ('' for a late entrant), expire-at ms, now ms,
-- sealed in PostgreSQL ('1' or ''), the drawn place to give if the draw
-- was reopened. Returns {'LOST'} for a lost queue (queue_lost): a late
-- place given there would vanish with the rebuild.
-- A cohort score is used only while the queue is not sealed; once the
-- controller has started admitting, everyone new queues behind, in arrival
-- order (score 2^52 + arrival number), so no admitted place ever moves.
local z, m = KEYS[1], KEYS[2]
if queue_lost(m, ARGV[5]) then return {'LOST'} end
local score = redis.call('ZSCORE', z, ARGV[1])
local created = 0
if not score then
  -- ARGV[6]: the drawn place to give if the draw was reopened after a loss
  -- (meta 'reopened': until when, ms) and this caller's window predates it.
  local cohort = ARGV[2]
  if cohort == '' and ARGV[6] and ARGV[6] ~= '' and
     tonumber(redis.call('HGET', m, 'reopened') or '0') > tonumber(ARGV[4]) then
    cohort = ARGV[6]
  end
  if cohort == '' or redis.call('HGET', m, 'sealed') then
    local seq = redis.call('HINCRBY', m, 'seq', 1)
    score = string.format('%.0f', 4503599627370496 + seq)
  else
    score = cohort
  end
  redis.call('ZADD', z, score, ARGV[1])
  created = 1
  redis.call('HSET', m, 'node', node_id())
  -- When this place was taken, for the window's fairness figures.
  if KEYS[3] and ARGV[4] then
    redis.call('HSET', KEYS[3], ARGV[1], ARGV[4])
    redis.call('PEXPIREAT', KEYS[3], ARGV[3])
  end
  if redis.call('ZCARD', z) == 1 then
    redis.call('PEXPIREAT', z, ARGV[3])
    -- The queue's mark (its creation time): the controller's witness in
    -- PostgreSQL tells a queue wiped and made again before its seal by it.
    redis.call('HSET', m, 'created', ARGV[4] or '1')
    redis.call('PEXPIREAT', m, ARGV[3])
  end
end
return {created, score}
