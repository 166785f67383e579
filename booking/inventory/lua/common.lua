-- Shared helpers, prepended to every script (Redis has no require).
-- Seat state: one bitmap per leg, bit b set = berth b free on that leg (so
-- a journey's free berths are the AND of its legs' bitmaps and no NOT is
-- ever needed: bits past the last berth stay 0). LOAD alone writes the
-- static parts: one bitmap per berth type (bit b set = berth b is of that
-- type) and the meta field 'coaches', two bytes (big-endian) per coach for
-- the index of its first berth and two more for the berth count, so coach
-- i holds berths [start(i), start(i + 1) - 1].
-- Numbers handed to redis.call are formatted with %.17g, which costs about
-- as much as a simple command: the scripts pass strings (ARGV, or '%d').

-- The hashes cnt, holds, live and daily each carry a field PAD whose value
-- is longer than hash-max-listpack-value, written by LOAD: Redis then keeps
-- them as hash tables. As listpacks (up to 512 entries by default) every
-- lookup scans them, and a busy shard's records and users made that the
-- largest cost of a hold. With it the hashes never empty, so a missing one
-- is a partial loss. No hold id, user id or counter is ever PAD.
local PAD = '|'

-- The node running the script (CLUSTER MYID), '' outside a cluster. LOAD
-- records it in meta as 'node'.
local function node_id()
  local id = redis.pcall('CLUSTER', 'MYID')
  if type(id) == 'string' then return id end
  return ''
end

-- Whether the shard's state was loaded on another node than this one: a
-- replica promoted by a failover, whose copy (replicated asynchronously)
-- may have missed the last writes. Such a shard is not ready until it is
-- rebuilt from PostgreSQL. loaded_by is meta's 'node' (nil before it was kept).
local function moved_node(loaded_by)
  return loaded_by ~= nil and loaded_by ~= false and loaded_by ~= '' and loaded_by ~= node_id()
end

-- Hold record: state|user|from|to|expires_ms|berths(csv)|waitlist_no|passengers
-- state: H held, W waitlist offer held, C confirmed, X waitlisted booking.
-- Berths stay strings; n_str is the passenger count as written.
local function rec_parse(s)
  local state, user, from, to, expires, csv, wl, n =
    string.match(s, '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)$')
  local berths = {}
  for b in string.gmatch(csv, '[^,]+') do berths[#berths + 1] = b end
  return { state = state, user = user, from = tonumber(from), to = tonumber(to),
           expires = expires, berths = berths, wl = wl, n = tonumber(n), n_str = n }
end

local LEG = { '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', '10', '11', '12', '13', '14', '15' }

-- Adds n (a string) to counter prefix<leg> of legs from..to-1.
local function count_add(cnt_key, prefix, from, to, n)
  for l = from, to - 1 do redis.call('HINCRBY', cnt_key, prefix .. LEG[l + 1], n) end
end

-- Sets the bits of berths (strings) to v ('0' taken, '1' free) in the
-- bitmaps keys[first..last]: SETBIT for one or two berths, else one
-- BITFIELD per bitmap (whichever costs less).
local function berths_set(keys, first, last, berths, v)
  if #berths <= 2 then
    for i = first, last do
      for _, b in ipairs(berths) do redis.call('SETBIT', keys[i], b, v) end
    end
    return
  end
  local args = {}
  for _, b in ipairs(berths) do
    args[#args + 1] = 'SET'; args[#args + 1] = 'u1'; args[#args + 1] = b; args[#args + 1] = v
  end
  for i = first, last do redis.call('BITFIELD', keys[i], unpack(args)) end
end

-- True when every key exists: a shard whose meta survived but whose seat
-- keys did not (a partial loss) must be refused, never read as empty.
local function all_exist(keys)
  return #keys == 0 or redis.call('EXISTS', unpack(keys)) == #keys
end

-- The hold id an idempotency key's answer names (epoch|status|hold id|...),
-- nil when the key is not set.
local function idem_hold(key)
  local prior = redis.call('GET', key)
  if not prior then return nil end
  local _, _, id = string.find(prior, '^[^|]*|[^|]*|([^|]*)')
  return id
end
