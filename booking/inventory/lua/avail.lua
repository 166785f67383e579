-- AVAIL: berths free on every leg of a journey, and waitlist places left.
-- KEYS: 1 meta 2 occ
-- ARGV: 1 from 2 to
local epoch = redis.call('HGET', KEYS[1], 'epoch')
if not epoch then return { 'NOT_READY' } end
local from, to = tonumber(ARGV[1]), tonumber(ARGV[2])
local legs = tonumber(redis.call('HGET', KEYS[1], 'legs'))
if not from or not to or from < 0 or to > legs or from >= to then return { 'BAD_JOURNEY' } end
local need = leg_mask(from, to)
local occ = redis.call('GET', KEYS[2])
local n, free = tonumber(redis.call('HGET', KEYS[1], 'nberths')), 0
for b = 0, n - 1 do
  if bit.band(occ_get(occ, b), need) == 0 then free = free + 1 end
end
local wl = tonumber(redis.call('HGET', KEYS[1], 'wlcap')) - tonumber(redis.call('HGET', KEYS[1], 'wlcount'))
return { 'OK', free, wl, n }
