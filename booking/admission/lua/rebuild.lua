-- REBUILD: replace a lost queue (queue_lost, or fewer admitted than
-- PostgreSQL logged) by the copy the controller staged from PostgreSQL.
-- KEYS: z, m, ba, bt, cl, at (the queue), then the staged z, ba, bt, cl
-- ARGV: fence, admitted (PostgreSQL's log count), expire-at ms,
--       fence to record (the larger of ours and the log's highest),
--       seq (the last late entrant's number in the staged queue)
-- Returns {'REBUILT'}, {'NOTLOST'} (someone rebuilt it first: the staged
-- copy is dropped), or {'STALE', fence} for a leader older than the fence
-- the queue has seen.
local staged = { KEYS[7], KEYS[8], KEYS[9], KEYS[10] }
local function drop() redis.call('DEL', unpack(staged)) end
if not queue_behind(KEYS[2], '1', ARGV[2]) then
  drop()
  return {'NOTLOST'}
end
local cur = tonumber(redis.call('HGET', KEYS[2], 'fence') or '0')
if tonumber(ARGV[1]) < cur then drop() return {'STALE', tostring(cur)} end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
for i, k in ipairs(staged) do
  if redis.call('EXISTS', k) == 1 then redis.call('RENAME', k, KEYS[({1, 3, 4, 5})[i]]) end
end
-- 'seq' numbers late entrants from here on, above every one staged.
redis.call('HSET', KEYS[2], 'admitted', ARGV[2], 'logged', ARGV[2], 'seq', ARGV[5], 'sealed', '1',
  'created', '1', 'fence', ARGV[4], 'node', node_id())
for i = 1, 5 do redis.call('PEXPIREAT', KEYS[i], ARGV[3]) end
return {'REBUILT'}
