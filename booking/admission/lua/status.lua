-- STATUS: where an account stands in a shard's queue.
-- KEYS: z, m, ba (admission batches: score = admitted count after the
-- batch, member = "<count>:<ms>:<fence>")
-- ARGV: member
local rank = redis.call('ZRANK', KEYS[1], ARGV[1])
local meta = redis.call('HMGET', KEYS[2], 'admitted', 'soldout', 'rate', 'cap', 'alts', 'sealed')
local card = redis.call('ZCARD', KEYS[1])
local admitted = tonumber(meta[1] or '0')
local batch = ''
if rank and rank < admitted then
  local b = redis.call('ZRANGEBYSCORE', KEYS[3], '(' .. rank, '+inf', 'LIMIT', 0, 1)
  batch = b[1] or ''
end
local score = redis.call('ZSCORE', KEYS[1], ARGV[1]) or ''
return {rank or -1, card, admitted, meta[2] or '', meta[3] or '', meta[4] or '', meta[5] or '', batch, meta[6] or '', score}
