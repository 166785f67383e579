-- Shared helpers, prepended to the queue scripts (Redis has no require).

-- The node running the script (CLUSTER MYID), '' outside a cluster: the
-- queue's meta records it as 'node', as booking/inventory's LOAD does for
-- seat state.
local function node_id()
  local id = redis.pcall('CLUSTER', 'MYID')
  if type(id) == 'string' then return id end
  return ''
end

-- Whether the queue whose meta is m lost its state, for a window that
-- PostgreSQL has sealed (sealed_pg '1'; before the seal the cohort lives
-- only here, and re-entrants get their places back by the keyed hash): meta
-- not sealed here (the keys were wiped: a restart, a flush), or written on
-- another node (a failover to a replica, which may have missed the last
-- writes: replication is asynchronous). Such a queue answers nothing until
-- the controller rebuilds it from PostgreSQL (REBUILD).
local function queue_lost(m, sealed_pg)
  if sealed_pg ~= '1' then return false end
  local f = redis.call('HMGET', m, 'sealed', 'node')
  if not f[1] then return true end
  return f[2] ~= false and f[2] ~= '' and f[2] ~= node_id()
end

-- Whether the queue whose meta is m must be rebuilt from PostgreSQL:
-- lost (queue_lost), or admitting fewer than PostgreSQL logged (floor: a
-- replica that missed the last writes).
local function queue_behind(m, sealed_pg, floor)
  return queue_lost(m, sealed_pg) or
    tonumber(redis.call('HGET', m, 'admitted') or '0') < tonumber(floor)
end
