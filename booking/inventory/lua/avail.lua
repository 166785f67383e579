-- AVAIL: berths free on every leg of a journey, and waitlist places left.
-- KEYS: 1 meta 2 scratch, then ARGV[3] leg bitmaps (the journey's legs in order)
-- ARGV: 1 from 2 to 3 leg keys
local meta = redis.call('HMGET', KEYS[1], 'epoch', 'legs', 'nberths', 'wlcap', 'wlcount')
if not meta[1] then return { 'NOT_READY' } end
local from, to = tonumber(ARGV[1]), tonumber(ARGV[2])
local legs = tonumber(meta[2])
if not from or not to or from < 0 or to > legs or from >= to then return { 'BAD_JOURNEY' } end
local nleg = tonumber(ARGV[3])
if nleg ~= to - from then return redis.error_reply('avail: leg keys do not match the journey') end
-- A shard whose meta survived without its leg bitmaps is refused whole.
if redis.call('EXISTS', unpack(KEYS, 3, 2 + nleg)) ~= nleg then return { 'NOT_READY' } end
local free
if nleg == 1 then
  free = redis.call('BITCOUNT', KEYS[3])
else
  -- Redis ANDs the legs' bitmaps and counts the berths free on all of
  -- them. The scratch key is left for the next call to overwrite.
  redis.call('BITOP', 'AND', KEYS[2], unpack(KEYS, 3, 2 + nleg))
  free = redis.call('BITCOUNT', KEYS[2])
end
return { 'OK', free, tonumber(meta[4]) - tonumber(meta[5]), tonumber(meta[3]) }
