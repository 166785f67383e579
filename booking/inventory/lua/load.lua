-- LOAD: replace a shard's whole state, rebuilt from PostgreSQL, under a
-- newer epoch. An equal or older epoch is refused, so a slow rebuild can
-- never overwrite a newer one.
-- KEYS: 1 meta 2 cnt 3 holds 4 exp 5 live 6 daily, then ARGV[12] leg bitmaps
--       (legs 0, 1, ...), then ARGV[13] berth-type bitmaps, then any further
--       keys of the shard's family (scratch, earlier formats): all are deleted
-- ARGV: 1 epoch 2 nberths 3 legs 4 wlcap 5 wlcount 6 wlnext 7 coaches
--       8 counts "field=value\n..." 9 holds "id=record\n..." 10 live "user=hold\n..."
--       11 daily "user=count\n..." 12 leg keys 13 type keys 14 pad,
--       15.. one bitmap per leg (legs of them), then one per type key
local cur = redis.call('HGET', KEYS[1], 'epoch')
if cur and tonumber(cur) >= tonumber(ARGV[1]) then return { 'STALE', cur } end
redis.call('DEL', unpack(KEYS))
local legs, nleg, ntype = tonumber(ARGV[3]), tonumber(ARGV[12]), tonumber(ARGV[13])
for l = 1, legs do redis.call('SET', KEYS[6 + l], ARGV[14 + l]) end
for i = 1, ntype do redis.call('SET', KEYS[6 + nleg + i], ARGV[14 + legs + i]) end
-- The pad field (PAD in common.lua) first: each hash is a hash table from
-- its first field on, and keeps it, since the hash never empties.
for _, i in ipairs({ 2, 3, 5, 6 }) do redis.call('HSET', KEYS[i], PAD, ARGV[14]) end
for k, v in string.gmatch(ARGV[8], '([^=\n]+)=([^\n]*)\n') do redis.call('HSET', KEYS[2], k, v) end
for k, v in string.gmatch(ARGV[9], '([^=\n]+)=([^\n]*)\n') do
  redis.call('HSET', KEYS[3], k, v)
  local r = rec_parse(v)
  if r.state == 'H' or r.state == 'W' then redis.call('ZADD', KEYS[4], r.expires, k) end
end
for k, v in string.gmatch(ARGV[10], '([^=\n]+)=([^\n]*)\n') do redis.call('HSET', KEYS[5], k, v) end
for k, v in string.gmatch(ARGV[11], '([^=\n]+)=([^\n]*)\n') do redis.call('HSET', KEYS[6], k, v) end
-- meta last: its epoch is what makes the shard ready.
-- (HOLD reads the first five fields on every call: they come first.)
-- 'node' is the node that loaded it (see moved_node).
redis.call('HSET', KEYS[1], 'epoch', ARGV[1], 'legs', ARGV[3], 'nberths', ARGV[2], 'coaches', ARGV[7],
  'node', node_id(), 'wlcap', ARGV[4], 'wlcount', ARGV[5], 'wlnext', ARGV[6])
return { 'LOADED', ARGV[1] }
