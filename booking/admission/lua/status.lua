-- STATUS: where an account stands in a shard's queue; an admitted account
-- asking inside its offer's pick-up window claims the offer here.
-- KEYS: z, m, ba (admission batches: score = admitted count after the
-- batch, member = "<count>:<ms>:<fence>"), cl (claim ms by member)
-- ARGV: member, now ms, offer pick-up window ms, expire-at ms, sealed in
-- PostgreSQL ('1' or '')
-- Returns {'LOST'} for a lost queue (queue_lost), else rank, card, admitted, soldout, rate, cap, alts, batch, sealed,
-- score, claim ms ('' when not claimed, -1 when released by a sold-out answer), reach.
if queue_lost(KEYS[2], ARGV[5]) then return {'LOST'} end
local rank = redis.call('ZRANK', KEYS[1], ARGV[1])
local meta = redis.call('HMGET', KEYS[2], 'admitted', 'soldout', 'rate', 'cap', 'alts', 'sealed', 'reach')
local card = redis.call('ZCARD', KEYS[1])
local admitted = tonumber(meta[1] or '0')
local batch, claim = '', ''
if rank and rank < admitted then
  local b = redis.call('ZRANGEBYSCORE', KEYS[3], '(' .. rank, '+inf', 'LIMIT', 0, 1)
  batch = b[1] or ''
  claim = redis.call('HGET', KEYS[4], ARGV[1]) or ''
  if claim == '' and batch ~= '' then
    local offered = tonumber(string.match(batch, '^%d+:(%d+)'))
    if offered and tonumber(ARGV[2]) < offered + tonumber(ARGV[3]) then
      claim = ARGV[2]
      redis.call('HSET', KEYS[4], ARGV[1], claim)
      redis.call('PEXPIREAT', KEYS[4], ARGV[4])
    end
  end
end
-- A waiter told sold out leaves: its place is released (claim -1), so an
-- offer that reaches it after a reopening lapses at once instead of
-- keeping a place for a pick-up that will not come. While every place is
-- held (reach: the berth-legs held, each failed payment's giving places
-- back), so is a waiter farther back than reach: no seat can come to it.
if rank and rank >= admitted then
  local beyond = meta[7] and rank >= admitted + tonumber(meta[7])
  if (meta[2] or beyond) and redis.call('HSETNX', KEYS[4], ARGV[1], '-1') == 1 then
    redis.call('PEXPIREAT', KEYS[4], ARGV[4])
  end
  claim = redis.call('HGET', KEYS[4], ARGV[1]) or ''
end
local score = redis.call('ZSCORE', KEYS[1], ARGV[1]) or ''
return {rank or -1, card, admitted, meta[2] or '', meta[3] or '', meta[4] or '', meta[5] or '', batch, meta[6] or '', score, claim, meta[7] or ''}
