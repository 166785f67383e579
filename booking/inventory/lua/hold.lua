-- HOLD: decide one hold attempt atomically.
-- KEYS: 1 meta 2 exp 3 idem 4 scratch (the journey's free berths) 5 holds 6 live
--       7 daily 8 cnt, then ARGV[12] leg bitmaps (the journey's legs in order),
--       then one berth-type bitmap per code of ARGV[13], then as many scratch keys
--       then the shard's seen set (users given HELD or WAITLIST_OFFERED: the
--       sold-out cache sends them to this script, see SoldOutCache)
-- When ARGV[14] (an admission token's mark lifetime, ms) is not 0, the last
-- KEY is that token's used-mark: a used token is refused, and a decision
-- (HELD, WAITLIST_OFFERED, SOLD_OUT) marks it used in this same step.
-- ARGV[15] = 1 is a retake: seats taken back for a payment that arrived after
-- its hold lapsed. It skips the per-user limits (the journey is paid for) and
-- does not become the user's live hold; its record is marked R (retaking)
-- until CONFIRM, so a late RELEASE of the lapsed hold leaves it alone.
-- A hold id that already has a record is refused (HOLD_EXISTS): a record is
-- never overwritten, its seats would stay taken with nothing to free them.
-- ARGV: 1 hold_id 2 user 3 from 4 to 5 expires_ms 6 daily_cap 7 prefs
--       8 id_ok 9 allow_waitlist 10 idem_ttl_s 11 max_pax 12 leg keys 13 type codes
--       16 the request's hash: kept with the idempotency key's answer, and a
--       replay with another hash is refused (KEY_REUSED) with nothing changed
-- Checked before any write: a script that fails midway keeps its writes.
-- Every redis.call and every table costs here: the script keeps both few.
local idem_ttl = tonumber(ARGV[10])
if not idem_ttl or idem_ttl < 1 then return redis.error_reply('hold: idempotency ttl must be at least 1 second') end
local meta = redis.call('HMGET', KEYS[1], 'epoch', 'legs', 'nberths', 'coaches', 'node')
local epoch = meta[1]
if not epoch or moved_node(meta[5]) then return { 'NOT_READY' } end

-- A replayed key returns the prior answer, but only one given under the
-- current epoch: after a rebuild, PostgreSQL's unique key is the judge.
-- Stored as epoch|answer (four fields)|request hash.
local req_hash = ARGV[16] or ''
local prior = redis.call('GET', KEYS[3])
if prior then
  local sep = string.find(prior, '|', 1, true)
  if string.sub(prior, 1, sep - 1) == epoch then
    local body = string.sub(prior, sep + 1)
    local answer, hash = string.match(body, '^([^|]*|[^|]*|[^|]*|[^|]*)|(.*)$')
    if not answer then answer, hash = body, '' end
    if hash ~= '' and req_hash ~= '' and hash ~= req_hash then return { 'KEY_REUSED', epoch } end
    return { 'REPLAY', epoch, answer }
  end
end

local tok_ttl = ARGV[14] or '0'
local tok_key = nil
if tok_ttl ~= '0' then
  tok_key = KEYS[#KEYS]
  if redis.call('EXISTS', tok_key) == 1 then return { 'TOKEN_USED', epoch } end
end

local hold_id, user = ARGV[1], ARGV[2]
local from, to = tonumber(ARGV[3]), tonumber(ARGV[4])
local prefs = ARGV[7]
local npax = string.len(prefs)
local legs = tonumber(meta[2])
if npax < 1 or npax > tonumber(ARGV[11]) then return { 'BAD_PASSENGERS', epoch } end
if ARGV[8] ~= '1' then return { 'NO_ID', epoch } end
if from < 0 or to > legs or from >= to then return { 'BAD_JOURNEY', epoch } end

local retake = ARGV[15] == '1'
if not retake then
  local live = redis.call('HGET', KEYS[6], user)
  if live then return { 'LIVE_HOLD', epoch, live } end
  local used = tonumber(redis.call('HGET', KEYS[7], user) or '0')
  if used >= tonumber(ARGV[6]) then return { 'DAILY_CAP', epoch } end
end

if redis.call('HEXISTS', KEYS[5], hold_id) == 1 then return { 'HOLD_EXISTS', epoch } end

local nleg, codes = tonumber(ARGV[12]), ARGV[13]
if nleg ~= to - from then return redis.error_reply('hold: leg keys do not match the journey') end
local ntype = string.len(codes)
local coaches = meta[4]
-- A shard whose meta survived without the keys this hold reads or writes
-- (a partial loss) is refused, not read as empty. (The hashes always hold
-- at least PAD.)
if not coaches or redis.call('EXISTS', unpack(KEYS, 5, 8 + nleg + ntype)) ~= 4 + nleg + ntype then
  return { 'NOT_READY' }
end

-- Redis ANDs the legs' bitmaps: bit b of F is set when berth b is free
-- for the whole journey. The scratch keys are left for the next call to
-- overwrite (scripts are atomic; LOAD and Wipe delete them). One MGET
-- reads F and the bitmaps of the wanted types.
local free = KEYS[9]
if nleg > 1 then
  free = KEYS[4]
  redis.call('BITOP', 'AND', free, unpack(KEYS, 9, 8 + nleg))
end
local maps = redis.call('MGET', free, unpack(KEYS, 9 + nleg, 8 + nleg + ntype))
local F = maps[1]
local nberths = tonumber(meta[3])
local byte, band = string.byte, bit.band
local W = { [0] = 128, 64, 32, 16, 8, 4, 2, 1 }

-- The first berth in [s, e] free in F (and set in T, if given), or nil.
local function first(T, s, e)
  local i, last = (s - s % 8) / 8, (e - e % 8) / 8
  while i <= last do
    local v = byte(F, i + 1)
    if T and v ~= 0 then v = band(v, byte(T, i + 1)) end
    if v ~= 0 then
      local base = 8 * i
      for j = 0, 7 do
        local w = W[j]
        if v >= w then
          local b = base + j
          if b >= s and b <= e then return b end
          v = v - w
        end
      end
    end
    i = i + 1
  end
  return nil
end

-- A wanted type's bitmap (false for a code with no bitmap).
local function tmap(c)
  local k = string.find(codes, c, 1, true)
  return k and maps[1 + k]
end

-- Assigns berths from [s, e]: preferences first (passengers wanting a
-- type, in order, get its first free berths), then the first free berths
-- for the others. Returns the assignment and the preferences met, or nil
-- when [s, e] has fewer free berths than passengers.
local function pick(s, e)
  local out, met, next_of = {}, 0, nil
  for i = 1, npax do
    local c = string.sub(prefs, i, i)
    local T = c ~= '-' and tmap(c)
    if T then
      next_of = next_of or {}
      local at = next_of[c] or s
      if at <= e then
        local b = first(T, at, e)
        if b then out[i], met, next_of[c] = b, met + 1, b + 1 else next_of[c] = e + 1 end
      end
    end
  end
  local at = s
  for i = 1, npax do
    if not out[i] then
      local b
      repeat
        b = at <= e and first(nil, at, e)
        if not b then return nil end
        at = b + 1
        local taken = false
        for k = 1, npax do if out[k] == b then taken = true end end
      until not taken
      out[i] = b
    end
  end
  return out, met
end

-- Coach i holds berths [cstart(i), cstart(i + 1) - 1].
local ncoach = (string.len(coaches) - string.len(coaches) % 2) / 2 - 1
local function cstart(i)
  local hi, lo = byte(coaches, 2 * i - 1, 2 * i)
  return hi * 256 + lo
end

-- Over the whole shard first. When that lands in one coach, it is the
-- coach the scan below would choose: every free berth (of each wanted
-- type) before it would have been picked first.
local best, bound = pick(0, nberths - 1)
if best and npax > 1 then
  local lo_b, hi_b = math.min(unpack(best)), math.max(unpack(best))
  local c, top = 1, ncoach
  while c < top do
    local mid = (c + top + 1 - (c + top + 1) % 2) / 2
    if cstart(mid) <= lo_b then c = mid else top = mid - 1 end
  end
  if hi_b >= cstart(c + 1) then
    -- Keep the group in one coach when any coach can take it all: the
    -- first coach meeting the most preferences (bound, met over the whole
    -- shard, is the most any coach can meet). Else spread as picked.
    -- Counts come from byte tables: free berths, and free berths of each
    -- wanted type (Redis ANDs those bitmaps too).
    local POP = { [0] = 0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4 }
    local function count(B, s, e) -- set bits of byte table B in [s, e]
      local n, i, last = 0, (s - s % 8) / 8, (e - e % 8) / 8
      for k = i, last do
        local v = B[k + 1]
        if k == i then v = v % (2 * W[s % 8]) end
        if k == last then v = v - v % W[e % 8] end
        local lo = v % 16
        n = n + POP[lo] + POP[(v - lo) / 16]
      end
      return n
    end
    local FB = { byte(F, 1, -1) }
    local want, TB = {}, {}
    if bound > 0 then
      for i = 1, npax do
        local c = string.sub(prefs, i, i)
        local k = c ~= '-' and string.find(codes, c, 1, true)
        if k then
          if not want[c] then
            want[c] = 0
            local key = KEYS[8 + nleg + ntype + k]
            redis.call('BITOP', 'AND', key, free, KEYS[8 + nleg + k])
            TB[c] = { byte(redis.call('GET', key), 1, -1) }
          end
          want[c] = want[c] + 1
        end
      end
    end
    local bs, be, best_met = nil, nil, -1
    local s = cstart(1)
    for i = 1, ncoach do
      local e = cstart(i + 1) - 1
      if e - s + 1 >= npax and count(FB, s, e) >= npax then
        local met = 0
        for c, n in pairs(want) do met = met + math.min(n, count(TB[c], s, e)) end
        if met > best_met then bs, be, best_met = s, e, met end
        if met == bound then break end
      end
      s = e + 1
    end
    if bs then
      best = pick(bs, be)
      if not best then return redis.error_reply('hold: a coach has fewer free berths than counted') end
    end
  end
end
-- The token's used-mark keeps the berth-legs the hold took (0 for a
-- waitlist place or none): the admission controller sizes what it offers
-- by what admitted parties take.
local function remember(answer, took)
  redis.call('SET', KEYS[3], epoch .. '|' .. answer .. '|' .. req_hash, 'EX', ARGV[10])
  if tok_key then redis.call('SET', tok_key, hold_id .. '|' .. took, 'PX', tok_ttl) end
end
-- A hold or a waitlist offer gives the user state on the shard (a live
-- hold, the day's count, a replayable key) and changes the shard: a
-- process's sold-out cache re-reads it (chg) and sends this user to the
-- script from then on (seen).
local function changed()
  redis.call('HINCRBY', KEYS[1], 'chg', '1')
  redis.call('SADD', KEYS[9 + nleg + 2 * ntype], user)
end

if best then
  local bstr = {}
  for i = 1, npax do bstr[i] = string.format('%d', best[i]) end
  local csv, n = table.concat(bstr, ','), string.format('%d', npax)
  berths_set(KEYS, 9, 8 + nleg, bstr, '0')
  count_add(KEYS[8], 'h', from, to, n)
  local state = retake and 'R|' or 'H|'
  redis.call('HSET', KEYS[5], hold_id, state .. user .. '|' .. ARGV[3] .. '|' .. ARGV[4] .. '|' .. ARGV[5] .. '|' .. csv .. '||' .. n)
  redis.call('ZADD', KEYS[2], ARGV[5], hold_id)
  if not retake then redis.call('HSET', KEYS[6], user, hold_id) end
  redis.call('HINCRBY', KEYS[7], user, '1')
  local answer = 'HELD|' .. hold_id .. '|' .. ARGV[5] .. '|' .. csv
  remember(answer, string.format('%d', npax * nleg))
  changed()
  return { 'HELD', epoch, answer }
end

local wl = redis.call('HMGET', KEYS[1], 'wlcap', 'wlcount')
if ARGV[9] == '1' and not retake and tonumber(wl[2] or '0') + npax <= tonumber(wl[1] or '0') then
  local n = string.format('%d', npax)
  redis.call('HINCRBY', KEYS[1], 'wlcount', n)
  local wlno = string.format('%d', redis.call('HINCRBY', KEYS[1], 'wlnext', '1'))
  redis.call('HSET', KEYS[5], hold_id, 'W|' .. user .. '|' .. ARGV[3] .. '|' .. ARGV[4] .. '|' .. ARGV[5] .. '||' .. wlno .. '|' .. n)
  redis.call('ZADD', KEYS[2], ARGV[5], hold_id)
  redis.call('HSET', KEYS[6], user, hold_id)
  redis.call('HINCRBY', KEYS[7], user, '1')
  local answer = 'WAITLIST_OFFERED|' .. hold_id .. '|' .. ARGV[5] .. '|' .. wlno
  remember(answer, '0')
  changed()
  return { 'WAITLIST_OFFERED', epoch, answer }
end

remember('SOLD_OUT|||', '0')
return { 'SOLD_OUT', epoch, 'SOLD_OUT|||' }
