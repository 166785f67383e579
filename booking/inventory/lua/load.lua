-- LOAD: replace a shard's whole state, rebuilt from PostgreSQL, under a
-- newer epoch. An equal or older epoch is refused, so a slow rebuild can
-- never overwrite a newer one.
-- KEYS: 1 meta 2 occ 3 btype 4 coach 5 cnt 6 holds 7 exp 8 live 9 daily
-- ARGV: 1 epoch 2 nberths 3 legs 4 wlcap 5 wlcount 6 wlnext 7 btype 8 coach 9 occ
--       10 counts "field=value\n..." 11 holds "id=record\n..." 12 live "user=hold\n..."
--       13 daily "user=count\n..."
local cur = redis.call('HGET', KEYS[1], 'epoch')
if cur and tonumber(cur) >= tonumber(ARGV[1]) then return { 'STALE', cur } end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9])
redis.call('SET', KEYS[2], ARGV[9])
redis.call('SET', KEYS[3], ARGV[7])
redis.call('SET', KEYS[4], ARGV[8])
for k, v in string.gmatch(ARGV[10], '([^=\n]+)=([^\n]*)\n') do redis.call('HSET', KEYS[5], k, v) end
for k, v in string.gmatch(ARGV[11], '([^=\n]+)=([^\n]*)\n') do
  redis.call('HSET', KEYS[6], k, v)
  local r = rec_parse(v)
  if r.state == 'H' or r.state == 'W' then redis.call('ZADD', KEYS[7], r.expires, k) end
end
for k, v in string.gmatch(ARGV[12], '([^=\n]+)=([^\n]*)\n') do redis.call('HSET', KEYS[8], k, v) end
for k, v in string.gmatch(ARGV[13], '([^=\n]+)=([^\n]*)\n') do redis.call('HSET', KEYS[9], k, v) end
-- meta last: its epoch is what makes the shard ready
redis.call('HSET', KEYS[1], 'nberths', ARGV[2], 'legs', ARGV[3], 'wlcap', ARGV[4],
  'wlcount', ARGV[5], 'wlnext', ARGV[6], 'epoch', ARGV[1])
return { 'LOADED', ARGV[1] }
