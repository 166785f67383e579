-- HOLD: decide one hold attempt atomically.
-- KEYS: 1 meta 2 occ 3 btype 4 coach 5 cnt 6 holds 7 exp 8 live 9 daily 10 idem
-- ARGV: 1 hold_id 2 user 3 from 4 to 5 expires_ms 6 daily_cap 7 prefs
--       8 id_ok 9 allow_waitlist 10 idem_ttl_s 11 max_pax
-- Checked before any write: a script that fails midway keeps its writes.
local idem_ttl = tonumber(ARGV[10])
if not idem_ttl or idem_ttl < 1 then return redis.error_reply('hold: idempotency ttl must be at least 1 second') end
local epoch = redis.call('HGET', KEYS[1], 'epoch')
if not epoch then return { 'NOT_READY' } end

-- A replayed key returns the prior answer, but only one given under the
-- current epoch: after a rebuild, PostgreSQL's unique key is the judge.
local prior = redis.call('GET', KEYS[10])
if prior then
  local sep = string.find(prior, '|', 1, true)
  if string.sub(prior, 1, sep - 1) == epoch then
    return { 'REPLAY', epoch, string.sub(prior, sep + 1) }
  end
end

local hold_id, user = ARGV[1], ARGV[2]
local from, to = tonumber(ARGV[3]), tonumber(ARGV[4])
local prefs = ARGV[7]
local npax = string.len(prefs)
local legs = tonumber(redis.call('HGET', KEYS[1], 'legs'))
if npax < 1 or npax > tonumber(ARGV[11]) then return { 'BAD_PASSENGERS', epoch } end
if ARGV[8] ~= '1' then return { 'NO_ID', epoch } end
if from < 0 or to > legs or from >= to then return { 'BAD_JOURNEY', epoch } end

local live = redis.call('HGET', KEYS[8], user)
if live then return { 'LIVE_HOLD', epoch, live } end
local used = tonumber(redis.call('HGET', KEYS[9], user) or '0')
if used >= tonumber(ARGV[6]) then return { 'DAILY_CAP', epoch } end

local function remember(answer)
  redis.call('SET', KEYS[10], epoch .. '|' .. answer, 'EX', idem_ttl)
end

local need = leg_mask(from, to)
local occ = redis.call('GET', KEYS[2])
local btype = redis.call('GET', KEYS[3])
local coach = redis.call('GET', KEYS[4])
local nberths = tonumber(redis.call('HGET', KEYS[1], 'nberths'))

-- Free berths for the whole journey, grouped by coach in shard order.
local coaches, order, nfree = {}, {}, 0
for b = 0, nberths - 1 do
  if bit.band(occ_get(occ, b), need) == 0 then
    local c = string.byte(coach, b + 1)
    if not coaches[c] then coaches[c] = {}; order[#order + 1] = c end
    local list = coaches[c]
    list[#list + 1] = b
    nfree = nfree + 1
  end
end

-- Assign berths from list: preferences first, then any free berth.
-- Returns the assignment and how many preferences it met.
local function pick(list)
  local taken, out, met = {}, {}, 0
  for i = 1, npax do
    local want = string.sub(prefs, i, i)
    if want ~= '-' then
      for _, b in ipairs(list) do
        if not taken[b] and string.sub(btype, b + 1, b + 1) == want then
          taken[b] = true; out[i] = b; met = met + 1; break
        end
      end
    end
  end
  for i = 1, npax do
    if not out[i] then
      for _, b in ipairs(list) do
        if not taken[b] then taken[b] = true; out[i] = b; break end
      end
    end
  end
  return out, met
end

if nfree >= npax then
  -- Keep the group in one coach when any coach can take it all.
  local best, best_met = nil, -1
  for _, c in ipairs(order) do
    local list = coaches[c]
    if #list >= npax then
      local out, met = pick(list)
      if met > best_met then best, best_met = out, met end
      if met == npax then break end
    end
  end
  if not best then
    local all = {}
    for _, c in ipairs(order) do
      for _, b in ipairs(coaches[c]) do all[#all + 1] = b end
    end
    best = pick(all)
  end
  for _, b in ipairs(best) do occ_set(KEYS[2], b, bit.bor(occ_get(occ, b), need)) end
  count_add(KEYS[5], 'h', from, to, npax)
  local rec = { state = 'H', user = user, from = from, to = to, expires = ARGV[5], berths = best, wl = '', n = npax }
  redis.call('HSET', KEYS[6], hold_id, rec_string(rec))
  redis.call('ZADD', KEYS[7], ARGV[5], hold_id)
  redis.call('HSET', KEYS[8], user, hold_id)
  redis.call('HINCRBY', KEYS[9], user, 1)
  local answer = 'HELD|' .. hold_id .. '|' .. ARGV[5] .. '|' .. table.concat(best, ',')
  remember(answer)
  return { 'HELD', epoch, answer }
end

local wlcap = tonumber(redis.call('HGET', KEYS[1], 'wlcap') or '0')
local wlcount = tonumber(redis.call('HGET', KEYS[1], 'wlcount') or '0')
if ARGV[9] == '1' and wlcount + npax <= wlcap then
  redis.call('HINCRBY', KEYS[1], 'wlcount', npax)
  local wlno = redis.call('HINCRBY', KEYS[1], 'wlnext', 1)
  local rec = { state = 'W', user = user, from = from, to = to, expires = ARGV[5], berths = {}, wl = wlno, n = npax }
  redis.call('HSET', KEYS[6], hold_id, rec_string(rec))
  redis.call('ZADD', KEYS[7], ARGV[5], hold_id)
  redis.call('HSET', KEYS[8], user, hold_id)
  redis.call('HINCRBY', KEYS[9], user, 1)
  local answer = 'WAITLIST_OFFERED|' .. hold_id .. '|' .. ARGV[5] .. '|' .. wlno
  remember(answer)
  return { 'WAITLIST_OFFERED', epoch, answer }
end

remember('SOLD_OUT|||')
return { 'SOLD_OUT', epoch, 'SOLD_OUT|||' }
