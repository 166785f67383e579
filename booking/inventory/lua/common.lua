-- Shared helpers, prepended to every script (Redis has no require).
-- Seat state: OCC holds two bytes per berth, a bitmask of the legs on which
-- that berth is taken (bit l = leg from stop l to stop l+1).
local function occ_get(occ, b)
  local hi, lo = string.byte(occ, 2 * b + 1, 2 * b + 2)
  return hi * 256 + lo
end

local function occ_set(key, b, mask)
  redis.call('SETRANGE', key, 2 * b, string.char(bit.rshift(mask, 8), bit.band(mask, 255)))
end

local function leg_mask(from, to)
  local m = 0
  for l = from, to - 1 do m = bit.bor(m, bit.lshift(1, l)) end
  return m
end

-- Hold record: state|user|from|to|expires_ms|berths(csv)|waitlist_no|passengers
-- state: H held, W waitlist offer held, C confirmed, X waitlisted booking
local function rec_parse(s)
  local f = {}
  for part in string.gmatch(s .. '|', '([^|]*)|') do f[#f + 1] = part end
  local berths = {}
  for b in string.gmatch(f[6], '[^,]+') do berths[#berths + 1] = tonumber(b) end
  return { state = f[1], user = f[2], from = tonumber(f[3]), to = tonumber(f[4]),
           expires = f[5], berths = berths, wl = f[7], n = tonumber(f[8]) }
end

local function rec_string(r)
  return table.concat({ r.state, r.user, r.from, r.to, r.expires, table.concat(r.berths, ','), r.wl or '', r.n }, '|')
end

local function count_add(cnt_key, prefix, from, to, n)
  for l = from, to - 1 do redis.call('HINCRBY', cnt_key, prefix .. l, n) end
end
