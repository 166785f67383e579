-- RELEASE: give a hold's seats back.
-- KEYS: 1 meta 2 occ 3 cnt 4 holds 5 exp 6 live 7 daily 8 idem (only read in undo mode)
-- ARGV: 1 hold_id 2 mode: release (expired, failed, cancelled hold),
--       undo (the durable write failed: as if the attempt never happened),
--       cancel (a confirmed or waitlisted booking is cancelled)
-- Idempotent: a hold that is gone answers GONE.
if not redis.call('HGET', KEYS[1], 'epoch') then return { 'NOT_READY' } end
local hold_id, mode = ARGV[1], ARGV[2]
local s = redis.call('HGET', KEYS[4], hold_id)
if not s then return { 'GONE' } end
local r = rec_parse(s)
local live = r.state == 'H' or r.state == 'W'
if live and mode == 'cancel' then return { 'STILL_HELD' } end
if not live and mode ~= 'cancel' then return { 'CONFIRMED' } end

local npax = r.n
if r.state == 'H' or r.state == 'C' then
  local occ = redis.call('GET', KEYS[2])
  local keep = bit.bnot(leg_mask(r.from, r.to))
  for _, b in ipairs(r.berths) do occ_set(KEYS[2], b, bit.band(occ_get(occ, b), keep)) end
  count_add(KEYS[3], r.state == 'H' and 'h' or 'c', r.from, r.to, -npax)
else
  redis.call('HINCRBY', KEYS[1], 'wlcount', -npax)
end
redis.call('HDEL', KEYS[4], hold_id)
redis.call('ZREM', KEYS[5], hold_id)
if redis.call('HGET', KEYS[6], r.user) == hold_id then redis.call('HDEL', KEYS[6], r.user) end
-- A hold that lapsed never became a ticket, so it does not use the day's cap.
if live then
  local left = redis.call('HINCRBY', KEYS[7], r.user, -1)
  if left <= 0 then redis.call('HDEL', KEYS[7], r.user) end
end
if mode == 'undo' then redis.call('DEL', KEYS[8]) end
return { 'RELEASED' }
