-- RELEASE: give a hold's seats back.
-- KEYS: 1 meta 2 cnt 3 holds 4 exp 5 live 6 daily 7 idem (only used in undo mode),
--       8.. leg bitmaps of legs 0, 1, ... (MaxLegs of them)
-- ARGV: 1 hold_id 2 mode: release (expired, failed, cancelled hold),
--       undo (the durable write failed: as if the attempt never happened),
--       cancel (a confirmed or waitlisted booking is cancelled)
-- Answers RELEASED, GONE (nothing to do: idempotent), CONFIRMED (release or
-- undo of a sold record: use cancel) or RETAKING (release of an R record).
-- A shard whose meta survived without the keys this needs (a partial loss)
-- answers NOT_READY and is left as it is.
if not redis.call('HGET', KEYS[1], 'epoch') then return { 'NOT_READY' } end
local hold_id, mode = ARGV[1], ARGV[2]

-- Undo forgets the attempt's idempotency key, if it still names this hold
-- (gone or not: a retry must not be answered with a hold never made durable).
local function forget()
  if idem_hold(KEYS[7]) == hold_id then redis.call('DEL', KEYS[7]) end
end

local s = redis.call('HGET', KEYS[3], hold_id)
if not s then
  if redis.call('EXISTS', KEYS[3]) == 0 then return { 'NOT_READY' } end
  if mode == 'undo' then forget() end
  return { 'GONE' }
end
local r = rec_parse(s)
-- H W: a live hold or waitlist offer; R: seats retaken for a late payment,
-- not confirmed yet; C X: sold. A release of a lapsed hold never frees an
-- R record: that is the retake's, made under the same id after the lapse.
local unsold = r.state == 'H' or r.state == 'W' or r.state == 'R'
if r.state == 'R' and mode == 'release' then return { 'RETAKING' } end
if not unsold and mode ~= 'cancel' then return { 'CONFIRMED' } end
-- Cancel takes any state: PostgreSQL cancelled a booking whose confirmation
-- this record may never have seen (H, W or R), and its seats go back all
-- the same.

local seats = r.state ~= 'W' and r.state ~= 'X'
local needed = { KEYS[2], KEYS[5], KEYS[6] }
if seats then
  for l = r.from, r.to - 1 do needed[#needed + 1] = KEYS[8 + l] end
end
if not all_exist(needed) then return { 'NOT_READY' } end
if seats then
  berths_set(needed, 4, #needed, r.berths, '1')
  count_add(KEYS[2], r.state == 'C' and 'c' or 'h', r.from, r.to, '-' .. r.n_str)
else
  redis.call('HINCRBY', KEYS[1], 'wlcount', '-' .. r.n_str)
end
redis.call('HDEL', KEYS[3], hold_id)
redis.call('ZREM', KEYS[4], hold_id)
if redis.call('HGET', KEYS[5], r.user) == hold_id then redis.call('HDEL', KEYS[5], r.user) end
-- A hold that lapsed never became a ticket, so it does not use the day's
-- cap; a cancelled ticket did, whatever its record said.
if unsold and mode ~= 'cancel' then
  local left = redis.call('HINCRBY', KEYS[6], r.user, '-1')
  if left <= 0 then redis.call('HDEL', KEYS[6], r.user) end
end
if mode == 'undo' then forget() end
-- Seats or waitlist places came back: a process's sold-out cache re-reads
-- the shard when chg moves (SoldOutCache).
redis.call('HINCRBY', KEYS[1], 'chg', '1')
return { 'RELEASED' }
